#!/usr/bin/env bash
# 33: TLS to the database. A private MariaDB listens on 127.0.0.1 and
# 127.0.0.2 with a certificate from the test's own CA that names only the IP
# address 127.0.0.1 (given deliberately, so that 127.0.0.2 is a wrong host
# name for the same server). Then:
#  - verify_identity with the right CA: migrate, check and run all go over
#    TLS (the cipher as the server reports dedupd's own session is printed
#    by check and logged by run), and the run applies the messages;
#  - verify_ca with the right CA connects to 127.0.0.2 (the chain is
#    checked, the name is not);
#  - a certificate from another CA (verify_identity and verify_ca) and the
#    wrong host name (verify_identity on 127.0.0.2) fail at start, exit 1,
#    each saying which;
#  - the same server restarted without TLS: required, verify_ca and
#    verify_identity fail at start, before sending the password, saying the
#    server offers no TLS, while preferred connects and warns (test 78 shows
#    what a server that wants the password in clear text receives).
source "$(dirname "$0")/../lib.sh"
tb_init mysql_tls
tb_mock payments:2

# Certificates: a CA, another CA, and a server certificate of the first.
tls="$TB_DIR/tls"
mkdir -p "$tls"
_ca() {
  openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj "/CN=dedupd test $1" \
    -keyout "$tls/$1.key" -out "$tls/$1.pem" >>"$TB_DIR/openssl.log" 2>&1 ||
    tb_die "openssl could not make the CA $1 (openssl.log)"
}
_ca ca
_ca otherca
openssl req -newkey rsa:2048 -nodes -subj "/CN=dedupd test server" -keyout "$tls/server.key" \
  -out "$tls/server.csr" >>"$TB_DIR/openssl.log" 2>&1 &&
  printf 'subjectAltName = IP:127.0.0.1\n' >"$tls/san.ext" &&
  openssl x509 -req -in "$tls/server.csr" -CA "$tls/ca.pem" -CAkey "$tls/ca.key" \
    -CAcreateserial -days 2 -extfile "$tls/san.ext" -out "$tls/server.pem" \
    >>"$TB_DIR/openssl.log" 2>&1 || tb_die "openssl could not make the server certificate"

port=$(tb_free_port)
net=(--port="$port" --bind-address=127.0.0.1,127.0.0.2)
tb_private_db "${net[@]}" --ssl-ca="$tls/ca.pem" --ssl-cert="$tls/server.pem" \
  --ssl-key="$tls/server.key"
tb_eq "the server has TLS" YES "$(tb_sql "SELECT @@have_ssl")"

# conf NAME HOST 'TLS SETTINGS': $TB_DIR/NAME.conf over TCP to HOST:port.
conf() {
  TB_MYSQL_HOST=$2 TB_MYSQL_PORT=$port TB_MYSQL_EXTRA="connect_timeout = \"3s\"; tls = { $3 };" \
    tb_config "$TB_DIR/$1.conf"
}

# --- verify_identity with the right CA: everything over TLS ---------------
conf good 127.0.0.1 'mode = "verify_identity"; ca = "tls/ca.pem";'
tb_migrate || tb_die "migrate over TLS failed"
"$DEDUPD" check -c "$TB_DIR/good.conf" >"$TB_DIR/check.log" 2>&1 ||
  tb_not_ok "check over TLS failed: $(grep FAIL "$TB_DIR/check.log")"
tb_check "check: dedupd's own session is encrypted (Ssl_cipher as the server reports it)" \
  grep -qE "^ok   database: connected to $TB_DB as $TB_RT_USER \(TLSv1\.[23], cipher [A-Za-z0-9_-]+\)$" \
  "$TB_DIR/check.log"

accepts() { tb_sql "SHOW GLOBAL STATUS LIKE 'Ssl_accepts'" | cut -f2; }
before=$(accepts)
tb_gen --keys 60 --dup-min 1 --dup-max 2 --partitions 2 --bad 0 --conflicts 0 --seed 33
tb_produce <"$TB_DIR/stream.txt" 2>/dev/null || tb_die "produce failed"
TB_CONF="$TB_DIR/good.conf"
tb_run || tb_die "dedupd run over TLS failed"
tb_check "run logs its sessions' TLS version and cipher once" test "$(grep -cE \
  "Database sessions to 127\.0\.0\.1:$port use TLS: TLSv1\.[23], cipher [A-Za-z0-9_-]+ \(mysql\.tls\.mode verify_identity\)" \
  "$TB_DIR/run.log")" -eq 1
tb_check "the server accepted TLS sessions from the run ($before, then $(accepts))" \
  test "$(accepts)" -ge "$((before + 3))"
tb_eq "the run applied every key" 60 "$(tb_sql 'SELECT COUNT(*) FROM dedup_record WHERE status = 1')"
tb_expect_ledger "$TB_DIR/expect.json"
tb_assert_committed_at_end

# --- verify_ca: the signature, not the name ---------------------------------
conf ca_only 127.0.0.2 'mode = "verify_ca"; ca = "tls/ca.pem";'
"$DEDUPD" check -c "$TB_DIR/ca_only.conf" >"$TB_DIR/check-ca.log" 2>&1 ||
  tb_not_ok "verify_ca to 127.0.0.2 failed: $(grep FAIL "$TB_DIR/check-ca.log")"
tb_check "verify_ca connects to a name the certificate lacks, over TLS" \
  grep -qE '^ok   database: .*\(TLSv1\.[23], cipher ' "$TB_DIR/check-ca.log"

# expect_start_fails WHAT CONF PATTERN: dedupd run on CONF exits 1 at start,
# and its log matches PATTERN (fixed text).
expect_start_fails() {
  local rc=0 log="$TB_DIR/$2.log"
  timeout --foreground "$(tb_secs 30)" "$DEDUPD" run -c "$TB_DIR/$2.conf" --exit-at-end \
    >"$log" 2>&1 || rc=$?
  tb_eq "$1: exit 1" 1 "$rc"
  tb_check "$1: says so" grep -qF -- "$3" "$log"
}

conf wrong_ca 127.0.0.1 'mode = "verify_identity"; ca = "tls/otherca.pem";'
expect_start_fails "another CA, verify_identity" wrong_ca \
  "the server's TLS certificate could not be verified with the CA certificates in mysql.tls.ca ($tls/otherca.pem)"
conf wrong_ca2 127.0.0.1 'mode = "verify_ca"; ca = "tls/otherca.pem";'
expect_start_fails "another CA, verify_ca" wrong_ca2 \
  "the server's TLS certificate could not be verified with the CA certificates in mysql.tls.ca ($tls/otherca.pem)"
conf wrong_host 127.0.0.2 'mode = "verify_identity"; ca = "tls/ca.pem";'
expect_start_fails "wrong host name, verify_identity" wrong_host \
  "the server's TLS certificate does not name the host 127.0.0.2, which mysql.tls.mode verify_identity requires"

# --- the same server without TLS --------------------------------------------
tb_private_db_kill9
tb_private_db_restart "${net[@]}"
tb_eq "the server has no TLS now" DISABLED "$(tb_sql "SELECT @@have_ssl")"
conf plain 127.0.0.1 'mode = "required";'
expect_start_fails "no TLS, required (refused before the password)" plain \
  "(database $TB_DB): the server offers no TLS, and mysql.tls.mode is required"
tb_check "no TLS, required: no password sent" grep -qF "(dedupd sent no password)" "$TB_DIR/plain.log"
conf plain_ca 127.0.0.1 'mode = "verify_ca"; ca = "tls/ca.pem";'
expect_start_fails "no TLS, verify_ca (refused before the password)" plain_ca \
  "(database $TB_DB): the server offers no TLS, and mysql.tls.mode is verify_ca"
conf plain_id 127.0.0.1 'mode = "verify_identity"; ca = "tls/ca.pem";'
expect_start_fails "no TLS, verify_identity (refused before logging in)" plain_id \
  "(database $TB_DB): the server offers no TLS, and mysql.tls.mode is verify_identity"
conf preferred 127.0.0.1 'mode = "preferred";'
"$DEDUPD" check -c "$TB_DIR/preferred.conf" >"$TB_DIR/check-preferred.log" 2>&1 ||
  tb_not_ok "preferred without TLS failed: $(grep FAIL "$TB_DIR/check-preferred.log")"
tb_check "preferred: connects in clear text and warns" grep -qF \
  "The database session to 127.0.0.1:$port is not encrypted: the server offers no TLS" \
  "$TB_DIR/check-preferred.log"
tb_check "preferred: check says no TLS" grep -qE '^ok   database: .*\(no TLS\)$' \
  "$TB_DIR/check-preferred.log"
tb_done
