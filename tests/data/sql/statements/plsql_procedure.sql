CREATE OR REPLACE PROCEDURE hr.raise_salary (p_dept IN NUMBER, p_pct IN NUMBER DEFAULT 10) IS
  v_total NUMBER;
  CURSOR c_emp IS SELECT empno, sal FROM hr.emp WHERE deptno = p_dept;
  r_emp c_emp%ROWTYPE;
BEGIN
  OPEN c_emp;
  LOOP
    FETCH c_emp INTO r_emp;
    EXIT WHEN c_emp%NOTFOUND;
    UPDATE hr.emp SET sal = r_emp.sal * (1 + p_pct / 100) WHERE empno = r_emp.empno;
  END LOOP;
  CLOSE c_emp;
  SELECT SUM(sal) INTO v_total FROM hr.emp WHERE deptno = p_dept;
  INSERT INTO hr.audit (dept, total) VALUES (p_dept, v_total);
  COMMIT;
END raise_salary;
/
CREATE TABLE hr.audit_copy AS SELECT dept, total FROM hr.audit;
