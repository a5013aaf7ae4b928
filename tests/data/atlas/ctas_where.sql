-- dialect: hive
CREATE TABLE mart.big_orders AS
SELECT o.id, o.amount * 2 AS doubled
FROM sales.orders o
WHERE o.status = 'SHIPPED';
