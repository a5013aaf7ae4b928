SELECT deptno, SUM(amount) AS total_amount
FROM orders
GROUP BY deptno;
