#!/usr/bin/env bash
# 108: the docs' walkthroughs run as written. The shell blocks of README.md's
# "A five-minute tour" and of docs/HANDLERS.md's "From an empty directory to
# a running handler" are taken from the pages, in order, and run in one bash
# each, so the pages cannot drift from what works. What the test changes is
# only where things are, said here once:
#   - the tour: /tmp/dd-tour is a directory of the test, port 9464 a free
#     port, build/ this build (already built: meson and ninja do nothing);
#   - HANDLERS.md: `meson install -C build` installs this build into a
#     directory of the test (PATH and PKG_CONFIG_PATH then name it); the
#     database `shop`, the users 'dedupd' and 'dedupd_migrate' are the
#     test's; mariadb talks to the test's server, dedupd reaches it and the
#     mock cluster through DEDUPD_MYSQL_SOCKET and DEDUPD_KAFKA_BROKERS;
#     `dedupd run` ends at the end of the topic (--exit-at-end).
# End states: the tour's balance, dead letters and metrics, and after its
# "Stop it all" no process of it left; the handler's grants applied once,
# its messages' dead letter, the committed offsets.
source "$(dirname "$0")/../lib.sh"
tb_init docs_walkthroughs
BUILD=$(dirname "$DEDUPD")
SRC=$DD_TEST_SRC_DIR

# sh_blocks FILE FROM TO: the ```sh blocks between the headings FROM and TO
# (their list indent taken off), one after another, each ended by a line
# "#--- block".
sh_blocks() {
  awk -v from="$2" -v to="$3" '
    $0 == from { in_s = 1; next } in_s && $0 == to { exit } !in_s { next }
    !on { t = $0; sub(/^ +/, "", t); if (t == "```sh") { ind = length($0) - length(t); on = 1 }; next }
    { l = $0; if (substr(l, 1, ind) ~ /^ *$/) l = substr(l, ind + 1) }
    l ~ /^```/ { print "#--- block"; on = 0; next } { print l }' "$1"
}

# ---- README.md: the tour ----
port=$(tb_free_port)
TOUR="$TB_DIR/tour"
sh_blocks "$SRC/README.md" "## A five-minute tour" "## A minimal handler" |
  sed -e "s#/tmp/dd-tour#$TOUR#g" -e "s#127.0.0.1:9464#127.0.0.1:$port#g" \
    -e "s#[$]PWD/build/#@BUILD@/#g" -e "s#\(^\|[^/[:alnum:]_]\)build/#\1@BUILD@/#g" \
    -e "s#@BUILD@#$BUILD#g" >"$TB_DIR/tour.blocks"
tb_eq "the tour has its three blocks" 3 "$(grep -c '^#--- block$' "$TB_DIR/tour.blocks")"
# block 1, then wait for what "give it a few seconds" waits for, block 2,
# block 3; the pids of block 1 are written down for the checks.
awk -v d="$TB_DIR" 'BEGIN { print "set -u; meson() { :; }; ninja() { :; }" }
  $0 == "#--- block" { n++
    if (n == 1) { print "echo \"$DEDUPD_PID $MOCK_PID\" >" d "/tour.pids"
      print "until curl -s 127.0.0.1:" port "/metrics | grep -q \"^dedupd_applied_total{route=\\\"default\\\"} 1$\" && kcat -C -b \"$BROKERS\" -t payments.dlq -e -q -f \"%h\\n\" 2>/dev/null | grep -c dedupd.reason | grep -qx 2; do ((SECONDS < " wait ")) || { echo \"# gave up waiting after $SECONDS s\"; break; }; sleep 0.2; done"
      print "exec 3>&1 >" d "/tour.look.log" }
    if (n == 2) print "exec >&3"
    next }
  { print }' port="$port" wait="$(tb_secs 120)" "$TB_DIR/tour.blocks" >"$TB_DIR/tour.sh"
(cd "$SRC" && timeout --foreground -k 10 "$(tb_secs 240)" bash "$TB_DIR/tour.sh") \
  >"$TB_DIR/tour.log" 2>&1
rc=$?
read -r tour_dedupd tour_mock <"$TB_DIR/tour.pids" || true
tb_eq "the tour runs to its end" 0 "$rc"
look="$TB_DIR/tour.look.log"
tb_check "one payment applied, two duplicates, one conflict (metrics)" \
  grep -qx 'dedupd_applied_total{route="default"} 1' "$look"
tb_check "... two duplicates" grep -qx 'dedupd_duplicates_total{route="default"} 2' "$look"
tb_check "... one conflict" grep -qx 'dedupd_conflicts_total{route="default"} 1' "$look"
tb_check "the balance is 1250 cents, one entry" grep -Eq '^m1[[:space:]]+EUR[[:space:]]+1250[[:space:]]+1' "$look"
tb_check "the dead letters' headers: conflict and bad_json" \
  bash -c "grep -q 'dedupd.reason=conflict' '$look' && grep -q 'dedupd.reason=bad_json' '$look'"
gone() { ! kill -0 "$1" 2>/dev/null; }
tb_check "after \"Stop it all\": dedupd is gone (pid $tour_dedupd)" gone "${tour_dedupd:-0}"
tb_check "... the mock cluster is gone (pid $tour_mock)" gone "${tour_mock:-0}"
tb_check "... MariaDB is stopped" test ! -S "$TOUR/db/mysqld.sock"
tb_check "dedupd stopped cleanly on SIGTERM, having left the group" \
  bash -c "grep -q 'Left the group tour' '$TOUR/dedupd.log' && tail -n 1 '$TOUR/dedupd.log' | grep -q 'Stopped cleanly'"
for p in $tour_dedupd $tour_mock; do kill -KILL "$p" 2>/dev/null || true; done

# ---- docs/HANDLERS.md: from an empty directory to a running handler ----
DOC="$SRC/docs/HANDLERS.md"
tb_mock coupon-grants:1
# the users are the doc's to create
_tb_mariadb -e "DROP USER IF EXISTS '$TB_MIG_USER'@'%', '$TB_RT_USER'@'%'"
subst() {
  sed -e "s/\`shop\`/\`$TB_DB\`/g" -e "s/\"shop\"/\"$TB_DB\"/g" \
    -e "s/'dedupd_migrate'@/'$TB_MIG_USER'@/g" -e "s/DEDUPD_MYSQL_USER=dedupd_migrate/DEDUPD_MYSQL_USER=$TB_MIG_USER/g" \
    -e "s/'dedupd'@/'$TB_RT_USER'@/g" -e "s/user = \"dedupd\"/user = \"$TB_RT_USER\"/g"
}
subst <"$DOC" >"$TB_DIR/HANDLERS.md"
WORK="$TB_DIR/grant"
mkdir -p "$WORK"
# the files of the page's steps 2 to 5
for f in grant.c messages.jsonl dedupd.conf grants.sql; do
  awk -v m="<!-- sdk-first-try: $f -->" '
    on == 0 { t = $0; sub(/^ +/, "", t); if (t == m) { ind = length($0) - length(t); on = 1 }; next }
    { l = $0; if (substr(l, 1, ind) ~ /^ *$/) l = substr(l, ind + 1) }
    on == 1 && l ~ /^```/ { on = 2; next } on == 2 && l ~ /^```/ { exit } on == 2 { print l }' \
    "$TB_DIR/HANDLERS.md" >"$WORK/$f"
done
sed 's/^/0\t-\t/' "$WORK/messages.jsonl" | tb_produce coupon-grants 2>/dev/null || tb_die "produce failed"
sh_blocks "$TB_DIR/HANDLERS.md" "## From an empty directory to a running handler" "## The ABI" \
  >"$TB_DIR/handlers.blocks"
tb_log "HANDLERS.md's commands, in order:"
grep -v '^#--- block$' "$TB_DIR/handlers.blocks" | sed 's/^/#   $ /'
SDK="$TB_DIR/sdk"
{
  echo "set -eu"
  echo "ninja() { :; }"
  echo "meson() { case \$1 in install) command meson install -C '$BUILD' --destdir '$SDK' --no-rebuild --quiet"
  echo "  export PKG_CONFIG_PATH=\$(dirname \"\$(find '$SDK' -name dedupd.pc | head -n 1)\")"
  echo "  export PATH=\$(dirname \"\$(find '$SDK' -path '*/bin/dedupd' | head -n 1)\"):\$PATH ;; esac; }"
  echo "mariadb() { command mariadb --no-defaults --socket='$DD_TEST_MYSQL_SOCKET' \"\$@\"; }"
  # handler-test runs on servers of its own; the rest reach the test's
  echo "dedupd() { local at=(DEDUPD_MYSQL_SOCKET='$DD_TEST_MYSQL_SOCKET' DEDUPD_KAFKA_BROKERS='$TB_BROKERS')"
  echo "  case \$1 in handler-test) command dedupd \"\$@\" ;; run) env \"\${at[@]}\" dedupd \"\$@\" --exit-at-end ;;"
  echo "  *) env \"\${at[@]}\" dedupd \"\$@\" ;; esac; }"
  grep -v '^#--- block$' "$TB_DIR/handlers.blocks"
} >"$TB_DIR/handlers.sh"
(cd "$WORK" && timeout --foreground -k 10 "$(tb_secs 300)" bash "$TB_DIR/handlers.sh") \
  >"$TB_DIR/handlers.log" 2>&1
rc=$?
tb_eq "HANDLERS.md's commands run in order" 0 "$rc"
tb_check "handler-test passed" grep -qx 'handler-test: PASS' "$TB_DIR/handlers.log"
tb_check "check passed" grep -q 'check passed' "$TB_DIR/handlers.log"
tb_eq "one grant per grant event" "u1 WELCOME10
u2 WELCOME10" "$(tb_sql 'SELECT user_id, coupon FROM coupon_grant ORDER BY user_id' | tr '\t' ' ')"
tb_eq "the grant without a coupon dead-lettered" "rejected 1" "$(tb_dlq_reasons coupon-grants.dlq)"
tb_eq "the runtime user has the page's privileges, no more" \
  "$(grep -c '^GRANT' "$WORK/grants.sql")" \
  "$(_tb_mariadb -N -e "SHOW GRANTS FOR '$TB_RT_USER'@'%'" | grep -cv 'GRANT USAGE')"
TB_GROUP=grants tb_assert_committed_at_end grants coupon-grants
tb_done
