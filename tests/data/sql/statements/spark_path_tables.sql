INSERT INTO analytics.events SELECT id, ts FROM parquet.`s3://lake/events/2024/`;
SELECT * FROM delta.`/mnt/delta/customers`;
