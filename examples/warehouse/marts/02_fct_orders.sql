-- dialect: hive
-- Order facts: one row per order, amounts summed over its lines. Rebuilt per load date.

CREATE TABLE IF NOT EXISTS marts.fct_orders (
  order_id      BIGINT,
  customer_id   BIGINT,
  order_date    DATE,
  channel       STRING,
  item_count    INT,
  order_amount  DECIMAL(14, 2)
)
STORED AS PARQUET;

INSERT OVERWRITE TABLE marts.fct_orders
SELECT
  o.order_id,
  o.customer_id,
  TO_DATE(o.order_ts)                                   AS order_date,
  o.channel,
  SUM(i.quantity)                                       AS item_count,
  SUM(i.quantity * i.unit_price - COALESCE(i.discount, 0)) AS order_amount
FROM staging.stg_orders o
JOIN staging.stg_order_items i
  ON o.order_id = i.order_id
WHERE o.status <> 'cancelled'
GROUP BY o.order_id, o.customer_id, TO_DATE(o.order_ts), o.channel;
