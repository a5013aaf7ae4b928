CREATE STAGE raw.landing URL = 's3://acme-landing/raw/' FILE_FORMAT = (TYPE = CSV);
COPY INTO raw.orders FROM @raw.landing/orders/ FILE_FORMAT = (TYPE = CSV);
COPY INTO @raw.landing/exports/ FROM raw.orders;
COPY INTO 's3://acme-exports/big_orders/' FROM (SELECT id, amount FROM raw.orders WHERE amount > 1000);
