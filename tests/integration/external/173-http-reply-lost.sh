#!/usr/bin/env bash
# 173: the HTTP handler when an answer never comes back. The reference
# service
#   - applies o1, then closes the connection without answering;
#   - hangs on o2 past the handler's time-out (1 s) before applying it;
#   - resets the connection on o3 before applying it;
#   - applies o4, then hangs past the time-out before answering, at every
#     attempt, until dedupd is killed -9.
# o1 to o3 are retried with the same Idempotency-Key and token: the
# service answers the repeat of o1 with its stored answer, applies o2 and
# o3 on the retry (and the late o2 finds it applied): one effect each.
# o4's row stays processing under the dead claim, its effect done; after a
# restart the redelivered message waits out the lease, takes the key over
# (token 2) and asks reconcile_url, whose 200 records it applied with the
# service's answer: no second POST. Offsets end at the end.
source "$(dirname "$0")/../lib.sh"
source "$(dirname "$0")/http-handler.sh"
tb_init http_reply_lost
tb_mock payments:2
tb_http_service
tb_http_faults \
  '{"match": ":o1$", "fault": "drop"}' \
  '{"match": ":o2$", "fault": "hang", "seconds": 2}' \
  '{"match": ":o3$", "fault": "reset"}' \
  '{"match": ":o4$", "fault": "hang-after", "seconds": 3, "times": 1000}'
tb_http_config "$TB_CONF" "url = \"$TB_HTTP_URL\"; reconcile_url = \"$TB_HTTP_URL/\${key}\";
  timeout = \"1s\";" \
  'external = { lease = "2s"; scan_interval = "0"; };' \
  'retry = { backoff_initial = "50ms"; backoff_max = "200ms"; };'
tb_migrate || tb_die "migrate failed"
for i in 1 2 3 4 5 6; do
  printf '%d\t-\t{"merchant_id":"m1","order_no":"o%d","amount":%d.75}\n' $((i % 2)) "$i" "$i"
done | tb_produce 2>/dev/null || tb_die "produce failed"

# Run 1 is killed once o1 to o3 are finished and o4 is applied at the
# service, its answers held back.
tb_start run1
run1=$TB_LAST_PID
answer() {
  python3 -c 'import json, sys
for l in open(sys.argv[1]):
    r = json.loads(l)
    if r["type"] == "apply" and r["key"] == sys.argv[2]: print(r["answer"]["payment_id"])' \
    "$TB_DIR/journal" "$1"
}
ready() {
  [[ -n "$(answer pay:m1:o4)" && "$(tb_sql "SELECT COUNT(*) FROM dedup_record WHERE status = 1
     AND biz_key IN ('pay:m1:o1', 'pay:m1:o2', 'pay:m1:o3')")" == 3 ]]
}
tb_wait_until 60 "o1 to o3 finished, o4 applied at the service" ready ||
  tb_die "o1 to o3 not finished or o4 not applied"
tb_kill9 "$run1"
tb_eq "o4 is left processing under token 1" "0 1" \
  "$(tb_sql "SELECT status, fence FROM dedup_record WHERE biz_key = 'pay:m1:o4'" | tr '\t' ' ')"
tb_run || tb_die "run after the kill failed"

tb_eq "every payment applied" "6 0" \
  "$(tb_sql "SELECT SUM(status = 1), SUM(status <> 1) FROM dedup_record" | tr '\t' ' ')"
tb_eq "effects at the service: one per payment" "6 6" "$(tb_http_effects)"
# "KEY: METHOD/TOKEN/STATUS ..." of every request the service logged.
calls=$(python3 - "$TB_DIR/requests" <<'PY'
import json, sys
calls = {}
for line in open(sys.argv[1]):
    r = json.loads(line)
    calls.setdefault(r["key"], []).append("%s/%s/%s" % (r["method"], r["fence"], r["status"]))
for key in sorted(calls):
    print(key + ": " + " ".join(calls[key]))
PY
)
tb_log "requests:"$'\n'"$calls"
tb_eq "o1: applied, answer lost; the retry (same token) gets the stored answer" \
  "pay:m1:o1: POST/1/201 POST/1/201" "$(grep '^pay:m1:o1:' <<<"$calls")"
tb_check "o2: retried with the same token after the time-out, applied once" \
  grep -Eq '^pay:m1:o2: (POST/1/201 ?){2,}$' <<<"$calls"
tb_eq "o3: reset before applying, applied by the retry" \
  "pay:m1:o3: POST/1/0 POST/1/201" "$(grep '^pay:m1:o3:' <<<"$calls")"
tb_check "o4: sent under token 1 (its answers held back), then asked about under token 2" \
  grep -Eq '^pay:m1:o4: (POST/1/201 )+GET/2/200$' <<<"$calls"
tb_eq "o1's row keeps the service's answer to the first POST" "$(answer pay:m1:o1)" \
  "$(tb_sql "SELECT JSON_VALUE(response, '\$.payment_id') FROM dedup_record WHERE biz_key = 'pay:m1:o1'")"
tb_eq "o4 was taken over (token 2) and recorded with the answer of token 1's POST" "2 1" \
  "$(tb_sql "SELECT fence, JSON_VALUE(response, '\$.fence') FROM dedup_record WHERE biz_key = 'pay:m1:o4'" | tr '\t' ' ')"
tb_check "the takeover asked reconcile()" grep -q 'reconcile() says the effect happened' "$TB_DIR/run.log"
tb_assert_committed_at_end
tb_done
