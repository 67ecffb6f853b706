#!/usr/bin/env bash
# 135: `dedupd redrive` trusts no dead letter further than its route would
# have written it, and reports every letter. Two routes: payments (dead
# letters to payments.dead) and coupons. Fourteen letters are put into
# payments.dead by hand, as someone who can write that topic would: letters
# of payments, one whose dedupd.biz_key header names another key than its
# payload's, a copy, a conflict, a reject, bad JSON, and forged ones: one
# naming coupons (whose handler must never run for payments.dead), a
# partition payments does not have, a partition "1x", two dedupd.topic
# headers, no header at all, the dead-letter topic as its source, a
# truncated payload. A filtered redrive (--key) applies only what its key,
# rendered from the payload, selects, and commits its group no further than
# the first letter it left out; the plain redrive after it finds every
# letter left, applies them, refuses the forged ones one by one, exits 4
# for the reject, and commits to the end. An operator's slips (--from-dlq
# a live topic, malformed numbers) are usage errors.
source "$(dirname "$0")/../lib.sh"
tb_init redrive_forged
tb_mock payments:2 coupons:1 payments.dead:1 coupons.dlq:1
TH="$DD_TEST_HANDLER_DIR/th_scripted.so"
tb_config_routes "
  { name = \"payments\"; topics = [\"payments\"]; key = \"pay:\${id}\"; table = \"dedup_record\";
    handler = { path = \"$TH\"; }; dlq = { topic = \"payments.dead\"; }; },
  { name = \"coupons\"; topics = [\"coupons\"]; key = \"cp:\${id}\"; table = \"dedup_coupon\";
    handler = { path = \"$TH\"; }; }"
tb_migrate || tb_die "migrate failed"
DLQ=payments.dead

# letter PAYLOAD [-H name=value]...: one dead letter into payments.dead.
letter() {
  local payload="$1"
  shift
  printf '0\t-\t%s\n' "$payload" | "$DDTK" produce -b "$TB_BROKERS" -t "$DLQ" "$@" 2>/dev/null ||
    tb_die "produce of a letter failed"
}
# h TOPIC PARTITION OFFSET REASON: the headers dedupd writes.
h() { echo "-H dedupd.topic=$1 -H dedupd.partition=$2 -H dedupd.offset=$3 -H dedupd.reason=$4"; }
# shellcheck disable=SC2046 # the headers are words
{
  letter '{"id":"p1"}' $(h payments 0 0 rejected) -H dedupd.biz_key=pay:p1           # 0
  letter '{"id":"p2"}' $(h payments 1 0 retries_exhausted) -H dedupd.biz_key=pay:p2  # 1
  letter '{"id":"p3"}' $(h payments 0 1 rejected) -H dedupd.biz_key=pay:p1           # 2: the header lies
  letter '{"id":"p1"}' $(h payments 0 0 rejected) -H dedupd.biz_key=pay:p1           # 3: a copy of 0
  letter '{"id":"x1"}' $(h coupons 0 0 rejected)                                     # 4: another route's
  letter '{"id":"x2"}' $(h payments 9 0 rejected)                                    # 5: no partition 9
  letter '{"id":"x3"}' $(h payments 1x 0 rejected)                                   # 6: not a number
  letter '{"id":"x4"}' -H dedupd.topic=payments $(h coupons 0 0 rejected)            # 7: two topics
  letter '{"id":"x5"}'                                                               # 8: no header
  letter '{"id":"x6"}' $(h payments.dead 0 0 rejected)                               # 9: the DLQ itself
  letter '{"id":"x7"' $(h payments 0 3 rejected) -H dedupd.truncated=900             # 10: cut
  letter '{"id":"r1","th":"reject"}' $(h payments 0 4 rejected)                      # 11: rejected again
  letter '{"id":"p1","v":2}' $(h payments 1 1 conflict)                              # 12: other content
  letter '{bad' $(h payments 1 2 bad_json)                                           # 13
}
printf '0\t-\t%s\n' '{"id":"live1"}' | tb_produce payments 2>/dev/null || tb_die "produce failed"

rj() { python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$@"; }
# outcomes FILE: "offset outcome reason" of every entry, in order.
outcomes() { rj "$1" '"\n".join("%d %s %s" % (e["offset"], e["outcome"], e.get("reason")) for e in r["entries"])'; }
redrive() {
  local name="$1" rc=0
  shift
  "$DEDUPD" redrive -c "$TB_CONF" --from-dlq "$DLQ" --report "$TB_DIR/$name.json" "$@" \
    2>"$TB_DIR/$name.log" || rc=$?
  echo "$rc"
}
effects() { tb_sql "SELECT biz_key, n FROM th_effect ORDER BY 1" | tr '\t' ' ' | paste -sd' '; }
committed() { tb_committed tg.redrive "$DLQ" | awk '{ print $2 }'; }

# An operator's slips: nothing is read, nothing committed.
usage() {
  local rc=0
  "$DEDUPD" redrive -c "$TB_CONF" "$@" >/dev/null 2>&1 || rc=$?
  tb_eq "usage error: $*" 2 "$rc"
}
usage --from-dlq payments
usage --from-dlq coupons.dead
usage --from-dlq "$DLQ" --source-topic coupons
usage --from-dlq "$DLQ" --rate 5x
usage --from-dlq "$DLQ" --source-partition 1x
usage --from-dlq "$DLQ" --source-offsets 3-2
usage --from-dlq "$DLQ" --reason ''
usage --from-dlq "$DLQ" --group "$(printf 'g%.0s' $(seq 300))"
tb_eq "no slip committed anything" "" "$(tb_committed tg.redrive payments | awk '$2 >= 0')"

# The forged letters, refused by every redrive, each with why.
forged="4 refused wrong_dlq
5 refused no_partition
6 refused bad_header
7 refused bad_header
8 refused not_a_dead_letter
9 refused source_is_dlq
10 refused truncated"

# A: --key judged on the key the payload renders: p1 only; the group stays
# at the first letter left out.
tb_eq "redrive --key exits 0" 0 "$(redrive a --key 'pay:p1')"
tb_eq "--key: every letter has its entry" "0 applied None
1 filtered --key
2 filtered --key
3 copy later_copy
$forged
11 filtered --key
12 conflict copy_differs
13 filtered --key" "$(outcomes "$TB_DIR/a.json")"
tb_eq "--key: letter 2 is left out by its payload's key, whatever its header says" "pay:p3" \
  "$(rj "$TB_DIR/a.json" '[e["key"] for e in r["entries"] if e["offset"] == 2][0]')"
tb_eq "--key: only p1 applied" "pay:p1 1" "$(effects)"
tb_eq "--key: the group commits no further than the first letter left out" 1 "$(committed)"

# B: the plain redrive finds what A left, refuses the forged letters, exits 4
# for the reject.
tb_eq "the plain redrive exits 4: a letter was not applied" 4 "$(redrive b --fail-on-findings)"
r="$TB_DIR/b.json"
tb_eq "every letter from the first one left has its entry" "1 applied None
2 applied None
3 duplicate applied_before
$forged
11 apply_failed rejected
12 conflict copy_differs
13 bad bad_json" "$(outcomes "$r")"
tb_eq "the summary counts them" "13 2 1 7 1 1 1 true" \
  "$(rj "$r" '" ".join(json.dumps(r["summary"][k]) for k in ("letters", "applied", "duplicate", "refused", "apply_failed", "conflict", "bad", "complete"))')"
tb_eq "an entry names the letter's reason and source position" \
  "retries_exhausted payments 1 0 payments" \
  "$(rj "$r" '" ".join(str(e[k]) for e in r["entries"] if e["offset"] == 1 for k in ("letter_reason", "source_topic", "source_partition", "source_offset", "route"))')"
tb_check "the forged letter says whose topic it names" \
  grep -q 'coupons belongs to route coupons, whose dead letters go to coupons.dlq' <(rj "$r" '[e["detail"] for e in r["entries"] if e["offset"] == 4][0]')
tb_eq "each applied once; no forged letter applied" "pay:p1 1 pay:p2 1 pay:p3 1" "$(effects)"
tb_eq "the dedup rows" "pay:p1 1
pay:p2 1
pay:p3 1
pay:r1 2" "$(tb_sql 'SELECT biz_key, status FROM dedup_record ORDER BY 1' | tr '\t' ' ')"
tb_eq "route coupons' handler never ran" 0 "$(tb_sql 'SELECT COUNT(*) FROM dedup_coupon')"
tb_assert_committed_at_end tg.redrive "$DLQ"
tb_eq "the live topic's message is left to the consumer" "" \
  "$(tb_sql "SELECT biz_key FROM dedup_record WHERE biz_key = 'pay:live1'")"

# C: nothing left to read.
tb_eq "a third redrive exits 0" 0 "$(redrive c)"
tb_eq "and reads nothing" 0 "$(rj "$TB_DIR/c.json" 'r["summary"]["letters"]')"
tb_done
