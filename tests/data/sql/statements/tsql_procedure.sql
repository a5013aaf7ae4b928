CREATE PROCEDURE dbo.LoadSales @Region VARCHAR(10), @MinAmt INT = 0, @Total INT OUTPUT
AS
BEGIN
    SET NOCOUNT ON;
    DECLARE @cutoff DATE = (SELECT MAX(load_date) FROM etl.batches);
    INSERT INTO dw.sales (id, amount)
    SELECT s.id, s.amount FROM stage.sales s WHERE s.region = @Region AND s.load_date > @cutoff;
    SELECT @Total = SUM(amount) FROM dw.sales;
    IF @Total > 0
        UPDATE dw.stats SET total = @Total WHERE region = @Region;
END;
