-- One procedure created twice in one script (a deployment script re-run, a fix appended): the second replaces it.
CREATE OR REPLACE PROCEDURE s.load_x IS
BEGIN
  INSERT INTO s.t1 (a) SELECT a FROM s.src;
END;
/
CREATE OR REPLACE PROCEDURE s.load_x (p_day IN DATE) IS
BEGIN
  INSERT INTO s.t2 (a) SELECT a FROM s.src WHERE d = p_day;
END;
/
