-- dialect: bigquery
-- UNNEST and a recursive CTE.
INSERT INTO `proj.ds.tags` (item_id, tag)
SELECT i.id, tag FROM `proj.ds.items` AS i, UNNEST(i.tags) AS tag;

CREATE TABLE `proj.ds.numbers` AS
WITH RECURSIVE n AS (SELECT start_value AS v FROM `proj.ds.bounds` UNION ALL SELECT v + 1 FROM n WHERE v < 100)
SELECT v FROM n;
