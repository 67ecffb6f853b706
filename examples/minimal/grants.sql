-- What the minimal example's statements need, for dedupd's runtime user
-- (docs/OPERATIONS.md, "Database users and privileges"). The names are
-- those of sql/grants.sql: database `payments`, user 'dedupd'@'%'. Replace
-- them with yours; run after `dedupd migrate` created the table.
GRANT INSERT ON `payments`.`signup` TO 'dedupd'@'%';
