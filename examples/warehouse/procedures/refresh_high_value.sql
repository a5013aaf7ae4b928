-- dialect: tsql
-- The finance team's stored procedure (SQL Server side of the warehouse): flags high-value customers.

CREATE PROCEDURE marts.refresh_high_value_customers
  @threshold DECIMAL(16, 2)
AS
BEGIN
  DELETE FROM marts.high_value_customers;

  INSERT INTO marts.high_value_customers (customer_id, lifetime_value, flagged_on)
  SELECT l.customer_id, l.lifetime_value, CAST(GETDATE() AS DATE)
  FROM marts.customer_ltv l
  WHERE l.lifetime_value >= @threshold;
END;
