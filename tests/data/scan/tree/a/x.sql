-- dialect: hive
INSERT INTO t2 SELECT a FROM t1;
