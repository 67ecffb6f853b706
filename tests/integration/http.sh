# shellcheck shell=bash
# HTTP helpers for the scenarios that talk to dedupd's HTTP endpoint (in
# several folders), sourced after lib.sh: source "$(dirname "$0")/../http.sh".
# Python's urllib rather than curl: curl is not on every fresh machine.
#
#   (a port for the endpoint: tb_free_port, in lib.sh)
#   TH_URL=http://127.0.0.1:$port
#   th_status PATH            the HTTP status code (000: no answer)
#   th_body PATH              the body (any status)
#   th_metric 'SERIES'        a sample's value from /metrics, e.g.
#                             th_metric 'dedupd_dead_letters_total{route="default",reason="conflict"}'
#   th_wait_status SECS CODE PATH   polls until PATH answers CODE

_th_get() {
  python3 - "$TH_URL$2" "$1" <<'PY'
import sys, urllib.request, urllib.error
url, what = sys.argv[1], sys.argv[2]
try:
    with urllib.request.urlopen(url, timeout=5) as r:
        code, body = r.status, r.read()
except urllib.error.HTTPError as e:
    code, body = e.code, e.read()
except Exception as e:
    code, body = 0, str(e).encode()
sys.stdout.write("%03d\n" % code if what == "status" else body.decode("utf-8", "replace"))
PY
}

th_status() { _th_get status "$1"; }
th_body() { _th_get body "$1"; }

# The metrics page is fetched into $TB_DIR/metrics.txt by th_scrape; th_metric
# reads the last scrape so several values come from one consistent snapshot.
th_scrape() { th_body /metrics >"$TB_DIR/metrics.txt"; }
th_metric() {
  awk -v s="$1" 'substr($0, 1, length(s) + 1) == s " " { print substr($0, length(s) + 2) }' \
    "$TB_DIR/metrics.txt"
}

th_wait_status() {
  local secs="$1" code="$2" path="$3"
  tb_wait_until "$secs" "$path answers $code" _th_is_status "$code" "$path"
}
_th_is_status() { [[ "$(th_status "$2")" == "$1" ]]; }
