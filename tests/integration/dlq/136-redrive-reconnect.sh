#!/usr/bin/env bash
# 136: `dedupd redrive` without routes. Nothing a letter says is taken on
# trust there either: letters naming a topic kafka.topics does not have,
# the dead-letter topic itself, a partition pay does not have, and a
# message with no dedupd.* header are refused, and `--from-dlq pay` (the
# live topic, an operator's slip) reads nothing and leaves its backlog to
# the consumer. A redrive whose database connections are killed midway
# reconnects, reads the letters since its last checkpoint again and ends
# with a complete report: every letter once, every key applied once. One
# whose database stays away (the account locked) gives up, and its report
# still says what it did: what it applied, and every letter it read without
# an outcome (not_done); its group is committed no further than what was
# done, and the redrive after it applies the rest, each key once.
source "$(dirname "$0")/../lib.sh"
tb_init redrive_reconnect
tb_mock pay:4 pay.dlq:1
export TB_HANDLER="$DD_TEST_HANDLER_DIR/th_scripted.so" TB_KEY='k:${id}' TB_WORKERS=1
tb_config "$TB_CONF" 'retry = { backoff_initial = "50ms"; backoff_max = "200ms"; };'
tb_migrate || tb_die "migrate failed"
DLQ=pay.dlq

h() { echo "-H dedupd.topic=$1 -H dedupd.partition=$2 -H dedupd.offset=$3 -H dedupd.reason=$4"; }
letters() { "$DDTK" produce -b "$TB_BROKERS" -t "$DLQ" "$@" 2>/dev/null || tb_die "produce failed"; }
# shellcheck disable=SC2046 # the headers are words
{
  printf '0\t-\t{"id":"x1"}\n' | letters $(h nobody 0 0 rejected) # 0: no one consumes it
  printf '0\t-\t{"id":"x2"}\n' | letters $(h pay.dlq 0 0 rejected) # 1: the DLQ itself
  printf '0\t-\t{"id":"x3"}\n' | letters                           # 2: no header
  printf '0\t-\t{"id":"x4"}\n' | letters $(h pay 9 0 rejected)     # 3: pay has 4 partitions
  for i in $(seq 1 30); do printf '0\t-\t{"id":"a%d"}\n' "$i"; done |
    letters $(h pay 1 7 retries_exhausted) # 4..33
}
printf '0\t-\t{"id":"live%d"}\n' 1 2 | tb_produce pay 2>/dev/null || tb_die "produce failed"

rj() { python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$@"; }
count() { tb_sql "SELECT COUNT(*) FROM th_effect WHERE biz_key LIKE '$1'"; }
at_least() { (($(count "$1") >= $2)); }
kill_conns() {
  local id
  for id in $(tb_sql "SELECT id FROM information_schema.PROCESSLIST WHERE user = '$TB_RT_USER'"); do
    tb_sql "KILL CONNECTION $id" 2>/dev/null || true
  done
}
redrive_bg() {
  local name="$1"
  shift
  tb_bg "$name" "$DEDUPD" redrive -c "$TB_CONF" --from-dlq "$DLQ" --report "$TB_DIR/$name.json" "$@"
}
# wait_exit PID: waits for it; its exit code in rc.
wait_exit() {
  rc=0
  wait "$1" || rc=$?
}

# The live topic is not a dead-letter topic: nothing is read or applied.
rc=0
"$DEDUPD" redrive -c "$TB_CONF" --from-dlq pay >/dev/null 2>"$TB_DIR/live.log" || rc=$?
tb_eq "--from-dlq pay (the live topic) is a usage error" 2 "$rc"
tb_eq "its backlog is left to the consumer" 0 "$(count 'k:live%')"
tb_eq "and no group committed on it" "" "$(tb_committed tg.redrive pay | awk '$2 >= 0')"
rc=0
"$DEDUPD" redrive -c "$TB_CONF" --from-dlq "$DLQ" --rate 5x >/dev/null 2>&1 || rc=$?
tb_eq "--rate 5x is a usage error" 2 "$rc"
tb_eq "nothing applied by the slips" 0 "$(count '%')"

# One: its connections killed once a checkpoint applied some.
redrive_bg one --rate 10
pid=$TB_LAST_PID
tb_wait_until 60 "the first letters applied" at_least 'k:a%' 5 || tb_die "nothing applied"
kill_conns
wait_exit "$pid"
tb_eq "the redrive ends well" 0 "$rc"
tb_check "it reconnected and read the letters since its checkpoint again" \
  grep -q "dedupd redrive: reconnected to the database" "$TB_DIR/one.log"
r="$TB_DIR/one.json"
tb_eq "complete, every letter once (offsets 0 to 33), the forged ones refused with why" \
  "true 34 30 4 0 $(seq -s' ' 0 33)
0 refused unknown_source
1 refused source_is_dlq
2 refused not_a_dead_letter
3 refused no_partition" "$(rj "$r" '" ".join(json.dumps(v) for v in (r["summary"]["complete"], r["summary"]["letters"], r["summary"]["applied"] + r["summary"]["duplicate"], r["summary"]["refused"], r["summary"]["not_done"])) + " " + " ".join(str(e["offset"]) for e in r["entries"]) + "".join("\n%d %s %s" % (e["offset"], e["outcome"], e["reason"]) for e in r["entries"] if e["offset"] < 4)')"
tb_eq "every key applied once, no forged one" "30 1 1 0" \
  "$(tb_sql "SELECT COUNT(*), MIN(n), MAX(n), SUM(biz_key LIKE 'k:x%') FROM th_effect" | tr '\t' ' ')"
tb_eq "their rows applied" 30 "$(tb_sql 'SELECT COUNT(*) FROM dedup_record WHERE status = 1')"
tb_assert_committed_at_end tg.redrive "$DLQ"

# Two: the database stays away; it gives up and reports what it did.
# shellcheck disable=SC2046 # the headers are words
for i in $(seq 1 20); do printf '0\t-\t{"id":"g%d"}\n' "$i"; done |
  letters $(h pay 2 9 rejected) # 34..53
redrive_bg two --rate 10
pid=$TB_LAST_PID
tb_wait_until 60 "the first letters applied" at_least 'k:g%' 3 || tb_die "nothing applied"
tb_sql "ALTER USER '$TB_RT_USER'@'%' ACCOUNT LOCK"
kill_conns
wait_exit "$pid"
tb_eq "it gives up: exit 1" 1 "$rc"
tb_sql "ALTER USER '$TB_RT_USER'@'%' ACCOUNT UNLOCK"
r="$TB_DIR/two.json"
applied=$(count 'k:g%')
committed=$(tb_committed tg.redrive "$DLQ" | awk '{ print $2 }')
tb_check "its group committed past some letters ($committed > 34)" test "$committed" -gt 34
# Its report: not complete, and why; what it applied; every letter read
# once, applied or not_done; the group committed only past letters applied.
tb_eq "the report of the redrive that gave up says what it did" \
  "false True $applied letters_read=True  $committed" "$(rj "$r" '" ".join((
    json.dumps(r["summary"]["complete"]), str(len(r["summary"].get("error", "")) > 0),
    str(r["summary"]["applied"]),
    "letters_read=%s" % (r["summary"]["letters"] == r["ranges"][0]["read_to"] - 34),
    " ".join("%d:%s" % (e["offset"], e["outcome"]) for i, e in enumerate(r["entries"])
             if e["offset"] != 34 + i or e["outcome"] not in ("applied", "not_done")
             or (e["offset"] < r["ranges"][0]["committed"] and e["outcome"] != "applied")),
    str(r["ranges"][0]["committed"])))')"

"$DEDUPD" redrive -c "$TB_CONF" --from-dlq "$DLQ" --report "$TB_DIR/three.json" \
  2>"$TB_DIR/three.log" || tb_die "the redrive after it failed (see three.log)"
tb_eq "the redrive after it reads from the group's position" $((54 - committed)) \
  "$(rj "$TB_DIR/three.json" 'r["summary"]["letters"]')"
tb_eq "every key applied once" "50 1 1" "$(tb_sql 'SELECT COUNT(*), MIN(n), MAX(n) FROM th_effect' | tr '\t' ' ')"
tb_eq "their rows applied" 50 "$(tb_sql 'SELECT COUNT(*) FROM dedup_record WHERE status = 1')"
tb_assert_committed_at_end tg.redrive "$DLQ"
tb_done
