-- A's view reads B's table; B's CTAS reads this view (a cycle between the files).
CREATE VIEW sales.v_orders AS SELECT * FROM sales.orders WHERE amount > 0;
