#!/usr/bin/env bash
# 174: `dedupd check` asks the HTTP handler whether its URL answers, and
# TLS is verified unless told whom to trust. The reference service serves
# HTTPS as orders.test (a certificate of a test CA, reached through the
# handler's `resolve`) and wants a client certificate of the same CA.
#   - no tls settings: check fails on the certificate, and a run sends
#     nothing (the message is retried, then dead-lettered with the reason);
#   - the CA, a client certificate and its key: check passes (OPTIONS, or
#     HEAD), the run applies the payment;
#   - the CA without a client certificate, a wrong pinned key: check fails;
#     the right pinned key passes; check = "none" does not probe;
#   - nothing listening: check fails with no answer; a bad setting fails
#     with its file and line.
source "$(dirname "$0")/../lib.sh"
source "$(dirname "$0")/http-handler.sh"
tb_init http_check_tls
tb_mock payments:1 other:1

tls="$TB_DIR/tls"
mkdir -p "$tls"
{
  openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj "/CN=dedupd test ca" \
    -keyout "$tls/ca.key" -out "$tls/ca.pem" &&
    for who in server client; do
      openssl req -newkey rsa:2048 -nodes -subj "/CN=dedupd test $who" -keyout "$tls/$who.key" \
        -out "$tls/$who.csr" &&
        printf 'subjectAltName = DNS:orders.test\n' >"$tls/san.ext" &&
        openssl x509 -req -in "$tls/$who.csr" -CA "$tls/ca.pem" -CAkey "$tls/ca.key" \
          -CAcreateserial -days 2 -extfile "$tls/san.ext" -out "$tls/$who.pem" || exit 1
    done
} >>"$TB_DIR/openssl.log" 2>&1 || tb_die "openssl could not make the certificates (openssl.log)"
pin="sha256//$(openssl x509 -in "$tls/server.pem" -pubkey -noout | openssl pkey -pubin -outform der |
  openssl dgst -sha256 -binary | base64)"
wrong_pin="sha256//$(openssl x509 -in "$tls/client.pem" -pubkey -noout |
  openssl pkey -pubin -outform der | openssl dgst -sha256 -binary | base64)"

tb_http_service --tls-cert "$tls/server.pem" --tls-key "$tls/server.key" --tls-client-ca "$tls/ca.pem"
port=${TB_HTTP_URL##*:}
port=${port%%/*}
url="https://orders.test:$port/payments"
net="url = \"$url\"; resolve = [ \"orders.test:$port:127.0.0.1\" ]; timeout = \"5s\";"
client="cert_file = \"tls/client.pem\"; key_file = \"tls/client.key\";"
export TB_DEDUP_EXTRA='retry_failed = false;'
ext='external = { lease = "5s"; scan_interval = "0"; };'
retry='retry = { backoff_initial = "50ms"; backoff_max = "50ms"; max_attempts = 2; };'
tb_migrate_conf() { TB_CONF="$1" tb_migrate >/dev/null || tb_die "migrate $1 failed"; }
# check_says NAME: `dedupd check` on NAME.conf; its handler line and exit code.
check_says() {
  local rc=0
  "$DEDUPD" check -c "$TB_DIR/$1.conf" >"$TB_DIR/check-$1.out" 2>&1 || rc=$?
  echo "$(grep -E '^(ok  |WARN|FAIL) handler http:' "$TB_DIR/check-$1.out" | cut -c1-160) (exit $rc)"
}

TB_TOPIC=payments tb_http_config "$TB_DIR/plain.conf" "$net" "$ext" "$retry"
tb_migrate_conf "$TB_DIR/plain.conf"
said=$(check_says plain)
tb_check "no CA given: the system's CAs do not know the test CA, check fails" \
  grep -Eq "^FAIL handler http: OPTIONS $url: no answer: SSL certificate problem.*\(exit 1\)$" <<<"$said"
printf '0\t-\t{"merchant_id":"m1","order_no":"o1","amount":1.00}\n' | tb_produce payments 2>/dev/null
TB_CONF="$TB_DIR/plain.conf" tb_run || tb_die "run without the CA failed"
tb_eq "nothing reached the service" "" "$(cat "$TB_DIR/journal")"
tb_check "the payment was dead-lettered, saying why" \
  grep -q "Dead-lettering message (retries_exhausted): gave up after retries: POST $url: no answer: SSL certificate problem" \
  "$TB_DIR/run.log"

TB_TOPIC=other TB_GROUP=g2 tb_http_config "$TB_DIR/tls.conf" \
  "$net tls = { ca_file = \"tls/ca.pem\"; $client };" "$ext" "$retry"
tb_eq "the CA and a client certificate: check passes" \
  "ok   handler http: OPTIONS $url answered 204 in" "$(check_says tls | sed 's/ in [0-9]* ms.*/ in/')"
printf '0\t-\t{"merchant_id":"m1","order_no":"o2","amount":2.00}\n' | tb_produce other 2>/dev/null
TB_CONF="$TB_DIR/tls.conf" TB_TOPIC=other tb_run || tb_die "run with TLS failed"
tb_eq "over verified TLS the payment is applied once" "1 1" "$(tb_http_effects 'o2$')"
tb_assert_committed_at_end g2 other

conf() { TB_TOPIC=other tb_http_config "$TB_DIR/$1.conf" "$net $2" "$ext"; }
conf head "tls = { ca_file = \"tls/ca.pem\"; $client }; check = \"HEAD\";"
tb_check "check = HEAD" grep -q "^ok   handler http: HEAD $url answered 200 in .*(exit 0)$" <<<"$(check_says head)"
conf noclient "tls = { ca_file = \"tls/ca.pem\"; };"
tb_check "no client certificate: the service refuses the handshake, check fails" \
  grep -q "^FAIL handler http: OPTIONS $url: no answer: .*(exit 1)$" <<<"$(check_says noclient)"
conf pinned "tls = { ca_file = \"tls/ca.pem\"; $client pinned_public_key = \"$pin\"; };"
tb_check "the server's key pinned: check passes" \
  grep -q "^ok   handler http: OPTIONS $url answered 204" <<<"$(check_says pinned)"
conf wrongpin "tls = { ca_file = \"tls/ca.pem\"; $client pinned_public_key = \"$wrong_pin\"; };"
tb_check "another key pinned: check fails" \
  grep -Eq "^FAIL handler http: OPTIONS $url: no answer: .*(pinned|public key).*\(exit 1\)$" <<<"$(check_says wrongpin)"
conf none "check = \"none\";"
tb_eq "check = none: not probed" \
  "ok   handler http: POST $url: not probed (check = \"none\") (exit 0)" "$(check_says none)"
closed=$(tb_free_port)
TB_TOPIC=other tb_http_config "$TB_DIR/closed.conf" "url = \"http://127.0.0.1:$closed/p\";" "$ext"
tb_check "nothing listening: check fails with no answer" \
  grep -Eq "^FAIL handler http: OPTIONS http://127.0.0.1:$closed/p: no answer: .*\(exit 1\)$" \
  <<<"$(check_says closed)"
TB_TOPIC=other tb_http_config "$TB_DIR/bad.conf" "url = \"$url\"; timeout = \"soon\";" "$ext"
rc=0
"$DEDUPD" check -c "$TB_DIR/bad.conf" >"$TB_DIR/check-bad.out" 2>&1 || rc=$?
tb_eq "a bad setting: check fails naming its file and line" 1 "$rc"
tb_check "  ... $TB_DIR/bad.conf:N: handler.http.timeout" \
  grep -q "$TB_DIR/bad.conf:[0-9]*: handler.http.timeout: expected a duration" "$TB_DIR/check-bad.out"
tb_done
