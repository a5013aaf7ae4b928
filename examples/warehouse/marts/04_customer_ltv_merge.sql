-- dialect: spark
-- Customer lifetime value, kept up to date with MERGE (a Delta / Iceberg table).

CREATE TABLE IF NOT EXISTS marts.customer_ltv (
  customer_id     BIGINT,
  lifetime_value  DECIMAL(16, 2),
  order_count     BIGINT,
  last_order_date DATE
) USING DELTA;

MERGE INTO marts.customer_ltv t
USING (
  SELECT customer_id,
         SUM(order_amount) AS total_amount,
         COUNT(*)          AS orders,
         MAX(order_date)   AS last_order
  FROM marts.fct_orders
  GROUP BY customer_id
) s
ON t.customer_id = s.customer_id
WHEN MATCHED THEN UPDATE SET
  t.lifetime_value  = s.total_amount,
  t.order_count     = s.orders,
  t.last_order_date = s.last_order
WHEN NOT MATCHED THEN INSERT (customer_id, lifetime_value, order_count, last_order_date)
  VALUES (s.customer_id, s.total_amount, s.orders, s.last_order);
