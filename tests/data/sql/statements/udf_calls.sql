SELECT dbo.calculate_tax(o.price) AS final_price FROM orders o;
SELECT product_name FROM dbo.get_user_orders(123) AS user_orders;
