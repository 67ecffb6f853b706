/*
 * The positions table and its writers (see dd_position.h for why).
 *
 * Every partition the consumer tracks is an entry: the watermark it
 * published (`want`) with its check message and, per shard, the highest
 * position that shard is known to hold (`seen`: found when the partition
 * was assigned, or written since). A shard's thread writes the entries
 * whose watermark passed what the shard holds, in one upsert that never
 * lowers a row (GREATEST: a member of the group that owned the partition
 * before, or a write that arrives late, cannot move it back; the check
 * goes with the offset that wins), and before writing reads back the rows
 * it watches: a row lower than what the shard held is a database that
 * went back under the running process, which stops writing and tells the
 * pipeline (the next start then finds the database's real position). A
 * write whose connection was lost leaves its outcome unknown: if the rows
 * are found below it after the server restarted (another start time), the
 * write may have been committed and then lost with the server's state, so
 * that counts as going back too; on a server that stayed up it was simply
 * not committed. An
 * entry whose rows were found to be another life's is written once
 * without GREATEST (`reset`), so that a restart does not find them again.
 * The writes are autocommit statements of their own, after the batch
 * transactions whose outcomes the watermark covers. A statement that
 * fails with an error no retry fixes (a privilege taken away, a table
 * changed under dedupd) stops the writers: Kafka's offsets wait for them,
 * so going on would apply messages without ever committing them.
 */
#include "dd_position.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <errmsg.h>

#include "dd_buf.h"
#include "dd_common.h"
#include "dd_grants.h"
#include "dd_hash.h"
#include "dd_log.h"

/* How often a shard's positions are written while they move. */
#define DD_POSITION_INTERVAL_MS 1000

/* The group is keyed by its digest: Kafka allows group ids longer than an
 * index holds, and utf8mb4_bin pads with spaces ("g" and "g " would share
 * rows). The digest's default is the expression, so a dedupd of the first
 * layout still writes to a migrated table during a rolling upgrade. */
#define DD_POSITION_KEY_DEFAULT "DEFAULT (UNHEX(SHA2(group_id, 256))) COMMENT 'SHA-256 of group_id'"
#define DD_POSITION_GROUP_COL "group_id BLOB NOT NULL COMMENT 'the consumer group (kafka.group)'"
#define DD_POSITION_CHECK_COLS(add)                                                                \
    add "check_offset BIGINT NULL COMMENT 'a message below next_offset this group read'," add      \
        "check_timestamp BIGINT NULL COMMENT 'its timestamp'," add                                 \
        "check_digest BINARY(32) NULL COMMENT 'SHA-256 of its key and value',"

static const char dd_position_ddl[] =
    "CREATE TABLE IF NOT EXISTS dedupd_position (" DD_POSITION_GROUP_COL ","
    " group_key BINARY(32) NOT NULL " DD_POSITION_KEY_DEFAULT ","
    " topic VARCHAR(249) NOT NULL,"
    " kpartition INT NOT NULL,"
    " next_offset BIGINT NOT NULL COMMENT 'every outcome below this offset is committed',"
    " updated_at DATETIME(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6)," DD_POSITION_CHECK_COLS(
        " ") " PRIMARY KEY (group_key, topic, kpartition)"
             ") ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin";

/* The first layout (group_id VARCHAR(255) the key, no check) to this one,
 * in one statement: the rows keep their positions, each keyed by the
 * digest of its group (computed by the default). */
static const char dd_position_upgrade[] =
    "ALTER TABLE dedupd_position DROP PRIMARY KEY, MODIFY " DD_POSITION_GROUP_COL ","
    " ADD COLUMN group_key BINARY(32) NOT NULL " DD_POSITION_KEY_DEFAULT
    " AFTER group_id," DD_POSITION_CHECK_COLS(
        " ADD COLUMN ") " ADD PRIMARY KEY (group_key, topic, kpartition)";

/* What says the table is of this layout. */
static const char dd_position_layout_sql[] =
    "SELECT COUNT(*) FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = DATABASE() AND "
    "TABLE_NAME = 'dedupd_position' AND COLUMN_NAME IN ('group_key', 'check_offset', "
    "'check_timestamp', 'check_digest')";
#define DD_POSITION_LAYOUT_COLS 4

typedef struct {
    char *topic;
    int32_t partition;
    int active;                /* assigned now */
    int64_t want;              /* the watermark published; -1 none */
    dd_position_check_t check; /* written with want */
    int64_t *seen;             /* per shard: the highest position it is known to hold; -1 none */
    unsigned char *reset;      /* per shard: write want as it is, not GREATEST */
    int64_t *tried; /* per shard: written when the connection was lost (unknown outcome); -1 */
} dd_position_entry_t;

typedef struct {
    char *topic;
    int32_t partition;
    int64_t offset;
    dd_position_check_t check;
} dd_position_row_t;

typedef struct {
    dd_position_t *pos;
    int shard;
    dd_db_t *db; /* its thread's */
    pthread_t thread;
    int started;
    uint64_t load_done, flush_done; /* generations served */
    dd_position_row_t *rows;        /* the last load's */
    size_t row_cnt;
    int64_t due_ms; /* the next write */
    int down;       /* the last attempt failed (logged once per outage) */
    int64_t server_start; /* the connection's server started then (s since the epoch); 0 unknown */
    int64_t tried_start;  /* server_start when a write's outcome became unknown; 0 none */
    dd_buf_t sql, forced;
} dd_position_shard_t;

struct dd_position_s {
    const dd_conf_t *conf;
    unsigned char group_key[DD_HASH_LEN]; /* SHA-256 of conf->kafka.group */
    pthread_mutex_t mu;
    pthread_cond_t cv;   /* work for the threads: a load, a flush, stop */
    pthread_cond_t done; /* a thread served a load or a flush */
    dd_position_entry_t *entries;
    size_t cnt, cap;
    dd_position_shard_t *shards;
    int shard_cnt;
    uint64_t load_gen, flush_gen;
    int stopped; /* went back, or an error no retry fixes */
    char stopped_msg[900];
    uint64_t errors;
    atomic_int stop;
};

int dd_position_migrate(MYSQL *db, char *errstr, size_t errstr_size)
{
    uint64_t cols = 0;
    int rc = dd_db_exec_raw(db, dd_position_ddl, errstr, errstr_size);

    if (!rc) rc = dd_db_count(db, dd_position_layout_sql, &cols, errstr, errstr_size);
    if (rc || cols == DD_POSITION_LAYOUT_COLS) return rc;
    dd_log(DD_LOG_INFO, "Upgrading the table dedupd_position: keyed by the digest of the "
                        "group id, and each position with the message it is checked by.");
    return dd_db_exec_raw(db, dd_position_upgrade, errstr, errstr_size);
}

/* The server's error preparing sql on db (0: none). */
static unsigned dd_position_prepare_err(dd_db_t *db, const char *sql)
{
    MYSQL_STMT *stmt = mysql_stmt_init(dd_db_mysql(db));
    unsigned err;

    if (!stmt) return CR_OUT_OF_MEMORY;
    err = mysql_stmt_prepare(stmt, sql, strlen(sql)) != 0 ? mysql_stmt_errno(stmt) : 0;
    mysql_stmt_close(stmt);
    return err;
}

int dd_position_check(dd_db_t *db, const dd_conf_t *conf, int *exists, char *errstr,
                      size_t errstr_size)
{
    unsigned err;

    /* The server says a table is missing only to a user it may tell (one
     * with privileges on the database, or on the table before it was
     * dropped); to another it denies the statement, and the privileges
     * are what is missing: information_schema would hide the table too.
     * Likewise a missing column is told only to a user who may read the
     * table. */
    *exists = 1;
    err = dd_position_prepare_err(db, "SELECT next_offset FROM dedupd_position LIMIT 0");
    if (err == CR_OUT_OF_MEMORY) {
        dd_errstr_set(errstr, errstr_size, "out of memory");
        return DD_ERR_NOMEM;
    }
    if (err == 1146) {
        *exists = 0;
        return DD_OK;
    }
    if (!err && dd_position_prepare_err(db, "SELECT group_key, check_offset, check_timestamp,"
                                            " check_digest FROM dedupd_position LIMIT 0") == 1054) {
        dd_errstr_set(errstr, errstr_size,
                      "the table dedupd_position was created by an older dedupd (it has no "
                      "column group_key or check_digest): run `dedupd migrate` with this "
                      "configuration to upgrade it (its positions are kept)");
        return DD_ERR_FATAL;
    }
    return dd_grants_check(db, conf, NULL, DD_GRANTS_POSITION, errstr, errstr_size);
}

/* ---- entries (mu held) ---- */

static dd_position_entry_t *dd_position_entry(dd_position_t *pos, const char *topic,
                                              int32_t partition, int create)
{
    dd_position_entry_t *e;

    for (size_t i = 0; i < pos->cnt; i++)
        if (pos->entries[i].partition == partition && strcmp(pos->entries[i].topic, topic) == 0)
            return &pos->entries[i];
    if (!create) return NULL;
    if (pos->cnt == pos->cap) {
        size_t cap = pos->cap ? pos->cap * 2 : 16;
        dd_position_entry_t *n = realloc(pos->entries, cap * sizeof(*n));
        if (!n) return NULL;
        pos->entries = n;
        pos->cap = cap;
    }
    e = &pos->entries[pos->cnt];
    memset(e, 0, sizeof(*e));
    e->topic = strdup(topic);
    e->seen = malloc((size_t)pos->shard_cnt * sizeof(*e->seen));
    e->reset = calloc((size_t)pos->shard_cnt, 1);
    e->tried = malloc((size_t)pos->shard_cnt * sizeof(*e->tried));
    if (!e->topic || !e->seen || !e->reset || !e->tried) {
        free(e->topic);
        free(e->seen);
        free(e->reset);
        free(e->tried);
        return NULL;
    }
    e->partition = partition;
    e->want = -1;
    e->check.offset = -1;
    for (int s = 0; s < pos->shard_cnt; s++)
        e->seen[s] = e->tried[s] = -1;
    pos->cnt++;
    return e;
}

/* The row of a shard's last load for topic [partition], or NULL. */
static const dd_position_row_t *dd_position_row(const dd_position_shard_t *ps, const char *topic,
                                                int32_t partition)
{
    for (size_t i = 0; i < ps->row_cnt; i++)
        if (ps->rows[i].partition == partition && strcmp(ps->rows[i].topic, topic) == 0)
            return &ps->rows[i];
    return NULL;
}

static int64_t dd_position_row_at(const dd_position_shard_t *ps, const char *topic,
                                  int32_t partition)
{
    const dd_position_row_t *row = dd_position_row(ps, topic, partition);

    return row ? row->offset : -1;
}

/* ---- a shard's thread ---- */

/* When the server started, to tell a restart from a connection lost. */
static const char dd_position_start_sql[] =
    "SELECT CAST(UNIX_TIMESTAMP() - VARIABLE_VALUE AS UNSIGNED) FROM "
    "information_schema.GLOBAL_STATUS WHERE VARIABLE_NAME = 'UPTIME'";

/* Connects when needed, learning when its server started; 0 or the class
 * of the error. mu not held. */
static int dd_position_connect(dd_position_shard_t *ps, char *err, size_t err_size)
{
    uint64_t start = 0;
    int rc = DD_OK;

    if (ps->db && dd_db_mysql(ps->db)) return DD_OK;
    if (!ps->db)
        rc = dd_db_new_shard(&ps->db, ps->pos->conf, ps->shard, err, err_size);
    else
        rc = dd_db_reconnect(ps->db, err, err_size);
    if (!rc) rc = dd_db_count(dd_db_mysql(ps->db), dd_position_start_sql, &start, err, err_size);
    if (!rc) ps->server_start = (int64_t)start;
    return rc;
}

/* After a failed statement: a connection that no longer answers is
 * dropped (the next attempt connects again). mu not held. */
static void dd_position_drop_dead(dd_position_shard_t *ps)
{
    if (ps->db && dd_db_mysql(ps->db) && mysql_ping(dd_db_mysql(ps->db)) != 0) {
        dd_db_destroy(ps->db);
        ps->db = NULL;
    }
}

/* A statement failed with rc: counted; one no retry fixes stops the
 * writers (logged at error), any other is tried again every second
 * (logged once per outage). mu held. */
static void dd_position_failed(dd_position_shard_t *ps, const char *what, int rc, const char *err)
{
    dd_position_t *pos = ps->pos;
    char who[340];

    pos->errors++;
    dd_conf_shard_name(pos->conf, ps->shard, who, sizeof(who));
    if (rc == DD_ERR_FATAL && !pos->stopped) {
        pos->stopped = 1;
        snprintf(pos->stopped_msg, sizeof(pos->stopped_msg),
                 "cannot %s the consumer's positions in %s, an error no retry fixes: %s (Kafka's "
                 "offsets are committed only up to the positions the database holds)",
                 what, who, err);
        dd_log(DD_LOG_ERROR,
               "Cannot %s the consumer's positions in %s: %s. No retry fixes it: "
               "stopping, since Kafka's offsets are committed only up to the positions the "
               "database holds.",
               what, who, err);
        pthread_cond_broadcast(&pos->done);
    }
    if (ps->down) return;
    ps->down = 1;
    if (rc != DD_ERR_FATAL)
        dd_log(DD_LOG_WARN,
               "Cannot %s the consumer's positions in %s, trying again every second (Kafka's "
               "offsets wait for them): %s",
               what, who, err);
}

static void dd_position_rows_free(dd_position_row_t *rows, size_t cnt)
{
    for (size_t i = 0; i < cnt; i++)
        free(rows[i].topic);
    free(rows);
}

/* The WHERE of group's rows. */
static void dd_position_where(dd_buf_t *sql, const unsigned char key[DD_HASH_LEN])
{
    dd_buf_puts(sql, " WHERE group_key = ");
    dd_db_hex(sql, key, DD_HASH_LEN);
}

/* A check from a row's three columns (NULL: none). */
static void dd_position_check_of(MYSQL_ROW row, const unsigned long *lens,
                                 dd_position_check_t *check)
{
    memset(check, 0, sizeof(*check));
    check->offset = -1;
    if (!row[0] || !row[1] || !row[2] || lens[2] != DD_PEEK_DIGEST_LEN) return;
    check->offset = atoll(row[0]);
    check->fp.timestamp = atoll(row[1]);
    memcpy(check->fp.digest, row[2], DD_PEEK_DIGEST_LEN);
}

/* Every row of the group whose digest is key, into *rowsp; sql is scratch. */
static int dd_position_select(MYSQL *mysql, const unsigned char key[DD_HASH_LEN], dd_buf_t *sql,
                              dd_position_row_t **rowsp, size_t *cntp, char *err, size_t err_size)
{
    dd_position_row_t *rows = NULL;
    size_t cnt = 0;
    MYSQL_RES *res;
    MYSQL_ROW row;

    *rowsp = NULL;
    *cntp = 0;
    dd_buf_reset(sql);
    dd_buf_puts(sql, "SELECT topic, kpartition, next_offset, check_offset, check_timestamp, "
                     "check_digest FROM dedupd_position");
    dd_position_where(sql, key);
    if (sql->oom) return DD_ERR_NOMEM;
    if (mysql_real_query(mysql, sql->p, sql->len) != 0 || !(res = mysql_store_result(mysql))) {
        dd_errstr_set(err, err_size, "%u: %s", mysql_errno(mysql), mysql_error(mysql));
        return dd_db_classify(mysql_errno(mysql));
    }
    rows = calloc(mysql_num_rows(res) + 1, sizeof(*rows));
    while (rows && (row = mysql_fetch_row(res))) {
        unsigned long *lens = mysql_fetch_lengths(res);
        if (!row[0] || !row[1] || !row[2] || !(rows[cnt].topic = strdup(row[0]))) continue;
        rows[cnt].partition = (int32_t)atol(row[1]);
        rows[cnt].offset = atoll(row[2]);
        dd_position_check_of(row + 3, lens + 3, &rows[cnt].check);
        cnt++;
    }
    mysql_free_result(res);
    if (!rows) return DD_ERR_NOMEM;
    *rowsp = rows;
    *cntp = cnt;
    return DD_OK;
}

static int dd_position_read(dd_position_shard_t *ps, dd_position_row_t **rowsp, size_t *cntp,
                            char *err, size_t err_size)
{
    return dd_position_select(dd_db_mysql(ps->db), ps->pos->group_key, &ps->sql, rowsp, cntp, err,
                              err_size);
}

/* A load: the rows become the shard's cache. mu held on entry and exit. */
static void dd_position_do_load(dd_position_shard_t *ps, uint64_t gen)
{
    dd_position_t *pos = ps->pos;
    dd_position_row_t *rows = NULL;
    size_t cnt = 0;
    char err[512];
    int rc;

    pthread_mutex_unlock(&pos->mu);
    rc = dd_position_connect(ps, err, sizeof(err));
    if (!rc) rc = dd_position_read(ps, &rows, &cnt, err, sizeof(err));
    if (rc) dd_position_drop_dead(ps);
    pthread_mutex_lock(&pos->mu);
    if (rc) {
        dd_position_failed(ps, "read", rc, err);
        return; /* tried again after the retry wait, unless the load was given up */
    }
    ps->down = 0;
    dd_position_rows_free(ps->rows, ps->row_cnt);
    ps->rows = rows;
    ps->row_cnt = cnt;
    ps->load_done = gen;
    pthread_cond_broadcast(&pos->done);
}

/* Compares what the shard holds with what it held: a row below it is the
 * database going back. mu held. */
static void dd_position_verify(dd_position_shard_t *ps, const dd_position_row_t *rows, size_t cnt)
{
    dd_position_t *pos = ps->pos;
    dd_position_shard_t tmp = {.rows = (dd_position_row_t *)rows, .row_cnt = cnt};
    char who[340];

    /* a server started at another time (beyond the clocks' second) */
    int restarted = ps->tried_start && (ps->server_start > ps->tried_start + 2 ||
                                        ps->server_start < ps->tried_start - 2);

    for (size_t i = 0; i < pos->cnt && !pos->stopped; i++) {
        dd_position_entry_t *e = &pos->entries[i];
        int64_t now = dd_position_row_at(&tmp, e->topic, e->partition);
        int64_t tried = e->tried[ps->shard];
        char at[32] = "none";
        e->tried[ps->shard] = -1;
        if (e->active && tried > e->seen[ps->shard] && now >= tried) e->seen[ps->shard] = tried;
        if (e->active && tried > e->seen[ps->shard] && restarted) {
            if (now >= 0) snprintf(at, sizeof(at), "%lld", (long long)now);
            pos->stopped = 1;
            snprintf(pos->stopped_msg, sizeof(pos->stopped_msg),
                     "the database's position of group %s, %s [%d] in %s is %s, below %lld that "
                     "this process wrote as its connection was lost and the server restarted "
                     "(a restore, a failover to a replica that lagged, or a crash before the "
                     "write was durable); a restart reads again from the database's position "
                     "what it may have lost",
                     pos->conf->kafka.group, e->topic, (int)e->partition,
                     dd_conf_shard_name(pos->conf, ps->shard, who, sizeof(who)), at,
                     (long long)tried);
            break;
        }
        if (!e->active || e->seen[ps->shard] < 0 || now >= e->seen[ps->shard]) continue;
        if (now >= 0) snprintf(at, sizeof(at), "%lld", (long long)now);
        pos->stopped = 1;
        snprintf(pos->stopped_msg, sizeof(pos->stopped_msg),
                 "the database's position of group %s, %s [%d] in %s went back from %lld to %s "
                 "while this process ran (a restore, or a failover to a replica that lagged); "
                 "a restart reads again from the database's position what it lost",
                 pos->conf->kafka.group, e->topic, (int)e->partition,
                 dd_conf_shard_name(pos->conf, ps->shard, who, sizeof(who)),
                 (long long)e->seen[ps->shard], at);
    }
    ps->tried_start = 0;
}

/* One row's values: the group, its digest, the partition, want and its
 * check. */
static void dd_position_values(dd_buf_t *b, MYSQL *mysql, const dd_position_t *pos,
                               const dd_position_entry_t *e)
{
    const char *group = pos->conf->kafka.group;

    dd_buf_puts(b, "(_binary");
    dd_db_quote(b, mysql, group, strlen(group));
    dd_buf_puts(b, ", ");
    dd_db_hex(b, pos->group_key, DD_HASH_LEN);
    dd_buf_puts(b, ", ");
    dd_db_quote(b, mysql, e->topic, strlen(e->topic));
    dd_buf_printf(b, ", %d, %lld, ", (int)e->partition, (long long)e->want);
    if (e->check.offset < 0) {
        dd_buf_puts(b, "NULL, NULL, NULL)");
        return;
    }
    dd_buf_printf(b, "%lld, %lld, ", (long long)e->check.offset, (long long)e->check.fp.timestamp);
    dd_db_hex(b, e->check.fp.digest, DD_PEEK_DIGEST_LEN);
    dd_buf_puts(b, ")");
}

#define DD_POSITION_INSERT                                                                         \
    "INSERT INTO dedupd_position (group_id, group_key, topic, kpartition, next_offset, "           \
    "check_offset, check_timestamp, check_digest) VALUES "
/* GREATEST keeps the furthest position; its check goes with it (the
 * checks are assigned before next_offset, which they compare with). */
#define DD_POSITION_RAISE                                                                          \
    " ON DUPLICATE KEY UPDATE"                                                                     \
    " check_offset = IF(VALUES(next_offset) >= next_offset, VALUES(check_offset), check_offset),"  \
    " check_timestamp = IF(VALUES(next_offset) >= next_offset, VALUES(check_timestamp), "          \
    "check_timestamp),"                                                                            \
    " check_digest = IF(VALUES(next_offset) >= next_offset, VALUES(check_digest), check_digest),"  \
    " next_offset = GREATEST(next_offset, VALUES(next_offset)), updated_at = CURRENT_TIMESTAMP(6)"
#define DD_POSITION_REWRITE                                                                        \
    " ON DUPLICATE KEY UPDATE next_offset = VALUES(next_offset),"                                  \
    " check_offset = VALUES(check_offset), check_timestamp = VALUES(check_timestamp),"             \
    " check_digest = VALUES(check_digest), updated_at = CURRENT_TIMESTAMP(6)"

/* The upserts of the entries to write, into ps->sql (raised) and
 * ps->forced (rewritten); vals[i]: what entry i is written as, -1 not.
 * *n entries in all. mu held. */
static void dd_position_build(dd_position_shard_t *ps, MYSQL *mysql, int64_t *vals, size_t *n)
{
    dd_position_t *pos = ps->pos;
    size_t raised = 0, forced = 0;

    dd_buf_reset(&ps->sql);
    dd_buf_reset(&ps->forced);
    for (size_t i = 0; i < pos->cnt; i++) {
        dd_position_entry_t *e = &pos->entries[i];
        int reset = e->reset[ps->shard];
        dd_buf_t *b = reset ? &ps->forced : &ps->sql;
        size_t *k = reset ? &forced : &raised;
        vals[i] = -1;
        if (e->want < 0 || (!reset && e->want <= e->seen[ps->shard])) continue;
        dd_buf_puts(b, (*k)++ ? ", " : DD_POSITION_INSERT);
        dd_position_values(b, mysql, pos, e);
        vals[i] = e->want;
    }
    if (raised) dd_buf_puts(&ps->sql, DD_POSITION_RAISE);
    if (forced) dd_buf_puts(&ps->forced, DD_POSITION_REWRITE);
    *n = raised + forced;
}

/* Runs what dd_position_build made. */
static int dd_position_exec(dd_position_shard_t *ps, char *err, size_t err_size)
{
    int rc = DD_OK;

    if (ps->sql.oom || ps->forced.oom) return DD_ERR_NOMEM;
    if (ps->forced.len) rc = dd_db_exec(ps->db, ps->forced.p, ps->forced.len, err, err_size);
    if (!rc && ps->sql.len) rc = dd_db_exec(ps->db, ps->sql.p, ps->sql.len, err, err_size);
    return rc;
}

/* After a failed upsert: when its connection was lost, the entries it
 * wrote may or may not be in the database (remembered in tried, for the
 * next read back to compare); returns 1 then. mu held. */
static int dd_position_unknown(dd_position_shard_t *ps, const int64_t *vals, size_t entry_cnt)
{
    dd_position_t *pos = ps->pos;

    if (ps->db && dd_db_mysql(ps->db)) return 0; /* still connected: the statement failed */
    for (size_t i = 0; vals && i < entry_cnt; i++) {
        dd_position_entry_t *e = &pos->entries[i];
        if (vals[i] >= 0 && !e->reset[ps->shard] && vals[i] > e->tried[ps->shard])
            e->tried[ps->shard] = vals[i];
    }
    return 1;
}

/* One write: read back, compare, upsert. mu held on entry and exit. */
static void dd_position_do_write(dd_position_shard_t *ps, uint64_t gen)
{
    dd_position_t *pos = ps->pos;
    size_t n = 0, cnt = 0, entry_cnt = 0;
    int64_t *vals = NULL;
    dd_position_row_t *rows = NULL;
    char err[512] = "";
    int rc;

    ps->due_ms = dd_now_ms() + DD_POSITION_INTERVAL_MS;
    pthread_mutex_unlock(&pos->mu);
    rc = dd_position_connect(ps, err, sizeof(err));
    if (!rc) rc = dd_position_read(ps, &rows, &cnt, err, sizeof(err));
    pthread_mutex_lock(&pos->mu);
    if (!rc) dd_position_verify(ps, rows, cnt);
    entry_cnt = pos->cnt; /* entries are only appended: indexes stay */
    if (!rc && !pos->stopped && !(vals = calloc(entry_cnt + 1, sizeof(*vals)))) rc = DD_ERR_NOMEM;
    if (!rc && vals) dd_position_build(ps, dd_db_mysql(ps->db), vals, &n);
    pthread_mutex_unlock(&pos->mu);
    if (!rc && n) rc = dd_position_exec(ps, err, sizeof(err));
    if (rc) dd_position_drop_dead(ps);
    dd_position_rows_free(rows, cnt);
    pthread_mutex_lock(&pos->mu);
    if (rc) dd_position_failed(ps, "write", rc, err);
    if (rc && n && dd_position_unknown(ps, vals, entry_cnt)) ps->tried_start = ps->server_start;
    if (!rc) {
        ps->down = 0;
        for (size_t i = 0; vals && i < entry_cnt; i++) {
            dd_position_entry_t *e = &pos->entries[i];
            if (vals[i] < 0) continue;
            if (e->reset[ps->shard] || vals[i] > e->seen[ps->shard]) e->seen[ps->shard] = vals[i];
            e->reset[ps->shard] = 0;
        }
        ps->flush_done = gen;
        pthread_cond_broadcast(&pos->done);
    }
    free(vals);
}

/* 1 when an entry's watermark passed what the shard holds, or its row is
 * to be rewritten. mu held. */
static int dd_position_pending(const dd_position_shard_t *ps)
{
    const dd_position_t *pos = ps->pos;

    for (size_t i = 0; i < pos->cnt; i++) {
        const dd_position_entry_t *e = &pos->entries[i];
        if (e->want > e->seen[ps->shard] || (e->want >= 0 && e->reset[ps->shard])) return 1;
    }
    return 0;
}

static void *dd_position_main(void *arg)
{
    dd_position_shard_t *ps = arg;
    dd_position_t *pos = ps->pos;

    pthread_mutex_lock(&pos->mu);
    while (!atomic_load(&pos->stop)) {
        int64_t now = dd_now_ms(), wait = ps->due_ms - now;
        uint64_t flush = pos->flush_gen;
        int pending = !pos->stopped && dd_position_pending(ps);

        if (pos->load_gen > ps->load_done && (!ps->down || wait <= 0) && !pos->stopped) {
            dd_position_do_load(ps, pos->load_gen);
            if (ps->down) ps->due_ms = dd_now_ms() + DD_POSITION_INTERVAL_MS;
        } else if (pending && (wait <= 0 || (flush > ps->flush_done && !ps->down))) {
            dd_position_do_write(ps, flush);
        } else if (!pending && flush > ps->flush_done) {
            ps->flush_done = flush;
            pthread_cond_broadcast(&pos->done);
        } else {
            struct timespec ts;
            dd_cond_deadline(
                &ts, wait > 0 && wait < DD_POSITION_INTERVAL_MS ? wait : DD_POSITION_INTERVAL_MS);
            pthread_cond_timedwait(&pos->cv, &pos->mu, &ts);
        }
    }
    pthread_mutex_unlock(&pos->mu);
    return NULL;
}

/* ---- life cycle ---- */

int dd_position_new(dd_position_t **posp, const dd_conf_t *conf, char *errstr, size_t errstr_size)
{
    dd_position_t *pos = calloc(1, sizeof(*pos));
    const void *group = conf->kafka.group;
    size_t len = strlen(conf->kafka.group);

    *posp = NULL;
    if (pos) pos->shards = calloc((size_t)conf->shard_cnt, sizeof(*pos->shards));
    if (!pos || !pos->shards || dd_hash_bytes(&group, &len, 1, pos->group_key)) {
        if (pos) free(pos->shards);
        free(pos);
        dd_errstr_set(errstr, errstr_size, "out of memory");
        return DD_ERR_NOMEM;
    }
    pos->conf = conf;
    pos->shard_cnt = conf->shard_cnt;
    pthread_mutex_init(&pos->mu, NULL);
    dd_cond_init(&pos->cv); /* on the monotonic clock, as dd_cond_deadline() */
    dd_cond_init(&pos->done);
    for (int s = 0; s < pos->shard_cnt; s++) {
        pos->shards[s].pos = pos;
        pos->shards[s].shard = s;
    }
    *posp = pos;
    return DD_OK;
}

int dd_position_start(dd_position_t *pos, char *errstr, size_t errstr_size)
{
    for (int s = 0; s < pos->shard_cnt; s++) {
        if (pthread_create(&pos->shards[s].thread, NULL, dd_position_main, &pos->shards[s]) != 0) {
            dd_errstr_set(errstr, errstr_size, "cannot start the position writer of shard %d", s);
            return DD_ERR_FATAL;
        }
        pos->shards[s].started = 1;
    }
    return DD_OK;
}

void dd_position_stop(dd_position_t *pos, int timeout_ms)
{
    if (!pos) return;
    if (timeout_ms > 0) dd_position_flush(pos, timeout_ms);
    pthread_mutex_lock(&pos->mu);
    atomic_store(&pos->stop, 1);
    pthread_cond_broadcast(&pos->cv);
    pthread_mutex_unlock(&pos->mu);
    for (int s = 0; s < pos->shard_cnt; s++) {
        if (pos->shards[s].started) pthread_join(pos->shards[s].thread, NULL);
        pos->shards[s].started = 0;
    }
}

void dd_position_destroy(dd_position_t *pos)
{
    if (!pos) return;
    dd_position_stop(pos, 0);
    for (int s = 0; s < pos->shard_cnt; s++) {
        dd_db_destroy(pos->shards[s].db);
        dd_position_rows_free(pos->shards[s].rows, pos->shards[s].row_cnt);
        dd_buf_release(&pos->shards[s].sql);
        dd_buf_release(&pos->shards[s].forced);
    }
    for (size_t i = 0; i < pos->cnt; i++) {
        free(pos->entries[i].topic);
        free(pos->entries[i].seen);
        free(pos->entries[i].reset);
        free(pos->entries[i].tried);
    }
    free(pos->entries);
    free(pos->shards);
    pthread_cond_destroy(&pos->done);
    pthread_cond_destroy(&pos->cv);
    pthread_mutex_destroy(&pos->mu);
    free(pos);
}

/* ---- the consumer's side ---- */

/* Waits on done until every shard's counter (of loads or flushes) reaches
 * gen, or the deadline. mu held. Returns the shards that did not. */
static int dd_position_wait(dd_position_t *pos, int load, uint64_t gen, int timeout_ms)
{
    int64_t deadline = dd_now_ms() + timeout_ms;

    for (;;) {
        int behind = 0;
        for (int s = 0; s < pos->shard_cnt; s++)
            behind += (load ? pos->shards[s].load_done : pos->shards[s].flush_done) < gen;
        if (!behind || pos->stopped) return pos->stopped && !load ? 0 : behind;
        int64_t left = deadline - dd_now_ms();
        if (left <= 0) return behind;
        struct timespec ts;
        dd_cond_deadline(&ts, left);
        pthread_cond_timedwait(&pos->done, &pos->mu, &ts);
    }
}

void dd_position_load(dd_position_t *pos, int timeout_ms)
{
    uint64_t gen;

    pthread_mutex_lock(&pos->mu);
    gen = ++pos->load_gen;
    pthread_cond_broadcast(&pos->cv);
    dd_position_wait(pos, 1, gen, timeout_ms);
    pthread_mutex_unlock(&pos->mu);
}

void dd_position_found(dd_position_t *pos, const char *topic, int32_t partition,
                       dd_position_found_t *out)
{
    memset(out, 0, sizeof(*out));
    out->min = -1;
    out->min_shard = -1;
    out->check.offset = -1;
    pthread_mutex_lock(&pos->mu);
    for (int s = 0; s < pos->shard_cnt; s++) {
        dd_position_shard_t *ps = &pos->shards[s];
        const dd_position_row_t *row;
        if (ps->load_done != pos->load_gen) {
            out->unread++;
            continue;
        }
        if (!(row = dd_position_row(ps, topic, partition))) {
            out->missing++;
            continue;
        }
        out->have++;
        if (out->min < 0 || row->offset < out->min) {
            out->min = row->offset;
            out->min_shard = s;
            out->check = row->check;
        }
    }
    pthread_mutex_unlock(&pos->mu);
}

/* The entry of a partition assigned now, its check set. mu held. */
static dd_position_entry_t *dd_position_assigned(dd_position_t *pos, const char *topic,
                                                 int32_t partition,
                                                 const dd_position_check_t *check)
{
    dd_position_entry_t *e = dd_position_entry(pos, topic, partition, 1);

    if (!e) return NULL;
    e->active = 1;
    e->want = -1;
    e->check.offset = -1;
    if (check) e->check = *check;
    memset(e->reset, 0, (size_t)pos->shard_cnt);
    return e;
}

void dd_position_track(dd_position_t *pos, const char *topic, int32_t partition, int64_t floor,
                       const dd_position_check_t *check)
{
    dd_position_entry_t *e;

    pthread_mutex_lock(&pos->mu);
    if ((e = dd_position_assigned(pos, topic, partition, check))) {
        for (int s = 0; s < pos->shard_cnt; s++) {
            dd_position_shard_t *ps = &pos->shards[s];
            e->seen[s] =
                ps->load_done == pos->load_gen ? dd_position_row_at(ps, topic, partition) : floor;
            e->tried[s] = -1;
        }
    }
    pthread_mutex_unlock(&pos->mu);
}

void dd_position_reset(dd_position_t *pos, const char *topic, int32_t partition, int64_t start,
                       const dd_position_check_t *keep)
{
    dd_position_entry_t *e;

    pthread_mutex_lock(&pos->mu);
    if ((e = dd_position_assigned(pos, topic, partition, keep))) {
        e->want = start;
        for (int s = 0; s < pos->shard_cnt; s++) {
            e->seen[s] = e->tried[s] = -1; /* nothing held counts until it is rewritten */
            e->reset[s] = 1;
        }
        pthread_cond_broadcast(&pos->cv);
    }
    pthread_mutex_unlock(&pos->mu);
}

void dd_position_untrack(dd_position_t *pos, const char *topic, int32_t partition)
{
    dd_position_entry_t *e;

    pthread_mutex_lock(&pos->mu);
    if ((e = dd_position_entry(pos, topic, partition, 0))) {
        e->active = 0;
        e->want = -1;
        memset(e->reset, 0, (size_t)pos->shard_cnt);
    }
    pthread_mutex_unlock(&pos->mu);
}

/* The entry of pt (pt->pos_slot, looked up again when it does not match). mu held. */
static dd_position_entry_t *dd_position_slot(dd_position_t *pos, dd_ptrack_t *pt)
{
    dd_position_entry_t *e;

    if (pt->pos_slot < 0 || (size_t)pt->pos_slot >= pos->cnt ||
        pos->entries[pt->pos_slot].partition != pt->partition ||
        strcmp(pos->entries[pt->pos_slot].topic, pt->topic) != 0) {
        e = dd_position_entry(pos, pt->topic, pt->partition, 0);
        pt->pos_slot = e ? (int)(e - pos->entries) : -1;
    }
    return pt->pos_slot < 0 ? NULL : &pos->entries[pt->pos_slot];
}

void dd_position_sync(dd_position_t *pos, dd_offsets_t *offs)
{
    pthread_mutex_lock(&pos->mu);
    for (size_t i = 0; i < dd_offsets_count(offs); i++) {
        dd_ptrack_t *pt = dd_offsets_at(offs, i);
        dd_position_entry_t *e;
        int64_t limit = INT64_MAX;
        if (!pt->assigned || !(e = dd_position_slot(pos, pt))) continue;
        if (pt->next > e->want) {
            /* the candidate is below the watermark: it checks this position */
            if (pt->cand_offset >= 0 && pt->next > pt->cand_offset) {
                e->check.offset = pt->cand_offset;
                e->check.fp = pt->cand_fp;
                pt->cand_offset = -1;
            }
            e->want = pt->next;
        }
        for (int s = 0; s < pos->shard_cnt; s++)
            if (e->seen[s] < limit) limit = e->seen[s];
        pt->limit = limit;
    }
    pthread_mutex_unlock(&pos->mu);
}

int dd_position_flush(dd_position_t *pos, int timeout_ms)
{
    uint64_t gen;
    int behind;

    pthread_mutex_lock(&pos->mu);
    gen = ++pos->flush_gen;
    pthread_cond_broadcast(&pos->cv);
    behind = dd_position_wait(pos, 0, gen, timeout_ms);
    pthread_mutex_unlock(&pos->mu);
    return behind ? DD_ERR_RETRIABLE : DD_OK;
}

int dd_position_stopped(dd_position_t *pos, char *errstr, size_t errstr_size)
{
    int stopped;

    pthread_mutex_lock(&pos->mu);
    stopped = pos->stopped;
    if (stopped) dd_errstr_set(errstr, errstr_size, "%s", pos->stopped_msg);
    pthread_mutex_unlock(&pos->mu);
    return stopped;
}

uint64_t dd_position_errors(dd_position_t *pos)
{
    uint64_t n;

    pthread_mutex_lock(&pos->mu);
    n = pos->errors;
    pthread_mutex_unlock(&pos->mu);
    return n;
}

/* ---- dedupd stats ---- */

/* One shard's rows for dd_position_lowest: folds them into out. */
static int dd_position_lowest_shard(const dd_conf_t *conf, int s, const char *const *topics,
                                    const int32_t *parts, int cnt, int64_t *out,
                                    dd_position_check_t *checks, int *tables, char *errstr,
                                    size_t errstr_size)
{
    dd_db_t *db = NULL;
    dd_buf_t sql = {0};
    dd_position_row_t *rows = NULL;
    size_t row_cnt = 0, len = strlen(conf->kafka.group);
    const void *group = conf->kafka.group;
    unsigned char key[DD_HASH_LEN];
    int exists = 0, rc = dd_hash_bytes(&group, &len, 1, key);

    if (!rc) rc = dd_db_new_shard(&db, conf, s, errstr, errstr_size);
    if (!rc) rc = dd_position_check(db, conf, &exists, errstr, errstr_size);
    if (!rc && exists)
        rc = dd_position_select(dd_db_mysql(db), key, &sql, &rows, &row_cnt, errstr, errstr_size);
    if (!rc && exists) {
        dd_position_shard_t tmp = {.rows = rows, .row_cnt = row_cnt};
        int first = (*tables)++ == 0;
        for (int i = 0; i < cnt; i++) {
            const dd_position_row_t *row = dd_position_row(&tmp, topics[i], parts[i]);
            int64_t at = row ? row->offset : -1;
            int lower = row && (out[i] < 0 || at < out[i]);
            if (first)
                out[i] = at >= 0 ? at : DD_POSITION_NONE;
            else if (out[i] == DD_POSITION_NONE)
                out[i] = at >= 0 ? DD_POSITION_PARTIAL : DD_POSITION_NONE;
            else if (out[i] >= 0)
                out[i] = at < 0 ? DD_POSITION_PARTIAL : at < out[i] ? at : out[i];
            if (checks && row && (first || lower)) checks[i] = row->check;
        }
    }
    dd_position_rows_free(rows, row_cnt);
    dd_buf_release(&sql);
    dd_db_destroy(db);
    return rc;
}

int dd_position_lowest(const dd_conf_t *conf, const char *const *topics, const int32_t *parts,
                       int cnt, int64_t *out, dd_position_check_t *checks, int *tables,
                       char *errstr, size_t errstr_size)
{
    int rc = DD_OK;

    *tables = 0;
    for (int i = 0; i < cnt; i++) {
        out[i] = DD_POSITION_NONE;
        if (checks) checks[i].offset = -1;
    }
    for (int s = 0; !rc && s < conf->shard_cnt; s++)
        rc = dd_position_lowest_shard(conf, s, topics, parts, cnt, out, checks, tables, errstr,
                                      errstr_size);
    return rc;
}
