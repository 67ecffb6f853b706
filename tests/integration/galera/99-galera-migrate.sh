#!/usr/bin/env bash
# 99: two `dedupd migrate` at once through two nodes of a Galera cluster,
# on a fresh database, ten times (the Kubernetes example's two replicas,
# each with migrate as its init container, behind a service that spreads
# them). GET_LOCK() would lock one node only; the migration lock is a row
# (dedupd_migrate_lock) whose write is certified cluster-wide, and a
# certification failure (1213) of any step is run again. Both migrates
# succeed every time, and every node has the complete schema, recorded
# once, with the lock free. Then the run works on that schema through the
# third node.
source "$(dirname "$0")/../lib.sh"
tb_init galera_migrate
tb_mock payments:2
tb_galera
export TB_MYSQL_HOST=127.0.0.1 TB_MYSQL_EXTRA='tls = { mode = "disabled"; };'

for i in $(seq 1 10); do
  TB_DB="t_galera_migrate_$i"
  _tb_mariadb -e "DROP DATABASE IF EXISTS \`$TB_DB\`; CREATE DATABASE \`$TB_DB\`;
                  $(_tb_grants migrate)" || tb_die "cannot create $TB_DB"
  TB_MYSQL_PORT=$(tb_galera_port 1) tb_config "$TB_DIR/m1.conf"
  TB_MYSQL_PORT=$(tb_galera_port 2) tb_config "$TB_DIR/m2.conf"
  DEDUPD_MYSQL_USER="$TB_MIG_USER" tb_bg "a$i" "$DEDUPD" migrate -c "$TB_DIR/m1.conf"
  pa=$TB_LAST_PID
  DEDUPD_MYSQL_USER="$TB_MIG_USER" tb_bg "b$i" "$DEDUPD" migrate -c "$TB_DIR/m2.conf"
  pb=$TB_LAST_PID
  ra=0 rb=0
  wait "$pa" || ra=$?
  wait "$pb" || rb=$?
  tb_eq "race $i: both migrates succeed" "0 0" "$ra $rb"
  ((ra == 0 && rb == 0)) || sed 's/^/#   /' "$TB_DIR/a$i.log" "$TB_DIR/b$i.log"
  for n in 1 2 3; do
    tb_eq "race $i, node $n: schema, layout, handler tables, lock free" "1 2 1 3 NULL" \
      "$(tb_galera_sql "$n" "SELECT (SELECT COUNT(*) FROM dedupd_schema WHERE table_name = 'dedup_record'),
          (SELECT MAX(version) FROM dedupd_schema),
          (SELECT COUNT(*) FROM dedupd_shard_layout),
          (SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE()
             AND TABLE_NAME IN ('ledger_entry', 'merchant_balance', 'payment_order')),
          (SELECT COALESCE(holder, 'NULL') FROM dedupd_migrate_lock WHERE id = 1)" | tr '\t' ' ')"
  done
done
waited=$(cat "$TB_DIR"/[ab]*.log | grep -c "another migrate holds the lock" || true)
tb_log "migrates that waited for the other's lock: $waited of 20"
tb_check "the lock made migrates wait for each other ($waited)" test "$waited" -ge 1

# The last database, migrated twice at once, serves a run through node 3.
_tb_grant_runtime || tb_die "cannot grant the runtime privileges"
TB_MYSQL_PORT=$(tb_galera_port 3) tb_config
tb_gen --keys 200 --dup-min 1 --dup-max 2 --partitions 2 --seed 99
tb_produce <"$TB_DIR/stream.txt" 2>/dev/null || tb_die "produce failed"
tb_run || tb_die "dedupd run through node 3 failed"
tb_expect_ledger
tb_assert_committed_at_end
tb_done
