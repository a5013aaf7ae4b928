SELECT a + b AS sum_ab
FROM t;
