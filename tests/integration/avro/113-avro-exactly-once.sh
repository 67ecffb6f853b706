#!/usr/bin/env bash
# 113: exactly once over Avro. A payment stream with duplicates on every
# partition, each payment's copies written by an independent serializer
# (python3-avro) under two writer schema versions in turn (fields in
# another order, union branches swapped: the same values), plus conflicts,
# bad records and key_missing ones, and hostile records (wrong magic byte,
# schema id 2^31, an unknown id, truncated, a string or counts past the
# record, 10000-deep nesting, NaN, a map with a key twice, U+0000 in a
# string). End state: every payment applied once (copies under either
# version are duplicates), every bad one dead-lettered
# with its reason, committed offsets at the end, each schema id fetched from
# the registry once.
source "$(dirname "$0")/../lib.sh"
source "$(dirname "$0")/avro.sh"
tb_init avro_exactly_once
tb_mock payments:4
tb_registry
TB_WORKERS=4 TB_DEDUP_EXTRA='format = "avro";' tb_config "$TB_CONF" \
  "schema_registry = { url = \"$TB_REGISTRY_URL/\"; timeout = \"2s\"; };"
tb_migrate || tb_die "migrate failed"

tb_gen --keys 600 --dup-min 1 --dup-max 4 --partitions 4 --bad 24 --conflicts 10 --seed 11
tb_avro <"$TB_DIR/stream.txt" >"$TB_DIR/avro.txt" || tb_die "avro-produce.py failed"
tb_avro --malformed >"$TB_DIR/malformed.txt" || tb_die "avro-produce.py --malformed failed"
n=$(($(wc -l <"$TB_DIR/avro.txt") + $(grep -vc '^#' "$TB_DIR/malformed.txt")))
{ cat "$TB_DIR/avro.txt"; grep -v '^#' "$TB_DIR/malformed.txt"; } | tb_produce 2>/dev/null ||
  tb_die "produce failed"

tb_run || tb_die "dedupd run failed"

tb_expect_ledger "$TB_DIR/expect.json"
for reason in key_missing key_too_long rejected conflict; do
  tb_eq "dead letters $reason" "$(tb_expect_get dead_letters.$reason)" "$(tb_dlq_count "$reason")"
done
# gen-payments' bad JSON became records cut short; the hostile ones add theirs
bad=$(($(tb_expect_get dead_letters.bad_json) + $(grep -c '^# bad_avro' "$TB_DIR/malformed.txt")))
tb_eq "dead letters bad_avro" "$bad" "$(tb_dlq_count bad_avro)"
tb_eq "dead letters schema_unknown" 1 "$(tb_dlq_count schema_unknown)"
tb_eq "dead letters bad_json" 0 "$(tb_dlq_count bad_json)"
tb_eq "dedup rows applied" "$(tb_expect_get dedup_rows.applied)" \
  "$(tb_sql "SELECT COUNT(*) FROM dedup_record WHERE status = 1")"
tb_eq "dedup rows failed" "$(tb_expect_get dedup_rows.failed)" \
  "$(tb_sql "SELECT COUNT(*) FROM dedup_record WHERE status = 2")"
tb_eq "duplicates: every copy under either version" \
  "$(($(wc -l <"$TB_DIR/avro.txt") - $(tb_expect_get dead_letters_total) - $(tb_expect_get unique_keys_applied)))" \
  "$(tb_summary duplicates)"
tb_assert_committed_at_end
tb_eq "summary counts every message once" "$n" "$(tb_summary messages)"
# payments v1 and v2, the Bag and Node schemas of the hostile records, and
# the unknown id: each asked for once
tb_eq "each schema id fetched once" "1 1|2 1|3 1|4 1|9999 1" "$(tb_registry_gets | paste -sd'|')"
tb_eq "the errors say where" 1 "$(tb_dlq | python3 -c '
import json, sys
hits = 0
for line in sys.stdin:
    e = json.loads(line).get("headers", {}).get("dedupd.error", "")
    if "string of 1000 bytes declared, only 2 bytes left at byte 5" in e: hits += 1
print(hits)')"
tb_eq "U+0000 in a string: bad_avro at the NUL's byte" 1 "$(tb_dlq | python3 -c '
import json, sys
print(sum("invalid Avro (schema id 3): NUL (U+0000) in a string at byte 7" in
          json.loads(l).get("headers", {}).get("dedupd.error", "") for l in sys.stdin))')"
tb_eq "a map with a key twice: the decoded record is refused" 1 "$(tb_dlq | python3 -c '
import json, sys
print(sum("the decoded Avro record: invalid JSON: duplicate member name" in
          json.loads(l).get("headers", {}).get("dedupd.error", "") for l in sys.stdin))')"
tb_done
