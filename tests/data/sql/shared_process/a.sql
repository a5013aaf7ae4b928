-- Loads the clean customer table (names upper-cased). b.sql loads it from the same table too: the two
-- statements share one Atlas process (same operation, inputs and output).
INSERT INTO crm.customers_clean (id, name, city)
SELECT id, upper(name), coalesce(city, 'unknown')
FROM crm.customers
WHERE active = 1;
