-- dialect: hive
-- Hand the daily sales to the partner portal as Parquet files.

INSERT OVERWRITE DIRECTORY 's3a://acme-exports/partner-portal/daily_sales'
STORED AS PARQUET
SELECT v.order_date, v.channel, v.revenue, v.orders
FROM reporting.v_daily_sales v
WHERE v.order_date >= DATE_SUB(CURRENT_DATE, 7);
