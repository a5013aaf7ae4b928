-- Rename: one edge from the rows of t2 to the rows of t3, no column edges.
ALTER TABLE t2 RENAME TO t3;
