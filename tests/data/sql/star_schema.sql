-- dialect: spark
-- schema: star_schema.schema.json
-- SELECT * expanded from the schema, through a subquery and a CTE.
WITH recent AS (SELECT * FROM shop.orders WHERE order_date >= '2024-01-01')
INSERT INTO shop.order_facts
SELECT r.*, c.country
FROM recent r
LEFT JOIN (SELECT * FROM shop.customers) c ON r.customer_id = c.customer_id;
