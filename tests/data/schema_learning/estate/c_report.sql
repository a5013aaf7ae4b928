-- Reads tables whose columns only the other files tell (written before them in name order).
INSERT INTO mart.customer_totals
SELECT customer_id, sum(amount) FROM sales.big_orders GROUP BY customer_id;
INSERT INTO mart.order_copy SELECT * FROM sales.v_orders;
