#!/usr/bin/env bash
# 172: the HTTP handler's answers that end a message, and its secrets. The
# reference service (examples/http-service) wants a bearer token, which
# the handler's headers take from the environment, and an API key header
# from a file. Its fault rules answer one payment 409 and one 422 (each
# dead-lettered rejected with the status and the start of the body, its
# key recorded failed, nothing applied), and one with a redirect, which is
# not followed (retried, then dead-lettered retries_exhausted). The others
# are applied once, a copy of one is a duplicate. Neither secret appears
# in dedupd's log, a dead letter, `dedupd check` or `dedupd stats`.
source "$(dirname "$0")/../lib.sh"
source "$(dirname "$0")/http-handler.sh"
tb_init http_reject
tb_mock payments:2
export TB_HTTP_TOKEN="tok-7f3a9c-secret"
tb_http_service --auth-env TB_HTTP_TOKEN
printf 'apikey-51be02-secret\n' >"$TB_DIR/apikey"
tb_http_faults \
  '{"match": ":o3$", "fault": "409", "error": "this payment was already refunded"}' \
  '{"match": ":o4$", "fault": "422", "error": "declined: card expired"}' \
  '{"match": ":o5$", "fault": "307", "location": "http://elsewhere.invalid/p", "times": 9}'
tb_http_config "$TB_CONF" "url = \"$TB_HTTP_URL\"; timeout = \"5s\";
  headers = [ \"Authorization: Bearer \${env:TB_HTTP_TOKEN}\", \"X-Api-Key: \${file:apikey}\" ];" \
  'external = { lease = "5s"; scan_interval = "0"; };' \
  'retry = { backoff_initial = "50ms"; backoff_max = "200ms"; max_attempts = 2; };'
tb_migrate || tb_die "migrate failed"
for i in 1 2 3 4 5 6 1; do
  printf '%d\t-\t{"merchant_id":"m1","order_no":"o%d","amount":%d.25}\n' $((i % 2)) "$i" "$i"
done | tb_produce 2>/dev/null || tb_die "produce failed"

"$DEDUPD" check -c "$TB_CONF" >"$TB_DIR/check.out" 2>&1 || tb_die "check failed: $(cat "$TB_DIR/check.out")"
tb_check "check reached the service with the configured headers" \
  grep -q "^ok   handler http: OPTIONS $TB_HTTP_URL answered 204" "$TB_DIR/check.out"
tb_run || tb_die "run failed"

tb_eq "applied: the payments the service took, once each" "pay:m1:o1 pay:m1:o2 pay:m1:o6" \
  "$(tb_sql "SELECT GROUP_CONCAT(biz_key ORDER BY biz_key SEPARATOR ' ') FROM dedup_record WHERE status = 1")"
tb_eq "failed: the rejected and the redirected" "pay:m1:o3 pay:m1:o4 pay:m1:o5" \
  "$(tb_sql "SELECT GROUP_CONCAT(biz_key ORDER BY biz_key SEPARATOR ' ') FROM dedup_record WHERE status = 2")"
tb_eq "effects at the service: 3, for 3 keys" "3 3" "$(tb_http_effects)"
tb_eq "the copy of o1 was a duplicate" 1 "$(tb_summary duplicates)"
letters=$(tb_dlq | python3 -c '
import json, sys
for line in sys.stdin:
    if line.strip():
        m = json.loads(line)
        h = m.get("headers", {})
        print(json.loads(m["payload"])["order_no"], h.get("dedupd.reason"), h.get("dedupd.error"))' | sort)
tb_log "dead letters:"$'\n'"$letters"
tb_eq "o3: rejected with its status and the start of the body" \
  "o3 rejected HTTP 409 from POST $TB_HTTP_URL: {\"error\": \"this payment was already refunded\"}" \
  "$(grep '^o3 ' <<<"$letters")"
tb_eq "o4: rejected with its status and the start of the body" \
  "o4 rejected HTTP 422 from POST $TB_HTTP_URL: {\"error\": \"declined: card expired\"}" \
  "$(grep '^o4 ' <<<"$letters")"
tb_eq "o5: the redirect not followed, retried, then given up" \
  "o5 retries_exhausted gave up after retries: HTTP 307 from POST $TB_HTTP_URL: a redirect to http://elsewhere.invalid/p, not followed (follow_redirects is off)" \
  "$(grep '^o5 ' <<<"$letters")"
tb_eq "three dead letters" 3 "$(wc -l <<<"$letters")"
tb_eq "the rejected keys' rows say why" "pay:m1:o3 HTTP 409" \
  "$(tb_sql "SELECT biz_key, LEFT(error, 8) FROM dedup_record WHERE biz_key = 'pay:m1:o3'" | tr '\t' ' ')"
tb_eq "the redirected payment was sent retry.max_attempts times" 2 \
  "$(grep -c '"key": "pay:m1:o5"' "$TB_DIR/requests")"

"$DEDUPD" stats -c "$TB_CONF" >"$TB_DIR/stats.out" 2>&1 || true
tb_dlq >"$TB_DIR/dlq.out"
for secret in tok-7f3a9c-secret apikey-51be02-secret; do
  tb_eq "the secret ${secret%%-*} is in no log, dead letter, check or stats output" "" \
    "$(grep -l "$secret" "$TB_DIR"/*.log "$TB_DIR/dlq.out" "$TB_DIR/check.out" "$TB_DIR/stats.out" \
      "$TB_CONF" 2>/dev/null | grep -v '/service.log$' || true)"
done
tb_assert_committed_at_end
tb_done
