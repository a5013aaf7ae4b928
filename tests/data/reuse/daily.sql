INSERT INTO marts.daily_orders
SELECT o.order_id, o.amount * 100 AS amount_cents
FROM sales.orders o
WHERE o.amount > 0;
