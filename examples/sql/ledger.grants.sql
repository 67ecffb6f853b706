-- The runtime user's privileges for ledger.conf (handler.grants): what its
-- statements do. A column read in ON DUPLICATE KEY UPDATE needs SELECT.
GRANT INSERT ON `payments`.`payment_entry` TO 'dedupd'@'%';
GRANT SELECT, INSERT, UPDATE ON `payments`.`merchant_account` TO 'dedupd'@'%';
