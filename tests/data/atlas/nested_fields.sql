-- dialect: spark
-- Nested data (issue 31): JSON events read into structs, flattened downstream; a struct built and written.
INSERT INTO mart.widget_assets
SELECT e.widget.asset.id AS asset_id, e.widget.name AS widget_name, e.props['channel'] AS channel
FROM raw.events e
WHERE e.widget.asset.kind = 'image';

INSERT INTO mart.order_items
SELECT o.id AS order_id, item.sku, item.qty
FROM raw.orders o LATERAL VIEW explode(o.items) x AS item;

CREATE TABLE mart.customers_nested AS
SELECT id, named_struct('city', city, 'zip', zip) AS address FROM raw.customers;

INSERT INTO mart.cities
SELECT c.address.city AS city, count(*) AS n FROM mart.customers_nested c GROUP BY c.address.city;
