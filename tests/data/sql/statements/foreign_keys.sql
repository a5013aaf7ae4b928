CREATE TABLE dept (deptno INT PRIMARY KEY, dname VARCHAR(20));
CREATE TABLE emp (
  empno INT PRIMARY KEY,
  deptno INT REFERENCES dept (deptno),
  mgr INT,
  CONSTRAINT fk_mgr FOREIGN KEY (mgr) REFERENCES emp (empno)
);
ALTER TABLE bonus ADD CONSTRAINT fk_bonus_emp FOREIGN KEY (empno) REFERENCES emp (empno);
