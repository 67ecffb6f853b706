/*
 * `dedupd stats`: the dedup tables and the consumer group at a glance, for
 * an operator or, with --format json, a script: every route's table (or
 * one route's, --route). Rows by status, the oldest
 * and newest, what awaits the purge and the retention settings, the most
 * frequent errors of failed rows (the table's record of rejected keys;
 * conflicts leave no row, so they are only in the dead-letter topic and
 * the metrics), and the group's committed offsets, end offsets and lag per
 * partition. Every query is an aggregate the table's indexes make cheap,
 * or a scan the output says it is; the group's offsets are read without
 * joining it (dd_kafka.h), so the live consumers do not rebalance.
 * With shards, each table is read in every shard: the figures of each
 * shard, and their totals. With outbox.enabled, the outbox too: events
 * waiting, the oldest one's age, events parked.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "dd_cmd.h"
#include "dd_common.h"
#include "dd_db.h"
#include "dd_grants.h"
#include "dd_kafka.h"
#include "dd_log.h"
#include "dd_outbox.h"
#include "dd_peek.h"
#include "dd_position.h"
#include "dd_text.h"

#define DD_TABLESTATS_TOP 5
#define DD_TABLESTATS_KAFKA_MS 10000

typedef struct {
    int json;
} dd_tablestats_opts_t;

/* Failed rows of one error. */
typedef struct {
    unsigned long long rows;
    char error[104];
} dd_tablestats_err_t;

/* What the table says (in one shard, or the totals of every shard). */
typedef struct {
    unsigned long long status[3], other, rows;
    int have_rows;
    char oldest[32], newest[32];
    long long oldest_age_s, newest_age_s;
    unsigned long long expired_done, expired_processing;
    dd_tablestats_err_t failed[DD_TABLESTATS_TOP];
    int failed_cnt;
} dd_tablestats_t;

/* What the group's offsets say. */
typedef struct {
    char **topics; /* the routes' (dd_kafka_route_topics): the parts' topics point here */
    int topic_cnt;
    dd_kafka_part_t *parts;
    int cnt;
    char error[512]; /* "" when they were read */
    /* outbox.enabled: the outbox of every shard together */
    dd_outbox_count_t outbox;
    char outbox_error[512];          /* "" when it was read */
    int64_t *db;                     /* per part: the database's position (dd_position_lowest) */
    dd_position_judgement_t *judged; /* per part: whether it is the topic's (dd_position_judge) */
    int db_tables;                   /* shards that keep positions */
} dd_tablestats_group_t;

/* Runs a SELECT and returns its stored result, or NULL with errstr set. */
static MYSQL_RES *dd_tablestats_select(dd_db_t *db, const char *sql, char *errstr,
                                       size_t errstr_size)
{
    MYSQL *mysql = dd_db_mysql(db);
    MYSQL_RES *res = NULL;

    if (mysql_query(mysql, sql) != 0 || !(res = mysql_store_result(mysql)))
        dd_errstr_set(errstr, errstr_size, "%u: %s", mysql_errno(mysql), mysql_error(mysql));
    return res;
}

/* ---- reading ---- */

static int dd_tablestats_by_status(dd_db_t *db, const char *table, dd_tablestats_t *ts,
                                   char *errstr, size_t errstr_size)
{
    char sql[256];
    MYSQL_RES *res;
    MYSQL_ROW row;

    snprintf(sql, sizeof(sql), "SELECT status, COUNT(*) FROM `%s` GROUP BY status", table);
    if (!(res = dd_tablestats_select(db, sql, errstr, errstr_size))) return DD_ERR_FATAL;
    while ((row = mysql_fetch_row(res))) {
        int st = atoi(row[0]);
        if (st >= 0 && st <= 2)
            ts->status[st] = strtoull(row[1], NULL, 10);
        else
            ts->other += strtoull(row[1], NULL, 10);
    }
    mysql_free_result(res);
    ts->rows = ts->status[0] + ts->status[1] + ts->status[2] + ts->other;
    return DD_OK;
}

/* A unix time (the database's UNIX_TIMESTAMP(), which reads a DATETIME in
 * the session's zone) as UTC with a Z, as the log lines write times. */
static void dd_tablestats_utc(const char *unix_s, char *out, size_t out_size)
{
    time_t t = (time_t)atoll(unix_s);
    struct tm tm;

    if (!gmtime_r(&t, &tm) || !strftime(out, out_size, "%Y-%m-%dT%H:%M:%SZ", &tm))
        snprintf(out, out_size, "%s", unix_s);
}

static int dd_tablestats_ages(dd_db_t *db, const char *table, dd_tablestats_t *ts, char *errstr,
                              size_t errstr_size)
{
    char sql[512];
    MYSQL_RES *res;
    MYSQL_ROW row;

    snprintf(sql, sizeof(sql),
             "SELECT UNIX_TIMESTAMP(MIN(created_at)),"
             " TIMESTAMPDIFF(SECOND, MIN(created_at), NOW(6)),"
             " UNIX_TIMESTAMP(MAX(created_at)),"
             " TIMESTAMPDIFF(SECOND, MAX(created_at), NOW(6)) FROM `%s`",
             table);
    if (!(res = dd_tablestats_select(db, sql, errstr, errstr_size))) return DD_ERR_FATAL;
    row = mysql_fetch_row(res);
    if (row && row[0] && row[2]) {
        ts->have_rows = 1;
        dd_tablestats_utc(row[0], ts->oldest, sizeof(ts->oldest));
        ts->oldest_age_s = atoll(row[1]);
        dd_tablestats_utc(row[2], ts->newest, sizeof(ts->newest));
        ts->newest_age_s = atoll(row[3]);
    }
    mysql_free_result(res);
    return DD_OK;
}

static int dd_tablestats_expired(dd_db_t *db, const char *table, dd_tablestats_t *ts, char *errstr,
                                 size_t errstr_size)
{
    char sql[256];
    MYSQL_RES *res;
    MYSQL_ROW row;

    /* Uses the expire_at index: cheap even on a large table. */
    snprintf(sql, sizeof(sql),
             "SELECT COALESCE(SUM(status <> 0), 0), COALESCE(SUM(status = 0), 0) FROM `%s`"
             " WHERE expire_at < NOW(6)",
             table);
    if (!(res = dd_tablestats_select(db, sql, errstr, errstr_size))) return DD_ERR_FATAL;
    if ((row = mysql_fetch_row(res))) {
        ts->expired_done = strtoull(row[0], NULL, 10);
        ts->expired_processing = strtoull(row[1], NULL, 10);
    }
    mysql_free_result(res);
    return DD_OK;
}

/* Failed rows are the table's record of dead letters: each carries the
 * handler's error. */
static int dd_tablestats_failures(dd_db_t *db, const char *table, dd_tablestats_t *ts, char *errstr,
                                  size_t errstr_size)
{
    char sql[256];
    MYSQL_RES *res;
    MYSQL_ROW row;

    snprintf(sql, sizeof(sql),
             "SELECT COUNT(*), LEFT(COALESCE(error, '(no error recorded)'), 100) FROM `%s`"
             " WHERE status = 2 GROUP BY 2 ORDER BY 1 DESC, 2 LIMIT %d",
             table, DD_TABLESTATS_TOP);
    if (!(res = dd_tablestats_select(db, sql, errstr, errstr_size))) return DD_ERR_FATAL;
    while ((row = mysql_fetch_row(res)) && ts->failed_cnt < DD_TABLESTATS_TOP) {
        ts->failed[ts->failed_cnt].rows = strtoull(row[0], NULL, 10);
        snprintf(ts->failed[ts->failed_cnt].error, sizeof(ts->failed[0].error), "%s", row[1]);
        ts->failed_cnt++;
    }
    mysql_free_result(res);
    return DD_OK;
}

/* The tables of the routes shown (only < 0: all) in one shard, into
 * ts[route * shard_cnt + shard]. */
static int dd_tablestats_read_shard(const dd_conf_t *conf, int only, int shard, dd_tablestats_t *ts,
                                    char *errstr, size_t errstr_size)
{
    dd_db_t *db = NULL;
    int rc = dd_db_new_shard(&db, conf, shard, errstr, errstr_size);

    for (int r = 0; !rc && r < conf->route_cnt; r++) {
        const char *table = conf->routes[r].dedup.table;
        dd_tablestats_t *t = &ts[r * conf->shard_cnt + shard];
        if (only >= 0 && r != only) continue;
        rc = dd_grants_check(db, conf, table, DD_GRANTS_READ, errstr, errstr_size);
        if (!rc) rc = dd_tablestats_by_status(db, table, t, errstr, errstr_size);
        if (!rc) rc = dd_tablestats_ages(db, table, t, errstr, errstr_size);
        if (!rc) rc = dd_tablestats_expired(db, table, t, errstr, errstr_size);
        if (!rc) rc = dd_tablestats_failures(db, table, t, errstr, errstr_size);
    }
    dd_db_destroy(db);
    if (rc && conf->shard_cnt > 1) {
        char msg[800];
        snprintf(msg, sizeof(msg), "%.700s", errstr);
        snprintf(errstr, errstr_size, "shard %d: %s", shard, msg);
    }
    return rc;
}

/* Adds one shard's figures of a table to the totals tot: counts add up,
 * the oldest and newest rows are the extremes, failed rows by error are
 * merged (an error in several shards is one line) and cut to the top:
 * the top of the errors each shard's top holds. */
static void dd_tablestats_add(dd_tablestats_t *tot, const dd_tablestats_t *t)
{
    for (int i = 0; i < 3; i++)
        tot->status[i] += t->status[i];
    tot->other += t->other;
    tot->rows += t->rows;
    tot->expired_done += t->expired_done;
    tot->expired_processing += t->expired_processing;
    if (t->have_rows) {
        if (!tot->have_rows || t->oldest_age_s > tot->oldest_age_s) {
            memcpy(tot->oldest, t->oldest, sizeof(tot->oldest));
            tot->oldest_age_s = t->oldest_age_s;
        }
        if (!tot->have_rows || t->newest_age_s < tot->newest_age_s) {
            memcpy(tot->newest, t->newest, sizeof(tot->newest));
            tot->newest_age_s = t->newest_age_s;
        }
        tot->have_rows = 1;
    }
    for (int i = 0; i < t->failed_cnt; i++) {
        int j = 0;
        while (j < tot->failed_cnt && strcmp(tot->failed[j].error, t->failed[i].error) != 0)
            j++;
        if (j == tot->failed_cnt) {
            if (j == DD_TABLESTATS_TOP) {
                /* Full: it takes the place of the least frequent when it
                 * is more frequent. */
                j = DD_TABLESTATS_TOP - 1;
                if (tot->failed[j].rows >= t->failed[i].rows) continue;
            } else {
                tot->failed_cnt++;
            }
            tot->failed[j] = t->failed[i];
        } else {
            tot->failed[j].rows += t->failed[i].rows;
        }
        /* Back into order: most rows first, then by error. */
        while (j > 0 && (tot->failed[j - 1].rows < tot->failed[j].rows ||
                         (tot->failed[j - 1].rows == tot->failed[j].rows &&
                          strcmp(tot->failed[j - 1].error, tot->failed[j].error) > 0))) {
            dd_tablestats_err_t tmp = tot->failed[j - 1];
            tot->failed[j - 1] = tot->failed[j];
            tot->failed[j] = tmp;
            j--;
        }
    }
}

/* The tables of the routes shown in every shard, into ts (route by route,
 * a shard each), and each table's totals into tot[route]. */
static int dd_tablestats_read(const dd_conf_t *conf, int only, dd_tablestats_t *ts,
                              dd_tablestats_t *tot, char *errstr, size_t errstr_size)
{
    int rc = DD_OK;

    for (int s = 0; !rc && s < conf->shard_cnt; s++)
        rc = dd_tablestats_read_shard(conf, only, s, ts, errstr, errstr_size);
    for (int r = 0; !rc && r < conf->route_cnt; r++)
        for (int s = 0; s < conf->shard_cnt; s++)
            dd_tablestats_add(&tot[r], &ts[r * conf->shard_cnt + s]);
    return rc;
}

/* The facts `dedupd run` would judge part i's position by. */
static void dd_tablestats_facts(const dd_tablestats_group_t *g, const dd_position_check_t *checks,
                                int i, const dd_peek_t *peek, dd_position_facts_t *f)
{
    memset(f, 0, sizeof(*f));
    f->pos = g->db[i];
    f->check = checks[i];
    f->committed = g->parts[i].committed;
    f->lo = g->parts[i].low;
    f->hi = g->parts[i].high;
    f->peek = peek;
}

/* Whether each position is the topic's, as `dedupd run` judges it: the
 * messages they are checked by read again, all at once. */
static void dd_tablestats_judge(const dd_conf_t *conf, dd_tablestats_group_t *g,
                                const dd_position_check_t *checks)
{
    dd_peek_t *peeks = calloc((size_t)g->cnt + 1, sizeof(*peeks));
    int *which = calloc((size_t)g->cnt + 1, sizeof(*which)), n = 0;
    rd_kafka_t *rk = NULL;
    char err[512];

    g->judged = calloc((size_t)g->cnt + 1, sizeof(*g->judged));
    for (int i = 0; peeks && which && g->judged && i < g->cnt; i++) {
        dd_position_facts_t f;
        which[i] = -1;
        if (g->db[i] < 0) continue;
        dd_tablestats_facts(g, checks, i, NULL, &f);
        if ((peeks[n].offset = dd_position_peek_offset(&f)) < 0) continue;
        peeks[n].topic = g->parts[i].topic;
        peeks[n].partition = g->parts[i].partition;
        which[i] = n++;
    }
    if (n && dd_peek_new(&rk, conf, err, sizeof(err))) rk = NULL;
    if (n) dd_peek_read(rk, peeks, n, DD_TABLESTATS_KAFKA_MS);
    for (int i = 0; peeks && which && g->judged && i < g->cnt; i++) {
        dd_position_facts_t f;
        if (g->db[i] < 0) continue;
        dd_tablestats_facts(g, checks, i, which[i] >= 0 ? &peeks[which[i]] : NULL, &f);
        dd_position_judge(&f, &g->judged[i]);
    }
    if (rk) dd_kafka_destroy_within(rk, 0, 2000);
    free(peeks);
    free(which);
}

/* The database's positions of the group's partitions. */
static void dd_tablestats_read_positions(const dd_conf_t *conf, dd_tablestats_group_t *g)
{
    const char **topics = calloc((size_t)g->cnt + 1, sizeof(*topics));
    int32_t *parts = calloc((size_t)g->cnt + 1, sizeof(*parts));
    dd_position_check_t *checks = calloc((size_t)g->cnt + 1, sizeof(*checks));

    g->db = calloc((size_t)g->cnt + 1, sizeof(*g->db));
    if (!topics || !parts || !checks || !g->db) {
        snprintf(g->error, sizeof(g->error), "out of memory");
    } else {
        for (int i = 0; i < g->cnt; i++) {
            topics[i] = g->parts[i].topic;
            parts[i] = g->parts[i].partition;
        }
        if (dd_position_lowest(conf, topics, parts, g->cnt, g->db, checks, &g->db_tables, g->error,
                               sizeof(g->error)) == DD_OK)
            dd_tablestats_judge(conf, g, checks);
    }
    free(topics);
    free(parts);
    free(checks);
}

/* The group's offsets, read without joining it. A failure is shown in
 * the output (the table's figures stand on their own) and fails the
 * command. */
static void dd_tablestats_read_group(const dd_conf_t *conf, int only, dd_tablestats_group_t *g)
{
    rd_kafka_t *rk = NULL;

    if (dd_kafka_reader_new(&rk, conf, conf->kafka.group, g->error, sizeof(g->error)) == DD_OK &&
        dd_kafka_route_topics(rk, conf, only, DD_TABLESTATS_KAFKA_MS, &g->topics, &g->topic_cnt,
                              g->error, sizeof(g->error)) == DD_OK &&
        dd_kafka_group_offsets(rk, (const char *const *)g->topics, g->topic_cnt,
                               DD_TABLESTATS_KAFKA_MS, &g->parts, &g->cnt, g->error,
                               sizeof(g->error)) == DD_OK)
        g->error[0] = '\0';
    if (rk) rd_kafka_destroy(rk);
    if (!g->error[0]) dd_tablestats_read_positions(conf, g);
}

/* outbox.enabled: every shard's outbox, added up (the oldest of all). */
static void dd_tablestats_read_outbox(const dd_conf_t *conf, dd_tablestats_group_t *g)
{
    for (int s = 0; s < conf->shard_cnt && !g->outbox_error[0]; s++) {
        dd_db_t *db = NULL;
        dd_outbox_count_t c;
        if (dd_db_new_shard(&db, conf, s, g->outbox_error, sizeof(g->outbox_error)) == DD_OK &&
            dd_outbox_count(dd_db_mysql(db), &c, g->outbox_error, sizeof(g->outbox_error)) ==
                DD_OK) {
            g->outbox.pending += c.pending;
            g->outbox.parked += c.parked;
            if (c.oldest_s > g->outbox.oldest_s) g->outbox.oldest_s = c.oldest_s;
        }
        dd_db_destroy(db);
    }
}

/* ---- text ---- */

static void dd_tablestats_line(const char *label, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void dd_tablestats_line(const char *label, const char *fmt, ...)
{
    va_list ap;

    printf("%-28s ", label);
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    putchar('\n');
}

/* "3d 4h", "2h 5m", "42s". */
static void dd_tablestats_age(long long s, char *out, size_t out_size)
{
    if (s >= 86400)
        snprintf(out, out_size, "%lldd %lldh", s / 86400, s % 86400 / 3600);
    else if (s >= 3600)
        snprintf(out, out_size, "%lldh %lldm", s / 3600, s % 3600 / 60);
    else if (s >= 60)
        snprintf(out, out_size, "%lldm %llds", s / 60, s % 60);
    else
        snprintf(out, out_size, "%llds", s);
}

static void dd_tablestats_offset(int64_t v, char *out, size_t out_size)
{
    if (v >= 0)
        snprintf(out, out_size, "%lld", (long long)v);
    else
        snprintf(out, out_size, "none");
}

/* What a position not used says (j: not DD_POSITION_OWN). */
static void dd_tablestats_unused(const dd_position_judgement_t *j, int64_t db, char *out,
                                 size_t out_size)
{
    static const char *const what[] = {
        [DD_POSITION_FOREIGN] = "not this topic's",
        [DD_POSITION_DIVERGED] = "past the partition's end",
        [DD_POSITION_UNCHECKED] = "cannot be checked",
    };
    char start[48] = "its log start offset";

    if (j->start >= 0) snprintf(start, sizeof(start), "%lld", (long long)j->start);
    snprintf(out, out_size, "%lld, %s (%s): the next run starts at %s", (long long)db,
             what[j->verdict], j->why, start);
}

/* The name of a judgement in the JSON. */
static const char *dd_tablestats_verdict(const dd_position_judgement_t *j)
{
    static const char *const names[] = {
        [DD_POSITION_OWN] = "used",
        [DD_POSITION_FOREIGN] = "foreign",
        [DD_POSITION_DIVERGED] = "diverged",
        [DD_POSITION_UNCHECKED] = "unchecked",
    };

    return names[j->verdict];
}

/* The database's position of part i, and how it stands to Kafka's. */
static void dd_tablestats_db(const dd_tablestats_group_t *g, int i, char *out, size_t out_size)
{
    int64_t db = g->db[i], k = g->parts[i].committed;

    if (db == DD_POSITION_PARTIAL)
        snprintf(out, out_size, "some shards hold none");
    else if (db < 0)
        snprintf(out, out_size, "none");
    else if (g->judged && g->judged[i].verdict != DD_POSITION_OWN)
        dd_tablestats_unused(&g->judged[i], db, out, out_size);
    else if (k >= 0 && db < k)
        snprintf(out, out_size,
                 "%lld, %lld behind Kafka's committed offset: the database went back",
                 (long long)db, (long long)(k - db));
    else if (k >= 0 && db > k)
        snprintf(out, out_size, "%lld, %lld ahead of Kafka's committed offset", (long long)db,
                 (long long)(db - k));
    else
        snprintf(out, out_size, "%lld, as Kafka's committed offset", (long long)db);
}

static void dd_tablestats_text_group(const dd_conf_t *conf, const dd_tablestats_group_t *g)
{
    char label[300], committed[32], db[800];
    long long total = 0;

    if (conf->outbox.enabled && g->outbox_error[0])
        printf("outbox: cannot read it: %s\n", g->outbox_error);
    else if (conf->outbox.enabled)
        printf("outbox: %lld event(s) waiting, the oldest for %.1f s, %lld parked\n",
               (long long)g->outbox.pending, g->outbox.oldest_s, (long long)g->outbox.parked);
    printf("group %s: committed offsets, end offsets and lag (read without joining)\n",
           conf->kafka.group);
    if (g->error[0]) {
        printf("  cannot read them: %s\n", g->error);
        return;
    }
    for (int i = 0; i < g->cnt; i++) {
        const dd_kafka_part_t *p = &g->parts[i];
        snprintf(label, sizeof(label), "  %s [%d]", p->topic, (int)p->partition);
        dd_tablestats_offset(p->committed, committed, sizeof(committed));
        dd_tablestats_line(label, "committed %s, end %lld, lag %lld", committed, (long long)p->high,
                           (long long)p->lag);
        total += p->lag;
    }
    dd_tablestats_line("  total lag", "%lld", total);
    printf("group %s: the database's positions (dedupd_position, the lowest of the shards)\n",
           conf->kafka.group);
    if (!g->db_tables) printf("  none kept: no table dedupd_position (run dedupd migrate)\n");
    for (int i = 0; g->db_tables && i < g->cnt; i++) {
        snprintf(label, sizeof(label), "  %s [%d]", g->parts[i].topic, (int)g->parts[i].partition);
        dd_tablestats_db(g, i, db, sizeof(db));
        dd_tablestats_line(label, "%s", db);
    }
}

/* Route r's table. */
static void dd_tablestats_text_table(const dd_conf_t *conf, int r, const dd_tablestats_t *ts)
{
    const dd_conf_route_t *route = &conf->routes[r];
    char age[32], every[32], iv[32];

    if (conf->has_routes) dd_tablestats_line("route", "%s", route->name);
    if (conf->shard_cnt > 1)
        dd_tablestats_line("table", "%s in %d shards (totals)", route->dedup.table,
                           conf->shard_cnt);
    else
        dd_tablestats_line("table", "%s.%s", conf->shards[0].database, route->dedup.table);
    dd_tablestats_line("rows", "%llu", ts->rows);
    dd_tablestats_line("  applied (status 1)", "%llu", ts->status[1]);
    dd_tablestats_line("  failed (status 2)", "%llu", ts->status[2]);
    dd_tablestats_line("  processing (status 0)", "%llu", ts->status[0]);
    if (ts->other) dd_tablestats_line("  unknown status", "%llu", ts->other);
    if (ts->have_rows) {
        dd_tablestats_age(ts->oldest_age_s, age, sizeof(age));
        dd_tablestats_line("oldest row", "%s (created %s ago)", ts->oldest, age);
        dd_tablestats_age(ts->newest_age_s, age, sizeof(age));
        dd_tablestats_line("newest row", "%s (created %s ago)", ts->newest, age);
    } else {
        dd_tablestats_line("oldest row", "-");
        dd_tablestats_line("newest row", "-");
    }
    dd_tablestats_line("expired, awaiting purge", "%llu", ts->expired_done);
    dd_tablestats_line("expired, still processing", "%llu (status 0: never purged)",
                       ts->expired_processing);
    dd_tablestats_age(route->dedup.ttl_s, every, sizeof(every));
    if (conf->purge.interval_s > 0) {
        dd_tablestats_age(conf->purge.interval_s, iv, sizeof(iv));
        dd_tablestats_line("retention", "ttl %s; `dedupd run` purges every %s, %d rows per batch",
                           every, iv, conf->purge.batch);
    } else {
        dd_tablestats_line("retention", "ttl %s; background purge off (purge.interval = 0)", every);
    }
    if (ts->failed_cnt > 0) printf("failed rows by error (top %d):\n", DD_TABLESTATS_TOP);
    for (int i = 0; i < ts->failed_cnt; i++) {
        char shown[4 * sizeof(ts->failed[0].error)]; /* a stored error, for a terminal */
        dd_text_visible(shown, sizeof(shown), ts->failed[i].error);
        printf("  %8llu  %s\n", ts->failed[i].rows, shown);
    }
}

/* With shards, a line per shard of route r's table (the lines above are
 * their totals). */
static void dd_tablestats_text_shards(const dd_conf_t *conf, int r, const dd_tablestats_t *ts)
{
    char label[64], addr[300];

    if (conf->shard_cnt < 2) return;
    printf("by shard (rows: applied/failed/processing; expired awaiting purge):\n");
    for (int s = 0; s < conf->shard_cnt; s++) {
        const dd_tablestats_t *t = &ts[r * conf->shard_cnt + s];
        snprintf(label, sizeof(label), "  shard %d", s);
        dd_tablestats_line(label, "%llu: %llu/%llu/%llu; %llu  (%s, %s)", t->rows, t->status[1],
                           t->status[2], t->status[0], t->expired_done,
                           dd_conf_mysql_addr(&conf->shards[s], addr, sizeof(addr)),
                           conf->shards[s].database);
    }
}

static void dd_tablestats_text(const dd_conf_t *conf, int only, const dd_tablestats_t *ts,
                               const dd_tablestats_t *tot, const dd_tablestats_group_t *g)
{
    for (int r = 0, n = 0; r < conf->route_cnt; r++) {
        if (only >= 0 && r != only) continue;
        if (n++) putchar('\n');
        dd_tablestats_text_table(conf, r, &tot[r]);
        dd_tablestats_text_shards(conf, r, ts);
    }
    printf("dead letters: the table records rejected keys as failed rows (status 2, with the "
           "error);\nconflicts are not stored in the table (a conflicting message goes to the "
           "dead-letter\ntopic only): see dedupd_conflicts_total and "
           "dedupd_dead_letters_total on /metrics.\n");
    dd_tablestats_text_group(conf, g);
}

/* ---- JSON ---- */

static void dd_tablestats_json_str(const char *name, const char *v, int first)
{
    printf("%s\"%s\":", first ? "" : ",", name);
    if (v)
        dd_text_json_fputs(stdout, v, strlen(v), 0);
    else
        fputs("null", stdout);
}

static void dd_tablestats_json_num(const char *name, long long v, int null, int first)
{
    printf("%s\"%s\":", first ? "" : ",", name);
    if (null)
        fputs("null", stdout);
    else
        printf("%lld", v);
}

static void dd_tablestats_json_group(const dd_conf_t *conf, const dd_tablestats_group_t *g)
{
    long long total = 0;

    if (conf->outbox.enabled && g->outbox_error[0]) {
        fputs("\"outbox\":{", stdout);
        dd_tablestats_json_str("error", g->outbox_error, 1);
        fputs("},", stdout);
    } else if (conf->outbox.enabled) {
        printf("\"outbox\":{\"pending\":%lld,\"parked\":%lld,\"oldest_s\":%.3f},",
               (long long)g->outbox.pending, (long long)g->outbox.parked, g->outbox.oldest_s);
    }
    fputs("\"group\":{", stdout);
    dd_tablestats_json_str("id", conf->kafka.group, 1);
    if (g->error[0]) {
        dd_tablestats_json_str("error", g->error, 0);
        fputs("}", stdout);
        return;
    }
    fputs(",\"partitions\":[", stdout);
    for (int i = 0; i < g->cnt; i++) {
        const dd_kafka_part_t *p = &g->parts[i];
        fputs(i ? ",{" : "{", stdout);
        dd_tablestats_json_str("topic", p->topic, 1);
        dd_tablestats_json_num("partition", p->partition, 0, 0);
        dd_tablestats_json_num("committed", p->committed, p->committed < 0, 0);
        dd_tablestats_json_num("low", p->low, 0, 0);
        dd_tablestats_json_num("end", p->high, 0, 0);
        dd_tablestats_json_num("lag", p->lag, 0, 0);
        dd_tablestats_json_num("database", g->db[i], g->db[i] < 0, 0);
        dd_tablestats_json_str(
            "database_check",
            g->db[i] >= 0 && g->judged ? dd_tablestats_verdict(&g->judged[i]) : NULL, 0);
        fputs("}", stdout);
        total += p->lag;
    }
    fputs("]", stdout);
    dd_tablestats_json_num("lag", total, 0, 0);
    fputs("}", stdout);
}

/* The figures of a table (a shard's or the totals), after a first member. */
static void dd_tablestats_json_counts(const dd_tablestats_t *ts)
{
    dd_tablestats_json_num("rows", (long long)ts->rows, 0, 0);
    dd_tablestats_json_num("applied", (long long)ts->status[1], 0, 0);
    dd_tablestats_json_num("failed", (long long)ts->status[2], 0, 0);
    dd_tablestats_json_num("processing", (long long)ts->status[0], 0, 0);
    dd_tablestats_json_num("unknown_status", (long long)ts->other, 0, 0);
    dd_tablestats_json_str("oldest_created_at", ts->have_rows ? ts->oldest : NULL, 0);
    dd_tablestats_json_num("oldest_age_s", ts->oldest_age_s, !ts->have_rows, 0);
    dd_tablestats_json_str("newest_created_at", ts->have_rows ? ts->newest : NULL, 0);
    dd_tablestats_json_num("newest_age_s", ts->newest_age_s, !ts->have_rows, 0);
    dd_tablestats_json_num("expired_awaiting_purge", (long long)ts->expired_done, 0, 0);
    dd_tablestats_json_num("expired_processing", (long long)ts->expired_processing, 0, 0);
    fputs(",\"failed_by_error\":[", stdout);
    for (int i = 0; i < ts->failed_cnt; i++) {
        fputs(i ? ",{" : "{", stdout);
        dd_tablestats_json_str("error", ts->failed[i].error, 1);
        dd_tablestats_json_num("rows", (long long)ts->failed[i].rows, 0, 0);
        fputs("}", stdout);
    }
    fputs("]", stdout);
}

/* "table":{...},"retention":{...} of route r: the totals of every shard,
 * and "shards", each shard's figures (one element without mysql.shards). */
static void dd_tablestats_json_table(const dd_conf_t *conf, int r, const dd_tablestats_t *ts,
                                     const dd_tablestats_t *tot)
{
    const dd_conf_route_t *route = &conf->routes[r];
    char addr[300];

    fputs("\"table\":{", stdout);
    dd_tablestats_json_str("database", conf->shards[0].database, 1);
    dd_tablestats_json_str("name", route->dedup.table, 0);
    dd_tablestats_json_counts(&tot[r]);
    fputs(",\"shards\":[", stdout);
    for (int s = 0; s < conf->shard_cnt; s++) {
        fputs(s ? ",{" : "{", stdout);
        dd_tablestats_json_num("shard", s, 0, 1);
        dd_tablestats_json_str("host", dd_conf_mysql_addr(&conf->shards[s], addr, sizeof(addr)), 0);
        dd_tablestats_json_str("database", conf->shards[s].database, 0);
        dd_tablestats_json_counts(&ts[r * conf->shard_cnt + s]);
        fputs("}", stdout);
    }
    fputs("]},\"retention\":{", stdout);
    dd_tablestats_json_num("ttl_s", route->dedup.ttl_s, 0, 1);
    dd_tablestats_json_num("purge_interval_s", conf->purge.interval_s, 0, 0);
    dd_tablestats_json_num("purge_batch", conf->purge.batch, 0, 0);
    fputs("}", stdout);
}

/* One object: "routes" (each route shown: its name, table and retention),
 * then, when one route is shown, its table and retention once more at the
 * top (the shape of a configuration without routes), then the group. */
static void dd_tablestats_json(const dd_conf_t *conf, int only, const dd_tablestats_t *ts,
                               const dd_tablestats_t *tot, const dd_tablestats_group_t *g)
{
    int shown = 0, one = only >= 0 ? only : conf->route_cnt == 1 ? 0 : -1;

    fputs("{\"routes\":[", stdout);
    for (int r = 0; r < conf->route_cnt; r++) {
        if (only >= 0 && r != only) continue;
        fputs(shown++ ? ",{" : "{", stdout);
        dd_tablestats_json_str("route", conf->routes[r].name, 1);
        fputs(",", stdout);
        dd_tablestats_json_table(conf, r, ts, tot);
        fputs("}", stdout);
    }
    fputs("],", stdout);
    if (one >= 0) {
        dd_tablestats_json_table(conf, one, ts, tot);
        fputs(",", stdout);
    }
    dd_tablestats_json_group(conf, g);
    fputs("}\n", stdout);
}

/* ---- the command ---- */

static int dd_tablestats_set(void *opts, int id, char *arg)
{
    (void)id; /* --format, the only one */
    if (strcmp(arg, "text") && strcmp(arg, "json")) {
        fprintf(stderr, "dedupd stats: --format must be text or json, not '%s'\n", arg);
        return DD_EXIT_USAGE;
    }
    ((dd_tablestats_opts_t *)opts)->json = arg[0] == 'j';
    return DD_EXIT_OK;
}

static const dd_cmd_opt_t dd_tablestats_opts[] = {
    DD_CMD_SET("format", "FORMAT", 'F',
               "text (the default) or json (one object: routes, and for\n"
               "one route its table and retention, group; a table's\n"
               "figures are the totals, its shards array each shard's;\n"
               "docs/OPERATIONS.md, Stats)"),
    DD_CMD_OPT_END,
};

static int dd_tablestats_run(const dd_cmd_ctx_t *ctx, void *opts)
{
    const dd_conf_t *conf = ctx->conf;
    const dd_tablestats_opts_t *o = opts;
    int only = ctx->only;
    dd_tablestats_t *ts = calloc((size_t)(conf->route_cnt * conf->shard_cnt), sizeof(*ts));
    dd_tablestats_t *tot = calloc((size_t)conf->route_cnt, sizeof(*tot));
    dd_tablestats_group_t g;
    char err[1024];
    int rc;

    memset(&g, 0, sizeof(g));
    if (!ts || !tot) {
        dd_log(DD_LOG_ERROR, "dedupd stats: out of memory");
        free(ts);
        free(tot);
        return DD_EXIT_FAIL;
    }
    rc = dd_tablestats_read(conf, only, ts, tot, err, sizeof(err));
    if (rc) {
        dd_log(DD_LOG_ERROR, "dedupd stats: %s", err);
        free(ts);
        free(tot);
        return DD_EXIT_FAIL;
    }
    dd_tablestats_read_group(conf, only, &g);
    if (conf->outbox.enabled) dd_tablestats_read_outbox(conf, &g);
    if (o->json)
        dd_tablestats_json(conf, only, ts, tot, &g);
    else
        dd_tablestats_text(conf, only, ts, tot, &g);
    fflush(stdout);
    if (g.error[0]) dd_log(DD_LOG_ERROR, "dedupd stats: group %s: %s", conf->kafka.group, g.error);
    if (g.outbox_error[0]) dd_log(DD_LOG_ERROR, "dedupd stats: outbox: %s", g.outbox_error);
    free(g.parts);
    free(g.db);
    free(g.judged);
    dd_kafka_topics_free(g.topics, g.topic_cnt);
    free(ts);
    free(tot);
    return g.error[0] || g.outbox_error[0] ? DD_EXIT_FAIL : DD_EXIT_OK;
}

const dd_cmd_t dd_cmd_stats = {
    .name = "stats",
    .args = "-c FILE [--format text|json] [--route NAME]",
    .summary = "the dedup tables and the group's lag at a glance",
    .usage = "usage: dedupd stats -c FILE [--format text|json] [--route NAME]\n"
             "\n"
             "Shows every route's dedup table at a glance (rows by status, the oldest and\n"
             "newest, what awaits the purge, the most frequent errors of failed rows) and\n"
             "the consumer group's committed offset, end offset and lag per partition of\n"
             "the routes' topics, read without joining the group (the running consumers\n"
             "do not rebalance). With mysql.shards, each table's totals over every shard,\n"
             "then a line per shard.\n",
    .exits = "  0  shown\n"
             "  1  failure: the database or the group's offsets could not be read (what\n"
             "     could be read is shown)\n"
             "  2  usage error, or no route of that name\n",
    .route_help = "only the route NAME (routes[].name; default for a\n"
                  "configuration without routes): its table and topics",
    .flags = DD_CMD_CONFIG | DD_CMD_ROUTE,
    .opts_size = sizeof(dd_tablestats_opts_t),
    .opts = dd_tablestats_opts,
    .set = dd_tablestats_set,
    .run = dd_tablestats_run,
};
