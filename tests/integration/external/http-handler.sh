# Helpers for the tests of the HTTP handler (handler.http, this folder's
# 17x), sourced after lib.sh: the reference service the examples ship
# (examples/http-service/service.py) and a configuration naming the
# handler by its group.

# tb_http_service [ARGS...]: starts the service on a port of its own (ARGS:
# more options of service.py). Its journal (state and effects), request
# log and fault rules are $TB_DIR/journal, $TB_DIR/requests and
# $TB_DIR/faults (tb_http_faults). Sets TB_HTTP_URL (the collection;
# https with --tls-cert) and TB_HTTP_PID.
tb_http_service() {
  local port scheme=http
  [[ " $* " == *" --tls-cert "* ]] && scheme=https
  port=$(tb_free_port)
  : >"$TB_DIR/faults"
  tb_bg service python3 "$DD_TEST_SRC_DIR/examples/http-service/service.py" \
    --listen "127.0.0.1:$port" --journal "$TB_DIR/journal" --log "$TB_DIR/requests" \
    --faults "$TB_DIR/faults" "$@"
  TB_HTTP_PID=$TB_LAST_PID
  tb_wait_until 20 "the service listens" grep -q '^listening' "$TB_DIR/service.log" ||
    tb_die "service.py did not start (see service.log)"
  TB_HTTP_URL="$scheme://127.0.0.1:$port/payments"
  tb_log "reference service at $TB_HTTP_URL (pid $TB_HTTP_PID)"
}

# tb_http_faults RULE...: the service's fault rules from now on (one JSON
# object each; service.py says which), written aside and renamed into
# place so the service never reads half a file.
tb_http_faults() {
  printf '%s\n' "$@" >"$TB_DIR/faults.new"
  mv -f "$TB_DIR/faults.new" "$TB_DIR/faults"
}

# tb_http_config FILE BODY [extra top-level lines...]: tb_config, with the
# handler named by its group: handler = { http = { BODY }; };
tb_http_config() {
  local file="$1" body="$2"
  shift 2
  tb_config "$file" "$@"
  python3 - "$file" "handler = { http = { $body }; };" <<'PY'
import sys
path, line = sys.argv[1], sys.argv[2]
lines = open(path).read().split("\n")
out = [line if l.startswith("handler = ") else l for l in lines]
open(path, "w").write("\n".join(out))
PY
}

# tb_http_effects [KEY_PATTERN]: "applied distinct" of the service's
# journal: effects, and the keys they were for (keys matching the
# pattern, a Python regex).
tb_http_effects() {
  python3 - "$TB_DIR/journal" "${1:-}" <<'PY'
import json, re, sys
recs = [json.loads(l) for l in open(sys.argv[1])]
keys = [r["key"] for r in recs if r["type"] == "apply"]
keys = [k for k in keys if re.search(sys.argv[2], k)]
print(len(keys), len(set(keys)))
PY
}
