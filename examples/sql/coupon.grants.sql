-- The runtime user's privileges for coupon.conf (handler.grants).
GRANT SELECT, UPDATE ON `shop`.`coupon_stock` TO 'dedupd'@'%';
GRANT INSERT ON `shop`.`coupon_grant` TO 'dedupd'@'%';
