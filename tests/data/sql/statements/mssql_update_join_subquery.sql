-- sql server
UPDATE s
SET s.PARENT_TABLE = u.PARENT_TABLE
FROM dwh_user.jv.CCF s
JOIN (
    SELECT TOP 1 *
    FROM dwh_user.jv.CCF_BAK u
    WHERE u.PRODUCT_NAME = 'Business loan'
) u ON 1 = 1
WHERE s.PRODUCT_NAME = 'Business loan'
