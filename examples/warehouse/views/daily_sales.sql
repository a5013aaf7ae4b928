-- dialect: hive
-- Daily revenue by channel, and the top categories, for the sales team.

CREATE OR REPLACE VIEW reporting.v_daily_sales AS
SELECT
  f.order_date,
  f.channel,
  SUM(f.order_amount) AS revenue,
  COUNT(*)            AS orders
FROM marts.fct_orders f
GROUP BY f.order_date, f.channel;

CREATE OR REPLACE VIEW reporting.v_category_sales AS
SELECT
  s.category,
  SUM(s.revenue) AS revenue
FROM marts.fct_product_sales s
WHERE s.sales_date >= DATE_SUB(CURRENT_DATE, 90)
GROUP BY s.category;
