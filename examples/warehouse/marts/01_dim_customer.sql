-- dialect: hive
-- Customer dimension, rebuilt every night from staging (CTAS).

DROP TABLE IF EXISTS marts.dim_customer;

CREATE TABLE marts.dim_customer
STORED AS PARQUET
AS
SELECT
  c.customer_id,
  CONCAT(c.first_name, ' ', c.last_name) AS customer_name,
  LOWER(c.email)                          AS email,
  co.country_name                         AS country,
  co.region                               AS region,
  c.signup_date
FROM staging.stg_customers c
LEFT JOIN staging.stg_countries co
  ON c.country_code = co.country_code
WHERE c.customer_id IS NOT NULL;
