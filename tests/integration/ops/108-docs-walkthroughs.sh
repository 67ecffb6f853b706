#!/usr/bin/env bash
# 108: README.md's "A five-minute tour" runs as written, twice in a row.
# Its shell blocks are taken from the page, in order, and run in one bash
# each time, so the page cannot drift from what works. What the test
# changes is only where things are: /tmp/dd-tour is a directory of the
# test, port 9464 a free port, build/ this build (already built: meson and
# ninja do nothing).
# The first run stops before "Stop it all", leaving dedupd, the mock
# cluster and MariaDB running, as an interrupted tour does; the second runs
# every block from the start: its first block stops what the first left
# and removes its files (a stale bootstrap file would point kcat at a dead
# port), and the tour works again.
# End states of the second run: the metrics, the balance, the dead letters'
# headers, the conflict's log line as the page describes it (the earlier
# copy), `dedupd stats`'s lag turning 0 as the page says, and after its
# "Stop it all" no process of either run left.
source "$(dirname "$0")/../lib.sh"
# shellcheck source=../docs.sh
source "$(dirname "$0")/../docs.sh"
tb_init docs_walkthroughs
BUILD=$(dirname "$DEDUPD")
SRC=$DD_TEST_SRC_DIR

port=$(tb_free_port)
TOUR="$TB_DIR/tour"
sh_blocks "$SRC/README.md" "## A five-minute tour" "## A minimal handler" |
  sed -e "s#/tmp/dd-tour#$TOUR#g" -e "s#127.0.0.1:9464#127.0.0.1:$port#g" \
    -e "s#[$]PWD/build/#@BUILD@/#g" -e "s#\(^\|[^/[:alnum:]_]\)build/#\1@BUILD@/#g" \
    -e "s#@BUILD@#$BUILD#g" >"$TB_DIR/tour.blocks"
tb_eq "the tour has its three blocks" 3 "$(grep -c '^#--- block$' "$TB_DIR/tour.blocks")"
# tour_script RUN BLOCKS: the tour's first BLOCKS blocks as one script:
# block 1, then a wait for what "give it a few seconds" waits for, block 2
# (its output in RUN.look.log), block 3; the pids of block 1 written down.
tour_script() {
  awk -v d="$TB_DIR" -v run="$1" -v last="$2" -v port="$port" -v wait="$(tb_secs 120)" '
    BEGIN { print "set -u; meson() { :; }; ninja() { :; }" }
    $0 == "#--- block" { n++
      if (n == 1) { print "echo \"$(cat " d "/tour/dedupd.pid) $(cat " d "/tour/mock.pid)\" >" d "/" run ".pids"
        print "until curl -s 127.0.0.1:" port "/metrics | grep -q \"^dedupd_applied_total{route=\\\"default\\\"} 1$\" && kcat -C -b \"$BROKERS\" -t payments.dlq -e -q -f \"%h\\n\" 2>/dev/null | grep -c dedupd.reason | grep -qx 2; do ((SECONDS < " wait ")) || { echo \"# gave up waiting after $SECONDS s\"; break; }; sleep 0.2; done"
        print "exec 3>&1 >" d "/" run ".look.log" }
      if (n == 2) print "exec >&3"
      if (n == last) exit
      next }
    { print }' "$TB_DIR/tour.blocks" >"$TB_DIR/$1.sh"
}
# run_tour RUN BLOCKS: runs it from the repository; its exit status. What
# it started is the cleanup trap's to stop too, should the test fail.
run_tour() {
  local rc=0 f
  tour_script "$1" "$2"
  (cd "$SRC" && timeout --foreground -k 10 "$(tb_secs 240)" bash "$TB_DIR/$1.sh") \
    >"$TB_DIR/$1.log" 2>&1 || rc=$?
  for f in "$TOUR"/*.pid "$TOUR/db/mysqld.pid"; do
    [[ -s "$f" ]] && TB_PIDS+=("$(cat "$f")")
  done
  return "$rc"
}
gone() { ! kill -0 "$1" 2>/dev/null; }

rc=0
run_tour first 2 || rc=$?
tb_eq "the first tour runs to its look" 0 "$rc"
read -r first_dedupd first_mock <"$TB_DIR/first.pids" || true
tb_check "... and leaves dedupd and the mock cluster running" \
  bash -c "kill -0 ${first_dedupd:-0} && kill -0 ${first_mock:-0}"
tb_check "... and MariaDB" test -S "$TOUR/db/mysqld.sock"
tb_check "stats run again within seconds shows a lag of 0, as the page says" \
  tb_wait_until 20 "total lag 0" bash -c \
  "'$DEDUPD' stats -c '$TOUR/dedupd.conf' 2>/dev/null | grep -Eq '^  total lag +0\$'"
first_bootstrap=$(cat "$TOUR/bootstrap")

rc=0
run_tour second 3 || rc=$?
tb_eq "the second tour runs to its end" 0 "$rc"
read -r tour_dedupd tour_mock <"$TB_DIR/second.pids" || true
tb_check "the second tour stopped the first one's dedupd (pid $first_dedupd)" gone "${first_dedupd:-0}"
tb_check "... and its mock cluster (pid $first_mock)" gone "${first_mock:-0}"
tb_check "... and started a cluster of its own" test "$(cat "$TOUR/bootstrap")" != "$first_bootstrap"
look="$TB_DIR/second.look.log"
tb_check "one payment applied, two duplicates, one conflict (metrics)" \
  grep -qx 'dedupd_applied_total{route="default"} 1' "$look"
tb_check "... two duplicates" grep -qx 'dedupd_duplicates_total{route="default"} 2' "$look"
tb_check "... one conflict" grep -qx 'dedupd_conflicts_total{route="default"} 1' "$look"
tb_check "the balance is 12.50, one entry" grep -Eq '^m1[[:space:]]+12\.50[[:space:]]+1$' "$look"
tb_check "the dead letters' headers: conflict and bad_json" \
  bash -c "grep -q 'dedupd.reason=conflict' '$look' && grep -q 'dedupd.reason=bad_json' '$look'"
tb_check "the conflict's log line names the earlier copy, as the page says" \
  grep -q 'reason="conflict" .* first_copy="payments \[1\] @0"' "$look"
tb_check "stats: the dedup table holds the payment's row" grep -Eq '^rows +1$' "$look"
tb_check "stats: the group's lag is shown" grep -Eq '^  total lag +[0-9]+$' "$look"
tb_check "after \"Stop it all\": dedupd is gone (pid $tour_dedupd)" gone "${tour_dedupd:-0}"
tb_check "... the mock cluster is gone (pid $tour_mock)" gone "${tour_mock:-0}"
tb_check "... MariaDB is stopped" test ! -S "$TOUR/db/mysqld.sock"
tb_check "dedupd stopped cleanly on SIGTERM, having left the group" \
  bash -c "grep -q 'Left the group tour' '$TOUR/dedupd.log' && tail -n 1 '$TOUR/dedupd.log' | grep -q 'Stopped cleanly'"
for p in $first_dedupd $first_mock $tour_dedupd $tour_mock; do kill -KILL "$p" 2>/dev/null || true; done
tb_done
