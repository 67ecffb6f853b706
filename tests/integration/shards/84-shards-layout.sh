#!/usr/bin/env bash
# 84: the recorded shard layout is everything that decides a key's shard.
# Two shards, the ledger sharded by merchant (shard_key "${merchant_id}",
# hash). After a first run, configurations that would send the stored keys
# elsewhere are refused by run, check and migrate, each naming the route,
# the part and both values, and nothing is applied again: shard_by modulo,
# shard_key unset or another template, shard_by map. `migrate --relayout` records the map,
# says what changed (a line per part), marks the change (changed_at), and
# run then starts with the wrong-shard check on: the redelivered payments
# whose rows are now in the wrong shard are dead-lettered wrong_shard, none
# is applied twice. The same map written
# otherwise (comments, a range split in two) is no change; other ranges
# are. Last, the upgrade path: a layout recorded without the routes (no
# `routes` column) is run as it is, with a warning (check: WARN), and the
# next `migrate` records the routes as no change (changed_at untouched);
# a changed configuration is refused from then on; `migrate --relayout`
# over such a layout records the routes as changed. And the SQL recipe of
# SHARDS.md for a DECIMAL shard key column.
source "$(dirname "$0")/../lib.sh"
tb_init shards_layout
tb_shards 2
tb_mock payments:2
TB_DEDUP_EXTRA='shard_key = "${merchant_id}";' tb_config "$TB_DIR/hash.conf"
tb_migrate || tb_die "migrate failed"
tb_eq "each shard records the route's line" \
  'dedup_record|hash||${merchant_id}|dedup_record|hash||${merchant_id}' \
  "$(tb_shards_sql "SELECT REPLACE(TRIM(TRAILING '\n' FROM CAST(routes AS CHAR)), '\t', '|') FROM dedupd_shard_layout" | paste -sd'|')"

pay() { printf '%s\t-\t{"merchant_id":"%s","order_no":"%s","amount":1.25,"currency":"CNY","status":"PAID","txn_id":"T%s"}\n' "$1" "$2" "$3" "$3"; }
{ for m in 101 102 103 104; do for o in 1 2; do pay $((o % 2)) "$m" "A$o"; done; done; } |
  tb_produce 2>/dev/null || tb_die "produce failed"
tb_run || tb_die "first run failed"
tb_eq "first run: 8 applied" 8 "$(tb_summary applied)"
ledger() { tb_shards_sql "SELECT COUNT(*) FROM ledger_entry" | paste -sd' '; }
before=$(ledger)
# The same payments again: a refused configuration must not apply them.
{ for m in 101 102 103 104; do for o in 1 2; do pay $((o % 2)) "$m" "A$o"; done; done; } |
  tb_produce 2>/dev/null || tb_die "produce failed"

# refused CONF PART: run, check and migrate refuse CONF, naming PART.
refused() {
  local conf="$1" part="$2" rc=0
  timeout --foreground 60 "$DEDUPD" run -c "$conf" --exit-at-end >"$TB_DIR/refused.log" 2>&1 || rc=$?
  tb_check "$part: run refuses (exit $rc)" test "$rc" -ne 0
  tb_check "$part: the refusal names the route, the part and --relayout" grep -qF \
    "records for route default (table dedup_record) another layout than the configuration's, ${part//\"/\\\"}: its keys would be looked for in another shard" \
    "$TB_DIR/refused.log" # logfmt escapes the quotes
  rc=0
  "$DEDUPD" check -c "$conf" >"$TB_DIR/refused-check.log" 2>&1 || rc=$?
  tb_check "$part: check fails (exit $rc)" test "$rc" -ne 0
  tb_check "$part: check says why" grep -qF "$part" "$TB_DIR/refused-check.log"
  rc=0
  DEDUPD_MYSQL_USER="$TB_MIG_USER" "$DEDUPD" migrate -c "$conf" >"$TB_DIR/refused-migrate.log" 2>&1 || rc=$?
  tb_check "$part: migrate without --relayout refuses (exit $rc)" test "$rc" -ne 0
  tb_eq "$part: nothing applied again" "$before" "$(ledger)"
}

TB_DEDUP_EXTRA='shard_key = "${merchant_id}"; shard_by = "modulo";' tb_config "$TB_DIR/modulo.conf"
refused "$TB_DIR/modulo.conf" 'shard_by hash -> shard_by modulo'
tb_config "$TB_DIR/unset.conf"
refused "$TB_DIR/unset.conf" 'shard_key "${merchant_id}" -> shard_key unset (the business key)'
TB_DEDUP_EXTRA='shard_key = "${merchant_id}:";' tb_config "$TB_DIR/colon.conf"
refused "$TB_DIR/colon.conf" 'shard_key "${merchant_id}" -> shard_key "${merchant_id}:"'
printf '0 102 0\n103 999 1\n' >"$TB_DIR/a.map"
TB_DEDUP_EXTRA='shard_key = "${merchant_id}"; shard_by = "map"; shard_map = "a.map";' \
  tb_config "$TB_DIR/map.conf"
refused "$TB_DIR/map.conf" 'shard_by hash -> shard_by map'
tb_eq "no layout change recorded" "NULL NULL" \
  "$(tb_shards_sql "SELECT IFNULL(changed_at, 'NULL') FROM dedupd_shard_layout" | paste -sd' ')"

# --relayout records the map and says what changed.
rc=0
DEDUPD_MYSQL_USER="$TB_MIG_USER" "$DEDUPD" migrate -c "$TB_DIR/map.conf" --relayout >"$TB_DIR/relayout.log" 2>&1 || rc=$?
tb_eq "migrate --relayout records the map" 0 "$rc"
digest=$(python3 -c 'import hashlib; print(hashlib.sha256(b"0 102 0\n103 999 1\n").hexdigest())')
for s in 0 1; do
  tb_check "relayout: shard $s: shard_by hash -> map" grep -qF \
    "shard $s (${TB_SHARD_SOCKETS[$s]}): route default (table dedup_record): shard_by hash -> shard_by map (changed)." \
    "$TB_DIR/relayout.log"
  tb_check "relayout: shard $s: the map" grep -qF \
    "shard $s (${TB_SHARD_SOCKETS[$s]}): route default (table dedup_record): no shard_map -> the shard_map of SHA-256 ${digest:0:16}... (changed)." \
    "$TB_DIR/relayout.log"
done
tb_eq "relayout: the shard key did not change" 0 "$(grep -c 'shard_key' "$TB_DIR/relayout.log")"
tb_eq "each shard records the map's digest" "dedup_record|map|$digest|\${merchant_id}" \
  "$(tb_shard_sql 1 "SELECT REPLACE(TRIM(TRAILING '\n' FROM CAST(routes AS CHAR)), '\t', '|') FROM dedupd_shard_layout")"
tb_eq "changed_at set in both shards" "SET SET" \
  "$(tb_shards_sql "SELECT IF(changed_at > NOW(6) - INTERVAL 1 MINUTE, 'SET', 'NULL') FROM dedupd_shard_layout" | paste -sd' ')"
"$DEDUPD" check -c "$TB_DIR/map.conf" >"$TB_DIR/check.log" 2>&1 || tb_not_ok "check after the relayout: $(grep FAIL "$TB_DIR/check.log")"
TB_CONF="$TB_DIR/map.conf" tb_run || tb_die "run with the recorded map failed"
tb_check "auto: the wrong-shard check is on after the relayout" grep -q \
  'Wrong-shard check: on until .* (the layout of shard [01] changed at .*; dedup.ttl 7d)' \
  "$TB_DIR/run.log"
# The rows were not moved: a redelivered payment whose merchant the map
# sends to the other shard is dead-lettered wrong_shard, the others are
# duplicates; none is applied again.
moved=0
for m in 101 102 103 104; do
  ((m <= 102 ? 0 : 1)) && want=1 || want=0
  (($(tb_sql "SELECT CRC32('$m') % 2") != want)) && moved=$((moved + 2))
done
tb_eq "after the relayout: nothing applied again" "$before" "$(ledger)"
tb_eq "after the relayout: the moved merchants' payments dead-lettered wrong_shard" "$moved" \
  "$(tb_summary dlq_wrong_shard)"
tb_eq "after the relayout: the others duplicates" $((8 - moved)) "$(tb_summary duplicates)"

# The same map written otherwise is no change; other ranges are.
printf '# the same ranges\n103   999\t1\n0 50 0 # split\n51 102 0\n' >"$TB_DIR/a.map"
"$DEDUPD" check -c "$TB_DIR/map.conf" >"$TB_DIR/check.log" 2>&1 ||
  tb_not_ok "the same map written otherwise is refused: $(grep FAIL "$TB_DIR/check.log")"
printf '0 101 0\n102 999 1\n' >"$TB_DIR/a.map"
digest2=$(python3 -c 'import hashlib; print(hashlib.sha256(b"0 101 0\n102 999 1\n").hexdigest())')
before=$(ledger)
refused "$TB_DIR/map.conf" "the shard_map of SHA-256 ${digest:0:16}... -> the shard_map of SHA-256 ${digest2:0:16}..."

# Upgrade: a layout recorded without the routes, as before they were.
printf '0 102 0\n103 999 1\n' >"$TB_DIR/a.map"
for s in 0 1; do
  tb_shard_sql "$s" "ALTER TABLE dedupd_shard_layout DROP COLUMN routes; UPDATE dedupd_shard_layout SET changed_at = NULL"
done
timeout --foreground 60 "$DEDUPD" run -c "$TB_DIR/map.conf" --exit-at-end >"$TB_DIR/old.log" 2>&1 ||
  tb_not_ok "run over a layout without routes failed: $(tail -3 "$TB_DIR/old.log")"
tb_check "run warns that the routes are not recorded" grep -qF \
  "records no shard_by, shard_key or map of 1 route(s) yet (a layout recorded before they were, or a new route): \`dedupd migrate\` records them" "$TB_DIR/old.log"
"$DEDUPD" check -c "$TB_DIR/map.conf" >"$TB_DIR/check.log" 2>&1 || tb_not_ok "check over a layout without routes failed"
tb_eq "check: a WARN per shard" 2 "$(grep -c '^WARN database: shard [01] .*`dedupd migrate` records them' "$TB_DIR/check.log")"
DEDUPD_MYSQL_USER="$TB_MIG_USER" "$DEDUPD" migrate -c "$TB_DIR/map.conf" >"$TB_DIR/upgrade.log" 2>&1 ||
  tb_not_ok "migrate over a layout without routes failed: $(tail -3 "$TB_DIR/upgrade.log")"
tb_eq "migrate records the routes" "dedup_record|map|$digest|\${merchant_id}" \
  "$(tb_shard_sql 0 "SELECT REPLACE(TRIM(TRAILING '\n' FROM CAST(routes AS CHAR)), '\t', '|') FROM dedupd_shard_layout")"
tb_eq "as no change" "NULL NULL" \
  "$(tb_shards_sql "SELECT IFNULL(changed_at, 'NULL') FROM dedupd_shard_layout" | paste -sd' ')"
"$DEDUPD" check -c "$TB_DIR/map.conf" >"$TB_DIR/check.log" 2>&1 || tb_not_ok "check after the upgrade failed"
tb_eq "check: no WARN after the upgrade" 0 "$(grep -c '^WARN database' "$TB_DIR/check.log")"
before=$(ledger)
refused "$TB_DIR/hash.conf" 'shard_by map -> shard_by hash'

# --relayout over a layout without routes: what they were is not known, so
# they are recorded as changed, and the wrong-shard check is on.
for s in 0 1; do
  tb_shard_sql "$s" "ALTER TABLE dedupd_shard_layout DROP COLUMN routes; UPDATE dedupd_shard_layout SET changed_at = NULL"
done
DEDUPD_MYSQL_USER="$TB_MIG_USER" "$DEDUPD" migrate -c "$TB_DIR/unset.conf" --relayout >"$TB_DIR/relayout2.log" 2>&1 ||
  tb_not_ok "relayout over a layout without routes failed"
tb_eq "relayout over no routes: a line per shard, changed" 2 \
  "$(grep -c '^shard [01] (.*): route default (table dedup_record): none recorded -> shard_by hash, shard_key unset (the business key), no map (changed)\.$' "$TB_DIR/relayout2.log")"
tb_eq "relayout over no routes: changed_at set" "SET SET" \
  "$(tb_shards_sql "SELECT IF(changed_at > NOW(6) - INTERVAL 1 MINUTE, 'SET', 'NULL') FROM dedupd_shard_layout" | paste -sd' ')"

# The key's own template as the shard key renders the business key: the
# same layout as no shard key.
TB_DEDUP_EXTRA='shard_key = "pay:${merchant_id}:${order_no}";' tb_config "$TB_DIR/whole.conf"
"$DEDUPD" check -c "$TB_DIR/whole.conf" >"$TB_DIR/check.log" 2>&1 ||
  tb_not_ok "the key's own template as shard key is refused: $(grep FAIL "$TB_DIR/check.log")"

# SHARDS.md's recipe for a DECIMAL column gives the K dedupd renders for
# its value (tests/unit/test_routes.c: CRC32('1.5'), CRC32('100')), its
# plain text does not.
canon() { echo "CRC32(TRIM(TRAILING '.' FROM TRIM(TRAILING '0' FROM CAST(CAST($1 AS DECIMAL(10,2)) AS CHAR))))"; }
tb_eq "the DECIMAL recipe: 1.50 -> 1.5, 100.00 -> 100, 0.00 -> 0, -0.50 -> -0.5" \
  "2270993338 595022058 $(tb_sql "SELECT CRC32('0')") $(tb_sql "SELECT CRC32('-0.5')")" \
  "$(tb_sql "SELECT $(canon 1.50), $(canon 100), $(canon 0), $(canon -0.50)" | tr '\t' ' ')"
tb_eq "a DECIMAL column's own text keeps its scale" 3756579112 "$(tb_sql "SELECT CRC32(CAST(1.50 AS DECIMAL(10,2)))")"
tb_done
