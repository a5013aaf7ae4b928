-- dialect: hive
-- Nightly: the CRM drops a CSV extract; move it into the managed staging table.

LOAD DATA INPATH 'hdfs://nameservice1/data/inbound/crm/customers' OVERWRITE INTO TABLE staging.stg_customers;

-- Country reference data comes from a file shared by the finance team.
CREATE EXTERNAL TABLE IF NOT EXISTS staging.stg_countries (
  country_code  STRING,
  country_name  STRING,
  region        STRING
)
ROW FORMAT DELIMITED FIELDS TERMINATED BY ','
LOCATION 'hdfs://nameservice1/data/reference/countries';
