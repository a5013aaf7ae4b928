-- The same load from another script: names copied as they are, and the region (which a.sql leaves out).
INSERT INTO crm.customers_clean (id, name, city, region)
SELECT id, name, lower(city), region
FROM crm.customers;
