-- saved by SQL Server Management Studio (Unicode, with a byte order mark)
INSERT INTO dbo.sales_copy (amount) SELECT amount FROM dbo.sales;
GO
INSERT INTO dbo.café (name) SELECT name FROM dbo.clients;
