#!/usr/bin/env bash
# 81: liveness means dedupd is wedged, not that its database is down. In
# the style of the shipped Kubernetes probes (deploy/kubernetes): the
# database is killed under traffic and stays down for 3 minutes, with
# messages in flight, longer than http.stuck_after (its default, 60 s,
# three times over). /healthz, polled every 3 s, answers 200 throughout
# (the liveness probe never restarts the sidecar), /readyz answers 503
# (after the first ping that fails). The database comes back: everything
# is applied exactly once (ledger, dedup rows) and the offsets are
# committed at the end. Test 46 holds the other side: a handler that
# hangs while the database answers fails /healthz.
source "$(dirname "$0")/../lib.sh"
source "$(dirname "$0")/../http.sh"
tb_init healthz_db_outage
tb_private_db
tb_mock payments:2
port=$(tb_free_port)
TH_URL="http://127.0.0.1:$port"
TB_WORKERS=2 TB_BATCH_MAX=50 tb_config "$TB_CONF" "http = { listen = \"127.0.0.1:$port\"; };"
tb_migrate || tb_die "migrate failed"
tb_gen --keys 1200 --dup-min 1 --dup-max 2 --partitions 2 --seed 81
n=$(wc -l <"$TB_DIR/stream.txt")
first=$((n / 3))
head -n "$first" "$TB_DIR/stream.txt" | tb_produce 2>/dev/null || tb_die "produce failed"
tb_start run
pid=$TB_LAST_PID
some() { (($(tb_sql "SELECT COUNT(*) FROM dedup_record WHERE status = 1") > 0)); }
tb_wait_until 60 "some keys applied" some || tb_die "nothing applied"
th_wait_status 30 200 /readyz || tb_die "never ready: $(th_body /readyz)"

tb_private_db_kill9
tb_log "database killed"
tail -n +"$((first + 1))" "$TB_DIR/stream.txt" | tb_produce 2>/dev/null || tb_die "produce failed"
healthy=0 sick=0 ready=0 unready=0 inflight=0 polls=0 first_sick=
end=$(($(date +%s) + 180))
while (($(date +%s) < end)); do
  h=$(th_status /healthz)
  r=$(th_status /readyz)
  polls=$((polls + 1))
  if [[ $h == 200 ]]; then healthy=$((healthy + 1)); else
    sick=$((sick + 1))
    [[ -n $first_sick ]] || first_sick="$h $(th_body /healthz)"
  fi
  if [[ $r == 503 ]]; then unready=$((unready + 1)); else ready=$((ready + 1)); fi
  th_scrape
  (($(th_metric dedupd_inflight_messages) > 0)) && inflight=$((inflight + 1))
  sleep 3
done
tb_log "$polls polls in 3 minutes: /healthz 200 x$healthy, other x$sick; /readyz 503 x$unready, other x$ready; messages in flight at $inflight"
tb_eq "/healthz 200 throughout the outage${first_sick:+ (first other: $first_sick)}" 0 "$sick"
tb_check "/readyz 503 during the outage (all but the first polls)" test "$ready" -le 2
tb_check "messages were in flight during the outage" test "$inflight" -ge $((polls - 3))
tb_check "dedupd kept running" kill -0 "$pid"

tb_private_db_restart
tb_log "database restarted"
at_end() { [[ "$(tb_committed | awk '{ print $1, $2 }')" == "$(tb_watermarks | awk '{ print $1, $3 }')" ]]; }
tb_wait_until 120 "everything committed after the outage" at_end || tb_die "not everything was committed"
th_wait_status 30 200 /readyz || true
tb_eq "/readyz 200 again" 200 "$(th_status /readyz)"
tb_eq "/healthz 200 after the outage" 200 "$(th_status /healthz)"
rc=0
tb_stop "$pid" || rc=$?
tb_eq "SIGTERM: exit 0" 0 "$rc"
tb_expect_ledger "$TB_DIR/expect.json"
tb_expect_outcome "$TB_DIR/expect.json"
tb_assert_committed_at_end
tb_done
