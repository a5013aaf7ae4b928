-- dialect: hive
-- Product sales per day, appended by the nightly job.

CREATE TABLE IF NOT EXISTS marts.fct_product_sales (
  sales_date    DATE,
  product_id    BIGINT,
  product_name  STRING,
  category      STRING,
  units         BIGINT,
  revenue       DECIMAL(14, 2)
)
STORED AS PARQUET;

INSERT INTO TABLE marts.fct_product_sales
SELECT
  TO_DATE(o.order_ts)          AS sales_date,
  p.product_id,
  p.product_name,
  p.category,
  SUM(i.quantity)              AS units,
  SUM(i.quantity * i.unit_price) AS revenue
FROM staging.stg_order_items i
JOIN staging.stg_orders o   ON i.order_id = o.order_id
JOIN staging.stg_products p ON i.product_id = p.product_id
WHERE o.status = 'shipped'
GROUP BY TO_DATE(o.order_ts), p.product_id, p.product_name, p.category;
