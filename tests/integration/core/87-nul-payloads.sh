#!/usr/bin/env bash
# 87: what a handler reads is what the key was built from. The tree handlers
# get (cJSON) cuts strings and member names at a NUL, while keys and hashes
# keep every byte: m1/o1, "o1\u0000dup", "m1\u0000x" and a member named
# "order_no\u0000" before the real "order_no" are four keys that the ledger
# example would book as m1/o1 four times. Each payload with a NUL is
# dead-lettered bad_json naming the byte; m1/o1 is booked once. Replay
# judges them as run does (bad_json, nothing missing), and handler-test
# refuses them too; its envelopes carry the payload as written.
source "$(dirname "$0")/../lib.sh"
tb_init nul_payloads
tb_mock payments:1
tb_config
tb_migrate || tb_die "migrate failed"

# offset, payload, the error its dead letter names ("-": applied)
cat >"$TB_DIR/cases.py" <<'PY'
CASES = [
    (b'{"merchant_id":"m1","order_no":"o1","txn_id":"t1","amount":12.50,"currency":"EUR","status":"PAID"}', "-"),
    (b'{"merchant_id":"m1","order_no":"o1\\u0000dup","txn_id":"t1","amount":12.50,"currency":"EUR","status":"PAID"}',
     "invalid JSON: NUL (\\u0000) in a string at byte 34"),
    (b'{"merchant_id":"m1\\u0000x","order_no":"o1","txn_id":"t1","amount":12.50,"currency":"EUR","status":"PAID"}',
     "invalid JSON: NUL (\\u0000) in a string at byte 18"),
    (b'{"order_no\\u0000":"o1","merchant_id":"m1","txn_id":"t1","amount":12.50,"currency":"EUR","status":"PAID","order_no":"zz"}',
     "invalid JSON: NUL (\\u0000) in a member name at byte 10"),
    (b'{"merchant_id":"m2","order_no":"o1","txn_id":"t2","amount":1,"currency":"EUR","status":"PAID"}', "-"),
]
PY
cases() { python3 -c 'import sys; sys.path.insert(0, sys.argv[1]); from cases import CASES; exec(sys.argv[2])' "$TB_DIR" "$1"; }
cases 'for p, _ in CASES: print("0\t-\thex:" + p.hex())' | tb_produce 2>/dev/null || tb_die "produce failed"

tb_run || tb_die "dedupd run failed"
tb_eq "two applied" 2 "$(tb_summary applied)"
tb_eq "three dead-lettered bad_json" 3 "$(tb_summary dlq_bad_json)"
tb_eq "m1 booked once, m2 once" "m1 1250 1
m2 100 1" "$(tb_sql 'SELECT merchant_id, balance_cents, entries FROM merchant_balance ORDER BY merchant_id' | tr '\t' ' ')"
tb_eq "two ledger entries, under the two keys" "pay:m1:o1
pay:m2:o1" "$(tb_sql 'SELECT biz_key FROM ledger_entry ORDER BY biz_key')"
tb_eq "no dedup row for a refused payload" 2 "$(tb_sql 'SELECT COUNT(*) FROM dedup_record')"
tb_eq "each dead letter: its offset, bad_json and the byte" \
  "$(cases 'for o, (_, e) in enumerate(CASES):
    if e != "-": print(o, "bad_json", e)')" \
  "$(tb_dlq | python3 -c '
import json, sys
for l in sys.stdin:
    h = json.loads(l)["headers"]
    print(h["dedupd.offset"], h["dedupd.reason"], h["dedupd.error"])' | sort -n)"
tb_assert_committed_at_end

# replay judges them as run did
"$DEDUPD" replay -c "$TB_CONF" --from earliest --report "$TB_DIR/report.json" 2>"$TB_DIR/replay.log" ||
  tb_die "replay failed (see replay.log)"
rj() { python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$TB_DIR/report.json" "$1"; }
tb_eq "replay: the three are bad_json" 3 "$(rj 'r["summary"]["bad_json"]')"
tb_eq "replay: nothing missing" 0 "$(rj 'r["summary"]["missing"]')"

# handler-test runs the same parse: the same two applied, three refused
cases 'for p, _ in CASES: print(p.decode())' >"$TB_DIR/msgs.jsonl"
rc=0
"$DEDUPD" handler-test --mysql-socket "$DD_TEST_MYSQL_SOCKET" -c "$DD_TEST_SRC_DIR/examples/ledger/dedupd.conf" \
  --handler "$DD_LEDGER_SO" "$TB_DIR/msgs.jsonl" >"$TB_DIR/htest.out" 2>"$TB_DIR/htest.log" || rc=$?
tb_eq "handler-test: exit 0" 0 "$rc"
tb_check "handler-test: two applied of five" grep -q 'pass 1: .*5 delivered, 2 applied' "$TB_DIR/htest.out"

# handler-test's envelopes send the payload as written (not as cJSON
# prints it back: numbers from doubles, strings cut at a NUL), and refuse
# an envelope with a NUL
printf '%s\n' '{"payload": {"id": 9007199254740993, "amount": 1e400}}' \
  '{"payload": "{\"id\":\"s\\u00e9\"}"}' >"$TB_DIR/env.jsonl"
rc=0
"$DEDUPD" handler-test --mysql-socket "$DD_TEST_MYSQL_SOCKET" --envelope \
  --handler "$DD_TEST_HANDLER_DIR/th_scripted.so" --key 'k:${id}' \
  --ignore-column th_effect.last_offset "$TB_DIR/env.jsonl" >"$TB_DIR/env.out" 2>"$TB_DIR/env.log" || rc=$?
tb_eq "handler-test --envelope: exit 0" 0 "$rc"
tb_check "the handler got the number as written" grep -qP '^\s+k:9007199254740993\t1\t' "$TB_DIR/env.out"
tb_check "and the string payload decoded" grep -qF $'k:s\xc3\xa9\t1\t' "$TB_DIR/env.out"
printf '%s\n' '{"payload": {"id": "x\u0000y"}}' >"$TB_DIR/env-nul.jsonl"
rc=0
"$DEDUPD" handler-test --mysql-socket "$DD_TEST_MYSQL_SOCKET" --envelope \
  --handler "$DD_TEST_HANDLER_DIR/th_scripted.so" --key 'k:${id}' "$TB_DIR/env-nul.jsonl" \
  >"$TB_DIR/env-nul.out" 2>&1 || rc=$?
tb_eq "an envelope with a NUL: exit 2" 2 "$rc"
tb_check "naming the line and the byte" grep -qF 'env-nul.jsonl:1: not JSON: NUL (\u0000) in a string at byte 21' "$TB_DIR/env-nul.out"
tb_done
