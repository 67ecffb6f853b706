#!/usr/bin/env bash
# 94: the database goes back in time under a running dedupd (a failover
# that dedupd's connections follow, a restore while it runs). 1,000 unique
# payments applied and the database copied cold; dedupd started and left
# running; 1,000 more applied; the database stopped, the copy put back and
# the server started again, with dedupd still running and reconnecting.
# The next payments move the watermarks: the position writer finds its
# rows below what it wrote and dedupd stops with exit status 1, naming the
# partition and shard, rather than writing its own positions over the
# database's. The restart (what a supervisor does) reads again what the
# database lost: every payment once.
source "$(dirname "$0")/../lib.sh"
tb_init db_back_live
tb_private_db

tb_mock payments:2
TB_WORKERS=2 TB_KAFKA_PROPS=auto.commit.interval.ms=200 tb_config
tb_migrate || tb_die "migrate failed"

tb_gen --keys 2020 --dup-min 1 --dup-max 1 --partitions 2 --seed 94
head -n 1000 "$TB_DIR/stream.txt" | tb_produce 2>/dev/null || tb_die "produce failed"
tb_run || tb_die "the first run failed"
dd_mariadb_stop "$TB_DB2" >>"$TB_DIR/db2.log" 2>&1 || tb_die "cannot stop the private MariaDB"
cp -a "$TB_DB2/data" "$TB_DIR/backup"
tb_private_db_restart

tb_start live
live=$TB_LAST_PID
sed -n 1001,2000p "$TB_DIR/stream.txt" | tb_produce 2>/dev/null || tb_die "produce failed"
positions_at() {
  [[ "$(tb_sql "SELECT SUM(next_offset) FROM dedupd_position WHERE group_id = 'tg'")" == "$1" ]]
}
tb_wait_until 60 "2,000 applied and their positions written" positions_at 2000 ||
  tb_die "the running dedupd did not apply the second 1,000"

dd_mariadb_stop "$TB_DB2" >>"$TB_DIR/db2.log" 2>&1 || tb_die "cannot stop the private MariaDB"
rm -rf "$TB_DB2/data"
cp -a "$TB_DIR/backup" "$TB_DB2/data"
tb_private_db_restart
tb_check "dedupd kept running through the outage" kill -0 "$live"

tail -n +2001 "$TB_DIR/stream.txt" | tb_produce 2>/dev/null || tb_die "produce failed"
rc=0
if ! timeout --foreground "$(tb_secs 60)" tail --pid="$live" -f /dev/null; then
  kill -9 "$live" 2>/dev/null
  tb_not_ok "the running dedupd did not stop"
fi
wait "$live" || rc=$?
tb_eq "the running dedupd stops with exit status 1" 1 "$rc"
# The write of 2,000 may have lost its connection as the server stopped
# (committed, not acknowledged): then the rows are found below what it
# wrote, on a server that restarted, and Kafka's offsets were held at what
# the database acknowledged, so the restart has nothing to rewind.
unknown=0
grep -q "below [0-9]* that this process wrote as its connection was lost" "$TB_DIR/live.log" && unknown=1
tb_check "its error names the partition, the shard and both positions" \
  grep -Eq "level=error msg=\"Stopping: the database's position of group tg, payments \[[01]\] in .* (went back from [0-9]+ to [0-9]+ while this process ran|is [0-9]+, below [0-9]+ that this process wrote as its connection was lost and the server restarted)" "$TB_DIR/live.log"
tb_eq "it did not write its positions over the database's" 1000 \
  "$(tb_sql "SELECT SUM(next_offset) FROM dedupd_position WHERE group_id = 'tg'")"

tb_run || tb_die "the restart failed"
tb_expect_ledger "$TB_DIR/expect.json"
tb_expect_outcome "$TB_DIR/expect.json"
tb_assert_committed_at_end
if ((unknown)); then
  tb_eq "no rewind: Kafka's offsets waited for what the database acknowledged" 0 "$(tb_summary position_rewinds)"
else
  tb_eq "a rewind counted per partition" 2 "$(tb_summary position_rewinds)"
fi
tb_done
