-- Each statement reads the base tables src(id BIGINT, amount DOUBLE, cust INT, tag STRING) and
-- customers(id INT, name STRING, country STRING) and writes one table named after the convention it shows.
-- The Spark hook and the SQL extractor (dialect spark) must give every written column the same direct and
-- indirect inputs (tests/test_conventions_agree.py).

-- window keys are indirect
CREATE TABLE cv_window USING parquet AS
SELECT id, sum(amount) OVER (PARTITION BY cust ORDER BY id) AS running FROM src;

-- ranking functions: their keys are indirect, nothing direct
CREATE TABLE cv_rank USING parquet AS
SELECT id, rank() OVER (PARTITION BY cust ORDER BY amount) AS r,
       dense_rank() OVER (ORDER BY tag) AS d, row_number() OVER (ORDER BY amount) AS rn FROM src;

-- GROUP BY keys restrict the aggregates; WHERE restricts them too; JOIN keys restrict the row set
CREATE TABLE cv_group USING parquet AS
SELECT c.country, sum(s.amount) AS total FROM src s JOIN customers c ON s.cust = c.id
WHERE s.amount > 5 GROUP BY c.country;

-- CASE conditions flow into the result
CREATE TABLE cv_case USING parquet AS
SELECT id, CASE WHEN amount > 20 THEN tag ELSE 'small' END AS size FROM src;

-- COALESCE keeps both sources
CREATE TABLE cv_coalesce USING parquet AS
SELECT id, coalesce(name, country) AS who FROM customers;

-- HAVING: one edge per column pair, the direct one winning
CREATE TABLE cv_having USING parquet AS
SELECT cust, sum(amount) AS total FROM src GROUP BY cust HAVING sum(amount) > 10;

-- a correlated subquery restricts the written rows from both sides of the correlation
CREATE TABLE cv_exists USING parquet AS
SELECT s.id, s.amount FROM src s WHERE EXISTS (SELECT 1 FROM customers c WHERE c.id = s.cust);

-- both sides of a UNION and an INTERSECT are direct
CREATE TABLE cv_union USING parquet AS
SELECT id, tag FROM src UNION ALL SELECT id, name FROM customers;

CREATE TABLE cv_intersect USING parquet AS
SELECT cust AS id FROM src INTERSECT SELECT id FROM customers;

-- a cast is a copy of its column
CREATE TABLE cv_cast USING parquet AS
SELECT CAST(amount AS INT) AS amount_int, upper(tag) AS tag_upper FROM src;
