#!/usr/bin/env bash
# 66: dead letters with two routes. Route payments (the ledger, dlq.topic
# payments.dead) and route coupons (the coupon example, no dlq.topic: the
# source topic's name and ".dlq", retry_failed = false) each get bad JSON,
# a message without its key's field, a conflict and rejects of their own
# handler: each lands in its route's dead-letter topic, with its reason and
# source topic, none in the other's. /metrics counts them under their
# route's label, and the per-route series add up to the summary's totals;
# the log lines of dead letters name the route.
source "$(dirname "$0")/../lib.sh"
source "$(dirname "$0")/../http.sh"
tb_init routes_dead_letters
tb_mock payments:1 coupons:1 payments.dead:1 payments.dlq:1 coupons.dlq:1
port=$(tb_free_port)
TH_URL="http://127.0.0.1:$port"

tb_config_routes "
  { name = \"payments\"; topics = [\"payments\"]; key = \"pay:\${merchant_id}:\${order_no}\";
    table = \"dedup_record\"; handler = { path = \"$DD_LEDGER_SO\"; };
    dlq = { topic = \"payments.dead\"; }; },
  { name = \"coupons\"; topics = [\"coupons\"]; key = \"coupon:\${code}:\${event_id}\";
    lane_key = \"\${code}\"; table = \"dedup_coupon\"; retry_failed = false;
    handler = { path = \"$TB_COUPON_SO\"; }; }" \
  "http = { listen = \"127.0.0.1:$port\"; };"
tb_migrate || tb_die "migrate failed"

pay() { printf '0\t-\t{"merchant_id":"m1","order_no":"%s","txn_id":"T%s","amount":%s,"currency":"EUR","status":"PAID"}\n' "$1" "$1" "$2"; }
{
  pay o1 5.00  # applied
  pay o1 5.00  # duplicate
  pay o1 6.00  # conflict
  pay o2 -1.00 # rejected by the ledger: not a positive amount
  printf '0\t-\t{"merchant_id":"m1"}\n' # key_missing
  printf '0\t-\tnot json\n'             # bad_json
} | tb_produce payments 2>/dev/null || tb_die "produce payments failed"
grant() { printf '0\t-\t{"event_id":"%s","event":"granted","code":"%s","user_id":"%s","amount_cents":%s}\n' "$@"; }
{
  grant e1 C1 u1 500 # applied
  grant e2 C2 u2 0   # rejected by the coupon handler: no amount
  printf '0\t-\t{"event_id":"e3","event":"bogus","code":"C3"}\n' # rejected: no such event
  printf '0\t-\t{"code":"C4"}\n'                                 # key_missing
  printf '0\t-\t[\n'                                             # bad_json
  grant e1 C1 u9 500 # conflict: the same event, other content
  grant e2 C2 u2 0   # rejected again, as its first copy
} | tb_produce coupons 2>/dev/null || tb_die "produce coupons failed"

tb_start run
pid=$TB_LAST_PID
_all_done() {
  th_scrape
  [[ "$(awk '/^dedupd_messages_total\{/ { s += $2 } END { print s + 0 }' "$TB_DIR/metrics.txt")" == 13 &&
    "$(th_metric dedupd_inflight_messages)" == 0 ]]
}
tb_wait_until 60 "every message consumed and finished" _all_done || tb_die "stream not consumed"
th_scrape

tb_eq "payments.dead: the payments route's dead letters" \
  "bad_json 1|conflict 1|key_missing 1|rejected 1" "$(tb_dlq_reasons payments.dead | paste -sd'|')"
tb_eq "... all from topic payments" "payments" \
  "$(tb_dlq payments.dead | python3 -c 'import json, sys
print(",".join(sorted(set(json.loads(l)["headers"]["dedupd.topic"] for l in sys.stdin if l.strip()))))')"
tb_eq "coupons.dlq: the coupons route's dead letters" \
  "bad_json 1|conflict 1|key_missing 1|rejected 3" "$(tb_dlq_reasons coupons.dlq | paste -sd'|')"
tb_eq "... all from topic coupons" "coupons" \
  "$(tb_dlq coupons.dlq | python3 -c 'import json, sys
print(",".join(sorted(set(json.loads(l)["headers"]["dedupd.topic"] for l in sys.stdin if l.strip()))))')"
tb_eq "nothing in payments.dlq (the default name, not the route's)" "" "$(tb_dlq payments.dlq)"
tb_eq "the coupon rejects, with the coupon handler's errors" \
  "amount_cents must be a whole number of cents|copy of a rejected message: amount_cents must be a whole number of cents|event must be \"granted\" or \"redeemed\"" \
  "$(tb_dlq coupons.dlq | python3 -c 'import json, sys
print("|".join(sorted(json.loads(l)["headers"]["dedupd.error"] for l in sys.stdin
                      if l.strip() and json.loads(l)["headers"]["dedupd.reason"] == "rejected")))')"

m() { th_metric "dedupd_$1_total{route=\"$2\"${3:+,$3}}"; }
tb_eq "messages by route" "6 7" "$(m messages payments) $(m messages coupons)"
tb_eq "applied by route" "1 1" "$(m applied payments) $(m applied coupons)"
tb_eq "duplicates by route" "1 0" "$(m duplicates payments) $(m duplicates coupons)"
tb_eq "conflicts by route" "1 1" "$(m conflicts payments) $(m conflicts coupons)"
for reason in bad_json key_missing conflict; do
  tb_eq "dead letters $reason by route" "1 1" \
    "$(m dead_letters payments "reason=\"$reason\"") $(m dead_letters coupons "reason=\"$reason\"")"
done
tb_eq "dead letters rejected by route" "1 3" \
  "$(m dead_letters payments 'reason="rejected"') $(m dead_letters coupons 'reason="rejected"')"
tb_eq "no series of the default route, none without a route" "" \
  "$(grep -E '^dedupd_(messages|applied|duplicates|conflicts|retries|dead_letters)_total[ {]' "$TB_DIR/metrics.txt" |
    grep -Ev '\{route="(payments|coupons)"' || true)"

rc=0
tb_stop "$pid" || rc=$?
tb_eq "SIGTERM: exit 0" 0 "$rc"
tb_summary_at() { grep '^summary ' "$TB_DIR/run.log" | tail -n 1 | tr ' ' '\n' | awk -F= -v f="$1" '$1 == f { print $2 }'; }
tb_eq "the per-route series add up to the summary's totals" \
  "$(tb_summary_at messages) $(tb_summary_at dead_letters) $(tb_summary_at dlq_rejected)" \
  "$(($(m messages payments) + $(m messages coupons))) 10 $(($(m dead_letters payments 'reason="rejected"') + $(m dead_letters coupons 'reason="rejected"')))"
tb_eq "summary_route lines agree" "route=payments messages=6 applied=1|route=coupons messages=7 applied=1" \
  "$(grep '^summary_route ' "$TB_DIR/run.log" | cut -d' ' -f2-4 | paste -sd'|')"
tb_check "a dead letter's log line names its route" \
  grep -q 'route="coupons" reason="rejected" msg="Dead-lettering message (rejected)' "$TB_DIR/run.log"
tb_eq "the tables: applied and failed keys of each route" "1 1|1 2" \
  "$(tb_sql "SELECT SUM(status = 1), SUM(status = 2) FROM dedup_record" | tr '\t' ' ')|$(
    tb_sql "SELECT SUM(status = 1), SUM(status = 2) FROM dedup_coupon" | tr '\t' ' ')"
tb_assert_committed_at_end tg payments
tb_assert_committed_at_end tg coupons
tb_done
