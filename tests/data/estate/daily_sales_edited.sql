-- dialect: hive
-- Daily revenue (no longer by channel), and the top categories, for the sales team.
-- The edited version of examples/warehouse/views/daily_sales.sql (issue 16's replay test).

CREATE OR REPLACE VIEW reporting.v_daily_sales AS
SELECT
  f.order_date,
  SUM(f.order_amount) AS revenue,
  COUNT(*)            AS orders
FROM marts.fct_orders f
GROUP BY f.order_date;

CREATE OR REPLACE VIEW reporting.v_category_sales AS
SELECT
  s.category,
  SUM(s.revenue) AS revenue
FROM marts.fct_product_sales s
WHERE s.sales_date >= DATE_SUB(CURRENT_DATE, 90)
GROUP BY s.category;
