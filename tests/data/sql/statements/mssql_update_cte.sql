-- sql server
WITH
    s AS (
        SELECT PARENT_TABLE
        FROM dwh_user.jv.CCF s
        WHERE s.PRODUCT_NAME = 'Business loan'
    ),
    u AS (
        SELECT TOP 1 PARENT_TABLE
        FROM dwh_user.jv.CCF_BAK u
        WHERE u.PRODUCT_NAME = 'Business loan'
    )
UPDATE s
SET s.PARENT_TABLE = u.PARENT_TABLE
FROM s
JOIN u ON 1 = 1
