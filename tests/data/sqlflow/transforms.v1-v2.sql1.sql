SELECT SUM(Quantity) AS total_quantity
FROM OrderDetails;
