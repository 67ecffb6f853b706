# shellcheck shell=bash
# A three-node MariaDB Galera cluster on loopback, for tests.
#
# Each node lives in DIR/nN (datadir, socket, pid file, error log), started
# with --no-defaults as scripts/lib/mariadb.sh starts a single server, and
# listens on 127.0.0.1 on ports of its own: SQL, group communication,
# incremental and full state transfer, all picked free when the bed is
# created and kept in DIR/ports. Nodes join by state transfer (the stock
# rsync method, wrapped by scripts/lib/galera-sst/wsrep_sst_ddrsync so that
# it works as root too). Source this file (it sources mariadb.sh), then:
#
#   dd_galera_start DIR          create (if needed) and start all three
#                                nodes: node 1 bootstraps, 2 and 3 join
#   dd_galera_stop DIR           clean shutdown of every node
#   dd_galera_node_stop DIR N    clean shutdown of node N
#   dd_galera_node_kill9 DIR N   SIGKILL node N
#   dd_galera_node_rejoin DIR N  start node N again after a stop or a kill:
#                                after a kill its position is recovered
#                                (--wsrep-recover) so it catches up by
#                                incremental transfer; waits until synced
#   dd_galera_node_wipe DIR N    remove node N's data: its rejoin is a full
#                                state transfer
#   dd_galera_port DIR N         node N's SQL port
#   dd_galera_client DIR N [mariadb args...]   the client on node N
#   dd_galera_wait_size DIR N SIZE   wait until node N sees SIZE nodes synced
#
# The nodes are small (64 MB buffer pool) so that three fit beside the
# rest of a test run.

# shellcheck source=mariadb.sh
source "$(dirname "${BASH_SOURCE[0]}")/mariadb.sh"
# shellcheck source=ports.sh
source "$(dirname "${BASH_SOURCE[0]}")/ports.sh"

DD_GALERA_PROVIDER=${DD_GALERA_PROVIDER:-/usr/lib/galera/libgalera_smm.so}
DD_GALERA_SST_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")/galera-sst" && pwd)
DD_GALERA_TIMEOUT=${DD_GALERA_TIMEOUT:-90}

# _dd_galera_ports DIR N: "SQL GCOMM IST SST" of node N.
_dd_galera_ports() {
  sed -n "$2p" "$1/ports"
}

dd_galera_port() {
  _dd_galera_ports "$1" "$2" | cut -d' ' -f1
}

dd_galera_client() {
  local dir="$1" n="$2"
  shift 2
  dd_mariadb_client "$dir/n$n" "$@"
}

# The options of node N (all but --wsrep-new-cluster / start position).
# A node is suspected after 10 s of silence: a sanitizer build on a busy
# machine can stall a node for seconds, and two nodes that suspect each
# other both leave the primary component. A killed node is evicted as late.
_dd_galera_opts() {
  local dir="$1" n="$2" sql gc ist sst peers="" i
  read -r sql gc ist sst <<<"$(_dd_galera_ports "$dir" "$n")"
  for i in 1 2 3; do
    peers+="${peers:+,}127.0.0.1:$(_dd_galera_ports "$dir" "$i" | cut -d' ' -f2)"
  done
  printf '%s\n' \
    --port="$sql" --bind-address=127.0.0.1 \
    --innodb-buffer-pool-size=64M --innodb-log-file-size=48M \
    --binlog-format=ROW --innodb-autoinc-lock-mode=2 --default-storage-engine=InnoDB \
    --wsrep-on=ON --wsrep-provider="$DD_GALERA_PROVIDER" \
    --wsrep-cluster-name=dd_galera --wsrep-cluster-address="gcomm://$peers" \
    --wsrep-node-name="n$n" --wsrep-node-address="127.0.0.1:$gc" \
    --wsrep-node-incoming-address="127.0.0.1:$sql" \
    --wsrep-sst-receive-address="127.0.0.1:$sst" --wsrep-sst-method=ddrsync \
    --wsrep-provider-options="gmcast.listen_addr=tcp://127.0.0.1:$gc;ist.recv_addr=127.0.0.1:$ist;gcache.size=128M;evs.suspect_timeout=PT10S;evs.inactive_timeout=PT20S;evs.keepalive_period=PT1S;pc.announce_timeout=PT2S"
}

# _dd_galera_launch DIR N [extra mariadbd options]: starts node N, waits
# until it answers on its socket.
_dd_galera_launch() {
  local dir="$1" n="$2" opts
  shift 2
  mapfile -t opts < <(_dd_galera_opts "$dir" "$n")
  PATH="$DD_GALERA_SST_DIR:$PATH" DD_MARIADB_START_TIMEOUT=$DD_GALERA_TIMEOUT \
    dd_mariadb_restart "$dir/n$n" "${opts[@]}" "$@"
}

# dd_galera_wait_size DIR N SIZE: node N is synced in a cluster of SIZE.
dd_galera_wait_size() {
  local dir="$1" n="$2" want="$3" ticks=$((DD_GALERA_TIMEOUT * 5)) got
  while ((ticks-- > 0)); do
    got=$(dd_galera_client "$dir" "$n" -N -B -e "SELECT
            (SELECT VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS WHERE VARIABLE_NAME = 'wsrep_cluster_size'),
            (SELECT VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS WHERE VARIABLE_NAME = 'wsrep_local_state_comment')" 2>/dev/null |
      tr '\t' ' ')
    [[ "$got" == "$want Synced" ]] && return 0
    sleep 0.2
  done
  echo "galera: ERROR: node $n of $dir not synced in a cluster of $want (last: ${got:-no answer})" >&2
  tail -n 30 "$dir/n$n/mysqld.err" >&2
  return 1
}

# dd_galera_ready DIR N: node N is in the primary component and accepts
# queries (wsrep_ready); a node that is not answers every query with 1047.
dd_galera_ready() {
  [[ "$(dd_galera_client "$1" "$2" -N -B -e "SELECT VARIABLE_VALUE FROM
        information_schema.GLOBAL_STATUS WHERE VARIABLE_NAME = 'wsrep_ready'" 2>/dev/null)" == ON ]]
}

# Installs node N's datadir from the template (mariadb.sh).
_dd_galera_install() {
  mkdir -p "$1/n$2"
  _dd_mariadb_install "$(cd "$1/n$2" && pwd)"
}

dd_galera_start() {
  local dir="${1:?usage: dd_galera_start DIR}" n
  mkdir -p "$dir"
  dir=$(cd "$dir" && pwd)
  [[ -s "$dir/ports" ]] || dd_free_ports 12 | paste -d' ' - - - - >"$dir/ports"
  for n in 1 2 3; do _dd_galera_install "$dir" "$n" || return 1; done
  _dd_galera_launch "$dir" 1 --wsrep-new-cluster || return 1
  dd_galera_wait_size "$dir" 1 1 || return 1
  # The root user over TCP, as tests and dedupd connect to the nodes.
  dd_galera_client "$dir" 1 -e "CREATE USER IF NOT EXISTS 'root'@'127.0.0.1';
    GRANT ALL ON *.* TO 'root'@'127.0.0.1' WITH GRANT OPTION" || return 1
  for n in 2 3; do
    _dd_galera_launch "$dir" "$n" || return 1
    dd_galera_wait_size "$dir" "$n" "$n" || return 1
  done
}

dd_galera_node_stop() {
  dd_mariadb_stop "$1/n$2"
}

dd_galera_node_kill9() {
  dd_mariadb_kill9 "$1/n$2"
}

dd_galera_node_wipe() {
  rm -rf "$1/n$2/data"
  _dd_galera_install "$1" "$2"
  rm -f "$1/n$2/data/grastate.dat"
}

# The position a killed node's InnoDB recovered to (uuid:seqno), or empty.
_dd_galera_recover() {
  local dir="$1" n="$2" opts
  mapfile -t opts < <(_dd_galera_opts "$dir" "$n")
  mariadbd --no-defaults --datadir="$dir/n$n/data" --user="$(id -un)" \
    --log-error="$dir/n$n/recover.err" --skip-networking --socket="$dir/n$n/recover.sock" \
    --innodb-buffer-pool-size=64M --innodb-log-file-size=48M "${opts[@]}" \
    --wsrep-recover >/dev/null 2>&1 || true
  sed -n 's/.*WSREP: Recovered position: \([^ ]*:[0-9-]*\).*/\1/p' "$dir/n$n/recover.err" | tail -n 1
}

dd_galera_node_rejoin() {
  local dir="${1:?usage: dd_galera_node_rejoin DIR N}" n="$2" pos size
  dir=$(cd "$dir" && pwd)
  pos=$(_dd_galera_recover "$dir" "$n")
  if [[ -n "$pos" && "$pos" != *:-1 ]]; then
    _dd_galera_launch "$dir" "$n" --wsrep-start-position="$pos" || return 1
  else
    _dd_galera_launch "$dir" "$n" || return 1
  fi
  size=0
  for i in 1 2 3; do [[ -S "$dir/n$i/mysqld.sock" ]] && _dd_mariadb_alive "$dir/n$i" && size=$((size + 1)); done
  dd_galera_wait_size "$dir" "$n" "$size"
}

dd_galera_stop() {
  local dir="${1:?usage: dd_galera_stop DIR}" n
  for n in 3 2 1; do dd_mariadb_stop "$dir/n$n"; done
}
