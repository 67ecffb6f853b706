#!/usr/bin/env bash
# 27: a dead letter always fits. With the dead-letter producer's
# message.max.bytes at 20000 and dedup.max_payload_bytes at 50000 (dedupd
# warns at start that they disagree), a bad message of 30000 bytes and one
# of 60000 (payload_too_large) are dead-lettered with their payload
# truncated and a dedupd.truncated header giving the original length; the
# partition is not stalled. Dead letters keep the original headers, except
# ones named dedupd.*: each dedupd.* header appears once, and is dedupd's.
# A dead letter the broker refuses as too large is sent again bare
# (dedupd's headers only) instead of unchanged forever.
source "$(dirname "$0")/../lib.sh"
tb_init dlq_too_large
tb_mock events:1 events.dlq:1
TB_HANDLER="$DD_TEST_HANDLER_DIR/th_scripted.so" TB_KEY='ev:${id}' \
  TB_KAFKA_PROPS="message.max.bytes=20000" TB_DEDUP_EXTRA='max_payload_bytes = 50000;' tb_config
tb_migrate || tb_die "migrate failed"

# offset 0 good, 1 bad JSON of 30000 bytes with headers, 2 good,
# 3 payload_too_large (60000 bytes), 4 good
pad() { python3 -c 'import sys; print("x" * int(sys.argv[1]), end="")' "$1"; }
printf '0\t-\t{"id":0}\n' | tb_produce 2>/dev/null || tb_die "produce failed"
printf '0\tk-bad\t{"id":1,"pad":"%s\n' "$(pad 29985)" |
  "$DDTK" produce -b "$TB_BROKERS" -t events -H trace-id=abc123 -H dedupd.reason=forged \
    2>/dev/null || tb_die "produce failed"
printf '0\t-\t{"id":2}\n0\tk-big\t{"id":3,"pad":"%s"}\n0\t-\t{"id":4}\n' "$(pad 59983)" |
  tb_produce 2>/dev/null || tb_die "produce failed"

TB_RUN_TIMEOUT=60 tb_run || tb_not_ok "run 1 failed"
tb_check "the start warns that max_payload_bytes exceeds what a dead letter carries" grep -q \
  'dedup.max_payload_bytes (50000) is more than a dead letter can carry whole: the dead-letter producer.s message.max.bytes is 20000' \
  "$TB_DIR/run.log"
tb_eq "good messages applied" "ev:0 ev:2 ev:4" "$(tb_sql 'SELECT biz_key FROM th_effect ORDER BY biz_key' | xargs)"
tb_assert_committed_at_end
tb_dlq >"$TB_DIR/dlq.jsonl"
check=$(python3 - "$TB_DIR/dlq.jsonl" <<'PY'
import json, sys
want = {"1": ("k-bad", "bad_json", 30000), "3": ("k-big", "payload_too_large", 60000)}
problems, seen = [], set()
for line in open(sys.argv[1]):
    d = json.loads(line)
    h = d["headers"]
    off = h.get("dedupd.offset")
    if off not in want:
        problems.append("unexpected dead letter for offset %s" % off)
        continue
    seen.add(off)
    key, reason, size = want[off]
    payload = d.get("payload", "")
    if d["key"] != key or h.get("dedupd.reason") != reason:
        problems.append("offset %s: key %r reason %r" % (off, d["key"], h.get("dedupd.reason")))
    if h.get("dedupd.truncated") != str(size):
        problems.append("offset %s: dedupd.truncated %r, want %d" % (off, h.get("dedupd.truncated"), size))
    if not 10000 < len(payload) < 20000 or not payload.startswith('{"id":%s,"pad":"xxx' % off):
        problems.append("offset %s: payload of %d bytes is not a prefix within 20000" % (off, len(payload)))
    names = [n for n, _ in d["header_list"]]
    for n in set(names):
        if n.startswith("dedupd.") and names.count(n) != 1:
            problems.append("offset %s: header %s appears %d times" % (off, n, names.count(n)))
    if off == "1" and h.get("trace-id") != "abc123":
        problems.append("offset 1: original header trace-id missing: %r" % d["header_list"])
if seen != set(want):
    problems.append("dead letters for offsets %s, want %s" % (sorted(seen), sorted(want)))
print("; ".join(problems) or "ok")
PY
)
tb_eq "dead letters truncated, with the original headers and one of each dedupd.* header" ok "$check"

# The broker refuses the next produce as too large (MSG_SIZE_TOO_LARGE):
# the dead letter is sent again bare, once, and the offsets pass it.
printf '0\tk-refused\t{"id":5\n0\t-\t{"id":6}\n' |
  "$DDTK" produce -b "$TB_BROKERS" -t events -H trace-id=def456 2>/dev/null || tb_die "produce failed"
tb_mock_ctl "request-errors 0 10 1"
TB_RUN_TIMEOUT=60 tb_run || tb_not_ok "run 2 failed"
tb_check "the refusal was logged" grep -q 'The broker refused the dead letter as too large' "$TB_DIR/run.log"
tb_eq "the bare dead letter: no key, no payload, no original headers, the length in dedupd.truncated" \
  "None|bad_json|7|False" "$(tb_dlq | python3 -c '
import json, sys
for l in sys.stdin:
    d = json.loads(l)
    h = d["headers"]
    if h["dedupd.offset"] == "5":
        print("%s|%s|%s|%s" % (d["key"], h["dedupd.reason"], h.get("dedupd.truncated"),
                               d["payload"] != "" or "trace-id" in h))')"
tb_eq "message 6 applied" 1 "$(tb_sql "SELECT COUNT(*) FROM th_effect WHERE biz_key = 'ev:6'")"
tb_assert_committed_at_end
tb_done
