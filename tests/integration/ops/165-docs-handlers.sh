#!/usr/bin/env bash
# 165: docs/HANDLERS.md's walkthroughs run as written: the first steps
# with the SQL handler ("First steps: the SQL handler"), then a handler in
# C ("A handler in C: from an empty directory to a running one"). Each
# section's shell blocks are taken from the page, in order, and run in one
# bash, in a directory holding the files the page gives (between its
# sql-first-try and sdk-first-try markers), so the page cannot drift from
# what works. What the test changes is only where things are: `meson
# install -C build` installs this build into a directory of the test (PATH
# and PKG_CONFIG_PATH then name it); the database `shop`, the users
# 'dedupd' and 'dedupd_migrate' are the test's; mariadb talks to the
# test's server, dedupd reaches it and the mock cluster through
# DEDUPD_MYSQL_SOCKET and DEDUPD_KAFKA_BROKERS, and handler-test through
# --mysql-socket instead of a server of its own; `dedupd run` ends at the
# end of the topic (--exit-at-end).
# End states, of each: handler-test passed, check passed, its rows (the
# points credited once, the coupons granted once), its dead letter, the
# committed offsets; the runtime user holds the privileges the page's
# grants give, no more.
source "$(dirname "$0")/../lib.sh"
# shellcheck source=../docs.sh
source "$(dirname "$0")/../docs.sh"
tb_init docs_handlers
BUILD=$(dirname "$DEDUPD")
DOC="$TB_DIR/HANDLERS.md"
SDK="$TB_DIR/sdk"
tb_mock points:1 coupon-grants:1
# the users are the page's to create
_tb_mariadb -e "DROP USER IF EXISTS '$TB_MIG_USER'@'%', '$TB_RT_USER'@'%'"
sed -e "s/\`shop\`/\`$TB_DB\`/g" -e "s/\"shop\"/\"$TB_DB\"/g" \
  -e "s/'dedupd_migrate'@/'$TB_MIG_USER'@/g" -e "s/DEDUPD_MYSQL_USER=dedupd_migrate/DEDUPD_MYSQL_USER=$TB_MIG_USER/g" \
  -e "s/'dedupd'@/'$TB_RT_USER'@/g" -e "s/user = \"dedupd\"/user = \"$TB_RT_USER\"/g" \
  "$DD_TEST_SRC_DIR/docs/HANDLERS.md" >"$DOC"

# walk NAME MARKER FROM TO FILE...: the section's files into $TB_DIR/NAME,
# then its blocks run there; 0 when every command succeeded.
walk() {
  local name="$1" marker="$2" from="$3" to="$4" f
  shift 4
  mkdir -p "$TB_DIR/$name"
  for f in "$@"; do
    doc_file "$f" "$marker" >"$TB_DIR/$name/$f"
    [[ -s "$TB_DIR/$name/$f" ]] || tb_die "docs/HANDLERS.md has no $marker block for $f"
  done
  sh_blocks "$DOC" "$from" "$to" >"$TB_DIR/$name.blocks"
  tb_log "$from: the commands, in order:"
  grep -v '^#--- block$' "$TB_DIR/$name.blocks" | sed 's/^/#   $ /'
  {
    echo "set -eu"
    echo "ninja() { :; }"
    echo "meson() { case \$1 in install) command meson install -C '$BUILD' --destdir '$SDK' --no-rebuild --quiet; sdk ;; esac; }"
    echo "mariadb() { command mariadb --no-defaults --socket='$DD_TEST_MYSQL_SOCKET' \"\$@\"; }"
    echo "dedupd() { local at=(DEDUPD_MYSQL_SOCKET='$DD_TEST_MYSQL_SOCKET' DEDUPD_KAFKA_BROKERS='$TB_BROKERS')"
    echo "  case \$1 in handler-test) command dedupd \"\$@\" --mysql-socket '$DD_TEST_MYSQL_SOCKET' ;; run) env \"\${at[@]}\" dedupd \"\$@\" --exit-at-end ;;"
    echo "  *) env \"\${at[@]}\" dedupd \"\$@\" ;; esac; }"
    # what `meson install` installed, once it has
    echo "sdk() { PKG_CONFIG_PATH=\$(dirname \"\$(find '$SDK' -name dedupd.pc | head -n 1)\");"
    echo "  PATH=\$(dirname \"\$(find '$SDK' -path '*/bin/dedupd' | head -n 1)\"):\$PATH; export PKG_CONFIG_PATH PATH; }"
    echo "[ -d '$SDK' ] && sdk"
    grep -v '^#--- block$' "$TB_DIR/$name.blocks"
  } >"$TB_DIR/$name.sh"
  (cd "$TB_DIR/$name" && timeout --foreground -k 10 "$(tb_secs 300)" bash "$TB_DIR/$name.sh") \
    >"$TB_DIR/$name.log" 2>&1
}

# ---- the SQL handler ----
sed 's/^/0\t-\t/' <(doc_file messages.jsonl sql-first-try) | tb_produce points 2>/dev/null ||
  tb_die "produce failed"
rc=0
walk points sql-first-try "## First steps: the SQL handler" "## A handler in C: from an empty directory to a running one" \
  dedupd.conf messages.jsonl grants.sql || rc=$?
tb_eq "the SQL handler's first steps run in order" 0 "$rc"
tb_check "... handler-test passed" grep -qx 'handler-test: PASS' "$TB_DIR/points.log"
tb_check "... check passed, the statements prepared as the runtime user" bash -c \
  "grep -q '^check passed' '$TB_DIR/points.log' && grep -q '^ok   handler connection: sql' '$TB_DIR/points.log'"
tb_eq "... the points credited once per event" "u1 70" "$(tb_sql 'SELECT * FROM points_balance' | tr '\t' ' ')"
tb_eq "... an entry per event" "e1 e2" "$(tb_sql 'SELECT event_id FROM points_entry ORDER BY 1' | paste -sd' ')"
tb_eq "... the negative one dead-lettered" "rejected 1" "$(tb_dlq_reasons points.dlq)"
TB_GROUP=points tb_assert_committed_at_end points points

# ---- a handler in C ----
sed 's/^/0\t-\t/' <(doc_file messages.jsonl sdk-first-try) | tb_produce coupon-grants 2>/dev/null ||
  tb_die "produce failed"
rc=0
walk grant sdk-first-try "## A handler in C: from an empty directory to a running one" "## The ABI" \
  grant.c messages.jsonl dedupd.conf grants.sql || rc=$?
tb_eq "the C handler's steps run in order" 0 "$rc"
tb_check "... handler-test passed" grep -qx 'handler-test: PASS' "$TB_DIR/grant.log"
tb_check "... check passed" grep -q '^check passed' "$TB_DIR/grant.log"
tb_eq "... one grant per grant event" "u1 WELCOME10
u2 WELCOME10" "$(tb_sql 'SELECT user_id, coupon FROM coupon_grant ORDER BY user_id' | tr '\t' ' ')"
tb_eq "... the grant without a coupon dead-lettered" "rejected 1" "$(tb_dlq_reasons coupon-grants.dlq)"
TB_GROUP=grants tb_assert_committed_at_end grants coupon-grants

tb_eq "the runtime user has the page's privileges, no more" \
  "$(cat "$TB_DIR/points/grants.sql" "$TB_DIR/grant/grants.sql" | grep '^GRANT' |
    sed 's/.* ON \(.*\) TO .*/\1/' | sort -u | wc -l)" \
  "$(_tb_mariadb -N -e "SHOW GRANTS FOR '$TB_RT_USER'@'%'" | grep -cv 'GRANT USAGE')"
tb_done
