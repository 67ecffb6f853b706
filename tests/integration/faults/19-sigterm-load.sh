#!/usr/bin/env bash
# 19: SIGTERM in the middle of a fast stream. dedupd stops polling, applies
# what it already took, commits the offsets and exits 0 well within
# shutdown_timeout. The committed offsets then match the applied rows
# exactly, so the restart applies the rest, re-applies nothing (no
# duplicates at all) and skips nothing.
source "$(dirname "$0")/../lib.sh"
tb_init sigterm_load
tb_mock events:4
TB_HANDLER="$DD_TEST_HANDLER_DIR/th_scripted.so" TB_KEY='ev:${id}' TB_WORKERS=2 TB_BATCH_MAX=50 \
  TB_BATCH_EXTRA='max_inflight = 1000;' tb_config "$TB_CONF" 'shutdown_timeout = "10s";'
tb_migrate || tb_die "migrate failed"

N=8000 # 1 ms each on 2 workers: about 4 s of work
python3 - "$N" <<'PY' | tb_produce 2>/dev/null || tb_die "produce failed"
import sys
for i in range(int(sys.argv[1])):
    print('%d\t-\t{"id":%d,"th":"sleep:1"}' % (i % 4, i))
PY

tb_start w
w=$TB_LAST_PID
effects_at_least() { (($(tb_sql 'SELECT COUNT(*) FROM th_effect') >= $1)); }
tb_wait_until 60 "1500 effects" effects_at_least 1500 || tb_die "the worker did not get going"
t0=$(date +%s%N)
rc=0
tb_stop "$w" || rc=$?
ms=$((($(date +%s%N) - t0) / 1000000))
tb_eq "exit 0 on SIGTERM" 0 "$rc"
tb_log "stopped in ${ms} ms"
tb_check "stopped within shutdown_timeout (${ms} ms < 10000)" test "$ms" -lt 10000
applied=$(tb_sql 'SELECT COUNT(*) FROM th_effect')
tb_check "stopped mid-stream ($applied of $N applied)" test "$applied" -lt "$N"
tb_eq "committed offsets cover exactly the applied messages" "$applied" \
  "$(tb_committed | awk '$2 > 0 { s += $2 } END { print s + 0 }')"

tb_run || tb_die "restart failed"
tb_eq "the restart applies the rest" $((N - applied)) "$(tb_summary applied)"
tb_eq "the restart re-applies nothing and sees no duplicate" 0 "$(tb_summary duplicates)"
tb_eq "every effect once" "$N 1 1" "$(tb_sql 'SELECT COUNT(*), MIN(n), MAX(n) FROM th_effect' | tr '\t' ' ')"
tb_assert_committed_at_end
tb_done
