#!/usr/bin/env bash
# 67: two routes, the worker killed with SIGKILL at random moments and
# restarted until it finishes (the pattern of 02). Payment callbacks into
# the ledger (route payments) and coupon grants and redemptions into the
# coupon example (route coupons) share every batch, lane and transaction;
# still each applied exactly once, by its own route's handler, with nothing
# missing: one ledger entry per payment, one coupon per grant, every
# redemption once, every key recorded in its own route's table, none left
# processing, offsets at the end of both topics.
source "$(dirname "$0")/../lib.sh"
tb_init routes_kill9
tb_mock payments:4 coupons:2
TB_WORKERS=4 TB_BATCH_MAX=10 TB_KAFKA_PROPS=auto.commit.interval.ms=200 tb_config_routes "
  { name = \"payments\"; topics = [\"payments\"]; key = \"pay:\${merchant_id}:\${order_no}\";
    lane_key = \"\${merchant_id}\"; table = \"dedup_record\";
    handler = { path = \"$DD_LEDGER_SO\"; }; },
  { name = \"coupons\"; topics = [\"coupons\"]; key = \"coupon:\${code}:\${event_id}\";
    lane_key = \"\${code}\"; table = \"dedup_coupon\";
    handler = { path = \"$TB_COUPON_SO\"; }; }"
tb_migrate || tb_die "migrate failed"

tb_gen --keys 2000 --dup-min 1 --dup-max 3 --partitions 4 --bad 10 --conflicts 6 --seed 58
tb_produce payments <"$TB_DIR/stream.txt" 2>/dev/null || tb_die "produce payments failed"
# 1500 grants, each delivered 1 to 3 times, then redemptions of C1-C300,
# a coupon's events in one partition (the lane key keeps their order).
python3 - >"$TB_DIR/coupons.txt" <<'PY'
import random
random.seed(58)
lines = []
for i in range(1, 1501):
    g = '%d\t-\t{"event_id":"g%d","event":"granted","code":"C%d","user_id":"u%d","amount_cents":%d}' % (
        i % 2, i, i, i, 100 + i)
    lines += [g] * random.randint(1, 3)
for i in range(1, 301):
    lines.append('%d\t-\t{"event_id":"r%d","event":"redeemed","code":"C%d","order_no":"o%d"}' % (
        i % 2, i, i, i))
print("\n".join(lines))
PY
tb_produce coupons <"$TB_DIR/coupons.txt" 2>/dev/null || tb_die "produce coupons failed"

RANDOM=58
kills=0
keys() { tb_sql 'SELECT (SELECT COUNT(*) FROM dedup_record) + (SELECT COUNT(*) FROM dedup_coupon)'; }
for round in $(seq 1 4); do
  target=$(($(keys) + 60 + RANDOM % 400))
  tb_bg "run$round" "$DEDUPD" run -c "$TB_CONF" --exit-at-end
  pid=$TB_LAST_PID
  while kill -0 "$pid" 2>/dev/null && (($(keys) < target)); do sleep 0.02; done
  sleep "0.0$((RANDOM % 10))"
  if kill -0 "$pid" 2>/dev/null; then
    tb_kill9 "$pid"
    kills=$((kills + 1))
    tb_log "round $round: killed at $(keys) dedup rows of both routes (target $target)"
  else
    wait "$pid" 2>/dev/null && break
  fi
done
tb_log "killed the worker $kills time(s)"
tb_check "worker was killed at least three times ($kills)" test "$kills" -ge 3
tb_run || tb_die "final run failed"

# route payments: the ledger and its table
tb_expect_ledger "$TB_DIR/expect.json"
tb_eq "payments: one applied row per key" "$(tb_expect_get dedup_rows.applied)" \
  "$(tb_sql 'SELECT COUNT(*) FROM dedup_record WHERE status = 1')"
for reason in bad_json key_missing key_too_long conflict; do
  tb_eq "payments: distinct dead letters $reason" "$(tb_expect_get "dead_letters.$reason")" \
    "$(tb_dlq_distinct "$reason" payments.dlq)"
done
# route coupons: the coupons and their table
tb_eq "coupons: every grant once, C1-C300 redeemed" "1500 300 1275750" \
  "$(tb_sql "SELECT COUNT(*), SUM(status = 'REDEEMED'), SUM(amount_cents) FROM coupon" | tr '\t' ' ')"
tb_eq "coupons: one applied row per event (1500 grants, 300 redemptions)" "1800 0" \
  "$(tb_sql 'SELECT SUM(status = 1), SUM(status <> 1) FROM dedup_coupon' | tr '\t' ' ')"
tb_eq "redemptions' responses: each redeemed now" 300 \
  "$(tb_sql "SELECT COUNT(*) FROM dedup_coupon WHERE biz_key LIKE 'coupon:%:r%' AND JSON_VALUE(response, '\$.redeemed') = 1")"
tb_eq "no key left processing in either table" "0 0" \
  "$(tb_sql 'SELECT (SELECT COUNT(*) FROM dedup_record WHERE status = 0), (SELECT COUNT(*) FROM dedup_coupon WHERE status = 0)' | tr '\t' ' ')"
tb_eq "no route's key in the other's table" "0 0" \
  "$(tb_sql "SELECT (SELECT COUNT(*) FROM dedup_record WHERE biz_key LIKE 'coupon:%'), (SELECT COUNT(*) FROM dedup_coupon WHERE biz_key LIKE 'pay:%')" | tr '\t' ' ')"
tb_assert_committed_at_end tg payments
tb_assert_committed_at_end tg coupons
tb_done
