WITH recent AS (SELECT id, amount FROM orders WHERE order_date > '2024-01-01')
INSERT INTO order_summary (order_id, amount)
SELECT id, amount FROM recent;
