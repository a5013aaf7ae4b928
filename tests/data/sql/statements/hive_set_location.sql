ALTER TABLE a.b SET LOCATION 's3://xxx/xx/1/xxx/';
