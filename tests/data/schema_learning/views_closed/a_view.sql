-- The view's columns are its definition's: a.
CREATE VIEW r.v AS SELECT t.a FROM s.t t;
CREATE TABLE r.c AS SELECT t.a FROM s.t t;
-- Read in the same script: b is no column of the view.
INSERT INTO s.x (b) SELECT v.b FROM r.v v;
