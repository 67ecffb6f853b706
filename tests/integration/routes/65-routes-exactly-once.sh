#!/usr/bin/env bash
# 65: one dedupd, two routes over three topics. Route payments (topics
# payments and payments-eu, the ledger, table dedup_record) and route
# coupons (the pattern ^coupons$, the coupon example, table dedup_coupon)
# both render keys k:1, k:2, ... for different payloads: each route's keys
# live in its own table, so none collides, and every message is applied
# once by its own route's handler (a copy on the other topic of the same
# route is a duplicate). End state per route's tables, the summary per
# route, offsets at the end of all three topics. Then the per-route
# commands: check, stats, purge --dry-run, replay of every route and
# replay --route coupons --apply repairing a key deleted from its table.
source "$(dirname "$0")/../lib.sh"
tb_init routes_exactly_once
tb_mock payments:2 payments-eu:2 coupons:2

TB_WORKERS=3 TB_BATCH_MAX=20 tb_config_routes "
  { name = \"payments\"; topics = [\"payments\", \"payments-eu\"];
    key = \"k:\${order_no}\"; table = \"dedup_record\";
    handler = { path = \"$DD_LEDGER_SO\"; }; dlq = { topic = \"payments.dlq\"; }; },
  { name = \"coupons\"; topics = [\"^coupons\$\"];
    key = \"k:\${event_id}\"; table = \"dedup_coupon\";
    handler = { path = \"$TB_COUPON_SO\"; }; }" \
  'retry = { backoff_initial = "10ms"; backoff_max = "100ms"; };'
tb_migrate || tb_die "migrate failed"
tb_eq "migrate: a line per route" \
  "route payments: dedup table dedup_record|route coupons: dedup table dedup_coupon" \
  "$(grep -o '^route [a-z]*: dedup table [a-z_]*' "$TB_DIR/migrate.log" | paste -sd'|')"

pay() { # PARTITION ORDER: a payment of order ORDER (merchant m1..m4, ORDER.00)
  printf '%s\t-\t{"merchant_id":"m%d","order_no":"%d","txn_id":"T%d","amount":%d.00,"currency":"EUR","status":"PAID"}\n' \
    "$1" $(($2 % 4 + 1)) "$2" "$2" "$2"
}
{ # orders 1-40, each twice
  for i in $(seq 1 40); do pay $((i % 2)) "$i"; done
  for i in $(seq 1 40); do pay $((i % 2)) "$i"; done
} | tb_produce payments 2>/dev/null || tb_die "produce payments failed"
{ # orders 41-60, and orders 1-5 once more: the same route's keys
  for i in $(seq 41 60) $(seq 1 5); do pay $((i % 2)) "$i"; done
} | tb_produce payments-eu 2>/dev/null || tb_die "produce payments-eu failed"
{ # coupons C1-C30 granted by events 1-30 (each twice), C1-C10 redeemed by
  # events 31-40 (a redemption that comes before its grant is retried)
  for i in $(seq 1 30) $(seq 1 30); do
    printf '%d\t-\t{"event_id":"%d","event":"granted","code":"C%d","user_id":"u%d","amount_cents":%d}\n' \
      $((i % 2)) "$i" "$i" "$i" $((i * 100))
  done
  for i in $(seq 1 10); do
    printf '%d\t-\t{"event_id":"%d","event":"redeemed","code":"C%d","order_no":"o%d"}\n' \
      $((i % 2)) $((i + 30)) "$i" "$i"
  done
} | tb_produce coupons 2>/dev/null || tb_die "produce coupons failed"

tb_run || tb_die "dedupd run failed"

# The same key text in both routes, each in its own table with its own hash.
tb_eq "k:1 is in both tables, with other content" "1 1 1" \
  "$(tb_sql "SELECT (SELECT COUNT(*) FROM dedup_record WHERE biz_key = 'k:1' AND status = 1),
                    (SELECT COUNT(*) FROM dedup_coupon WHERE biz_key = 'k:1' AND status = 1),
                    (SELECT d.request_hash <> c.request_hash FROM dedup_record d, dedup_coupon c
                     WHERE d.biz_key = 'k:1' AND c.biz_key = 'k:1')" | tr '\t' ' ')"
tb_eq "route payments: 60 keys applied" "60 0" \
  "$(tb_sql "SELECT SUM(status = 1), SUM(status <> 1) FROM dedup_record" | tr '\t' ' ')"
tb_eq "route coupons: 40 keys applied" "40 0" \
  "$(tb_sql "SELECT SUM(status = 1), SUM(status <> 1) FROM dedup_coupon" | tr '\t' ' ')"
tb_eq "ledger: each order booked once (60, 1830.00 in all)" "60 60 183000" \
  "$(tb_sql "SELECT COUNT(*), COUNT(DISTINCT order_no), SUM(amount_cents) FROM ledger_entry" |
    tr '\t' ' ')"
tb_eq "balances: 1830.00 over the 4 merchants" "4 183000 60" \
  "$(tb_sql "SELECT COUNT(*), SUM(balance_cents), SUM(entries) FROM merchant_balance" | tr '\t' ' ')"
tb_eq "coupons: 30 granted once, C1-C10 redeemed" "30 10 46500" \
  "$(tb_sql "SELECT COUNT(*), SUM(status = 'REDEEMED'), SUM(amount_cents) FROM coupon" |
    tr '\t' ' ')"
tb_eq "no ledger row came from a coupon event, no coupon from a payment" "0 0" \
  "$(tb_sql "SELECT (SELECT COUNT(*) FROM ledger_entry WHERE order_no LIKE 'o%'),
                    (SELECT COUNT(*) FROM coupon WHERE code NOT LIKE 'C%')" | tr '\t' ' ')"
tb_eq "summary: 175 messages, 100 applied, 75 duplicates, no conflict, no dead letter" \
  "175 100 75 0 0" \
  "$(echo "$(tb_summary messages) $(tb_summary applied) $(tb_summary duplicates) $(tb_summary conflicts) $(tb_summary dead_letters)")"
tb_eq "summary of route payments" "105 60 45 0" \
  "$(for f in messages applied duplicates dead_letters; do tb_summary_route payments $f; done | paste -sd' ')"
tb_eq "summary of route coupons" "70 40 30 0" \
  "$(for f in messages applied duplicates dead_letters; do tb_summary_route coupons $f; done | paste -sd' ')"
tb_check "the log names each route's topics and handler" \
  grep -q 'Route coupons: topics ^coupons\$, key k:${event_id}, dedup table dedup_coupon, handler .*coupon.so' \
  "$TB_DIR/run.log"
tb_eq "one handler instance per route" 2 "$(grep -c 'Handler .* loaded from .* for route ' "$TB_DIR/run.log")"
for t in payments payments-eu coupons; do tb_assert_committed_at_end tg "$t"; done

# ---- the commands, per route ----
"$DEDUPD" check -c "$TB_CONF" >"$TB_DIR/check.txt" 2>&1 || tb_not_ok "check failed: $(cat "$TB_DIR/check.txt")"
tb_eq "check: each route's table and topics" "2 2 1" \
  "$(echo "$(grep -c '^ok   route [a-z]*: dedup table: ' "$TB_DIR/check.txt") $(grep -c '^ok   route [a-z]*: privileges: ' "$TB_DIR/check.txt") $(grep -c '^ok   kafka: route coupons: pattern ^coupons\$ matches coupons ' "$TB_DIR/check.txt")")"

"$DEDUPD" stats -c "$TB_CONF" --format json >"$TB_DIR/stats.json" 2>"$TB_DIR/stats.err" ||
  tb_not_ok "stats failed: $(cat "$TB_DIR/stats.err")"
tb_eq "stats: every route's table" "payments dedup_record 60|coupons dedup_coupon 40|6" \
  "$(python3 -c 'import json, sys; s = json.load(open(sys.argv[1]))
print("|".join("%s %s %d" % (r["route"], r["table"]["name"], r["table"]["rows"]) for r in s["routes"])
      + "|%d" % len(s["group"]["partitions"]))' "$TB_DIR/stats.json")"
"$DEDUPD" stats -c "$TB_CONF" --format json --route coupons >"$TB_DIR/stats1.json" 2>>"$TB_DIR/stats.err" ||
  tb_not_ok "stats --route failed: $(cat "$TB_DIR/stats.err")"
tb_eq "stats --route coupons: its table, its topic's partitions" "dedup_coupon 40 2 coupons" \
  "$(python3 -c 'import json, sys; s = json.load(open(sys.argv[1]))
print(s["table"]["name"], s["table"]["rows"], len(s["group"]["partitions"]),
      ",".join(sorted(set(p["topic"] for p in s["group"]["partitions"]))))' "$TB_DIR/stats1.json")"

tb_eq "purge --dry-run: a line per route's table" \
  "would delete 0 expired rows from dedup_record|would delete 0 expired rows from dedup_coupon" \
  "$("$DEDUPD" purge -c "$TB_CONF" --dry-run 2>&1 | grep -o '^would delete 0 expired rows from [a-z_]*' | paste -sd'|')"
rc=0
"$DEDUPD" purge -c "$TB_CONF" --route nope >"$TB_DIR/purge.txt" 2>&1 || rc=$?
tb_eq "purge --route of no route: usage error" "2" "$rc"
tb_check "... naming it" grep -q -- '--route nope: .* has no route of that name' "$TB_DIR/purge.txt"

"$DEDUPD" replay -c "$TB_CONF" --from earliest --summary "$TB_DIR/replay.json" \
  --report "$TB_DIR/report.json" 2>>"$TB_DIR/replay.log" || tb_die "replay failed"
tb_eq "replay of every route: 100 keys (60 + 40), all applied" "175 100 100 0 0" \
  "$(python3 -c 'import json, sys; s = json.load(open(sys.argv[1]))["summary"]
print(s["messages"], s["keys"], s["applied"], s["missing"], s["conflict"])' "$TB_DIR/replay.json")"

# A coupon event's key and effect lost: replay of route coupons finds it
# missing and applies it through the coupon handler, once.
tb_sql "DELETE FROM dedup_coupon WHERE biz_key = 'k:5'; DELETE FROM coupon WHERE code = 'C5'"
"$DEDUPD" replay -c "$TB_CONF" --route coupons --from earliest --apply --all-consumed \
  --summary "$TB_DIR/apply.json" --report "$TB_DIR/apply-report.json" 2>>"$TB_DIR/replay.log" ||
  tb_die "replay --route coupons --apply failed"
tb_eq "replay --route coupons --apply: its 70 messages, 1 key missing, repaired" "70 40 1 1" \
  "$(python3 -c 'import json, sys; s = json.load(open(sys.argv[1]))["summary"]
print(s["messages"], s["keys"], s["missing"], s["repaired"])' "$TB_DIR/apply.json")"
tb_eq "... the entry names its route" "coupons k:5" \
  "$(python3 -c 'import json, sys
print(" ".join("%s %s" % (e["route"], e["key"]) for e in json.load(open(sys.argv[1]))["entries"]))' \
    "$TB_DIR/apply-report.json")"
tb_eq "coupon C5 granted again, once; its key recorded" "1 500 1" \
  "$(tb_sql "SELECT COUNT(*), SUM(amount_cents), (SELECT COUNT(*) FROM dedup_coupon WHERE biz_key = 'k:5' AND status = 1) FROM coupon WHERE code = 'C5'" | tr '\t' ' ')"
tb_eq "route payments untouched" "60 60" \
  "$(tb_sql "SELECT (SELECT COUNT(*) FROM dedup_record), (SELECT COUNT(*) FROM ledger_entry)" | tr '\t' ' ')"
tb_done
