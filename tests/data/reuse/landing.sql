INSERT INTO marts.landed_orders
SELECT l.order_id, l.amount
FROM parquet.`hdfs://nn:8020/landing/orders` l;
