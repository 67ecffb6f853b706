/*
 * `dedupd replay`'s report: every verdict that is not `applied` (and with
 * --orphans the dedup rows of the range whose key never showed up), in
 * topic/partition/offset order, streamed from the temporary tables as JSON
 * or CSV, and a summary table on stderr.
 */
#include "dd_replay_int.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "dd_common.h"
#include "dd_text.h"
#include "dd_utf8.h"

static const char *const dd_replay_status_names[DD_RS_CNT] = {
    "none",       "applied", "missing",     "conflict", "failed",
    "processing", "pending", "wrong_shard", "bad"};

static const char *const dd_replay_apply_names[DD_RA_CNT] = {"none", "repaired", "already_applied",
                                                             "failed", "not_repaired"};
static const char *const dd_replay_row_names[3] = {"processing", "applied", "failed"};

/* One line of the report, from dd_replay_key / dd_replay_event (a verdict)
 * or from dd_replay_orphan (status "orphan"). NULL fields are left out. */
typedef struct {
    const char *route; /* its route's name, with routes; NULL without */
    const char *shard; /* the key's shard, with mysql.shards; NULL without or for a bad message */
    const char *row_shard; /* wrong_shard: the shard holding its row */
    const char *status, *reason, *topic;
    const char *partition, *offset;
    const char *key; /* the business key, bytes */
    size_t key_len;
    const char *kafka_key; /* the message's Kafka key, bytes; NULL: none */
    size_t kafka_key_len;
    const char *hash, *stored_hash, *detail, *apply, *apply_error, *row_status, *created_at;
} dd_replay_entry_t;

/* A key is reported as text when it is printable UTF-8 (no control
 * characters), else in hex: JSON and CSV readers, and the eye, then get
 * the same bytes back. Business keys and Kafka keys alike. */
static int dd_replay_printable(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)s[i] < 0x20 || s[i] == 0x7f) return 0;
    return dd_utf8_valid(s, n);
}

static void dd_replay_hex_fputs(FILE *out, const char *s, size_t n)
{
    char hex[2];

    for (size_t i = 0; i < n; i++) {
        dd_text_hex(hex, s + i, 1, 0);
        fwrite(hex, 1, 2, out);
    }
}

void dd_replay_json_key(FILE *out, const char *name, const char *key, size_t len, int first)
{
    fprintf(out, "%s\"%s\":", first ? "" : ",", name);
    if (key && dd_replay_printable(key, len)) {
        dd_text_json_fputs(out, key, len, 0);
        return;
    }
    fputs("null", out);
    if (!key) return;
    fprintf(out, ",\"%s_hex\":\"", name);
    dd_replay_hex_fputs(out, key, len);
    fputc('"', out);
}

static void dd_replay_json_field(FILE *out, const char *name, const char *v, int number)
{
    if (!v) return;
    fprintf(out, ",\"%s\":", name);
    if (number)
        fputs(v, out);
    else
        dd_text_json_fputs(out, v, strlen(v), 0);
}

static void dd_replay_json_entry(FILE *out, const dd_replay_entry_t *e, int first)
{
    fputs(first ? "\n    {" : ",\n    {", out);
    dd_replay_json_key(out, "key", e->key, e->key_len, 1);
    dd_replay_json_field(out, "route", e->route, 0);
    dd_replay_json_field(out, "shard", e->shard, 1);
    dd_replay_json_field(out, "status", e->status, 0);
    dd_replay_json_field(out, "reason", e->reason, 0);
    dd_replay_json_field(out, "topic", e->topic, 0);
    dd_replay_json_field(out, "partition", e->partition, 1);
    dd_replay_json_field(out, "offset", e->offset, 1);
    if (e->topic && !e->row_status) /* a message (an orphan is a row) */
        dd_replay_json_key(out, "kafka_key", e->kafka_key, e->kafka_key_len, 0);
    dd_replay_json_field(out, "hash", e->hash, 0);
    dd_replay_json_field(out, "stored_hash", e->stored_hash, 0);
    dd_replay_json_field(out, "row_shard", e->row_shard, 1);
    dd_replay_json_field(out, "row_status", e->row_status, 0);
    dd_replay_json_field(out, "created_at", e->created_at, 0);
    dd_replay_json_field(out, "detail", e->detail, 0);
    dd_replay_json_field(out, "apply", e->apply, 0);
    dd_replay_json_field(out, "apply_error", e->apply_error, 0);
    fputc('}', out);
}

void dd_replay_csv_field(FILE *out, const char *v, size_t n, int last)
{
    if (v && strcspn(v, ",\"\r\n") < n) {
        fputc('"', out);
        for (size_t i = 0; i < n; i++) {
            if (v[i] == '"') fputc('"', out);
            fputc(v[i], out);
        }
        fputc('"', out);
    } else if (v) {
        fwrite(v, 1, n, out);
    }
    fputc(last ? '\n' : ',', out);
}

void dd_replay_csv_key(FILE *out, const char *key, size_t len)
{
    if (key && dd_replay_printable(key, len)) {
        dd_replay_csv_field(out, key, len, 0);
        fputc(',', out);
        return;
    }
    fputc(',', out);
    if (key) dd_replay_hex_fputs(out, key, len);
    fputc(',', out);
}

#define DD_REPLAY_CSV_COLUMNS                                                                      \
    "status,reason,topic,partition,offset,key,key_hex,kafka_key,kafka_key_hex,hash,stored_hash,"   \
    "detail,apply,apply_error"

/* routes, shards: whether the route and shard columns are there (the
 * header's). */
static void dd_replay_csv_entry(FILE *out, const dd_replay_entry_t *e, int routes, int shards)
{
    const char *v[] = {e->status, e->reason, e->topic, e->partition, e->offset};
    char detail[1200];

    for (size_t i = 0; i < DD_ARRAY_LEN(v); i++)
        dd_replay_csv_field(out, v[i], v[i] ? strlen(v[i]) : 0, 0);
    dd_replay_csv_key(out, e->key, e->key_len);
    dd_replay_csv_key(out, e->kafka_key, e->kafka_key_len);
    dd_replay_csv_field(out, e->hash, e->hash ? strlen(e->hash) : 0, 0);
    dd_replay_csv_field(out, e->stored_hash, e->stored_hash ? strlen(e->stored_hash) : 0, 0);
    if (e->row_status)
        snprintf(detail, sizeof(detail), "row status %s, created %s", e->row_status,
                 e->created_at ? e->created_at : "?");
    else
        snprintf(detail, sizeof(detail), "%s", e->detail ? e->detail : "");
    dd_replay_csv_field(out, detail, strlen(detail), 0);
    dd_replay_csv_field(out, e->apply, e->apply ? strlen(e->apply) : 0, 0);
    dd_replay_csv_field(out, e->apply_error, e->apply_error ? strlen(e->apply_error) : 0,
                        !routes && !shards);
    if (routes) dd_replay_csv_field(out, e->route, e->route ? strlen(e->route) : 0, !shards);
    if (shards) dd_replay_csv_field(out, e->shard, e->shard ? strlen(e->shard) : 0, 1);
}

static const char *dd_replay_name(const char *const *names, int cnt, const char *num)
{
    int v = num ? atoi(num) : -1;

    return v >= 0 && v < cnt ? names[v] : "unknown";
}

/* The name of route r for an entry, with routes; NULL without. */
static const char *dd_replay_route_name(const dd_replay_t *rp, const char *r)
{
    int v = r ? atoi(r) : -1;

    if (!rp->conf->has_routes || v < 0 || v >= rp->conf->route_cnt) return NULL;
    return rp->conf->routes[v].name;
}

/* Streams the verdicts that are not `applied`, in topic/partition/offset
 * order, to the report. Returns 0 or DD_ERR_FATAL. */
static int dd_replay_write_entries(dd_replay_t *rp, FILE *out, char *errstr, size_t errstr_size)
{
    static const char cols[] = "status, reason, topic, kpartition, koffset, biz_key, "
                               "LOWER(HEX(msg_hash)), LOWER(HEX(stored_hash)), detail, kafka_key, "
                               "route, shard";
    static const char key_cols[] = "row_shard, outcome, outcome_error";
    MYSQL_RES *res;
    MYSQL_ROW row;
    int n = 0;

    dd_buf_reset(&rp->sql);
    dd_buf_printf(&rp->sql,
                  "SELECT %s, %s FROM dd_replay_key WHERE status <> %d "
                  "UNION ALL SELECT %s, NULL, 0, NULL FROM dd_replay_event ORDER BY 3, 4, 5",
                  cols, key_cols, DD_RS_APPLIED, cols);
    /* columns: 0-9 cols, 10 route, 11 shard, 12 row_shard, 13 outcome, 14 outcome_error */
    if (!(res = dd_replay_query(rp, 1, errstr, errstr_size))) return DD_ERR_FATAL;
    while ((row = mysql_fetch_row(res))) {
        unsigned long *len = mysql_fetch_lengths(res);
        int outcome = atoi(row[13]);
        dd_replay_entry_t e = {
            .route = dd_replay_route_name(rp, row[10]),
            .shard = rp->conf->shard_cnt > 1 ? row[11] : NULL,
            .status = dd_replay_name(dd_replay_status_names, DD_RS_CNT, row[0]),
            .reason = row[1],
            .topic = row[2],
            .partition = row[3],
            .offset = row[4],
            .key = row[5],
            .key_len = len[5],
            .hash = row[6],
            .stored_hash = row[7],
            .detail = row[8],
            .kafka_key = row[9],
            .kafka_key_len = len[9],
            .row_shard = row[12],
            .apply_error = row[14],
            .apply = outcome ? dd_replay_name(dd_replay_apply_names, DD_RA_CNT, row[13]) : NULL,
        };
        if (rp->args->csv)
            dd_replay_csv_entry(out, &e, rp->conf->has_routes, rp->conf->shard_cnt > 1);
        else
            dd_replay_json_entry(out, &e, n == 0);
        n++;
    }
    mysql_free_result(res);
    return DD_OK;
}

/* Streams the rows of rp->sql run in shard from into table in shard to,
 * 500 rows per INSERT: replay's working set crossing between shards'
 * sessions (the keys of the range to a shard's anti-join, its orphans
 * back to shard 0). Binary columns go as hex, numbers as they are. */
static int dd_replay_copy(dd_replay_t *rp, int from, int to, const char *table, char *errstr,
                          size_t errstr_size)
{
    MYSQL *quote = dd_db_mysql(rp->sdb[to]);
    MYSQL_RES *res = dd_replay_shard_query(rp, from, 1, errstr, errstr_size);
    MYSQL_FIELD *f;
    MYSQL_ROW row;
    unsigned nf;
    int rc = DD_OK, n = 0;

    if (!res) return DD_ERR_FATAL;
    f = mysql_fetch_fields(res);
    nf = mysql_num_fields(res);
    for (;;) {
        row = rc ? NULL : mysql_fetch_row(res);
        if (n > 0 && (!row || n == DD_REPLAY_BATCH)) {
            rc = rp->sql.oom ? DD_ERR_NOMEM
                             : dd_db_exec(rp->sdb[to], rp->sql.p, rp->sql.len, errstr, errstr_size);
            n = 0;
        }
        if (!row) break;
        if (rc) continue; /* dropped: mysql_free_result drains the rest */
        unsigned long *len = mysql_fetch_lengths(res);
        if (n == 0) {
            dd_buf_reset(&rp->sql);
            dd_buf_printf(&rp->sql, "INSERT INTO %s VALUES ", table);
        }
        dd_buf_puts(&rp->sql, n++ ? ",(" : "(");
        for (unsigned i = 0; i < nf; i++) {
            if (i) dd_buf_puts(&rp->sql, ",");
            if (!row[i])
                dd_buf_puts(&rp->sql, "NULL");
            else if (IS_NUM(f[i].type))
                dd_buf_printf(&rp->sql, "%.*s", (int)len[i], row[i]);
            else if (f[i].charsetnr == 63 && f[i].type != MYSQL_TYPE_DATETIME &&
                     f[i].type != MYSQL_TYPE_TIMESTAMP)
                dd_db_hex(&rp->sql, row[i], len[i]);
            else
                dd_db_quote(&rp->sql, quote, row[i], len[i]);
        }
        dd_buf_puts(&rp->sql, ")");
    }
    if (!rc && mysql_errno(dd_db_mysql(rp->sdb[from]))) {
        MYSQL *m = dd_db_mysql(rp->sdb[from]);
        dd_errstr_set(errstr, errstr_size, "shard %d: %u: %s", from, mysql_errno(m),
                      mysql_error(m));
        rc = DD_ERR_FATAL;
    }
    if (rc == DD_ERR_NOMEM)
        dd_errstr_set(errstr, errstr_size, "out of memory building a statement");
    mysql_free_result(res);
    return rc;
}

/* --orphans of route r in shard s: its dedup rows whose first-seen
 * position is in the replayed range of its topics, but whose key never
 * showed up in it. The anti-join runs in s (a full scan of the dedup
 * table: it has no index on topic/partition/offset): in shard 0 against
 * dd_replay_key, into dd_replay_orphan; in another shard against
 * dd_replay_okey, the keys routed there (dd_replay_shard_keys), its rows
 * then copied to dd_replay_orphan, where dd_replay_find_orphans drops
 * those whose key the range routed to another shard. */
static int dd_replay_route_orphans(dd_replay_t *rp, int r, int s, char *errstr, size_t errstr_size)
{
    MYSQL *mysql = dd_db_mysql(rp->db);
    int any = 0;

    dd_buf_reset(&rp->sql);
    if (s == 0)
        dd_buf_printf(&rp->sql,
                      "INSERT INTO dd_replay_orphan SELECT %d, 0, d.biz_key, d.topic, "
                      "d.kpartition, d.koffset, d.status, d.request_hash, d.created_at FROM `%s` "
                      "d WHERE NOT EXISTS (SELECT 1 FROM dd_replay_key k WHERE k.route = %d AND "
                      "k.biz_key = d.biz_key) AND (FALSE",
                      r, rp->conf->routes[r].dedup.table, r);
    else
        dd_buf_printf(&rp->sql,
                      "SELECT %d, %d, d.biz_key, d.topic, d.kpartition, d.koffset, d.status, "
                      "d.request_hash, d.created_at FROM `%s` d WHERE NOT EXISTS (SELECT 1 FROM "
                      "dd_replay_okey k WHERE k.route = %d AND k.biz_key = d.biz_key) AND (FALSE",
                      r, s, rp->conf->routes[r].dedup.table, r);
    for (int i = 0; i < rp->part_cnt; i++) {
        const dd_replay_part_t *pt = &rp->parts[i];
        if (pt->route != r || pt->start >= pt->end) continue;
        dd_buf_puts(&rp->sql, " OR (d.topic = ");
        dd_db_quote(&rp->sql, mysql, pt->topic, strlen(pt->topic));
        dd_buf_printf(&rp->sql,
                      " AND d.kpartition = %d AND d.koffset >= %lld AND d.koffset < %lld)",
                      (int)pt->partition, (long long)pt->start, (long long)pt->end);
        any = 1;
    }
    dd_buf_puts(&rp->sql, ")");
    if (!any) return DD_OK;
    if (s == 0) return dd_replay_exec(rp, rp->sql.p, rp->sql.len, errstr, errstr_size);
    return dd_replay_copy(rp, s, 0, "dd_replay_orphan", errstr, errstr_size);
}

/* The keys of the range routed to shard s (s > 0), from dd_replay_key in
 * shard 0's session into dd_replay_okey in s's, for its anti-join. */
static int dd_replay_shard_keys(dd_replay_t *rp, int s, char *errstr, size_t errstr_size)
{
    static const char ddl[] = "CREATE TEMPORARY TABLE dd_replay_okey (route SMALLINT NOT NULL,"
                              " biz_key VARBINARY(255) NOT NULL, PRIMARY KEY (route, biz_key))"
                              " ENGINE=InnoDB";
    int rc = dd_db_exec(rp->sdb[s], ddl, strlen(ddl), errstr, errstr_size);

    if (rc) {
        char msg[800];
        snprintf(msg, sizeof(msg), "%.700s", errstr);
        dd_errstr_set(errstr, errstr_size, "shard %d: %s", s, msg);
        return rc;
    }
    dd_buf_reset(&rp->sql);
    dd_buf_printf(&rp->sql, "SELECT route, biz_key FROM dd_replay_key WHERE shard = %d", s);
    return dd_replay_copy(rp, 0, s, "dd_replay_okey", errstr, errstr_size);
}

/* --orphans: every shard's, every route's (dd_replay_route_orphans), into
 * a temporary table in shard 0's session. An orphan's key is in no shard
 * in the range, as without shards. */
static int dd_replay_find_orphans(dd_replay_t *rp, char *errstr, size_t errstr_size)
{
    static const char ddl[] =
        "CREATE TEMPORARY TABLE dd_replay_orphan (route SMALLINT NOT NULL, shard SMALLINT NOT NULL,"
        " biz_key VARBINARY(255) NOT NULL, topic VARCHAR(249) NOT NULL, kpartition INT NOT NULL,"
        " koffset BIGINT NOT NULL, status TINYINT NOT NULL, request_hash BINARY(32) NOT NULL,"
        " created_at DATETIME(6) NOT NULL) ENGINE=InnoDB";
    MYSQL_RES *res;
    MYSQL_ROW row;
    int rc = dd_replay_exec(rp, ddl, strlen(ddl), errstr, errstr_size);

    for (int s = 0; !rc && s < rp->conf->shard_cnt; s++) {
        if (s > 0) rc = dd_replay_shard_keys(rp, s, errstr, errstr_size);
        for (int r = 0; !rc && r < rp->conf->route_cnt; r++)
            rc = dd_replay_route_orphans(rp, r, s, errstr, errstr_size);
    }
    if (!rc && rp->conf->shard_cnt > 1) {
        /* A row left in a shard its key's route does not name, the key in
         * the range: not an orphan (without a row in its own shard, the
         * key is wrong_shard). Rare: one statement. */
        static const char drop[] =
            "DELETE FROM dd_replay_orphan WHERE shard > 0 AND EXISTS (SELECT 1 FROM "
            "dd_replay_key k WHERE k.route = dd_replay_orphan.route AND k.biz_key = "
            "dd_replay_orphan.biz_key)";
        dd_buf_reset(&rp->sql);
        rc = dd_replay_exec(rp, drop, strlen(drop), errstr, errstr_size);
    }
    if (rc) return rc;
    dd_buf_reset(&rp->sql);
    dd_buf_puts(&rp->sql, "SELECT COUNT(*) FROM dd_replay_orphan");
    if (!(res = dd_replay_query(rp, 0, errstr, errstr_size))) return DD_ERR_FATAL;
    if ((row = mysql_fetch_row(res))) rp->sum.orphans = strtoull(row[0], NULL, 10);
    mysql_free_result(res);
    return DD_OK;
}

static int dd_replay_write_orphans(dd_replay_t *rp, FILE *out, char *errstr, size_t errstr_size)
{
    MYSQL_RES *res;
    MYSQL_ROW row;
    int n = 0;

    dd_buf_reset(&rp->sql);
    dd_buf_puts(&rp->sql,
                "SELECT biz_key, topic, kpartition, koffset, status, "
                "LOWER(HEX(request_hash)), created_at, route, shard FROM dd_replay_orphan "
                "ORDER BY topic, kpartition, koffset");
    if (!(res = dd_replay_query(rp, 1, errstr, errstr_size))) return DD_ERR_FATAL;
    while ((row = mysql_fetch_row(res))) {
        unsigned long *len = mysql_fetch_lengths(res);
        dd_replay_entry_t e = {
            .route = dd_replay_route_name(rp, row[7]),
            .shard = rp->conf->shard_cnt > 1 ? row[8] : NULL,
            .status = "orphan",
            .reason = "key_not_in_range",
            .key = row[0],
            .key_len = len[0],
            .topic = row[1],
            .partition = row[2],
            .offset = row[3],
            .row_status = dd_replay_name(dd_replay_row_names, 3, row[4]),
            .stored_hash = row[5],
            .created_at = row[6],
        };
        if (rp->args->csv)
            dd_replay_csv_entry(out, &e, rp->conf->has_routes, rp->conf->shard_cnt > 1);
        else
            dd_replay_json_entry(out, &e, n == 0);
        n++;
    }
    mysql_free_result(res);
    return DD_OK;
}

/* The summary's name=value pairs, shared by the JSON object, the CSV
 * trailer and the table on stderr. */
typedef struct {
    const char *name;
    uint64_t value;
    int sub; /* a line of the bad-message breakdown */
} dd_replay_kv_t;

static size_t dd_replay_kvs(const dd_replay_t *rp, dd_replay_kv_t *kv)
{
    const dd_replay_sum_t *s = &rp->sum;
    size_t n = 0;

    kv[n++] = (dd_replay_kv_t){"messages", s->messages, 0};
    kv[n++] = (dd_replay_kv_t){"keys", s->keys, 0};
    for (int i = DD_RS_APPLIED; i < DD_RS_CNT; i++)
        if (i != DD_RS_WRONG_SHARD || rp->conf->shard_cnt > 1) /* only shards have it */
            kv[n++] = (dd_replay_kv_t){dd_replay_status_names[i], s->status[i], 0};
    for (int i = DD_REASON_BAD_JSON; i <= DD_REASON_PAYLOAD_TOO_LARGE; i++)
        kv[n++] = (dd_replay_kv_t){dd_reason2str((dd_reason_t)i), s->bad[i], 1};
    for (int r = 0; r < rp->conf->route_cnt; r++) {
        if (rp->conf->routes[r].dedup.format != DD_FORMAT_AVRO) continue;
        kv[n++] = (dd_replay_kv_t){"schema_unknown", s->bad[DD_REASON_SCHEMA_UNKNOWN], 1};
        kv[n++] = (dd_replay_kv_t){"bad_avro", s->bad[DD_REASON_BAD_AVRO], 1};
        break;
    }
    kv[n++] = (dd_replay_kv_t){"tombstone", s->bad[DD_REASON_TOMBSTONE], 1};
    if (s->tombstones_skipped)
        kv[n++] = (dd_replay_kv_t){"tombstones_skipped", s->tombstones_skipped, 0};
    kv[n++] = (dd_replay_kv_t){"copy_conflicts", s->copy_conflicts, 0};
    if (rp->args->apply) {
        kv[n++] = (dd_replay_kv_t){"repaired", s->apply[DD_RA_REPAIRED], 0};
        kv[n++] = (dd_replay_kv_t){"already_applied", s->apply[DD_RA_ALREADY_APPLIED], 0};
        kv[n++] = (dd_replay_kv_t){"apply_failed", s->apply[DD_RA_FAILED], 0};
    }
    if (rp->args->orphans) kv[n++] = (dd_replay_kv_t){"orphans", s->orphans, 0};
    return n;
}

#define DD_REPLAY_KV_MAX 24

void dd_replay_json_range(FILE *out, const dd_replay_part_t *pt, int first)
{
    fputs(first ? "\n    {\"topic\":" : ",\n    {\"topic\":", out);
    dd_text_json_fputs(out, pt->topic, strlen(pt->topic), 0);
    fprintf(out, ",\"partition\":%d,\"from\":%lld,\"to\":%lld,\"read_to\":%lld", (int)pt->partition,
            (long long)pt->start, (long long)pt->end, (long long)pt->pos);
}

/* "summary": {...}, "ranges": [...] (without the braces around them): the
 * head of the JSON report, and the whole of --summary FILE. */
static void dd_replay_write_summary(dd_replay_t *rp, FILE *out, int complete)
{
    dd_replay_kv_t kv[DD_REPLAY_KV_MAX];
    size_t n = dd_replay_kvs(rp, kv);

    fprintf(out, "  \"summary\": {\"mode\":\"%s\",\"complete\":%s",
            rp->args->apply ? "apply" : "report", complete ? "true" : "false");
    for (size_t i = 0; i < n; i++)
        fprintf(out, ",\"%s\":%llu", kv[i].name, (unsigned long long)kv[i].value);
    fprintf(out, ",\"findings\":%llu},\n  \"ranges\": [",
            (unsigned long long)dd_replay_findings(rp));
    for (int i = 0; i < rp->part_cnt; i++) {
        const dd_replay_part_t *pt = &rp->parts[i];
        dd_replay_json_range(out, pt, i == 0);
        if (pt->group_committed >= 0)
            fprintf(out, ",\"group_committed\":%lld}", (long long)pt->group_committed);
        else
            fputs(",\"group_committed\":null}", out);
    }
    fputs("\n  ]", out);
}

void dd_replay_csv_head(const dd_replay_t *rp, FILE *out, const char *columns)
{
    /* with routes, each entry's route in a column of its own, after the
     * others; with shards, its shard after that, the last */
    fprintf(out, "%s%s%s\n", columns, rp->conf->has_routes ? ",route" : "",
            rp->conf->shard_cnt > 1 ? ",shard" : "");
}

/* The report: JSON (summary, ranges, entries, orphans) or CSV (a header
 * line and the entries, nothing else: the summary goes to stderr and to
 * --summary FILE, so strict CSV readers take the file as it is). */
static int dd_replay_write(dd_replay_t *rp, FILE *out, int complete, char *errstr,
                           size_t errstr_size)
{
    int rc;

    if (rp->args->csv) {
        dd_replay_csv_head(rp, out, DD_REPLAY_CSV_COLUMNS);
    } else {
        fputs("{\n", out);
        dd_replay_write_summary(rp, out, complete);
        fputs(",\n  \"entries\": [", out);
    }
    rc = dd_replay_write_entries(rp, out, errstr, errstr_size);
    if (!rc && rp->args->orphans && !rp->args->csv) fputs("\n  ],\n  \"orphans\": [", out);
    if (!rc && rp->args->orphans) rc = dd_replay_write_orphans(rp, out, errstr, errstr_size);
    if (!rp->args->csv) fputs("\n  ]\n}\n", out);
    return rc;
}

/* Opens path for writing (NULL: stdout), runs write, and closes it,
 * turning every write error into DD_ERR_IO. */
static int dd_replay_write_file(dd_replay_t *rp, const char *path,
                                int (*write)(dd_replay_t *, FILE *, int, char *, size_t),
                                int complete, char *errstr, size_t errstr_size)
{
    FILE *out = path ? fopen(path, "w") : stdout;
    int rc;

    if (!out) {
        dd_errstr_set(errstr, errstr_size, "cannot write %s: %s", path, strerror(errno));
        return DD_ERR_IO;
    }
    rc = write(rp, out, complete, errstr, errstr_size);
    if (fflush(out) != 0 || ferror(out)) {
        if (!rc)
            dd_errstr_set(errstr, errstr_size, "writing %s: %s", path ? path : "stdout",
                          strerror(errno));
        rc = rc ? rc : DD_ERR_IO;
    }
    if (path && fclose(out) != 0 && !rc) {
        dd_errstr_set(errstr, errstr_size, "writing %s: %s", path, strerror(errno));
        rc = DD_ERR_IO;
    }
    return rc;
}

static int dd_replay_write_summary_file(dd_replay_t *rp, FILE *out, int complete, char *errstr,
                                        size_t errstr_size)
{
    (void)errstr;
    (void)errstr_size;
    fputs("{\n", out);
    dd_replay_write_summary(rp, out, complete);
    fputs("\n}\n", out);
    return DD_OK;
}

int dd_replay_report(dd_replay_t *rp, int complete, char *errstr, size_t errstr_size)
{
    int rc = DD_OK;

    if (rp->args->orphans) rc = dd_replay_find_orphans(rp, errstr, errstr_size);
    if (!rc)
        rc = dd_replay_write_file(rp, rp->args->report, dd_replay_write, complete, errstr,
                                  errstr_size);
    if (!rc && rp->args->summary)
        rc = dd_replay_write_file(rp, rp->args->summary, dd_replay_write_summary_file, complete,
                                  errstr, errstr_size);
    return rc;
}

uint64_t dd_replay_findings(const dd_replay_t *rp)
{
    const dd_replay_sum_t *s = &rp->sum;
    uint64_t open = s->status[DD_RS_MISSING] + s->status[DD_RS_FAILED];
    uint64_t fixed = s->apply[DD_RA_REPAIRED] + s->apply[DD_RA_ALREADY_APPLIED];

    return (open > fixed ? open - fixed : 0) + s->status[DD_RS_CONFLICT] + s->copy_conflicts +
           s->status[DD_RS_WRONG_SHARD];
}

void dd_replay_print_summary(dd_replay_t *rp, int complete)
{
    dd_replay_kv_t kv[DD_REPLAY_KV_MAX];
    size_t n = dd_replay_kvs(rp, kv);
    double secs = (double)(dd_now_ms() - rp->progress_line.t0_ms) / 1000.0;

    fprintf(stderr, "dedupd replay (%s%s): %d partition(s) in %.1f s\n",
            rp->args->apply ? "apply" : "report only", complete ? "" : ", INTERRUPTED",
            rp->part_cnt, secs);
    for (size_t i = 0; i < n; i++) {
        int sub = kv[i].sub;
        if (sub && kv[i].value == 0)
            continue; /* bad-message breakdown: only the reasons that occurred */
        fprintf(stderr, "  %s%-*s %12llu\n", sub ? "  " : "", sub ? 16 : 18, kv[i].name,
                (unsigned long long)kv[i].value);
    }
    fprintf(stderr, "  %-18s %12llu\n", "findings", (unsigned long long)dd_replay_findings(rp));
}
