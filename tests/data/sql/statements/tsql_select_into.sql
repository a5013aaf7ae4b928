SELECT c.id, c.name, SUM(o.amount) AS total
INTO dbo.customer_totals
FROM dbo.customers c JOIN dbo.orders o ON o.customer_id = c.id
GROUP BY c.id, c.name;
SELECT * INTO #recent FROM dbo.orders WHERE order_date > '2024-01-01';
