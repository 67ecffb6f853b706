#!/usr/bin/env bash
# 01: 3,000+ payment callbacks over 4 partitions, every key delivered 1-4
# times (re-encoded, across partitions), plus bad messages and conflicts.
# End state: every business effect exactly once, one dedup row per key,
# dead letters by reason, committed offsets at the end of every partition.
source "$(dirname "$0")/../lib.sh"
tb_init exactly_once
tb_mock payments:4
TB_WORKERS=4 tb_config
tb_migrate || tb_die "migrate failed"

tb_gen --keys 1300 --dup-min 1 --dup-max 4 --partitions 4 --bad 30 --conflicts 15 --seed 7
n=$(wc -l <"$TB_DIR/stream.txt")
tb_check "stream has 3,000+ messages ($n)" test "$n" -ge 3000
tb_produce <"$TB_DIR/stream.txt" 2>/dev/null || tb_die "produce failed"

tb_run || tb_die "dedupd run failed"

tb_expect_ledger "$TB_DIR/expect.json"
tb_expect_outcome "$TB_DIR/expect.json"
tb_assert_committed_at_end
tb_eq "summary counts every message once" "$n" "$(tb_summary messages)"
tb_eq "dead letters carry source headers" 0 "$(tb_dlq | python3 -c '
import json, sys
bad = 0
for line in sys.stdin:
    h = json.loads(line).get("headers", {})
    for k in ("dedupd.reason", "dedupd.error", "dedupd.topic", "dedupd.partition", "dedupd.offset"):
        if k not in h:
            bad += 1
print(bad)')"
tb_done
