UPDATE inventory AS i
SET qty = i.qty - o.qty, updated_by = 'etl'
FROM orders o
WHERE o.item_id = i.item_id AND o.status = 'shipped';
