#!/usr/bin/env bash
# 55: --partitions, --from and --to restrict the range: offsets per
# partition (--to exclusive), ISO-8601 times and durations back from now
# (resolved with offsets_for_times), and the counts follow. Ranges empty or
# inverted whatever the topic holds are refused (exit 2).
source "$(dirname "$0")/../lib.sh"
tb_init replay_range
tb_mock payments:4
tb_config
tb_migrate || tb_die "migrate failed"

rj() { python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$@"; }
# gen FIRST COUNT: one unique payment per message, round robin over 4 partitions.
gen() {
  local i
  for ((i = $1; i < $1 + $2; i++)); do
    printf '%d\t-\t{"merchant_id":"m%d","order_no":"R%05d","txn_id":"t%d","amount":1.25,"currency":"CNY","status":"PAID"}\n' \
      $((i % 4)) $((i % 7)) "$i" "$i"
  done
}
gen 0 40 | tb_produce 2>/dev/null || tb_die "produce A failed"
sleep 1.5
split=$(date -u +%Y-%m-%dT%H:%M:%S.%3NZ)
sleep 1.5
gen 40 20 | tb_produce 2>/dev/null || tb_die "produce B failed"
tb_run || tb_die "dedupd run failed"

# replay NAME ARGS...: runs a report-only replay into $TB_DIR/NAME.json.
replay() {
  local name="$1"
  shift
  "$DEDUPD" replay -c "$TB_CONF" "$@" --report "$TB_DIR/$name.json" 2>>"$TB_DIR/replay.log" ||
    tb_die "replay $* failed"
}
counts() { rj "$TB_DIR/$1.json" '"%d %d %d" % (r["summary"]["messages"], r["summary"]["keys"], r["summary"]["applied"])'; }

replay all --from earliest
tb_eq "whole topic: messages keys applied" "60 60 60" "$(counts all)"
replay p13 --from earliest --partitions 1,3
tb_eq "--partitions 1,3" "30 30 30" "$(counts p13)"
tb_eq "--partitions 1,3 ranges" "1 3" "$(rj "$TB_DIR/p13.json" '" ".join(str(x["partition"]) for x in r["ranges"])')"
replay off --from 5 --to 8
tb_eq "--from 5 --to 8 (exclusive) on 4 partitions" "12 12 12" "$(counts off)"
tb_eq "--from 5 --to 8 ranges" "5-8 5-8 5-8 5-8" \
  "$(rj "$TB_DIR/off.json" '" ".join("%d-%d" % (x["from"], x["to"]) for x in r["ranges"])')"
replay before --from earliest --to "$split"
tb_eq "--to TIME: the messages before it" "40 40 40" "$(counts before)"
replay after --from "$split"
tb_eq "--from TIME: the messages after it" "20 20 20" "$(counts after)"
replay recent --from -1h --to latest
tb_eq "--from -1h" "60 60 60" "$(counts recent)"
replay tail --from 12 --partitions 2
tb_eq "--from 12 --partitions 2" "3 3 3" "$(counts tail)"
replay past --from 1000
tb_eq "--from past the end: nothing to read" "0 0 0" "$(counts past)"
tb_check "... and a warning says so" grep -q "Nothing to replay" "$TB_DIR/replay.log"

# refused NAME PATTERN ARGS...: replay exits 2 with PATTERN on stderr and
# writes no report.
refused() {
  local name="$1" pattern="$2" rc=0
  shift 2
  "$DEDUPD" replay -c "$TB_CONF" "$@" --report "$TB_DIR/$name.json" 2>"$TB_DIR/$name.err" || rc=$?
  tb_eq "replay $*: exit 2" 2 "$rc"
  tb_check "... says why: $(head -n 1 "$TB_DIR/$name.err")" grep -qE -e "$pattern" "$TB_DIR/$name.err"
  tb_check "... and writes no report" test ! -e "$TB_DIR/$name.json"
}
refused inverted '--to 5 is before --from 10: .* inverted' --from 10 --to 5
refused same '--to 5 is the same as --from: .* empty' --from 5 --to 5
refused tbefore "--to .* is before --from .*: .* inverted" --from "$split" --to 2020-01-01T00:00:00Z
refused dbefore "--to .* is before --from .*: .* inverted" --from -1h --to -2h
refused latest '--from latest selects nothing' --from latest
tb_done
