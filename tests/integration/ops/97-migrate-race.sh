#!/usr/bin/env bash
# 97: `dedupd migrate` run twice at once (two replicas' init containers)
# on a fresh database, ten times: both succeed, the schema is complete and
# recorded once, and the migration lock (a row of dedupd_migrate_lock, so
# that it replicates) is free afterwards. A lock held by another migrate
# makes migrate wait for it; one whose lease ran out (a migrate that died)
# is taken over at once. The same race through two Galera nodes is test 99.
source "$(dirname "$0")/../lib.sh"
tb_init migrate_race
tb_mock payments:1

# migrate_as NAME: dedupd migrate on TB_CONF in the background, log NAME.log.
migrate_as() {
  DEDUPD_MYSQL_USER="$TB_MIG_USER" tb_bg "$1" "$DEDUPD" migrate -c "$TB_CONF"
}

# expect_migrated LABEL: the schema of a complete migrate on TB_DB.
expect_migrated() {
  tb_eq "$1: dedup table at the newest version, recorded once" "1 2" \
    "$(tb_sql "SELECT COUNT(*), MAX(version) FROM dedupd_schema WHERE table_name = 'dedup_record'" | tr '\t' ' ')"
  tb_eq "$1: the key format recorded" "dedupd key_format=2" \
    "$(tb_sql "SELECT TABLE_COMMENT FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE()
               AND TABLE_NAME = 'dedup_record'")"
  tb_eq "$1: the shard layout recorded once" 1 "$(tb_sql "SELECT COUNT(*) FROM dedupd_shard_layout")"
  tb_eq "$1: the handler's tables exist" 3 \
    "$(tb_sql "SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE()
               AND TABLE_NAME IN ('ledger_entry', 'merchant_balance', 'payment_order')")"
  tb_eq "$1: the migration lock is free" "NULL" \
    "$(tb_sql "SELECT COALESCE(holder, 'NULL') FROM dedupd_migrate_lock WHERE id = 1")"
}

not_grep() { ! grep -q "$@"; }

# fresh_db NAME: TB_DB is a new database, with the migration privileges.
fresh_db() {
  TB_DB="t_migrate_race_$1"
  _tb_mariadb -e "DROP DATABASE IF EXISTS \`$TB_DB\`; CREATE DATABASE \`$TB_DB\`;
                  $(_tb_grants migrate)" || tb_die "cannot create $TB_DB"
  tb_config
}

for i in $(seq 1 10); do
  fresh_db "$i"
  migrate_as "a$i"
  pa=$TB_LAST_PID
  migrate_as "b$i"
  pb=$TB_LAST_PID
  ra=0 rb=0
  wait "$pa" || ra=$?
  wait "$pb" || rb=$?
  tb_eq "race $i: both migrates succeed" "0 0" "$ra $rb"
  ((ra == 0 && rb == 0)) || sed 's/^/#   /' "$TB_DIR/a$i.log" "$TB_DIR/b$i.log"
  expect_migrated "race $i"
done

# A lock another migrate holds for 3 more seconds: migrate waits for it.
fresh_db held
tb_sql "CREATE TABLE dedupd_migrate_lock (id TINYINT UNSIGNED NOT NULL PRIMARY KEY,
          holder VARCHAR(255) NULL, lease_until DATETIME(6) NULL) ENGINE=InnoDB;
        INSERT INTO dedupd_migrate_lock VALUES (1, 'elsewhere:1', NOW(6) + INTERVAL 3 SECOND)"
t0=$(date +%s)
DEDUPD_MYSQL_USER="$TB_MIG_USER" "$DEDUPD" migrate -c "$TB_CONF" >"$TB_DIR/held.log" 2>&1 ||
  tb_die "migrate after a held lock failed: $(cat "$TB_DIR/held.log")"
took=$(($(date +%s) - t0))
tb_check "held: migrate said it waits for another" grep -q "another migrate holds the lock" "$TB_DIR/held.log"
tb_check "held: ... and waited until the lease ran out (${took}s)" test "$took" -ge 2
expect_migrated held

# A lock left by a migrate that died: its lease is over, taken at once.
fresh_db stale
tb_sql "CREATE TABLE dedupd_migrate_lock (id TINYINT UNSIGNED NOT NULL PRIMARY KEY,
          holder VARCHAR(255) NULL, lease_until DATETIME(6) NULL) ENGINE=InnoDB;
        INSERT INTO dedupd_migrate_lock VALUES (1, 'dead:1', NOW(6) - INTERVAL 1 SECOND)"
DEDUPD_MYSQL_USER="$TB_MIG_USER" "$DEDUPD" migrate -c "$TB_CONF" >"$TB_DIR/stale.log" 2>&1 ||
  tb_die "migrate after a stale lock failed: $(cat "$TB_DIR/stale.log")"
tb_check "stale: migrate did not wait" not_grep "another migrate holds the lock" "$TB_DIR/stale.log"
expect_migrated stale
tb_done
