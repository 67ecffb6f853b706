#!/usr/bin/env bash
# 160: the SQL handler (handler.sql) applies each message's statements once,
# with every value bound exactly as the payload wrote it, and its rules
# enforced. Payments of orders run three statements: a row of values, an
# order moved UNPAID -> PAID (expect = 1) and a payment row; then an event
# (outbox) and the response query.
#   - hostile values stored byte for byte (quotes, backslashes, an SQL
#     injection, a literal ${merchant_id}, emoji, control characters), the
#     same string into a VARBINARY column; 19- and 20-digit integers,
#     38-digit decimals, -0.00 (as a DECIMAL, and as written through
#     ${json:...}), 1.5e3, booleans as 1/0, null and an absent optional
#     field as NULL, an object as JSON text; the message's key, partition
#     and offset;
#   - rejected, nothing written, the dead letter naming why: a second
#     payment of a paid order (expect), a missing field, an object where a
#     value goes, a number too big for a DECIMAL, a value the column refuses;
#   - the same messages through batches (handle_batch, bulk executions) and
#     one at a time (handler.batch = false) leave the same rows.
source "$(dirname "$0")/../lib.sh"
tb_init sql_handler
tb_mock pay_a:2 pay_b:2

# sql_body PREFIX [RESPONSE]: handler.sql over tables PREFIX*, with the
# response query when RESPONSE is given (a batch then goes message by
# message: a's has none, so its batches run in bulk).
sql_body() {
  local resp=""
  [[ -n "${2:-}" ]] && resp="response = \"SELECT status, paid_txn FROM $1orders WHERE order_no = \${order}\";"
  cat <<EOF
migrate = (
  "CREATE TABLE IF NOT EXISTS $1vals (k VARBINARY(255) PRIMARY KEY, s VARCHAR(100) NULL,"
  " b VARBINARY(400) NULL, n19 BIGINT, u20 BIGINT UNSIGNED, d38 DECIMAL(38,2), neg0 DECIMAL(10,2),"
  " neg0_text VARCHAR(20), e DECIMAL(10,0), flag TINYINT, note VARCHAR(50) NULL, meta LONGTEXT"
  " CHECK (JSON_VALID(meta)), pos VARCHAR(40)) DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin",
  "CREATE TABLE IF NOT EXISTS $1orders (order_no VARCHAR(20) PRIMARY KEY, status VARCHAR(10),"
  " paid_txn VARCHAR(20) NULL)",
  "CREATE TABLE IF NOT EXISTS $1payments (txn VARCHAR(20) PRIMARY KEY, order_no VARCHAR(20),"
  " amount DECIMAL(38,2))"
);
statements = (
  { name = "vals"; sql = "INSERT INTO $1vals VALUES (\${@key}, \${s}, \${s}, \${n19}, \${u20},"
    " \${d38}, \${neg0}, \${json:neg0}, \${e}, \${flag}, \${note?}, \${json:meta},"
    " CONCAT(\${@topic}, '/', \${@partition}, '/', \${@offset}))"; },
  { name = "paid"; sql = "UPDATE $1orders SET status = 'PAID', paid_txn = \${txn}"
    " WHERE order_no = \${order} AND status = 'UNPAID'"; expect = 1; },
  { name = "payment"; sql = "INSERT INTO $1payments VALUES (\${txn}, \${order}, \${d38})"; }
);
$resp
events = ( { topic = "order.paid"; key = "\${order}";
  value = "{\\"id\\": \${@event_id}, \\"order\\": \${order}, \\"amount\\": \${d38}, \\"meta\\": \${meta}}"; } );
EOF
}
grants() {
  printf 'GRANT INSERT ON `x`.`%svals` TO '"'dedupd'@'%%'"';\n' "$1"
  printf 'GRANT SELECT, UPDATE ON `x`.`%sorders` TO '"'dedupd'@'%%'"';\n' "$1"
  printf 'GRANT INSERT ON `x`.`%spayments` TO '"'dedupd'@'%%'"';\n' "$1"
}
grants a_ >"$TB_DIR/grants_a.sql"
grants b_ >"$TB_DIR/grants_b.sql"
export TB_KEY='pay:${order}:${txn}' TB_BATCH_WAIT_MS=200 TB_WORKERS=1
outbox='outbox = { enabled = true; relay = false; };'
TB_TOPIC=pay_a TB_GROUP=ga TB_HANDLER_SQL=$(sql_body a_) \
  TB_DEDUP_EXTRA='lane_key = "${order}"; table = "dedup_a";' tb_config "$TB_DIR/a.conf" "$outbox"
TB_HANDLER_GRANTS="$TB_DIR/grants_a.sql" tb_migrate || tb_die "migrate a failed"
TB_TOPIC=pay_b TB_GROUP=gb TB_HANDLER_SQL=$(sql_body b_ response) TB_HANDLER_EXTRA='batch = false;' \
  TB_DEDUP_EXTRA='lane_key = "${order}"; table = "dedup_b";' tb_config "$TB_DIR/b.conf" "$outbox"
TB_HANDLER_GRANTS="$TB_DIR/grants_b.sql" tb_migrate || tb_die "migrate b failed"
for p in a_ b_; do
  tb_sql "INSERT INTO ${p}orders (order_no, status) VALUES
    ('o1', 'UNPAID'), ('o2', 'UNPAID'), ('o3', 'UNPAID'), ('o4', 'UNPAID'), ('o5', 'UNPAID'),
    ('o6', 'UNPAID'), ('o7', 'UNPAID'), ('o8', 'UNPAID'), ('o9', 'UNPAID')"
done

# The messages (partition 0, key -, payload), and what the good ones must
# leave: hex of s, and the other columns as MariaDB prints them.
python3 - "$TB_DIR" <<'PY'
import json, sys
d = sys.argv[1]
good = [
    ('o1', 't1', '\'); DROP TABLE a_vals; --', '9223372036854775807', '18446744073709551615',
     '123456789012345678901234567890123456.78', 'true', '{"a": [1, "x"]}', '"n"'),
    ('o2', 't2', 'it\'s "quoted" \\ back\\slash \\\'', '-9223372036854775808', '0',
     '-999999999999999999999999999999999999.99', 'false', '[]', 'null'),
    ('o3', 't3', '${merchant_id}', '1', '1', '0.01', 'true', '{}', None),
    ('o4', 't4', '😀 张伟 é \u0001\u001f\n\t\u007f', '0', '7', '0.10', 'false', '"s"', '"é"'),
]
lines, want = [], []
for order, txn, s, n19, u20, d38, flag, meta, note in good:
    p = ('{"order":%s,"txn":%s,"s":%s,"n19":%s,"u20":%s,"d38":%s,"neg0":-0.00,"e":1.5e3,'
         '"flag":%s,"meta":%s%s}') % (json.dumps(order), json.dumps(txn), json.dumps(s), n19, u20,
                                      d38, flag, meta, '' if note is None else ',"note":' + note)
    lines.append(p)
    want.append('\t'.join([s.encode().hex().upper(), n19, u20, d38, '0.00', '-0.00', '1500',
                           '1' if flag == 'true' else '0',
                           'NULL' if note in (None, 'null') else json.loads(note), meta]))
bad = [
    '{"order":"o1","txn":"t9","s":"again","n19":1,"u20":1,"d38":1.00,"neg0":0,"e":1,"flag":true,"meta":{}}',
    '{"order":"o5","txn":"t5","n19":1,"u20":1,"d38":1.00,"neg0":0,"e":1,"flag":true,"meta":{}}',
    '{"order":"o6","txn":"t6","s":{"x":1},"n19":1,"u20":1,"d38":1.00,"neg0":0,"e":1,"flag":true,"meta":{}}',
    '{"order":"o7","txn":"t7","s":"x","n19":1,"u20":1,"d38":1e66,"neg0":0,"e":1,"flag":true,"meta":{}}',
    '{"order":"o8","txn":"t8","s":"%s","n19":1,"u20":1,"d38":1.00,"neg0":0,"e":1,"flag":true,"meta":{}}' % ('x' * 101),
    '{"order":"o9","txn":"t10","s":"x","n19":1,"u20":-1,"d38":1.00,"neg0":0,"e":1,"flag":true,"meta":{}}',
]
# the good ones first, in a batch of their own (bulk executions); then
# the bad ones and a copy of o1's payment (a duplicate)
open(d + '/good.txt', 'w').write(''.join('0\t-\t%s\n' % m for m in lines))
open(d + '/bad.txt', 'w').write(''.join('0\t-\t%s\n' % m for m in bad + [lines[0]]))
open(d + '/want.txt', 'w').write('\n'.join(want) + '\n')
PY
produce() { tb_produce "$1" <"$TB_DIR/$2.txt" 2>/dev/null || tb_die "produce to $1 failed"; }
produce pay_a good
TB_CONF="$TB_DIR/a.conf" tb_run || tb_die "run a (good) failed"
tb_eq "a: the good ones applied in one batch, in bulk" "4 4 0" \
  "$(tb_summary applied) $(tb_summary batched) $(tb_summary batch_declined)"
produce pay_a bad
TB_CONF="$TB_DIR/a.conf" tb_run || tb_die "run a (bad) failed"
tb_eq "a: 1 duplicate, 6 rejected" "0 1 6" \
  "$(tb_summary applied) $(tb_summary duplicates) $(tb_summary dlq_rejected)"
produce pay_b good
produce pay_b bad
TB_CONF="$TB_DIR/b.conf" tb_run || tb_die "run b failed"
tb_eq "b: one at a time: 4 applied, 1 duplicate, 6 rejected" "4 0 1 6" \
  "$(tb_summary applied) $(tb_summary batched) $(tb_summary duplicates) $(tb_summary dlq_rejected)"

vals() {
  tb_sql "SELECT HEX(s), n19, u20, d38, neg0, neg0_text, e, flag, COALESCE(note, 'NULL'), meta
          FROM $1vals ORDER BY k"
}
tb_eq "a: values stored exactly, byte for byte" "$(cat "$TB_DIR/want.txt")" "$(vals a_)"
tb_eq "a: the string in a VARBINARY column, the same bytes" 0 \
  "$(tb_sql 'SELECT COUNT(*) FROM a_vals WHERE HEX(s) <> HEX(b)')"
tb_eq "a: the message's key, topic, partition, offset bound" "pay:o1:t1 pay_a/0/0" \
  "$(tb_sql "SELECT k, pos FROM a_vals WHERE k = 'pay:o1:t1'" | tr '\t' ' ')"
tb_eq "a: the table of the injection is there" 4 "$(tb_sql 'SELECT COUNT(*) FROM a_vals')"
tb_eq "batches and one at a time leave the same values" "$(vals a_)" "$(vals b_)"
for t in orders payments; do
  tb_eq "batches and one at a time leave the same $t" \
    "$(tb_sql "SELECT * FROM a_$t ORDER BY 1")" "$(tb_sql "SELECT * FROM b_$t ORDER BY 1")"
done
tb_eq "o1 paid once, by t1; the rejected ones not" "o1 PAID t1
o2 PAID t2
o3 PAID t3
o4 PAID t4
o5 UNPAID NULL
o6 UNPAID NULL
o7 UNPAID NULL
o8 UNPAID NULL
o9 UNPAID NULL" "$(tb_sql 'SELECT * FROM a_orders ORDER BY 1' | tr '\t' ' ')"
tb_eq "the second payment of o1 rolled back: no row of t9" "t1 t2 t3 t4" \
  "$(tb_sql 'SELECT txn FROM a_payments ORDER BY 1' | paste -sd' ')"
tb_eq "b: the response, the order's row" '{"status":"PAID","paid_txn":"t1"}' \
  "$(tb_sql "SELECT response FROM dedup_b WHERE biz_key = 'pay:o1:t1'")"
tb_eq "one event per applied payment, none of the rejected, ids distinct" "8 8" \
  "$(tb_sql 'SELECT COUNT(*), COUNT(DISTINCT event_id) FROM dedupd_outbox' | tr '\t' ' ')"
tb_eq "the event: its id, the values as written" \
  '{"id": "ID", "order": "o2", "amount": -999999999999999999999999999999999999.99, "meta": []}' \
  "$(tb_sql "SELECT REPLACE(CONVERT(msg_value USING utf8mb4), event_id, 'ID') FROM dedupd_outbox
             WHERE msg_key = 'o2' LIMIT 1")"

# dead letters as "order error", by order
letters() {
  tb_dlq "$1" | python3 -c '
import json, sys
rows = []
for l in sys.stdin:
    h = json.loads(l)["headers"]
    rows.append((h["dedupd.biz_key"].split(":")[1], h["dedupd.reason"], h["dedupd.error"]))
for r in sorted(rows):
    print(*r)'
}
want_letters="o1 rejected statement paid: 0 row(s) affected, expected 1
o5 rejected statement vals: field s is missing
o6 rejected statement vals: field s is an object: \${json:s} binds its JSON text
o7 rejected statement vals: field d38: the number 1e66 does not fit a DECIMAL (65 digits, 38 after the point)
o8 rejected statement vals: Data too long for column 's' at row 1 (1406)
o9 rejected statement vals: Out of range value for column 'u20' at row 1 (1264)"
tb_eq "a: each rejected message dead-lettered, naming why" "$want_letters" "$(letters pay_a.dlq)"
tb_eq "b: the same dead letters" "$want_letters" "$(letters pay_b.dlq)"
tb_eq "a: the rejected keys recorded failed" 6 "$(tb_sql 'SELECT COUNT(*) FROM dedup_a WHERE status = 2')"
tb_assert_committed_at_end ga pay_a
tb_assert_committed_at_end gb pay_b
tb_done
