-- dialect: hive
-- Staging tables over the landing zone. Files arrive as Parquet from the order system's exports and as CSV
-- from the CRM; these tables only give them a schema, the data stays where it lands.

CREATE DATABASE IF NOT EXISTS staging;

CREATE EXTERNAL TABLE IF NOT EXISTS staging.stg_orders (
  order_id     BIGINT,
  customer_id  BIGINT,
  order_ts     TIMESTAMP,
  status       STRING,
  channel      STRING
)
PARTITIONED BY (load_date STRING)
STORED AS PARQUET
LOCATION 'hdfs://nameservice1/data/landing/orders';

CREATE EXTERNAL TABLE IF NOT EXISTS staging.stg_order_items (
  order_id    BIGINT,
  line_no     INT,
  product_id  BIGINT,
  quantity    INT,
  unit_price  DECIMAL(12, 2),
  discount    DECIMAL(12, 2)
)
STORED AS PARQUET
LOCATION 'hdfs://nameservice1/data/landing/order_items';

CREATE EXTERNAL TABLE IF NOT EXISTS staging.stg_products (
  product_id    BIGINT,
  product_name  STRING,
  category      STRING,
  list_price    DECIMAL(12, 2)
)
STORED AS PARQUET
LOCATION 's3a://acme-lake/reference/products';

CREATE TABLE IF NOT EXISTS staging.stg_customers (
  customer_id   BIGINT,
  first_name    STRING,
  last_name     STRING,
  email         STRING,
  country_code  STRING,
  signup_date   DATE
)
ROW FORMAT DELIMITED FIELDS TERMINATED BY ','
STORED AS TEXTFILE;
