#!/usr/bin/env bash
# 51: `dedupd replay --apply` repairs. The business rows and dedup rows of 8
# keys are deleted after a complete run; replay --apply must book exactly
# those 8 again (the ledger matches the expect file again, no key booked
# twice), send no dead letters, and a second --apply must find everything
# applied and change nothing.
source "$(dirname "$0")/../lib.sh"
tb_init replay_apply
tb_mock payments:4
tb_config
tb_migrate || tb_die "migrate failed"

tb_gen --keys 400 --dup-min 1 --dup-max 3 --partitions 4 --bad 16 --conflicts 6 --seed 12
tb_produce <"$TB_DIR/stream.txt" 2>/dev/null || tb_die "produce failed"
tb_run || tb_die "dedupd run failed"
tb_expect_ledger

rj() { python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$@"; }
checksum() { tb_sql "CHECKSUM TABLE ledger_entry, merchant_balance, payment_order, dedup_record"; }
dlq_before=$(tb_dlq_reasons)

tb_sql "CREATE TABLE victims AS SELECT biz_key FROM dedup_record WHERE status = 1
          ORDER BY SHA2(biz_key, 256) LIMIT 8;
        UPDATE merchant_balance b JOIN (SELECT merchant_id, currency, SUM(amount_cents) s, COUNT(*) c
            FROM ledger_entry WHERE biz_key IN (SELECT biz_key FROM victims)
            GROUP BY merchant_id, currency) x USING (merchant_id, currency)
          SET b.balance_cents = b.balance_cents - x.s, b.entries = b.entries - x.c;
        DELETE FROM ledger_entry WHERE biz_key IN (SELECT biz_key FROM victims);
        DELETE FROM dedup_record WHERE biz_key IN (SELECT biz_key FROM victims)"
tb_eq "ledger lost 8 entries" "$(($(tb_expect_get unique_keys_applied) - 8))" \
  "$(tb_sql 'SELECT COUNT(*) FROM ledger_entry')"

"$DEDUPD" replay -c "$TB_CONF" --from earliest --apply --report "$TB_DIR/apply1.json" \
  2>"$TB_DIR/replay1.log" || tb_die "replay --apply failed (see replay1.log)"
r="$TB_DIR/apply1.json"
tb_eq "apply: 8 missing" 8 "$(rj "$r" 'r["summary"]["missing"]')"
tb_eq "apply: 8 repaired" 8 "$(rj "$r" 'r["summary"]["repaired"]')"
tb_eq "apply: repaired entries are the deleted keys" \
  "$(tb_sql 'SELECT biz_key FROM victims ORDER BY biz_key')" \
  "$(rj "$r" '"\n".join(sorted(e["key"] for e in r["entries"] if e.get("apply") == "repaired"))')"
# Rejected keys are failed rows; with retry_failed (the default) they are
# tried again, rejected again, and stay failed.
tb_eq "apply: rejected keys tried again and failed again" "$(tb_expect_get dedup_rows.failed)" \
  "$(rj "$r" 'r["summary"]["apply_failed"]')"
tb_expect_ledger
tb_expect_outcome "$TB_DIR/expect.json"
tb_eq "dedup rows of the repaired keys are back, applied" 8 \
  "$(tb_sql 'SELECT COUNT(*) FROM dedup_record d JOIN victims v USING (biz_key) WHERE d.status = 1')"
tb_eq "replay sent no dead letters" "$dlq_before" "$(tb_dlq_reasons)"

applied_rows() {
  tb_sql 'SELECT MD5(GROUP_CONCAT(biz_key, request_hash, updated_at ORDER BY biz_key)) FROM dedup_record WHERE status = 1'
}
before=$(checksum)
applied_before=$(applied_rows)
"$DEDUPD" replay -c "$TB_CONF" --from earliest --apply --report "$TB_DIR/apply2.json" \
  2>"$TB_DIR/replay2.log" || tb_die "second replay --apply failed"
r="$TB_DIR/apply2.json"
tb_eq "second apply: nothing missing" 0 "$(rj "$r" 'r["summary"]["missing"]')"
tb_eq "second apply: nothing repaired" 0 "$(rj "$r" 'r["summary"]["repaired"]')"
tb_eq "second apply: every good key applied" "$(tb_expect_get unique_keys_applied)" \
  "$(rj "$r" 'r["summary"]["applied"]')"
# Failed keys are tried again (retry_failed) and rejected again: the failed
# rows' error and updated_at may move, nothing else.
tb_eq "second apply changes no business table" \
  "$(grep -v dedup_record <<<"$before")" "$(checksum | grep -v dedup_record)"
tb_eq "second apply changes no applied dedup row" "$applied_before" "$(applied_rows)"
tb_expect_ledger
tb_done
