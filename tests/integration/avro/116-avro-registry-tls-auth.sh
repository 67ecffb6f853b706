#!/usr/bin/env bash
# 116: the schema registry over HTTPS with basic authentication. The
# registry serves a certificate of a test CA and wants a user and password.
# With the CA in schema_registry.tls.ca and the password from a file, every
# payment is applied. Without the CA (the certificate is not trusted) or
# with a wrong password (401), nothing is applied and nothing
# dead-lettered: the messages wait, the log saying why; neither the log
# nor a dead letter ever shows the password.
source "$(dirname "$0")/../lib.sh"
source "$(dirname "$0")/avro.sh"
tb_init avro_registry_tls_auth
tb_mock payments:2 payments.dlq:1

tls="$TB_DIR/tls"
mkdir -p "$tls"
openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj "/CN=dedupd test ca" \
  -keyout "$tls/ca.key" -out "$tls/ca.pem" >>"$TB_DIR/openssl.log" 2>&1 &&
  openssl req -newkey rsa:2048 -nodes -subj "/CN=dedupd test registry" \
    -keyout "$tls/server.key" -out "$tls/server.csr" >>"$TB_DIR/openssl.log" 2>&1 &&
  printf 'subjectAltName = IP:127.0.0.1\n' >"$tls/san.ext" &&
  openssl x509 -req -in "$tls/server.csr" -CA "$tls/ca.pem" -CAkey "$tls/ca.key" \
    -CAcreateserial -days 2 -extfile "$tls/san.ext" -out "$tls/server.pem" \
    >>"$TB_DIR/openssl.log" 2>&1 || tb_die "openssl could not make the certificates"
secret="Reg1stry-S3cret-$$"
tb_registry --user dedupd --password "$secret" --cert "$tls/server.pem" --key "$tls/server.key"
printf '%s\n' "$secret" >"$TB_DIR/registry.pw"
chmod 600 "$TB_DIR/registry.pw"
printf 'wrong-%s\n' "$secret" >"$TB_DIR/wrong.pw"
chmod 600 "$TB_DIR/wrong.pw"

tb_gen --keys 100 --dup-min 1 --dup-max 2 --partitions 2 --bad 0 --conflicts 0 --seed 13
tb_avro --cafile "$tls/ca.pem" --versions 2 <"$TB_DIR/stream.txt" >"$TB_DIR/avro.txt" ||
  tb_die "avro-produce.py failed"
tb_produce <"$TB_DIR/avro.txt" 2>/dev/null || tb_die "produce failed"

conf() { # NAME REGISTRY_SETTINGS
  TB_DEDUP_EXTRA='format = "avro";' tb_config "$TB_DIR/$1.conf" \
    "schema_registry = { url = \"$TB_REGISTRY_URL\"; user = \"dedupd\"; timeout = \"2s\"; $2 };" \
    'retry = { backoff_initial = "50ms"; backoff_max = "500ms"; };'
}
conf good "password_file = \"registry.pw\"; tls = { ca = \"tls/ca.pem\"; };"
TB_CONF="$TB_DIR/good.conf"
tb_migrate || tb_die "migrate failed"

# waits NAME WHAT: a run of NAME.conf waits for the registry, logging WHAT;
# then SIGTERM: exit 0, nothing applied, nothing dead-lettered.
waits() {
  local pid
  tb_bg "$1" "$DEDUPD" run -c "$TB_DIR/$1.conf"
  pid=$TB_LAST_PID
  tb_wait_until 30 "$1: the wait logged" grep -q "waits for the schema registry" "$TB_DIR/$1.log" ||
    tb_die "$1: no wait logged"
  tb_check "$1: the log says why ($2)" grep -q "waits for the schema registry: .*$2" "$TB_DIR/$1.log"
  tb_stop "$pid" || tb_not_ok "$1: exit 0 on SIGTERM"
  tb_eq "$1: nothing applied" 0 "$(tb_sql "SELECT COUNT(*) FROM dedup_record")"
  tb_eq "$1: nothing dead-lettered" "" "$(tb_dlq_reasons)"
}
conf untrusted "password_file = \"registry.pw\";"
waits untrusted "certificate"
conf wrongpw "password_file = \"wrong.pw\"; tls = { ca = \"tls/ca.pem\"; };"
waits wrongpw "HTTP 401"
tb_eq "the registry refused the wrong password" 1 "$(tb_registry_gets unauthorized | wc -l)"

TB_CONF="$TB_DIR/good.conf"
tb_run || tb_die "dedupd run failed"
tb_expect_ledger "$TB_DIR/expect.json"
tb_assert_committed_at_end
tb_eq "schemas fetched with the password, once each" "1 1|2 1" "$(tb_registry_gets | paste -sd'|')"
tb_eq "the password is in no log and no dead letter" 0 \
  "$(cat "$TB_DIR"/*.log <(tb_dlq) | grep -c -- "$secret" || true)"
tb_done
