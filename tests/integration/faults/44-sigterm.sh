#!/usr/bin/env bash
# 44: SIGTERM while workers are inside slow handler calls, with more work
# queued than shutdown_timeout allows. dedupd stops polling, finishes or
# abandons the queued batches by the deadline, commits the offsets of what
# it applied and exits 0. The restart (--exit-at-end) gets exactly the
# uncommitted messages again and applies only the ones not applied before:
# every effect exactly once. The log says what happened, in order: starting,
# joining, each partition assigned, the signal, draining, the final commit
# per partition (the offsets the group then has), leaving the group with the
# revoked partitions' offsets, and last "Stopped".
source "$(dirname "$0")/../lib.sh"
source "$(dirname "$0")/../http.sh"
tb_init sigterm
tb_mock events:2
port=$(tb_free_port)
TH_URL="http://127.0.0.1:$port"
TB_HANDLER="$DD_TEST_HANDLER_DIR/th_scripted.so" TB_KEY='ev:${id}' TB_BATCH_MAX=5 \
  tb_config "$TB_CONF" "http = { listen = \"127.0.0.1:$port\"; };" 'shutdown_timeout = "2s";'
tb_migrate || tb_die "migrate failed"
# 200 messages of 100 ms each on 2 workers: about 10 s of work.
python3 -c 'import json
for i in range(200):
    print("%d\t-\t%s" % (i % 2, json.dumps({"id": i, "th": "sleep:100"})))' | tb_produce 2>/dev/null ||
  tb_die "produce failed"

tb_start run
pid=$TB_LAST_PID
_busy() { th_scrape; [[ "$(th_metric 'dedupd_applied_total{route="default"}')" -ge 10 && "$(th_metric dedupd_inflight_messages)" -gt 0 ]]; }
tb_wait_until 60 "a worker busy in the handler" _busy || tb_die "never saw work in flight"
rc=0
start=$(date +%s)
tb_stop "$pid" || rc=$?
tb_eq "SIGTERM with a handler running: exit 0" 0 "$rc"
tb_check "stopped within 20 s" test $(($(date +%s) - start)) -le "$(tb_secs 20)"
applied=$(tb_summary applied)
[[ -z "$applied" ]] && applied=$(grep '^summary ' "$TB_DIR/run.log" | tail -n 1 | sed 's/.* applied=\([0-9]*\).*/\1/')
tb_check "stopped before the end ($applied of 200 applied)" test "$applied" -lt 200
tb_eq "effects = applied at stop" "$applied" "$(tb_sql 'SELECT COUNT(*) FROM th_effect')"
committed=$(tb_committed | awk '{ s += ($2 > 0 ? $2 : 0) } END { print s + 0 }')
tb_check "offsets committed ($committed), none past what was applied ($applied)" \
  test "$committed" -ge 1 -a "$committed" -le "$applied"

# The first run's log lines, in order.
sed '/^---- dedupd run/,$d' "$TB_DIR/run.log" | grep '^ts=' >"$TB_DIR/first.log"
tb_check "life cycle lines in order, Stopped last" python3 - "$TB_DIR/first.log" <<'PY'
import re, sys
lines = [l.split(' msg="', 1)[1] for l in open(sys.argv[1]) if ' msg="' in l]
want = [r"Starting dedupd \S+ \(librdkafka .*\): config .*, group tg, topics events, handler .*th_scripted\.so, 2 worker\(s\)",
        r"Joining the group tg: subscribed",
        r"Assigned events \[0\]: committed offset none",
        r"Assigned events \[1\]: committed offset none",
        r"Received SIGTERM: stopping\. Draining \d+ message\(s\) in flight for up to 2000 ms",
        r"Final commit: events \[0\]: committed offset ",
        r"Final commit: events \[1\]: committed offset ",
        r"Leaving the group tg\.",
        r"Revoked events \[0\]: committed offset ",
        r"Revoked events \[1\]: committed offset ",
        r"Left the group tg\.",
        r"Stopped"]
at = -1
for w in want:
    i = next((i for i, l in enumerate(lines) if i > at and re.match(w, l)), None)
    assert i is not None, "no line %r after line %d: %s" % (w, at, lines[at] if at >= 0 else "")
    at = i
assert lines[-1].startswith("Stopped"), "last line: " + lines[-1]
PY
tb_eq "the final commit lines name the offsets the group has" \
  "$(tb_committed | awk '{ print $1, ($2 < 0 ? "none" : $2) }')" \
  "$(sed -n 's/.*msg="Final commit: events \[\([0-9]*\)\]: committed offset \([a-z0-9]*\)\.".*/\1 \2/p' "$TB_DIR/first.log")"

TB_RUN_TIMEOUT=60 tb_run || tb_die "restart failed"
tb_eq "restart gets exactly the uncommitted messages" "$((200 - committed))" "$(tb_summary messages)"
tb_eq "restart applies only the rest" "$((200 - applied))" "$(tb_summary applied)"
tb_eq "restart skips what was applied but not committed" "$((applied - committed))" \
  "$(tb_summary duplicates)"
tb_eq "200 effects" 200 "$(tb_sql 'SELECT COUNT(*) FROM th_effect')"
tb_eq "no effect applied twice" 0 "$(tb_sql 'SELECT COUNT(*) FROM th_effect WHERE n <> 1')"
tb_assert_committed_at_end
tb_done
