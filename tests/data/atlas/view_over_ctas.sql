-- dialect: spark
-- default_db: mart
CREATE TABLE big AS SELECT id, amount FROM sales.orders WHERE amount > 100;
CREATE VIEW big_ids AS SELECT id FROM big;
INSERT OVERWRITE DIRECTORY 's3a://exports/big/' SELECT id, amount FROM big;
