#!/usr/bin/env bash
# 175: calls in flight (external.in_flight) beyond the workers. One worker,
# in_flight = 8, the reference service answering every POST after 200 ms:
# 64 payments of 16 merchants, the lane key the merchant. The service's
# request log (each POST logged when answered, so it ran over the 200 ms
# before) shows
#   - up to 8 calls at once from a single worker, never more;
#   - the calls of one merchant one after the other, never two at once,
#     in the order the merchant's payments were produced (one partition
#     per merchant);
# and the run takes a fraction of the 12.8 s one call at a time would.
# Every payment is applied once, the offsets at the end.
source "$(dirname "$0")/../lib.sh"
source "$(dirname "$0")/http-handler.sh"
tb_init http_in_flight
tb_mock payments:4
tb_http_service --delay-ms 200
export TB_WORKERS=1 TB_DEDUP_EXTRA='lane_key = "${merchant_id}";'
tb_http_config "$TB_CONF" "url = \"$TB_HTTP_URL\"; timeout = \"10s\";" \
  'external = { lease = "10s"; scan_interval = "0"; in_flight = 8; };'
tb_migrate || tb_die "migrate failed"
# merchant m<i mod 16>, on partition (i mod 16) mod 4: a merchant's
# payments in order on one partition
seq 1 64 | awk '{ m = $1 % 16; printf "%d\t-\t{\"merchant_id\":\"m%d\",\"order_no\":\"o%02d\",\"amount\":1}\n", m % 4, m, $1 }' |
  tb_produce 2>/dev/null || tb_die "produce failed"
tb_run || tb_die "run failed"

tb_eq "every payment applied once at the service" "64 64" "$(tb_http_effects)"
tb_eq "every key applied" "64 0" \
  "$(tb_sql "SELECT SUM(status = 1), SUM(status <> 1) FROM dedup_record" | tr '\t' ' ')"
# "MAX_AT_ONCE OVERLAPS_OF_A_MERCHANT OUT_OF_ORDER SPAN_S" from the log.
read -r most same disorder span < <(python3 - "$TB_DIR/requests" <<'PY'
import json, sys
posts = [json.loads(l) for l in open(sys.argv[1])]
posts = [(r["t"] - 0.2, r["t"], r["key"]) for r in posts if r["method"] == "POST"]
events = sorted([(s, 1) for s, _, _ in posts] + [(e, -1) for _, e, _ in posts])
cur = most = 0
for _, d in events:
    cur += d
    most = max(most, cur)
by_merchant = {}
for s, e, key in sorted(posts):
    by_merchant.setdefault(key.split(":")[1], []).append((s, e, int(key.split(":o")[1])))
same = disorder = 0
for calls in by_merchant.values():
    for a, b in zip(calls, calls[1:]):
        same += b[0] < a[1] - 0.02  # started before the previous one ended (20 ms of slack)
        disorder += b[2] < a[2]
span = max(e for _, e, _ in posts) - min(s for s, _, _ in posts)
print(most, same, disorder, "%.1f" % span)
PY
)
tb_log "at most $most calls at once; a merchant's calls overlapping: $same; out of order: $disorder; all calls within $span s"
tb_check "several calls at once from one worker (at least 4)" test "$most" -ge 4
tb_check "never more than in_flight (8)" test "$most" -le 8
tb_eq "a merchant's calls one after the other" 0 "$same"
tb_eq "a merchant's calls in the order of its payments" 0 "$disorder"
tb_check "the calls took well under the 12.8 s of one at a time" \
  python3 -c "import sys; sys.exit(0 if float(sys.argv[1]) < 8 else 1)" "$span"
tb_assert_committed_at_end
tb_done
