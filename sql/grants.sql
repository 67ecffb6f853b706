-- The privileges of dedupd's two database users (docs/OPERATIONS.md,
-- "Database users and privileges", quotes these lines and a unit test holds
-- it to them; tests/integration/lib.sh grants exactly these to its users).
-- The [runtime] and [outbox] lines are what dedupd checks at start
-- (src/db/dd_grants.c, dd_grants_needed; a unit test holds them to it).
-- The names are those of config/dedupd.conf: database `payments`, dedup
-- table `dedup_record`, runtime user 'dedupd'@'%', the ledger handler's
-- tables without a prefix. Replace them with yours; create the users first
-- (CREATE USER ... IDENTIFIED BY ..., or your server's way).

-- [migrate] `dedupd migrate`: creates and alters the dedup table, records
-- its version in dedupd_schema, runs the handler's migrate(). Before the
-- first migrate.
GRANT CREATE, ALTER, INDEX, SELECT, INSERT, UPDATE ON `payments`.* TO 'dedupd_migrate'@'%';

-- [runtime] run, replay, purge, stats, check. After `dedupd migrate`: a
-- grant on a table needs the table. With routes, the first line for each
-- route's dedup table (routes[].table).
GRANT SELECT, INSERT, UPDATE, DELETE ON `payments`.`dedup_record` TO 'dedupd'@'%';
GRANT SELECT ON `payments`.`dedupd_schema` TO 'dedupd'@'%';
GRANT SELECT ON `payments`.`dedupd_shard_layout` TO 'dedupd'@'%';
GRANT SELECT, INSERT, UPDATE ON `payments`.`dedupd_position` TO 'dedupd'@'%';
GRANT SELECT, INSERT ON `payments`.`dedupd_avro_schema` TO 'dedupd'@'%';
GRANT CREATE TEMPORARY TABLES ON `payments`.* TO 'dedupd'@'%';

-- [outbox] with outbox.enabled: handlers' events (host->emit) and the
-- relay that publishes and then deletes them (or parks those Kafka refuses
-- for good). In every database shard.
GRANT SELECT, INSERT, UPDATE, DELETE ON `payments`.`dedupd_outbox` TO 'dedupd'@'%';

-- [ledger] the example handler (examples/ledger/): what its statements
-- read and write. Another handler documents its own.
GRANT SELECT, INSERT ON `payments`.`ledger_entry` TO 'dedupd'@'%';
GRANT SELECT, INSERT, UPDATE ON `payments`.`merchant_balance` TO 'dedupd'@'%';
GRANT SELECT, INSERT, UPDATE ON `payments`.`payment_order` TO 'dedupd'@'%';

-- [notify] the example handler in external mode (examples/notify/notify.c):
-- its finish() writes notify_log in dedupd's transaction, as the runtime
-- user; its own connection to the notification store (notify_outbox,
-- notify_fence) logs in as handler.config's user, here the same one.
GRANT INSERT ON `payments`.`notify_log` TO 'dedupd'@'%';
GRANT SELECT, INSERT, UPDATE ON `payments`.`notify_outbox` TO 'dedupd'@'%';
GRANT SELECT, INSERT, UPDATE ON `payments`.`notify_fence` TO 'dedupd'@'%';
