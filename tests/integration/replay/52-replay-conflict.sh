#!/usr/bin/env bash
# 52: a dedup row whose stored request hash differs from the topic's message
# (UPDATE dedup_record SET request_hash = ...) is a `conflict` with the
# stored hash in the report; --apply never overwrites it (the ledger and the
# row stay as they are) and reports no repair for it.
source "$(dirname "$0")/../lib.sh"
tb_init replay_conflict
tb_mock payments:2
tb_config
tb_migrate || tb_die "migrate failed"

tb_gen --keys 120 --dup-min 1 --dup-max 2 --partitions 2 --seed 13
tb_produce <"$TB_DIR/stream.txt" 2>/dev/null || tb_die "produce failed"
tb_run || tb_die "dedupd run failed"

rj() { python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$@"; }
checksum() { tb_sql "CHECKSUM TABLE ledger_entry, merchant_balance, payment_order, dedup_record"; }

key=$(tb_sql "SELECT biz_key FROM dedup_record WHERE status = 1 ORDER BY biz_key LIMIT 1 OFFSET 7")
tb_sql "UPDATE dedup_record SET request_hash = UNHEX(SHA2('tampered', 256)) WHERE biz_key = '$key'"
tampered=$(tb_sql "SELECT LOWER(HEX(request_hash)) FROM dedup_record WHERE biz_key = '$key'")

before=$(checksum)
"$DEDUPD" replay -c "$TB_CONF" --from earliest --report "$TB_DIR/report.json" 2>"$TB_DIR/replay.log" ||
  tb_die "replay failed"
r="$TB_DIR/report.json"
tb_eq "one conflict" 1 "$(rj "$r" 'r["summary"]["conflict"]')"
tb_eq "nothing missing" 0 "$(rj "$r" 'r["summary"]["missing"]')"
tb_eq "the conflict is the tampered key" "$key hash_differs $tampered" \
  "$(rj "$r" '"\n".join(e["key"] + " " + e["reason"] + " " + e["stored_hash"] for e in r["entries"] if e["status"] == "conflict")')"
tb_eq "its message hash differs from the stored one" 1 \
  "$(rj "$r" 'sum(1 for e in r["entries"] if e["status"] == "conflict" and len(e["hash"]) == 64 and e["hash"] != e["stored_hash"])')"
tb_eq "report-only changes nothing" "$before" "$(checksum)"

"$DEDUPD" replay -c "$TB_CONF" --from earliest --apply --report "$TB_DIR/apply.json" 2>>"$TB_DIR/replay.log" ||
  tb_die "replay --apply failed"
tb_eq "apply: conflict still reported" 1 "$(rj "$TB_DIR/apply.json" 'r["summary"]["conflict"]')"
tb_eq "apply: nothing repaired" 0 "$(rj "$TB_DIR/apply.json" 'r["summary"]["repaired"]')"
tb_eq "apply leaves a conflicting row and the ledger alone" "$before" "$(checksum)"
tb_eq "the ledger books the key once" 1 "$(tb_sql "SELECT COUNT(*) FROM ledger_entry WHERE biz_key = '$key'")"
tb_expect_ledger
tb_done
