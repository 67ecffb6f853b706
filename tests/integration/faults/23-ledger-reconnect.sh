#!/usr/bin/env bash
# 23: the ledger keeps prepared statements per connection (in the state its
# conn_init makes), and a worker's connection can be replaced under it.
# While the worker applies a stream through the ledger's handle_batch(), the
# test kills its database connections (KILL CONNECTION) again and again:
# each lane rolls back, calls the ledger's conn_fini for the old connection
# (closing a statement of a dead connection only frees it), reconnects,
# calls conn_init for the new one and replays its batch, where the ledger
# prepares its statements again. A statement used on the wrong connection
# would fail without a server error, which the ledger reports by declining
# the batch: so no batch may be declined, and the end state is every
# payment exactly once.
source "$(dirname "$0")/../lib.sh"
tb_init ledger_reconnect
tb_mock payments:4
TB_WORKERS=2 TB_BATCH_MAX=20 \
  tb_config "$TB_CONF" 'retry = { backoff_initial = "20ms"; backoff_max = "200ms"; };'
tb_migrate || tb_die "migrate failed"
tb_gen --keys 6000 --dup-min 1 --dup-max 3 --partitions 4 --seed 123
tb_produce <"$TB_DIR/stream.txt" 2>/dev/null || tb_die "produce failed"
want=$(tb_expect_get dedup_rows.applied)

tb_start w
w=$TB_LAST_PID
applied() { tb_sql "SELECT COUNT(*) FROM dedup_record WHERE status = 1"; }
# worker_conns: the worker's connections to the test database.
worker_conns() {
  tb_sql "SELECT id FROM information_schema.PROCESSLIST
          WHERE db = '$TB_DB' AND id <> CONNECTION_ID() AND command <> 'Daemon'"
}
started() { (($(applied) > 0)); }
tb_wait_until 60 "the first payments applied" started || tb_die "the worker did not get going"
# Three rounds: kill every connection of the worker, then wait until a lane
# has reconnected, so each round lands on a running worker.
reconnects() { grep -c "reconnected to the database" "$TB_DIR/w.log" || true; }
kills=0
for round in 1 2 3; do
  (($(applied) < want)) || break
  before=$(reconnects)
  for id in $(worker_conns); do
    tb_sql "KILL CONNECTION $id" 2>/dev/null && kills=$((kills + 1))
  done
  back() { (($(reconnects) > before || $(applied) >= want)); }
  tb_wait_until 60 "a lane reconnected after round $round" back || tb_die "no reconnect"
done
tb_log "killed $kills connections in $round rounds"
done_all() { (($(applied) == want)); }
tb_wait_until 120 "every payment applied" done_all || tb_die "the worker did not finish"
tb_stop "$w" || tb_die "the worker did not stop cleanly"
tb_assert_committed_at_end

reconnects=$(grep -c "reconnected to the database" "$TB_DIR/w.log" || true)
tb_check "connections were killed mid-stream ($kills) and the lanes reconnected ($reconnects)" \
  test "$kills" -ge 2 -a "$reconnects" -ge 2
tb_check "handle_batch applied the payments ($(tb_summary_sum batched "$TB_DIR/w.log"))" \
  test "$(tb_summary_sum batched "$TB_DIR/w.log")" -ge 1000
tb_eq "no batch declined: the statements were prepared again on each new connection" 0 \
  "$(tb_summary_sum batch_declined "$TB_DIR/w.log")"
tb_expect_ledger "$TB_DIR/expect.json"
tb_expect_outcome "$TB_DIR/expect.json"
tb_expect_ledger_ids
tb_done
