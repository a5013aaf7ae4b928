-- dialect: hive
-- default_db: dw
-- A small Hive ETL: DDL teaches the schema, then INSERT OVERWRITE by position.
CREATE TABLE daily_sales (store_id INT, total DOUBLE, orders BIGINT) PARTITIONED BY (dt STRING);

INSERT OVERWRITE TABLE daily_sales PARTITION (dt = '2024-01-01')
SELECT s.store_id,
       SUM(o.amount * (1 - o.discount)),   -- value modified
       COUNT(*)
FROM raw.orders o
JOIN raw.stores s ON o.store_id = s.id
WHERE o.status = 'done'
GROUP BY s.store_id
HAVING SUM(o.amount) > 0;

CREATE TABLE top_stores AS
SELECT store_id, total,
       RANK() OVER (PARTITION BY dt ORDER BY total DESC) AS rnk
FROM daily_sales;

INSERT OVERWRITE LOCAL DIRECTORY '/tmp/top_stores'
SELECT * FROM top_stores WHERE rnk <= 10;

ALTER TABLE top_stores RENAME TO top_stores_old;
