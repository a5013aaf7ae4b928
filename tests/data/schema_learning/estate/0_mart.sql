CREATE TABLE mart.customer_totals (customer_id BIGINT, total DECIMAL(16,2));
CREATE TABLE mart.order_copy (order_id BIGINT, customer_id BIGINT, amount DECIMAL(10,2));
