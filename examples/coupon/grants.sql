-- What the coupon example's statements need, for dedupd's runtime user
-- (docs/OPERATIONS.md, "Database users and privileges"): the UPDATE's WHERE
-- and the status read need SELECT. The names are those of sql/grants.sql:
-- database `payments`, user 'dedupd'@'%'. Replace them with yours; run
-- after `dedupd migrate` created the table.
GRANT SELECT, INSERT, UPDATE ON `payments`.`coupon` TO 'dedupd'@'%';
