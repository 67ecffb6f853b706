#!/usr/bin/env bash
# 117: a schema registry that wants a client certificate (mutual TLS). With
# schema_registry.tls.cert and tls.key naming a certificate of the
# registry's client CA, every payment is applied once and each schema is
# fetched once. Without them the TLS handshake fails: nothing is applied
# and nothing dead-lettered, the messages wait and the log says so.
source "$(dirname "$0")/../lib.sh"
source "$(dirname "$0")/avro.sh"
tb_init avro_registry_client_cert
tb_mock payments:2 payments.dlq:1

tls="$TB_DIR/tls"
mkdir -p "$tls"
# cert NAME CN [EXT]: a key and a certificate of the test CA.
cert() {
  openssl req -newkey rsa:2048 -nodes -subj "/CN=$2" -keyout "$tls/$1.key" \
    -out "$tls/$1.csr" >>"$TB_DIR/openssl.log" 2>&1 &&
    openssl x509 -req -in "$tls/$1.csr" -CA "$tls/ca.pem" -CAkey "$tls/ca.key" \
      -CAcreateserial -days 2 ${3:+-extfile "$3"} -out "$tls/$1.pem" >>"$TB_DIR/openssl.log" 2>&1
}
printf 'subjectAltName = IP:127.0.0.1\n' >"$tls/san.ext"
openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj "/CN=dedupd test ca" \
  -keyout "$tls/ca.key" -out "$tls/ca.pem" >>"$TB_DIR/openssl.log" 2>&1 &&
  cert server "dedupd test registry" "$tls/san.ext" && cert client "dedupd" ||
  tb_die "openssl could not make the certificates"
tb_registry --cert "$tls/server.pem" --key "$tls/server.key" --client-ca "$tls/ca.pem"

tb_gen --keys 80 --dup-min 1 --dup-max 2 --partitions 2 --bad 0 --conflicts 0 --seed 17
tb_avro --cafile "$tls/ca.pem" --cert "$tls/client.pem" --key "$tls/client.key" --versions 2 \
  <"$TB_DIR/stream.txt" >"$TB_DIR/avro.txt" || tb_die "avro-produce.py failed"
tb_produce <"$TB_DIR/avro.txt" 2>/dev/null || tb_die "produce failed"

conf() { # NAME TLS_SETTINGS
  TB_DEDUP_EXTRA='format = "avro";' tb_config "$TB_DIR/$1.conf" \
    "schema_registry = { url = \"$TB_REGISTRY_URL\"; timeout = \"2s\"; tls = { ca = \"tls/ca.pem\"; $2 }; };" \
    'retry = { backoff_initial = "50ms"; backoff_max = "500ms"; };'
}
conf nocert ""
conf good 'cert = "tls/client.pem"; key = "tls/client.key";'
TB_CONF="$TB_DIR/good.conf"
tb_migrate || tb_die "migrate failed"

tb_bg nocert "$DEDUPD" run -c "$TB_DIR/nocert.conf"
pid=$TB_LAST_PID
tb_check "without a client certificate: the messages wait for the registry" \
  tb_wait_until 30 "the wait logged" grep -q "waits for the schema registry" "$TB_DIR/nocert.log"
tb_check "... and the registry served no schema" test ! -s "$TB_DIR/registry.gets"
tb_stop "$pid" || tb_not_ok "without a client certificate: exit 0 on SIGTERM"
tb_eq "... nothing applied" 0 "$(tb_sql "SELECT COUNT(*) FROM dedup_record")"
tb_eq "... nothing dead-lettered" "" "$(tb_dlq_reasons)"

tb_run || tb_die "dedupd run failed"
tb_expect_ledger "$TB_DIR/expect.json"
tb_assert_committed_at_end
tb_eq "with the client certificate: each schema fetched once" "1 1|2 1" \
  "$(tb_registry_gets | paste -sd'|')"
tb_done
