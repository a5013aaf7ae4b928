-- dialect: hive
INSERT INTO mart.summary
SELECT c.country AS region, count(*) AS n, sum(o.amount) AS total
FROM sales.orders o
JOIN sales.customers c ON o.customer_id = c.id
GROUP BY c.country;
