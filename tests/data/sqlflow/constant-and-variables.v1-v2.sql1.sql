SELECT 'constant' as field1, 2 as field2;
