#!/usr/bin/env bash
# 83: a rebalance while the database is down. Two members a and b of one
# group apply a first part; the database is killed, more is produced (in
# flight in both), and b stops (SIGTERM): a's partitions are revoked and
# assigned again. a waits for the messages it holds only while its lanes
# could finish them: they wait for the database, so it goes on at once, and
# its loop counts as turning while it waits. a's /healthz, polled for 40 s
# with http.stuck_after = "20s" (the loop not turning for 10 s would fail
# it) and shutdown_timeout = "30s" (the longest a revoke waits), stays 200.
# The database comes back: everything applied exactly once, the offsets
# committed at the end.
source "$(dirname "$0")/../lib.sh"
source "$(dirname "$0")/../http.sh"
tb_init healthz_rebalance_db_down
tb_private_db
tb_mock payments:4
for m in a b; do
  p=$(tb_free_port)
  eval "port_$m=$p"
  TB_WORKERS=2 TB_BATCH_MAX=20 tb_config "$TB_DIR/$m.conf" \
    "http = { listen = \"127.0.0.1:$p\"; stuck_after = \"20s\"; };" 'shutdown_timeout = "30s";'
done
TB_CONF="$TB_DIR/a.conf"
tb_migrate || tb_die "migrate failed"
tb_gen --keys 1000 --dup-min 1 --dup-max 2 --partitions 4 --seed 83
n=$(wc -l <"$TB_DIR/stream.txt")
first=$((n / 3))
head -n "$first" "$TB_DIR/stream.txt" | tb_produce 2>/dev/null || tb_die "produce failed"
tb_start_groups a b
some() { (($(tb_sql "SELECT COUNT(*) FROM dedup_record WHERE status = 1") > 0)); }
tb_wait_until 60 "some keys applied" some || tb_die "nothing applied"
TH_URL="http://127.0.0.1:$port_a"
th_wait_status 30 200 /readyz || tb_die "a never ready: $(th_body /readyz)"

tb_private_db_kill9
tb_log "database killed"
tail -n +"$((first + 1))" "$TB_DIR/stream.txt" | tb_produce 2>/dev/null || tb_die "produce failed"
sleep 3
kill -TERM "${TB_PID[b]}"
tb_log "b stopping: a's partitions are revoked"
sick=0 polls=0 first_sick=
end=$(($(date +%s) + 40))
while (($(date +%s) < end)); do
  h=$(th_status /healthz)
  polls=$((polls + 1))
  if [[ $h != 200 ]]; then
    sick=$((sick + 1))
    [[ -n $first_sick ]] || first_sick="$h $(th_body /healthz)"
  fi
  sleep 2
done
tb_log "$polls polls of a's /healthz: $sick not 200"
tb_eq "a's /healthz 200 through the rebalance${first_sick:+ (first other: $first_sick)}" 0 "$sick"
tb_check "the log says a revoked its partitions" grep -q 'Revoking [0-9]* partition' "$TB_DIR/a.log"
rc=0
wait "${TB_PID[b]}" || rc=$?
tb_eq "b: exit 0" 0 "$rc"

tb_private_db_restart
tb_log "database restarted"
at_end() { [[ "$(tb_committed | awk '{ print $1, $2 }')" == "$(tb_watermarks | awk '{ print $1, $3 }')" ]]; }
tb_wait_until 120 "everything committed after the outage" at_end || tb_die "not everything was committed"
rc=0
tb_stop "${TB_PID[a]}" || rc=$?
tb_eq "a: SIGTERM exit 0" 0 "$rc"
tb_expect_ledger "$TB_DIR/expect.json"
tb_expect_outcome "$TB_DIR/expect.json"
tb_assert_committed_at_end
tb_done
