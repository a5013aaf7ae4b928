UPDATE emp e
SET (sal, comm) = (SELECT AVG(sal) * 1.1, MAX(comm) FROM emp_hist h WHERE h.empno = e.empno)
WHERE e.deptno = 10;
