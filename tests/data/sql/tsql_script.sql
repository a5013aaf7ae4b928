-- dialect: tsql
-- A script with a broken statement in the middle: the others still give lineage.
INSERT INTO dbo.emp_copy (id, name)
SELECT TOP 100 e.id, UPPER(e.name) FROM dbo.employees AS e WHERE e.active = 1;

SELECT FROM WHERE;

WITH mgr AS (
    SELECT id, manager_id FROM dbo.employees
)
INSERT INTO dbo.reporting (emp_id, boss_id)
SELECT m.id, (SELECT TOP 1 b.id FROM dbo.employees b WHERE b.id = m.manager_id) FROM mgr m;

SELECT dept, COUNT(*) AS n, a, b FROM dbo.employees, dbo.depts GROUP BY dept;
