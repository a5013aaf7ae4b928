-- Unqualified columns over a join: only a schema tells which table each comes from.
INSERT INTO mart.order_totals
SELECT order_id, total FROM sales.orders o JOIN mart.customer_totals t ON o.customer_id = t.customer_id;
