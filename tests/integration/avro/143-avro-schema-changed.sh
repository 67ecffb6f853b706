#!/usr/bin/env bash
# 143: a registry rebuilt without its ids serves another schema under an
# id whose payments are applied. dedupd run applies payments written under
# schema id 1; `dedupd migrate`'s table dedupd_avro_schema records id 1's
# fingerprint. The registry is then rebuilt and the first schema
# registered in it, id 1 again, has merchant_id and order_no swapped: read
# under it, every old record has another business key. `dedupd replay
# --apply` over the topic refuses the schema (exits non-zero, saying why)
# and books nothing; a new `dedupd run` meeting the old records again
# leaves them waiting, logs an error, counts a changed_schema fault and
# commits nothing past them. End state: every payment booked once, the
# recorded fingerprint unchanged, no dead letter.
source "$(dirname "$0")/../lib.sh"
source "$(dirname "$0")/../http.sh"
source "$(dirname "$0")/avro.sh"
tb_init avro_schema_changed
tb_mock payments:2
tb_registry
port=$(tb_free_port)
TH_URL="http://127.0.0.1:$port"
_config() {
  TB_REGISTRY_TIMEOUT=1s tb_avro_config "http = { listen = \"127.0.0.1:$port\"; };" \
    "retry = { backoff_initial = \"50ms\"; backoff_max = \"200ms\"; };"
}
_config
tb_migrate || tb_die "migrate failed"

tb_gen --keys 40 --dup-min 1 --dup-max 1 --partitions 2 --bad 0 --conflicts 0 --seed 13
tb_avro --only-version 1 <"$TB_DIR/stream.txt" >"$TB_DIR/v1.txt" || tb_die "avro-produce.py failed"
tb_produce <"$TB_DIR/v1.txt" 2>/dev/null || tb_die "produce failed"
tb_run || tb_die "dedupd run failed"
tb_expect_ledger "$TB_DIR/expect.json"
recorded=$(tb_sql "SELECT schema_id, HEX(fingerprint) FROM dedupd_avro_schema" || true)
tb_eq "id 1's fingerprint recorded" 1 "$(tb_sql "SELECT COUNT(*) FROM dedupd_avro_schema WHERE schema_id = 1")"

# the registry rebuilt: its first schema, id 1 again, another one
python3 -c 'import sys, urllib.request
urllib.request.urlopen(urllib.request.Request(sys.argv[1] + "/admin/rebuild", data=b"{}"))' \
  "$TB_REGISTRY_URL" || tb_die "cannot rebuild the registry"
tb_avro --swap-keys </dev/null || tb_die "cannot register the other schema"

rc=0
timeout --foreground -k 10 "$(tb_secs 120)" "$DEDUPD" replay -c "$TB_CONF" --from earliest --apply \
  >"$TB_DIR/replay.out" 2>"$TB_DIR/replay.log" || rc=$?
((rc != 0)) && tb_ok "replay --apply stops (exit $rc)" || tb_not_ok "replay --apply stops"
grep -q "schema id 1: the schema registry serves another schema than the one this database recorded" \
  "$TB_DIR/replay.log" && tb_ok "replay says why" || tb_not_ok "replay says why: $(tail -3 "$TB_DIR/replay.log")"
tb_expect_ledger "$TB_DIR/expect.json"

# the old records again, for a new consumer group: they wait
TB_GROUP=tg2 _config
tb_start run2
pid=$TB_LAST_PID
_changed() {
  th_scrape && (($(th_metric 'dedupd_schema_registry_faults_total{fault="changed_schema"}') >= 2))
}
tb_wait_until 30 "the changed schema refused, again" _changed &&
  tb_ok "the changed schema is counted" || tb_not_ok "the changed schema is counted"
tb_stop "$pid" || tb_not_ok "dedupd exits 0 on SIGTERM"
grep -q 'level=error msg="schema id 1: the schema registry serves another schema than the one this database recorded for the id (the database (.*) recorded fingerprint [0-9a-f]\{64\} for it, the schema served now has [0-9a-f]\{64\}); it is not used. Its messages wait.' \
  "$TB_DIR/run2.log" && tb_ok "an error line says which id and both fingerprints" ||
  tb_not_ok "an error line says which id and both fingerprints"
tb_eq "nothing committed by the new group" "" "$(tb_committed tg2 payments | awk '$2 >= 0')"
tb_expect_ledger "$TB_DIR/expect.json"
tb_eq "the recorded fingerprint unchanged" "$recorded" \
  "$(tb_sql "SELECT schema_id, HEX(fingerprint) FROM dedupd_avro_schema")"
tb_eq "no dead letters" "" "$(tb_dlq_reasons)"
tb_done
