#!/usr/bin/env bash
# 170: 2,000 payments through the HTTP handler to the reference service,
# exactly once in effect at the service although
#   - a quarter of them come twice or three times (the same content, some
#     on another partition);
#   - the service fails some the first time: 500s, 429 with Retry-After,
#     hangs past the handler's time-out, connections reset before applying
#     and dropped after applying;
#   - dedupd is killed -9 twice, each time while the service holds back
#     the answer to a payment it applied (so the key is left processing
#     under the dead claim, its effect done), and restarted; 4 workers with
#     4 calls in flight each (external.in_flight), so up to 16 calls are
#     on their way when it dies.
# The verdict is the end state: the service's journal holds one effect per
# payment, for every payment; the dedup table every key applied, none
# failed or processing; the two keys of the kills were taken over (token
# 2) and found applied through reconcile_url, not sent again; no dead
# letter; the group's offsets at the end of every partition.
source "$(dirname "$0")/../lib.sh"
source "$(dirname "$0")/http-handler.sh"
tb_init http_payments
tb_mock payments:4
tb_http_service
# Keys are pay:m<i mod 7>:p<iiii>. The first kill's key is p0500, the
# second's one the service has not seen when the first run dies (its rule
# goes in front then).
faults=('{"match": "[05]1$", "fault": "500"}'
  '{"match": "[27]3$", "fault": "429", "retry_after": "1"}'
  '{"match": "[38]7$", "fault": "503", "retry_after": "date+1"}'
  '{"match": "0[49]$", "fault": "reset"}'
  '{"match": "5[16]$", "fault": "drop"}'
  '{"match": "1(19|88)$", "fault": "hang", "seconds": 1}')
hold() { printf '{"match": ":%s$", "fault": "hang-after", "seconds": 3, "times": 1000}' "${1##*:}"; }
tb_http_faults "$(hold p0500)" "${faults[@]}"
export TB_WORKERS=4
tb_http_config "$TB_CONF" "url = \"$TB_HTTP_URL\"; reconcile_url = \"$TB_HTTP_URL/\${key}\";
  timeout = \"500ms\";" \
  'external = { lease = "2s"; scan_interval = "0"; in_flight = 4; };' \
  'retry = { backoff_initial = "50ms"; backoff_max = "500ms"; };'
tb_migrate || tb_die "migrate failed"
N=2000
python3 - "$N" >"$TB_DIR/stream" <<'PY'
import json, random, sys
n = int(sys.argv[1])
rnd = random.Random(170)
msgs = []
for i in range(1, n + 1):
    p = {"merchant_id": "m%d" % (i % 7), "order_no": "p%04d" % i,
         "amount": "%d.%02d" % (rnd.randint(1, 900), rnd.randint(0, 99)), "currency": "EUR"}
    msgs.append((i % 4, json.dumps(p)))
    for _ in range(rnd.choice([0, 0, 0, 1, 2]) if i % 4 == 0 else 0):
        msgs.append((rnd.randrange(4), json.dumps(p)))  # a copy, maybe on another partition
for part, text in msgs:
    print("%d\t-\t%s" % (part, text))
PY
tb_produce <"$TB_DIR/stream" 2>/dev/null || tb_die "produce failed"
tb_log "produced $(wc -l <"$TB_DIR/stream") messages for $N payments"

# applied KEY: the service applied KEY.
applied() { grep -F "\"key\": \"$1\"" "$TB_DIR/journal" | grep -q '"type": "apply"'; }
# not_seen: the last payment the service has no request for.
not_seen() {
  python3 - "$TB_DIR/requests" "$N" <<'PY'
import json, sys
seen = {json.loads(l)["key"] for l in open(sys.argv[1])}
for i in range(int(sys.argv[2]), 0, -1):
    key = "pay:m%d:p%04d" % (i % 7, i)
    if key not in seen and key[-2:] not in ("19", "88"):
        print(key)
        break
PY
}
# Two runs killed -9 once the service applied their kill's key (its
# answers held back past the time-out), then one to the end.
kills="pay:m$((500 % 7)):p0500"
for run in 1 2; do
  key=${kills##* }
  tb_start "run$run"
  pid=$TB_LAST_PID
  tb_wait_until 120 "$key applied at the service" applied "$key" || tb_die "$key never applied"
  tb_kill9 "$pid"
  tb_log "killed -9 after $(tb_http_effects) (effects, keys) at the service, $key held"
  ((run == 2)) && break
  kills+=" $(not_seen)"
  tb_http_faults "$(hold "${kills##* }")" "${faults[@]}"
done
tb_run || tb_die "the last run failed"

tb_eq "one effect per payment at the service, for every payment" "$N $N" "$(tb_http_effects)"
tb_eq "every key applied, none failed or processing" "$N $N 0" \
  "$(tb_sql "SELECT COUNT(*), SUM(status = 1), SUM(status <> 1) FROM dedup_record" | tr '\t' ' ')"
tb_eq "each applied key recorded with the service's answer to it" 0 \
  "$(tb_sql "SELECT COUNT(*) FROM dedup_record WHERE JSON_VALUE(response, '\$.key') <> biz_key
             OR response IS NULL")"
tb_eq "the kills' keys were taken over and found applied under token 1" \
  "$(printf '%s 2 1\n' $kills | sort)" \
  "$(tb_sql "SELECT biz_key, fence, JSON_VALUE(response, '\$.fence') FROM dedup_record
             WHERE FIND_IN_SET(biz_key, '${kills// /,}') ORDER BY biz_key" | tr '\t' ' ')"
# A key claimed but not yet applied when dedupd died is taken over and
# sent again under the new token, after reconcile_url said not done.
tb_eq "every POST under a token above 1 came after a GET under it answered 404" "" \
  "$(python3 - "$TB_DIR/requests" <<'PY'
import json, sys
asked = set()
for line in open(sys.argv[1]):
    r = json.loads(line)
    if r["method"] == "GET" and r["status"] == 404:
        asked.add((r["key"], r["fence"]))
    elif r["method"] == "POST" and r["fence"] > 1 and (r["key"], r["fence"]) not in asked:
        print(r["key"], r["fence"])
PY
)"
tb_check "faults were injected: 500, 429, 503, reset, drop, hang" python3 - "$TB_DIR/requests" <<'PY'
import json, sys
seen = {json.loads(l)["fault"] for l in open(sys.argv[1])}
sys.exit(0 if {"500", "429", "503", "reset", "drop", "hang", "hang-after"} <= seen else 1)
PY
tb_eq "no dead letter" "" "$(tb_dlq_reasons)"
tb_assert_committed_at_end
tb_done
