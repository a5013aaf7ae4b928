DELETE FROM sales WHERE region IN (SELECT region FROM closed_regions);
DELETE FROM sales s USING returns r WHERE s.id = r.sale_id;
TRUNCATE TABLE staging_sales;
