#!/usr/bin/env bash
# 74: the maintenance commands over every shard. With three shards (three
# MariaDB servers), `dedupd stats --format json` gives each shard's counts (equal
# to what SQL counts there) and their totals, the text a line per shard;
# `dedupd purge --dry-run` counts each shard's expired rows and deletes
# nothing; `dedupd purge` deletes exactly the expired finished rows of each
# shard, a line per shard, never a row in state 0 nor one that has not
# expired; --route still selects the table.
source "$(dirname "$0")/../lib.sh"
tb_init shards_commands
tb_mock payments:2
tb_shards 3
tb_config "$TB_CONF" "purge = { interval = \"0\"; batch = 3; };"
tb_migrate || tb_die "migrate failed"

# _rows SHARD PREFIX COUNT STATUS EXPIRE_SQL: inserts rows directly.
_rows() {
  local sql="INSERT INTO dedup_record (biz_key, request_hash, status, error, topic, kpartition,"
  sql+=" koffset, created_at, expire_at) VALUES "
  for i in $(seq 1 "$3"); do
    ((i > 1)) && sql+=","
    sql+="('$2:$i', UNHEX(SHA2('$2:$i', 256)), $4, IF($4 = 2, 'rejected in shard $1', NULL),"
    sql+=" 'payments', 0, $i, NOW(6) - INTERVAL 10 DAY, $5)"
  done
  tb_shard_sql "$1" "$sql"
}
past='NOW(6) - INTERVAL 1 DAY'
future='NOW(6) + INTERVAL 1 DAY'
# Shard s: 2+s expired applied, 1 expired failed, 1 expired processing,
# 3 unexpired applied (s = 0, 1, 2): each shard's counts differ.
for s in 0 1 2; do
  _rows "$s" "old-applied-$s" $((2 + s)) 1 "$past"
  _rows "$s" "old-failed-$s" 1 2 "$past"
  _rows "$s" "old-processing-$s" 1 0 "$past"
  _rows "$s" "new-applied-$s" 3 1 "$future"
done

"$DEDUPD" stats -c "$TB_CONF" --format json >"$TB_DIR/stats.json" 2>"$TB_DIR/stats.err" ||
  tb_die "dedupd stats --format json failed: $(cat "$TB_DIR/stats.err")"
sj() { python3 -c 'import json,sys; s=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$TB_DIR/stats.json" "$1"; }
tb_eq "stats json: three shards, in order" "0 1 2" \
  "$(sj '" ".join(str(x["shard"]) for x in s["table"]["shards"])')"
for s in 0 1 2; do
  want=$(tb_shard_sql "$s" "SELECT COUNT(*), COALESCE(SUM(status = 1), 0), COALESCE(SUM(status = 2), 0),
    COALESCE(SUM(status = 0), 0), COALESCE(SUM(expire_at < NOW(6) AND status <> 0), 0)
    FROM dedup_record" | tr '\t' ' ')
  tb_eq "stats json: shard $s's counts are SQL's there" "$want" \
    "$(sj '" ".join(str(s["table"]["shards"]['"$s"'][k]) for k in ("rows", "applied", "failed", "processing", "expired_awaiting_purge"))')"
done
tb_eq "stats json: totals over the shards" "24 18 3 3 12" \
  "$(sj '" ".join(str(s["table"][k]) for k in ("rows", "applied", "failed", "processing", "expired_awaiting_purge"))')"
tb_eq "stats json: the totals' failed rows by error, merged" \
  "rejected in shard 0:1 rejected in shard 1:1 rejected in shard 2:1" \
  "$(sj '" ".join("%s:%d" % (e["error"], e["rows"]) for e in s["table"]["failed_by_error"])')"

"$DEDUPD" stats -c "$TB_CONF" >"$TB_DIR/stats.txt" 2>&1 || tb_die "dedupd stats failed: $(cat "$TB_DIR/stats.txt")"
tb_check "stats text: the table in 3 shards" grep -q '^table  *dedup_record in 3 shards (totals)$' "$TB_DIR/stats.txt"
tb_check "stats text: total rows" grep -q '^rows  *24$' "$TB_DIR/stats.txt"
tb_check "stats text: shard 2's line" \
  grep -Eq "^  shard 2 +9: 7/1/1; 5  \(${TB_SHARD_SOCKETS[2]}, $TB_DB\)$" "$TB_DIR/stats.txt"

out=$("$DEDUPD" purge -c "$TB_CONF" --dry-run 2>"$TB_DIR/purge.err") ||
  tb_die "dedupd purge --dry-run failed: $(cat "$TB_DIR/purge.err")"
tb_eq "purge --dry-run: a line per shard" \
  "would delete 3 expired rows from dedup_record in shard 0 in 1 batch (dry run: nothing deleted)
would delete 4 expired rows from dedup_record in shard 1 in 2 batches (dry run: nothing deleted)
would delete 5 expired rows from dedup_record in shard 2 in 2 batches (dry run: nothing deleted)" "$out"
tb_eq "purge --dry-run deleted nothing" "7 8 9" \
  "$(for s in 0 1 2; do tb_shard_sql "$s" 'SELECT COUNT(*) FROM dedup_record'; done | paste -sd' ')"

out=$("$DEDUPD" purge -c "$TB_CONF" 2>"$TB_DIR/purge.err") || tb_die "dedupd purge failed: $(cat "$TB_DIR/purge.err")"
tb_eq "purge: a line per shard" \
  "deleted 3 expired rows from dedup_record in shard 0 in 1 batch
deleted 4 expired rows from dedup_record in shard 1 in 2 batches
deleted 5 expired rows from dedup_record in shard 2 in 2 batches" "$out"
for s in 0 1 2; do
  tb_eq "shard $s: no expired finished row left" 0 \
    "$(tb_shard_sql "$s" 'SELECT COUNT(*) FROM dedup_record WHERE expire_at < NOW(6) AND status <> 0')"
  tb_eq "shard $s: the expired row in state 0 kept" 1 \
    "$(tb_shard_sql "$s" "SELECT COUNT(*) FROM dedup_record WHERE biz_key LIKE 'old-processing-%'")"
  tb_eq "shard $s: the unexpired rows kept" 3 \
    "$(tb_shard_sql "$s" "SELECT COUNT(*) FROM dedup_record WHERE biz_key LIKE 'new-applied-$s:%'")"
done
tb_eq "purge --route default: every shard, nothing left to delete" \
  "deleted 0 expired rows from dedup_record in shard 0 in 0 batches
deleted 0 expired rows from dedup_record in shard 1 in 0 batches
deleted 0 expired rows from dedup_record in shard 2 in 0 batches" \
  "$("$DEDUPD" purge -c "$TB_CONF" --route default 2>/dev/null)"

# A shard that cannot be read fails the command, naming it; the others are
# purged all the same.
_rows 0 again-0 2 1 "$past"
_rows 2 again-2 2 1 "$past"
tb_shard_sql 1 "REVOKE DELETE ON \`$TB_DB\`.\`dedup_record\` FROM '$TB_RT_USER'@'%'"
rc=0
out=$("$DEDUPD" purge -c "$TB_CONF" 2>"$TB_DIR/purge.err") || rc=$?
tb_eq "purge with shard 1 refusing: exit 1" 1 "$rc"
tb_check "purge: the error names shard 1" grep -q 'dedupd purge: shard 1: ' "$TB_DIR/purge.err"
tb_eq "purge: shards 0 and 2 purged all the same" "0 0" \
  "$(for s in 0 2; do tb_shard_sql "$s" "SELECT COUNT(*) FROM dedup_record WHERE biz_key LIKE 'again-%'"; done | paste -sd' ')"
tb_done
