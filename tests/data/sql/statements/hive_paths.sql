CREATE EXTERNAL TABLE logs.raw_events (event_id STRING, payload STRING)
PARTITIONED BY (dt STRING)
STORED AS PARQUET
LOCATION 'hdfs://nn/warehouse/raw_events';
LOAD DATA INPATH 'hdfs://nn/landing/events/2024-01-01' OVERWRITE INTO TABLE logs.raw_events PARTITION (dt='2024-01-01');
INSERT OVERWRITE DIRECTORY 's3://exports/events/' SELECT event_id FROM logs.raw_events WHERE dt = '2024-01-01';
