CREATE TABLE sales.big_orders AS SELECT * FROM sales.v_orders WHERE amount > 100;
CREATE TABLE sales.orders (order_id BIGINT, customer_id BIGINT, amount DECIMAL(10,2));
