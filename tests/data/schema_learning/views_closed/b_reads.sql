-- Read in another file: b is no column of the view or of the CTAS table either.
INSERT INTO s.y (a, b) SELECT v.a, v.b FROM r.v v;
INSERT INTO s.z (b) SELECT b FROM r.c;
-- A plain table's DDL may be older than the table: its other columns are taken.
CREATE TABLE s.plain (a INT);
INSERT INTO s.w (b) SELECT p.b FROM s.plain p;
