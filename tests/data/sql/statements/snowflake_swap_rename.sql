ALTER TABLE analytics.orders_new SWAP WITH analytics.orders;
ALTER TABLE analytics.orders_old RENAME TO analytics.orders_archive;
