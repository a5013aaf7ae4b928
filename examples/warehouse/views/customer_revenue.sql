-- dialect: hive
-- What the BI dashboards read: revenue per customer with their dimension attributes.

CREATE OR REPLACE VIEW reporting.v_customer_revenue AS
SELECT
  d.customer_id,
  d.customer_name,
  d.country,
  d.region,
  SUM(f.order_amount) AS revenue,
  COUNT(f.order_id)   AS orders
FROM marts.dim_customer d
JOIN marts.fct_orders f
  ON d.customer_id = f.customer_id
GROUP BY d.customer_id, d.customer_name, d.country, d.region;
