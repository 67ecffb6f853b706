#!/usr/bin/env bash
# 78: no password before TLS. A fake server (fake-mysql.py) that offers no
# TLS and wants the password in clear text records every packet dedupd
# sends it. It comes in two kinds: one names mysql_native_password in its
# handshake and answers the login with a switch to mysql_clear_password,
# the other names mysql_clear_password at once. Against both, under
# mysql.tls.mode required, verify_ca, verify_identity and preferred, dedupd
# fails to start and the password never arrives; under disabled (a network
# the operator trusts) it does arrive, which shows the fake server would
# have caught it. No log of dedupd's shows the password.
source "$(dirname "$0")/../lib.sh"
tb_init no_password_before_tls
tb_mock payments:1

pw='S3cret-pw-78'
pw_hex=$(printf '%s' "$pw" | od -An -tx1 | tr -d ' \n')
openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj "/CN=dedupd test 78" \
  -keyout "$TB_DIR/ca.key" -out "$TB_DIR/ca.pem" >>"$TB_DIR/openssl.log" 2>&1 ||
  tb_die "openssl could not make a CA (openssl.log)"

# fake KIND PLUGIN: starts the fake server naming PLUGIN; sets fake_port.
fake() {
  rm -f "$TB_DIR/$1.port"
  python3 "$(dirname "$0")/fake-mysql.py" "$TB_DIR/$1.port" "$TB_DIR/$1.packets" "$2" \
    >>"$TB_DIR/fake.log" 2>&1 &
  TB_PIDS+=("$!")
  tb_wait_until 20 "the fake server ($1)" test -s "$TB_DIR/$1.port" || tb_die "no fake server"
  fake_port=$(cat "$TB_DIR/$1.port")
}

# login KIND MODE: dedupd run under MODE against the fake server KIND; sets
# got to the packets the server received from it, one hex line each.
login() {
  local name="$1-$2" before rc=0 ca=
  [[ $2 == verify_* ]] && ca='ca = "ca.pem";'
  TB_MYSQL_HOST=127.0.0.1 TB_MYSQL_PORT=$fake_port TB_MYSQL_EXTRA="password = \"$pw\";
    connect_timeout = \"3s\"; tls = { mode = \"$2\"; $ca };" \
    tb_config "$TB_DIR/$name.conf"
  touch "$TB_DIR/$1.packets"
  before=$(wc -l <"$TB_DIR/$1.packets")
  timeout --foreground "$(tb_secs 30)" "$DEDUPD" run -c "$TB_DIR/$name.conf" --exit-at-end \
    >"$TB_DIR/$name.log" 2>&1 || rc=$?
  tb_eq "$1, $2: dedupd does not start" 1 "$rc"
  got=$(tail -n +"$((before + 1))" "$TB_DIR/$1.packets")
}

for kind in switch direct; do
  if [[ $kind == switch ]]; then fake "$kind" mysql_native_password; else fake "$kind" mysql_clear_password; fi
  for mode in required verify_ca verify_identity preferred; do
    login "$kind" "$mode"
    tb_check "$kind, $mode: the password never reached the server" \
      test "${got/$pw_hex/}" = "$got"
    tb_check "$kind, $mode: the log says the password was withheld" \
      grep -qE "dedupd sent no password|TLS/SSL error: SSL is required" "$TB_DIR/$kind-$mode.log"
  done
  login "$kind" disabled
  tb_check "$kind, disabled: the password reached the server in clear text (the fake server works)" \
    test "${got/$pw_hex/}" != "$got"
done
tb_check "no log of dedupd's shows the password" bash -c "! grep -qF -- '$pw' \"\$@\"" _ \
  "$TB_DIR"/*-*.log
tb_check "required: the server saw the user name only" \
  grep -q "$(printf '%s' "$TB_RT_USER" | od -An -tx1 | tr -d ' \n')" "$TB_DIR/switch.packets"
tb_done
