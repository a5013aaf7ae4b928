SELECT order_id AS report_id
FROM orders;
