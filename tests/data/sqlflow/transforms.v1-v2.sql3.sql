SELECT ROUND(salary) AS salary_r
FROM employees;
