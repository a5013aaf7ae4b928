-- As SQL Server Management Studio scripts a database: each object in its batch, END without ';', then GO.
CREATE PROCEDURE dbo.load_one
AS
BEGIN
    INSERT INTO dbo.t1 (a) SELECT a FROM dbo.s1;
END
GO
INSERT INTO dbo.t2 (b) SELECT b FROM dbo.s2;
GO
CREATE PROCEDURE dbo.load_two
AS
BEGIN
    BEGIN TRY
        INSERT INTO dbo.t3 (c) SELECT c FROM dbo.s3;
    END TRY
    BEGIN CATCH
        THROW;
    END CATCH
END
GO
GO 2
INSERT INTO dbo.t4 (d) SELECT d FROM dbo.s4
GO
INSERT INTO dbo.t5 (e) SELECT e FROM dbo.s5;
