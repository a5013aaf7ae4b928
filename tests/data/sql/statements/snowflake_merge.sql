MERGE INTO dw.customers t
USING (SELECT id, name, email FROM stage.customers WHERE batch_id = 42) s
ON t.id = s.id
WHEN MATCHED AND s.email IS NOT NULL THEN UPDATE SET t.name = s.name, t.email = LOWER(s.email)
WHEN MATCHED AND s.name IS NULL THEN DELETE
WHEN NOT MATCHED THEN INSERT (id, name, email) VALUES (s.id, s.name, s.email);
