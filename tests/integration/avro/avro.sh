# Helpers for the Avro tests (this folder), sourced after lib.sh: the test
# schema registry (tests/tools/mock-registry.py) and the independent Avro
# producer (tests/tools/avro-produce.py, Apache Avro's Python library).
# Both need python3-avro (scripts/install-deps), Debian's package for the
# python3 that tb_init puts first on PATH.

# tb_registry [ARGS...]: starts the test registry (ARGS: more options of
# mock-registry.py); sets TB_REGISTRY_URL (https with --cert). Its faults
# come from $TB_DIR/registry.fault (tb_registry_fault), the schema fetches
# it served are logged in $TB_DIR/registry.gets.
tb_registry() {
  local scheme=http
  [[ " $* " == *" --cert "* ]] && scheme=https
  python3 -c 'import avro' 2>/dev/null || tb_die "python3-avro is not installed (scripts/install-deps)"
  : >"$TB_DIR/registry.fault"
  : >"$TB_DIR/registry.gets"
  tb_bg registry python3 "$DD_TEST_SRC_DIR/tests/tools/mock-registry.py" \
    --port-file "$TB_DIR/registry.port" --fault-file "$TB_DIR/registry.fault" \
    --log "$TB_DIR/registry.gets" "$@"
  tb_wait_until 20 "registry port file" test -s "$TB_DIR/registry.port" ||
    tb_die "mock-registry.py did not start (see registry.log)"
  TB_REGISTRY_URL="$scheme://127.0.0.1:$(cat "$TB_DIR/registry.port")"
  tb_log "test registry at $TB_REGISTRY_URL"
}

# tb_registry_fault [down|slow SECS|error|notfound]: the registry's answers
# to schema fetches from now on; no argument: answer normally. Written aside
# and renamed into place: the registry reads the file on every request, and
# a truncated file would read as "answer normally".
tb_registry_fault() {
  printf '%s\n' "$*" >"$TB_DIR/registry.fault.new"
  mv -f "$TB_DIR/registry.fault.new" "$TB_DIR/registry.fault"
}

# tb_registry_gets [FAULT]: schema fetches served (under that fault; ok:
# answered), as "ID COUNT" lines in id order.
tb_registry_gets() {
  awk -v f="${1:-ok}" '$1 == "GET" && $3 == f { n[$2]++ } END { for (i in n) print i, n[i] }' \
    "$TB_DIR/registry.gets" | sort -n
}

# tb_avro ARGS...: avro-produce.py against the test registry (stdin, stdout).
tb_avro() { python3 "$DD_TEST_SRC_DIR/tests/tools/avro-produce.py" --registry "$TB_REGISTRY_URL" "$@"; }

# tb_avro_config [LINES...]: a configuration (tb_config) of one route in
# format avro on the test registry, its schema_registry.timeout
# TB_REGISTRY_TIMEOUT (2s), with LINES after it.
tb_avro_config() {
  TB_DEDUP_EXTRA='format = "avro";' tb_config "$TB_CONF" \
    "schema_registry = { url = \"$TB_REGISTRY_URL\"; timeout = \"${TB_REGISTRY_TIMEOUT:-2s}\"; };" "$@"
}

# tb_at_end [TOPIC]: succeeds when the group's committed offsets of TOPIC
# are its end offsets.
tb_at_end() {
  local t="${1:-$TB_TOPIC}"
  [[ "$(tb_committed "${TB_GROUP:-tg}" "$t")" == "$(tb_watermarks "$t" | awk '{print $1, $3}')" ]]
}
