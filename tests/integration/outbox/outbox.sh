# shellcheck shell=bash
# Helpers of the outbox tests (this folder), after lib.sh.

# tb_outbox_check [TOPIC]: the ledger's events on TOPIC (payment.booked)
# against its booked payments (outbox-check.py; with tb_shards, those of
# every shard), with the checks every
# outbox test makes; `val NAME` reads a figure afterwards.
tb_outbox_check() {
  local topic="${1:-payment.booked}" booked
  if ((${#TB_SHARD_SOCKETS[@]} > 0)); then
    tb_shards_sql 'SELECT id, merchant_id, order_no FROM ledger_entry' >"$TB_DIR/booked.tsv"
  else
    tb_sql 'SELECT id, merchant_id, order_no FROM ledger_entry' >"$TB_DIR/booked.tsv"
  fi
  tb_consume "$topic" >"$TB_DIR/out.jsonl" || tb_die "consume of $topic failed"
  python3 "$(dirname "${BASH_SOURCE[0]}")/outbox-check.py" "$TB_DIR/booked.tsv" "$TB_DIR/out.jsonl" \
    >"$TB_DIR/check.txt" || tb_die "outbox-check.py failed"
  booked=$(wc -l <"$TB_DIR/booked.tsv")
  tb_eq "every booked payment's event is on $topic" 0 "$(val missing)"
  tb_eq "no event of a payment that was not booked" 0 "$(val unknown)"
  tb_eq "every copy carries its event's id (header = payload), keyed by the merchant" 0 "$(val bad_id)"
  tb_eq "one event id per booked payment ($booked)" "$booked" "$(val distinct_ids)"
  tb_eq "per merchant, the events' first copies in booking order" 0 "$(val order_bad)"
}

# tb_outbox_id_sql BIZ_KEY_SQL: the SQL expression of the id of the first
# event emitted for the business key BIZ_KEY_SQL (an SQL expression) in
# dedup_record of TB_DB: the first 32 hex digits of the SHA-256 of the
# outbox's event namespace, the table, the key and "0", NUL apart.
tb_outbox_id_sql() {
  local ns
  ns=$(tb_sql "SELECT TABLE_COMMENT FROM information_schema.TABLES
    WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'dedupd_outbox'")
  ns=${ns##*event_namespace=}
  [[ $ns =~ ^[0-9a-f]{32}$ ]] || tb_die "dedupd_outbox records no event namespace: '$ns'"
  echo "LEFT(SHA2(CONCAT('$ns', CHAR(0), 'dedup_record', CHAR(0), $1, CHAR(0), '0'), 256), 32)"
}

val() { awk -v k="$1" '$1 == k { print $2 }' "$TB_DIR/check.txt"; }
