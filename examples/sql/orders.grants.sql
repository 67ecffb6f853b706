-- The runtime user's privileges for orders.conf (handler.grants). The
-- UPDATE reads the columns of its WHERE: SELECT too. The outbox's own
-- privileges are dedupd's (sql/grants.sql, [outbox]).
GRANT SELECT, UPDATE ON `shop`.`shop_order` TO 'dedupd'@'%';
GRANT INSERT ON `shop`.`order_payment` TO 'dedupd'@'%';
