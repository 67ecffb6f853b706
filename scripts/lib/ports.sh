# shellcheck shell=bash
# Free TCP ports on 127.0.0.1 for the servers a test starts (HTTP
# endpoints, private MariaDB servers, Galera nodes). Source this file, then:
#
#   dd_free_ports [N]   N ports (default 1), one a line
#
# A port comes from below the kernel's ephemeral range
# (net.ipv4.ip_local_port_range), so no outgoing connection and no server
# bound to port 0 can take it between the pick and the server's bind, which
# may be seconds later. Each port is claimed by creating
# ${DD_PORTS_DIR:-$TMPDIR/dd-ports}/PORT, so tests running at once never get
# the same one. Claims older than a day are dropped.

dd_free_ports() {
  python3 - "${1:-1}" "${DD_PORTS_DIR:-${TMPDIR:-/tmp}/dd-ports}" <<'PY'
import os, random, socket, sys, time

n, claims = int(sys.argv[1]), sys.argv[2]
os.makedirs(claims, exist_ok=True)
try:
    with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
        eph_lo, eph_hi = (int(x) for x in f.read().split())
except (OSError, ValueError):
    eph_lo, eph_hi = 32768, 60999
lo, hi = (10000, eph_lo - 1) if eph_lo > 11000 else (eph_hi + 1, 65535)
for name in os.listdir(claims):
    try:
        if time.time() - os.stat(os.path.join(claims, name)).st_mtime > 86400:
            os.rmdir(os.path.join(claims, name))
    except OSError:
        pass
got = []
for _ in range(1000 * n):
    if len(got) == n:
        break
    port = random.randint(lo, hi)
    try:
        os.mkdir(os.path.join(claims, str(port)))
    except FileExistsError:
        continue
    s = socket.socket()
    try:
        s.bind(("127.0.0.1", port))  # in use by something else: keep the claim, pick again
    except OSError:
        continue
    finally:
        s.close()
    got.append(port)
if len(got) < n:
    sys.exit("dd_free_ports: no free port left in %d..%d (claims in %s)" % (lo, hi, claims))
print("\n".join(map(str, got)))
PY
}
