-- The shard layout of a database (docs/SHARDS.md): which shard of how many
-- it is, one row. `dedupd migrate` creates the table with this statement
-- (it is built into dedupd, not applied from this file) and records the
-- configuration's layout in every shard unless one is recorded already;
-- `dedupd run` and `dedupd check` refuse a shard that records another
-- layout than the configuration's (mysql.shards: the index is the
-- element's position, the count the list's length).
CREATE TABLE IF NOT EXISTS dedupd_shard_layout (
  id TINYINT NOT NULL PRIMARY KEY,
  shard_index INT NOT NULL,
  shard_count INT NOT NULL,
  recorded_at DATETIME(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6)
) ENGINE=InnoDB;
