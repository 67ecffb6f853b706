#!/usr/bin/env bash
# 10: poison messages on one partition between good ones: invalid JSON,
# binary / invalid UTF-8, a key field missing, null, an object or an array,
# a key over 255 bytes, a payload over dedup.max_payload_bytes. Each is
# dead-lettered with its reason, the original Kafka key and payload bytes,
# and the source topic/partition/offset headers; the good messages around
# them are applied and the committed offset passes them all.
source "$(dirname "$0")/../lib.sh"
tb_init poison_messages
tb_mock events:1
TB_HANDLER="$DD_TEST_HANDLER_DIR/th_scripted.so" TB_KEY='ev:${id}' \
  TB_DEDUP_EXTRA='max_payload_bytes = 2000;' tb_config
tb_migrate || tb_die "migrate failed"

long=$(printf 'x%.0s' $(seq 1 300))
big=$(printf 'y%.0s' $(seq 1 2100))
# offset<TAB>kafka key<TAB>payload<TAB>expected reason ("-" = applied)
cat >"$TB_DIR/cases.txt" <<EOF
0	k-good0	{"id":"g0"}	-
1	k-json	{"id":"b1",	bad_json
2	k-bin	hex:ff00fe80	bad_json
3	k-missing	{"other":1}	key_missing
4	k-null	{"id":null}	key_missing
5	k-obj	{"id":{"a":1}}	key_missing
6	k-arr	{"id":[1,2]}	key_missing
7	k-long	{"id":"$long"}	key_too_long
8	k-big	{"id":"big","pad":"$big"}	payload_too_large
9	k-trail	{"id":"t"}}	bad_json
10	-	{"id":"g1"}	-
11	hexkey	hex:c328	bad_json
12	k-good2	{"id":"g2"}	-
EOF
cut -f 2,3 "$TB_DIR/cases.txt" | sed 's/^/0\t/' | tb_produce 2>/dev/null || tb_die "produce failed"

tb_run || tb_die "dedupd run failed"

tb_eq "good messages applied once" "ev:g0 1
ev:g1 1
ev:g2 1" "$(tb_sql 'SELECT biz_key, n FROM th_effect ORDER BY biz_key' | tr '\t' ' ')"
tb_eq "no dedup row for a poison message" 3 "$(tb_sql 'SELECT COUNT(*) FROM dedup_record')"
tb_assert_committed_at_end
tb_eq "committed offset passes every poison message" "0 13" "$(tb_committed)"

# Every dead letter matches its source message byte for byte.
tb_dlq >"$TB_DIR/dlq.jsonl"
check=$(python3 - "$TB_DIR/cases.txt" "$TB_DIR/dlq.jsonl" <<'PY'
import json, sys
cases = {}
for line in open(sys.argv[1], encoding="utf-8"):
    off, key, payload, reason = line.rstrip("\n").split("\t")
    if reason != "-":
        cases[off] = (key, payload, reason)
letters = [json.loads(l) for l in open(sys.argv[2]) if l.strip()]
problems = []
seen = set()
for d in letters:
    h = d["headers"]
    off = h.get("dedupd.offset")
    if off not in cases:
        problems.append("unexpected dead letter for offset %s" % off)
        continue
    seen.add(off)
    key, payload, reason = cases[off]
    if h.get("dedupd.reason") != reason:
        problems.append("@%s reason %s, expected %s" % (off, h.get("dedupd.reason"), reason))
    if h.get("dedupd.topic") != "events" or h.get("dedupd.partition") != "0":
        problems.append("@%s source headers %s/%s" % (off, h.get("dedupd.topic"), h.get("dedupd.partition")))
    if not h.get("dedupd.error"):
        problems.append("@%s has no dedupd.error" % off)
    if payload.startswith("hex:"):
        got = d.get("payload_hex") or ""
        if got != payload[4:] or "payload" in d:
            problems.append("@%s payload bytes %r" % (off, d.get("payload", got)))
    elif d.get("payload") != payload:
        problems.append("@%s payload differs (%d vs %d chars)" % (off, len(d.get("payload") or ""), len(payload)))
    want_key = None if key == "-" else key
    if d.get("key") != want_key:
        problems.append("@%s key %r, expected %r" % (off, d.get("key"), want_key))
    # No usable business key: no biz_key header (a null key is not a key).
    if "dedupd.biz_key" in h:
        problems.append("@%s carries a biz_key header" % off)
missing = sorted(set(cases) - seen, key=int)
if missing:
    problems.append("no dead letter for offsets %s" % ",".join(missing))
if len(letters) != len(cases):
    problems.append("%d dead letters for %d poison messages" % (len(letters), len(cases)))
print("; ".join(problems) or "ok")
PY
)
tb_eq "dead letters: reason, key, payload bytes and source headers" ok "$check"
tb_eq "summary counts every message" 13 "$(tb_summary messages)"
tb_eq "summary dead letters" 10 "$(tb_summary dead_letters)"
tb_done
