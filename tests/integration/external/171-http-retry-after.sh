#!/usr/bin/env bash
# 171: a Retry-After is honoured. The reference service answers one
# payment 429 with "Retry-After: 2" (seconds), another 503 with an HTTP
# date about 3 s ahead, a third 429 with an hour (longer than the
# handler's retry_after_max of 3 s, which bounds it) and a fourth 429
# without one. dedupd's own backoff (retry.*) is 50 ms, so a handler that
# ignored Retry-After would come back within a fraction of a second. The
# service's request log (its own clock) holds when each attempt came: the
# second attempt never before the time asked for, the bounded one after 3
# s, and the one without a Retry-After on the backoff. Every payment is
# applied once in the end.
source "$(dirname "$0")/../lib.sh"
source "$(dirname "$0")/http-handler.sh"
tb_init http_retry_after
tb_mock payments:2
tb_http_service
tb_http_faults \
  '{"match": ":o1$", "fault": "429", "retry_after": "2"}' \
  '{"match": ":o2$", "fault": "503", "retry_after": "date+3"}' \
  '{"match": ":o3$", "fault": "429", "retry_after": "3600"}' \
  '{"match": ":o4$", "fault": "429"}'
tb_http_config "$TB_CONF" "url = \"$TB_HTTP_URL\"; timeout = \"5s\"; retry_after_max = \"3s\";" \
  'external = { lease = "5s"; scan_interval = "0"; };' \
  'retry = { backoff_initial = "50ms"; backoff_max = "50ms"; };'
tb_migrate || tb_die "migrate failed"
for i in 1 2 3 4 5 6; do
  printf '%d\t-\t{"merchant_id":"m1","order_no":"o%d","amount":%d.10}\n' $((i % 2)) "$i" "$i"
done | tb_produce 2>/dev/null || tb_die "produce failed"
tb_run || tb_die "run failed"

tb_eq "every payment applied once" "6 0" \
  "$(tb_sql "SELECT SUM(status = 1), SUM(status <> 1) FROM dedup_record" | tr '\t' ' ')"
tb_eq "effects at the service: 6, for 6 keys" "6 6" "$(tb_http_effects)"
# For each faulted key: "KEY ATTEMPTS WAITED_MS ASKED_MS", the wait from
# the fault's answer to the next attempt, and what the answer asked for
# (seconds, or an HTTP date on the service's clock).
waits=$(python3 - "$TB_DIR/requests" <<'PY'
import email.utils, json, sys
reqs = {}
for line in open(sys.argv[1]):
    r = json.loads(line)
    if r["method"] == "POST":
        reqs.setdefault(r["key"], []).append(r)
for key in sorted(reqs):
    rs = reqs[key]
    if len(rs) < 2:
        continue
    first, second = rs[0], rs[1]
    ra = first["retry_after"]
    if ra is None:
        asked = 0
    elif ra.isdigit():
        asked = int(ra) * 1000
    else:
        asked = (email.utils.parsedate_to_datetime(ra).timestamp() - first["t"]) * 1000
    print(key, len(rs), int((second["t"] - first["t"]) * 1000), int(asked))
PY
)
tb_log "retried keys (key, attempts, waited ms, asked ms):"$'\n'"$waits"
tb_eq "the faulted keys, each sent twice" "pay:m1:o1 2
pay:m1:o2 2
pay:m1:o3 2
pay:m1:o4 2" "$(awk '{ print $1, $2 }' <<<"$waits")"
tb_check "429 Retry-After: 2: not retried before 2 s" \
  awk '$1 == "pay:m1:o1" { exit !($3 >= 2000 && $4 == 2000) }' <<<"$waits"
tb_check "503 Retry-After: an HTTP date: not retried before it" \
  awk '$1 == "pay:m1:o2" { exit !($3 >= $4 && $4 >= 1000) }' <<<"$waits"
tb_check "429 Retry-After: 3600, over retry_after_max: retried after 3 s, before 6 s" \
  awk '$1 == "pay:m1:o3" { exit !($3 >= 3000 && $3 < 6000 && $4 == 3600000) }' <<<"$waits"
tb_check "429 without Retry-After: the backoff, well under a second" \
  awk '$1 == "pay:m1:o4" { exit !($3 < 900) }' <<<"$waits"
tb_check "the bounded Retry-After was logged" \
  grep -q 'Retry-After of 3600 s is longer than retry_after_max (3 s): waiting that long instead' \
  "$TB_DIR/run.log"
tb_assert_committed_at_end
tb_done
