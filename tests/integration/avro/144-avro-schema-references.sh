#!/usr/bin/env bash
# 144: Confluent schema references, nested. The payments' writer schema
# takes its payer from subject payer-value (com.example.pay.Payer), whose
# bank is a record of subject bank-value (com.example.pay.Bank); the
# records are written by python3-avro with the referenced names known, as
# Confluent's serializer does. dedupd reads the references (each subject
# and version fetched once) and applies every payment once; the decoded
# payer holds its bank as a record. End state: the ledger, no dead letter,
# offsets at the end, one fetch of the id and of each referenced version.
source "$(dirname "$0")/../lib.sh"
source "$(dirname "$0")/avro.sh"
tb_init avro_schema_references
tb_mock payments:2
tb_registry
tb_avro_config
tb_migrate || tb_die "migrate failed"

tb_gen --keys 60 --dup-min 1 --dup-max 3 --partitions 2 --bad 0 --conflicts 4 --seed 17
tb_avro --references <"$TB_DIR/stream.txt" >"$TB_DIR/avro.txt" || tb_die "avro-produce.py failed"
tb_produce <"$TB_DIR/avro.txt" 2>/dev/null || tb_die "produce failed"

tb_run || tb_die "dedupd run failed"

tb_expect_ledger "$TB_DIR/expect.json"
tb_eq "dead letters: the conflicts only" "conflict $(tb_expect_get dead_letters.conflict)" \
  "$(tb_dlq_reasons)"
tb_eq "dedup rows applied" "$(tb_expect_get dedup_rows.applied)" \
  "$(tb_sql "SELECT COUNT(*) FROM dedup_record WHERE status = 1")"
tb_assert_committed_at_end
tb_eq "the id fetched once" "3 1" "$(tb_registry_gets | paste -sd'|')"
tb_eq "each referenced version fetched once" "bank-value 1 1|payer-value 1 1" \
  "$(awk '$1 == "SUBJECT" { n[$2 " " $3]++ } END { for (s in n) print s, n[s] }' \
    "$TB_DIR/registry.gets" | sort | paste -sd'|')"
tb_done
