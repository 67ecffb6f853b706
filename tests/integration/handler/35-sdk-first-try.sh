#!/usr/bin/env bash
# 35: a new handler works on the first try, from an empty directory outside
# the repository with only the installed SDK and docs/HANDLERS.md. The SDK
# is this build's `meson install --destdir`; the handler, its messages, its
# configuration and its grant are the ones HANDLERS.md's step-by-step shows
# (taken from the page, between its `sdk-first-try` markers, so the page
# cannot drift from what works; README.md shows the same handler). Each
# command the page gives is run as shown, and logged:
#   cc -shared -fPIC -o grant.so grant.c $(pkg-config --cflags --libs dedupd)
#   dedupd handler-test -c dedupd.conf messages.jsonl   (its own mariadbd)
#   dedupd migrate / dedupd run, on the test bed, with the page's grant.
# End state: handler-test passes; on the test bed one coupon_grant row per
# grant event (the repeated one applied once, the one without a coupon
# dead-lettered rejected), offsets committed at the end.
source "$(dirname "$0")/../lib.sh"
tb_init sdk_first_try
BUILD=$(dirname "$DEDUPD")
SDK="$TB_DIR/sdk"
# shellcheck disable=SC2034 # the page docs.sh's doc_file reads
DOC="$DD_TEST_SRC_DIR/docs/HANDLERS.md"

# show CMD...: logs the command as the page gives it (to the test's output,
# whatever CMD's output is redirected to), then runs it.
exec 3>&1
show() {
  tb_log "\$ $*" >&3
  "$@"
}
# shellcheck source=../docs.sh
source "$(dirname "$0")/../docs.sh"
# from_doc FILE: the page's block of FILE (between its sdk-first-try
# markers) into FILE.
from_doc() {
  doc_file "$1" sdk-first-try >"$1"
  [[ -s "$1" ]] || tb_die "docs/HANDLERS.md has no sdk-first-try block for $1"
}

show meson install -C "$BUILD" --destdir "$SDK" --no-rebuild --quiet >"$TB_DIR/install.log" 2>&1 ||
  tb_die "meson install --destdir failed (see install.log)"
PKG_CONFIG_PATH=$(dirname "$(find "$SDK" -name dedupd.pc | head -n 1)")
DEDUPD=$(find "$SDK" -path '*/bin/dedupd' | head -n 1)
export PKG_CONFIG_PATH PATH="$(dirname "$DEDUPD"):$PATH"
tb_log "the installed SDK: PKG_CONFIG_PATH=$PKG_CONFIG_PATH, dedupd in PATH"

mkdir "$TB_DIR/grant"
cd "$TB_DIR/grant" || tb_die "no directory"
for f in grant.c messages.jsonl dedupd.conf grants.sql; do from_doc "$f"; done
tb_eq "README.md shows HANDLERS.md's handler" "$(cat grant.c)" \
  "$(awk '/^## A minimal handler/ { s = 1 } s && /^```c/ { on = 1; next } on && /^```/ { exit } on' \
    "$DD_TEST_SRC_DIR/README.md")"
tb_check "README.md gives HANDLERS.md's build line" \
  grep -qxF 'cc -shared -fPIC -o grant.so grant.c $(pkg-config --cflags --libs dedupd)' \
  "$DD_TEST_SRC_DIR/README.md"

# shellcheck disable=SC2046 # the flags are words
show cc -shared -fPIC -o grant.so grant.c $(pkg-config --cflags --libs dedupd) 2>"$TB_DIR/cc.log" ||
  tb_die "the page's handler does not build with the page's line (see cc.log)"
tb_ok "grant.so built with pkg-config alone"

rc=0
show dedupd handler-test -c dedupd.conf messages.jsonl >"$TB_DIR/handler-test.out" \
  2>"$TB_DIR/handler-test.log" || rc=$?
sed 's/^/#   /' "$TB_DIR/handler-test.out"
tb_eq "dedupd handler-test passes, on a mariadbd of its own" 0 "$rc"
tb_check "... with the page's verdict" grep -qx 'handler-test: PASS' "$TB_DIR/handler-test.out"
tb_check "... having compared the handler's table" \
  grep -q '^ok   table coupon_grant (ignoring id): the same 2 row(s) after both passes' \
  "$TB_DIR/handler-test.out"

# The installed dedupd runs it on the test bed, with the page's key and grant.
tb_mock coupon-grants:1
TB_HANDLER="$PWD/grant.so" TB_KEY=$(sed -n 's/^dedup = { key = "\(.*\)"; };$/\1/p' dedupd.conf) \
  tb_config
tb_log "\$ dedupd migrate -c $TB_CONF    # as the migration user, then the page's grant"
TB_HANDLER_GRANTS=grants.sql tb_migrate || tb_die "dedupd migrate failed"
sed 's/^/0\t-\t/' messages.jsonl | tb_produce 2>/dev/null || tb_die "produce failed"
tb_log "\$ dedupd run -c $TB_CONF --exit-at-end"
tb_run || tb_die "dedupd run failed"
tb_eq "one grant per grant event" "u1 WELCOME10
u2 WELCOME10" "$(tb_sql 'SELECT user_id, coupon FROM coupon_grant ORDER BY user_id' | tr '\t' ' ')"
tb_eq "the grant without a coupon dead-lettered" "rejected 1" "$(tb_dlq_reasons)"
tb_assert_committed_at_end
tb_done
