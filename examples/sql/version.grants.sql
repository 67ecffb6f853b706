-- The runtime user's privileges for version.conf (handler.grants).
GRANT SELECT, UPDATE ON `docs`.`document` TO 'dedupd'@'%';
GRANT INSERT ON `docs`.`document_version` TO 'dedupd'@'%';
