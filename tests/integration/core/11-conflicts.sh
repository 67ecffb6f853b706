#!/usr/bin/env bash
# 11: same business key, different content is a conflict — whether the first
# copy was committed by an earlier run or sits in the same batch — and the
# stored effect is never touched. Re-encoded copies (other field order,
# whitespace, number spelling) are duplicates, never conflicts. Each conflict
# is logged at warn with both request hashes and the stored row's times (or
# the earlier copy); a flood of poison messages is logged 10 lines per reason
# and 10 s, then one line counts the rest.
source "$(dirname "$0")/../lib.sh"
tb_init conflicts
tb_mock events:1
TB_HANDLER="$DD_TEST_HANDLER_DIR/th_scripted.so" TB_KEY='ev:${id}' TB_WORKERS=1 \
  TB_BATCH_WAIT_MS=1000 tb_config
tb_migrate || tb_die "migrate failed"

# Run 1: the first copies of a and c.
printf '0\t-\t%s\n' '{"id":"a","v":1.5,"w":"x"}' '{"id":"c","v":3}' | tb_produce 2>/dev/null ||
  tb_die "produce failed"
tb_run || tb_die "first run failed"
tb_eq "run 1 applied a and c" 2 "$(tb_summary applied)"
stored=$(tb_sql 'SELECT biz_key, HEX(request_hash), status, response, koffset FROM dedup_record ORDER BY biz_key')

# Run 2, one batch (offsets 2..7):
printf '0\t-\t%s\n' \
  '{"id":"a","v":2,"w":"x"}' \
  '{ "w" : "x", "v" : 1.50, "id" : "a" }' \
  '{"id":"b","v":1}' \
  '{"id":"b","v":1,"extra":true}' \
  '{"v":1,   "id":"b"}' \
  '{"v":3e0,"id":"c"}' | tb_produce 2>/dev/null || tb_die "produce failed"
tb_run || tb_die "second run failed"

tb_eq "run 2 was one batch" 1 "$(tb_summary batches)"
tb_eq "run 2 applied only b" 1 "$(tb_summary applied)"
tb_eq "run 2 conflicts" 2 "$(tb_summary conflicts)"
tb_eq "run 2 duplicates (re-encoded copies)" 3 "$(tb_summary duplicates)"
tb_eq "each effect applied once" "ev:a 1
ev:b 1
ev:c 1" "$(tb_sql 'SELECT biz_key, n FROM th_effect ORDER BY biz_key' | tr '\t' ' ')"
tb_eq "stored rows of a and c untouched" "$stored" \
  "$(tb_sql "SELECT biz_key, HEX(request_hash), status, response, koffset FROM dedup_record WHERE biz_key <> 'ev:b' ORDER BY biz_key")"
tb_eq "b's row is from its first copy" "1 4" \
  "$(tb_sql "SELECT status, koffset FROM dedup_record WHERE biz_key = 'ev:b'" | tr '\t' ' ')"
tb_eq "conflict dead letters: offset, key header, payload" \
  '2 ev:a {"id":"a","v":2,"w":"x"}
5 ev:b {"id":"b","v":1,"extra":true}' \
  "$(tb_dlq | python3 -c '
import json, sys
for line in sys.stdin:
    d = json.loads(line)
    h = d["headers"]
    print(h["dedupd.offset"], h.get("dedupd.biz_key"), d["payload"]) if h["dedupd.reason"] == "conflict" else print("unexpected", h)' | sort -n)"

# The log: one warn line per conflict, naming both request hashes and what the
# message conflicts with (the stored row and its times, or the earlier copy).
hash_of() { python3 -c 'import hashlib, json, sys
def canon(v):
    if isinstance(v, dict):
        return "{" + ",".join(json.dumps(k) + ":" + canon(v[k]) for k in sorted(v)) + "}"
    return json.dumps(v)
print(hashlib.sha256(canon(json.loads(sys.argv[1])).encode()).hexdigest())' "$1"; }
tb_eq "conflict log lines: offset, key, reason, hashes, stored row's times / earlier copy" \
  "2 ev:a conflict $(hash_of '{"id":"a","v":2,"w":"x"}') $(tb_sql "SELECT LOWER(HEX(request_hash)), created_at, updated_at FROM dedup_record WHERE biz_key = 'ev:a'" | tr '\t' ' ') -
5 ev:b conflict $(hash_of '{"id":"b","v":1,"extra":true}') $(hash_of '{"id":"b","v":1}') - - events [0] @4" \
  "$(tail -n +"$((TB_RUN_START + 1))" "$TB_DIR/run.log" | python3 -c '
import shlex, sys
for line in sys.stdin:
    if "level=warn" not in line or "reason=" not in line:
        continue
    f = dict(w.split("=", 1) for w in shlex.split(line) if "=" in w)
    print(f["offset"], f["key"], f["reason"], f["hash"], f["stored_hash"],
          f.get("stored_created_at", "-"), f.get("stored_updated_at", "-"), f.get("first_copy", "-"))')"
tb_check "the conflicts' lines are warnings that say Dead-lettering message (conflict)" \
  test "$(grep -c 'level=warn .*msg="Dead-lettering message (conflict): ' "$TB_DIR/run.log")" = 2
tb_assert_committed_at_end

# Run 3: 25 messages that are not JSON. 10 lines for the reason in 10 s, then
# one line says how many more were not logged.
for i in $(seq 1 25); do printf '0\t-\tnot json %d\n' "$i"; done | tb_produce 2>/dev/null ||
  tb_die "produce failed"
tb_run || tb_die "third run failed"
tb_eq "run 3: 25 dead letters" 25 "$(tb_summary dlq_bad_json)"
run3() { tail -n +"$((TB_RUN_START + 1))" "$TB_DIR/run.log"; }
tb_eq "run 3: 10 lines for reason bad_json" 10 "$(run3 | grep -c 'level=warn .*reason="bad_json"')"
tb_check "run 3: then one line counts the 15 not logged" \
  grep -q '15 more dead letter(s) of reason bad_json were not logged' <(run3)
tb_assert_committed_at_end
tb_done
