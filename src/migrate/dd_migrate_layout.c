/*
 * The recorded shard layout (see dd_migrate.h): what decides the shard of
 * a key stored in a database, recorded there by `dedupd migrate` and
 * compared by run, check and replay with what the configuration decides.
 *
 * Why all of it: a key's shard is a function of the shard count, the
 * shard's place in mysql.shards, and for its route the shard_by, the shard
 * key template and the map. Change any one and keys already stored in one
 * shard are looked for in another, where they look new: the payment is
 * applied a second time. So each is recorded, and a change is refused
 * until `migrate --relayout` says the data was moved, which also starts
 * the window of the wrong-shard check (changed_at).
 *
 * The routes' part is one text column, a line per dedup table: a route is
 * named by its table, because the rows are the table's (a route renamed
 * over the same table changes nothing). A line of a table the
 * configuration no longer has is kept: a route that comes back is
 * compared with what its rows were written under.
 */
#include "dd_migrate.h"

#include <stdlib.h>
#include <string.h>

#include <mysqld_error.h>

#include "dd_buf.h"
#include "dd_common.h"
#include "dd_db.h"
#include "dd_key.h"
#include "dd_log.h"
#include "dd_shard.h"

static const char dd_migrate_layout_sql[] =
    "CREATE TABLE IF NOT EXISTS dedupd_shard_layout ("
    " id TINYINT NOT NULL PRIMARY KEY,"
    " shard_index INT NOT NULL,"
    " shard_count INT NOT NULL,"
    " recorded_at DATETIME(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6),"
    " changed_at DATETIME(6) NULL,"
    " routes MEDIUMBLOB NULL"
    ") ENGINE=InnoDB";

/* A table created before these columns were. */
static const char *const dd_migrate_layout_cols_sql[] = {
    "ALTER TABLE dedupd_shard_layout ADD COLUMN IF NOT EXISTS changed_at DATETIME(6) NULL",
    "ALTER TABLE dedupd_shard_layout ADD COLUMN IF NOT EXISTS routes MEDIUMBLOB NULL",
};

/* What a database records. */
typedef struct {
    int idx, cnt;   /* -1: no layout */
    int has_routes; /* the routes column is there and not NULL */
    dd_buf_t routes;
} dd_layout_rec_t;

/* One line of the routes column: table, shard_by, map, shard key. */
typedef struct {
    const char *f[4];
    size_t len[4];
} dd_layout_line_t;

enum { DD_LINE_TABLE, DD_LINE_BY, DD_LINE_MAP, DD_LINE_KEY };

/*
 * The configuration's layout
 */

/* The shard key of d as the layout records it: "" for the business key. */
static int dd_migrate_layout_key(const dd_conf_dedup_t *d, char *out, size_t out_size, char *errstr,
                                 size_t errstr_size)
{
    dd_key_tmpl_t *sk = NULL, *key = NULL;
    char key_text[DD_MIGRATE_SHARD_KEY_MAX];
    size_t len = 0;
    int rc;

    out[0] = '\0';
    if (!d->shard_key) return DD_OK;
    rc = dd_key_tmpl_new(&sk, d->shard_key, errstr, errstr_size);
    if (!rc) rc = dd_key_tmpl_new(&key, d->key, errstr, errstr_size);
    if (!rc && (len = dd_key_tmpl_text(sk, out, out_size)) >= out_size) {
        dd_errstr_set(errstr, errstr_size, "shard_key is %zu bytes, the layout records at most %zu",
                      len, out_size - 1);
        rc = DD_ERR_CONFIG;
    }
    /* the key's own template renders the business key itself */
    if (!rc && dd_key_tmpl_text(key, key_text, sizeof(key_text)) < sizeof(key_text) &&
        strcmp(key_text, out) == 0)
        out[0] = '\0';
    dd_key_tmpl_destroy(sk);
    dd_key_tmpl_destroy(key);
    return rc;
}

int dd_migrate_layout_of(const dd_conf_t *conf, int s, dd_migrate_layout_t *layout, char *errstr,
                         size_t errstr_size)
{
    char err[512];

    layout->shard = s;
    layout->shard_cnt = conf->shard_cnt;
    layout->route_cnt = 0;
    for (int r = 0; conf->shard_cnt > 1 && r < conf->route_cnt; r++) {
        const dd_conf_dedup_t *d = &conf->routes[r].dedup;
        dd_migrate_route_layout_t *rt = &layout->route[layout->route_cnt++];

        rt->route = conf->routes[r].name;
        rt->table = d->table;
        rt->shard_by = dd_shard_by_name(d->shard_by);
        snprintf(rt->map, sizeof(rt->map), "%s",
                 d->shard_by == DD_SHARD_MAP ? d->shard_map_digest : "");
        if (dd_migrate_layout_key(d, rt->shard_key, sizeof(rt->shard_key), err, sizeof(err))) {
            dd_errstr_set(errstr, errstr_size, "route %s: %s", rt->route, err);
            return DD_ERR_CONFIG;
        }
    }
    return DD_OK;
}

/*
 * The recorded layout
 */

/* Reads the recorded layout into rec (rec->routes must be empty). */
static int dd_migrate_layout_read(MYSQL *db, dd_layout_rec_t *rec)
{
    MYSQL_RES *res = NULL;
    MYSQL_ROW row;
    int rc = DD_OK, cols = 3;

    rec->idx = rec->cnt = -1;
    rec->has_routes = 0;
    if (mysql_query(db, "SELECT shard_index, shard_count, routes FROM dedupd_shard_layout"
                        " WHERE id = 1") != 0 &&
        mysql_errno(db) == ER_BAD_FIELD_ERROR) {
        cols = 2; /* recorded before the routes were */
        mysql_query(db, "SELECT shard_index, shard_count FROM dedupd_shard_layout WHERE id = 1");
    }
    if (mysql_errno(db) || !(res = mysql_store_result(db))) {
        rc = dd_db_classify(mysql_errno(db));
    } else if ((row = mysql_fetch_row(res)) && row[0] && row[1]) {
        rec->idx = atoi(row[0]);
        rec->cnt = atoi(row[1]);
        if (cols == 3 && row[2]) {
            rec->has_routes = 1;
            dd_buf_put(&rec->routes, row[2], mysql_fetch_lengths(res)[2]);
            dd_buf_puts(&rec->routes, ""); /* NUL-terminated even when empty */
        }
    }
    mysql_free_result(res);
    return rc;
}

/* The line of table in text[0..len), 1 when found (a line without its
 * four fields is no line). */
static int dd_migrate_layout_find(const char *text, size_t len, const char *table,
                                  dd_layout_line_t *line)
{
    const char *p = text, *end = text + len;

    while (p && p < end) {
        const char *eol = memchr(p, '\n', (size_t)(end - p)), *f = p;
        int n = 0;

        if (!eol) eol = end;
        for (; n < 3; n++) {
            const char *tab = memchr(f, '\t', (size_t)(eol - f));
            if (!tab) break;
            line->f[n] = f;
            line->len[n] = (size_t)(tab - f);
            f = tab + 1;
        }
        line->f[3] = f;
        line->len[3] = (size_t)(eol - f);
        if (n == 3 && line->len[0] == strlen(table) && memcmp(p, table, line->len[0]) == 0)
            return 1;
        p = eol + 1;
    }
    return 0;
}

/* Appends route rt's line. */
static void dd_migrate_layout_line(dd_buf_t *b, const dd_migrate_route_layout_t *rt)
{
    dd_buf_printf(b, "%s\t%s\t%s\t%s\n", rt->table, rt->shard_by, rt->map, rt->shard_key);
}

/* The routes column to record: the configuration's lines, then the
 * recorded lines of the tables it does not have. */
static void dd_migrate_layout_merge(const dd_migrate_layout_t *layout, const dd_layout_rec_t *rec,
                                    dd_buf_t *out)
{
    const char *p = rec->routes.p, *end = p ? p + rec->routes.len : NULL;

    dd_buf_puts(out, "");
    for (int r = 0; r < layout->route_cnt; r++)
        dd_migrate_layout_line(out, &layout->route[r]);
    while (p && p < end) {
        const char *eol = memchr(p, '\n', (size_t)(end - p));
        size_t n = eol ? (size_t)(eol - p) : (size_t)(end - p), tlen = strcspn(p, "\t\n");
        int ours = 0;

        for (int r = 0; !ours && r < layout->route_cnt; r++)
            ours = strlen(layout->route[r].table) == tlen &&
                   memcmp(layout->route[r].table, p, tlen) == 0;
        if (!ours && n > 0) {
            dd_buf_put(out, p, n);
            dd_buf_puts(out, "\n");
        }
        p += n + 1;
    }
}

/*
 * Differences
 */

/* A part of a route's line as the messages say it. */
static void dd_migrate_layout_say(int part, const char *v, size_t len, char *out, size_t out_size)
{
    if (part == DD_LINE_BY)
        snprintf(out, out_size, "shard_by %.*s", (int)len, v);
    else if (part == DD_LINE_KEY && len == 0)
        snprintf(out, out_size, "shard_key unset (the business key)");
    else if (part == DD_LINE_KEY)
        snprintf(out, out_size, "shard_key \"%.*s\"", (int)(len > 300 ? 300 : len), v);
    else if (len == 0)
        snprintf(out, out_size, "no shard_map");
    else
        snprintf(out, out_size, "the shard_map of SHA-256 %.16s...", v);
}

/* The parts of route rt that differ from the recorded line: a bit per
 * part (1 << DD_LINE_BY, ...). */
static int dd_migrate_layout_parts(const dd_migrate_route_layout_t *rt, const dd_layout_line_t *ln)
{
    const char *now[4] = {NULL, rt->shard_by, rt->map, rt->shard_key};
    int bits = 0;

    for (int part = DD_LINE_BY; part <= DD_LINE_KEY; part++)
        if (ln->len[part] != strlen(now[part]) || memcmp(ln->f[part], now[part], ln->len[part]))
            bits |= 1 << part;
    return bits;
}

/* "WAS, but the configuration has NOW" for the first part in bits. */
static void dd_migrate_layout_say_diff(const dd_migrate_route_layout_t *rt,
                                       const dd_layout_line_t *ln, int part, char *out,
                                       size_t out_size)
{
    const char *now[4] = {NULL, rt->shard_by, rt->map, rt->shard_key};
    char was[400], is[400];

    dd_migrate_layout_say(part, ln->f[part], ln->len[part], was, sizeof(was));
    dd_migrate_layout_say(part, now[part], strlen(now[part]), is, sizeof(is));
    snprintf(out, out_size, "%s -> %s", was, is);
}

static const char dd_migrate_layout_advice[] =
    ": its keys would be looked for in another shard and claimed anew. Restore the "
    "configuration the data was written with (the order of mysql.shards is the shard index), "
    "or move the data first and then record the new layout with `dedupd migrate --relayout` "
    "(docs/SHARDS.md, \"Changing the shard count\")";

/* The first difference between rec and layout into errstr; 0 when none.
 * *unknown: the routes rec records nothing for. */
static int dd_migrate_layout_compare(const char *who, const dd_layout_rec_t *rec,
                                     const dd_migrate_layout_t *layout, int *unknown, char *errstr,
                                     size_t errstr_size)
{
    *unknown = 0;
    if (rec->idx != layout->shard || rec->cnt != layout->shard_cnt) {
        dd_errstr_set(errstr, errstr_size,
                      "%s records the layout shard %d of %d, but the configuration makes it "
                      "shard %d of %d%s",
                      who, rec->idx, rec->cnt, layout->shard, layout->shard_cnt,
                      dd_migrate_layout_advice);
        return DD_ERR_CONFIG;
    }
    for (int r = 0; r < layout->route_cnt; r++) {
        const dd_migrate_route_layout_t *rt = &layout->route[r];
        dd_layout_line_t ln;
        char diff[900];
        int bits, part = DD_LINE_BY;

        if (!rec->has_routes ||
            !dd_migrate_layout_find(rec->routes.p, rec->routes.len, rt->table, &ln)) {
            ++*unknown;
            continue;
        }
        if (!(bits = dd_migrate_layout_parts(rt, &ln))) continue;
        while (!(bits & (1 << part)))
            part++;
        dd_migrate_layout_say_diff(rt, &ln, part, diff, sizeof(diff));
        dd_errstr_set(errstr, errstr_size,
                      "%s records for route %s (table %s) another layout than the "
                      "configuration's, %s%s",
                      who, rt->route, rt->table, diff, dd_migrate_layout_advice);
        return DD_ERR_CONFIG;
    }
    return DD_OK;
}

int dd_migrate_layout_check(MYSQL *db, const char *who, const dd_migrate_layout_t *layout,
                            int required, int *unknown, char *errstr, size_t errstr_size)
{
    dd_layout_rec_t rec = {0};
    int rc, none = 0;

    if (!unknown) unknown = &none;
    *unknown = 0;
    dd_migrate_layout_read(db, &rec);
    if (rec.cnt < 0) {
        rc = DD_OK;
        if (required) {
            dd_errstr_set(errstr, errstr_size,
                          "%s records no shard layout (dedupd_shard_layout%s%s): run `dedupd "
                          "migrate` with this configuration, which records it in every shard",
                          who, mysql_errno(db) ? ": " : "", mysql_errno(db) ? mysql_error(db) : "");
            rc = DD_ERR_CONFIG;
        }
    } else {
        rc = dd_migrate_layout_compare(who, &rec, layout, unknown, errstr, errstr_size);
    }
    dd_buf_release(&rec.routes);
    return rc;
}

/*
 * Recording
 */

/* With --relayout: a line per difference between rec and layout. */
static void dd_migrate_layout_report(FILE *report, const char *who, const dd_layout_rec_t *rec,
                                     const dd_migrate_layout_t *layout)
{
    int any = rec->idx != layout->shard || rec->cnt != layout->shard_cnt;

    if (any)
        fprintf(report, "%s: layout shard %d of %d -> shard %d of %d (changed).\n", who, rec->idx,
                rec->cnt, layout->shard, layout->shard_cnt);
    for (int r = 0; r < layout->route_cnt; r++) {
        const dd_migrate_route_layout_t *rt = &layout->route[r];
        dd_layout_line_t ln;
        char diff[900];
        int bits;

        if (!rec->has_routes ||
            !dd_migrate_layout_find(rec->routes.p, rec->routes.len, rt->table, &ln)) {
            dd_migrate_layout_say(DD_LINE_KEY, rt->shard_key, strlen(rt->shard_key), diff,
                                  sizeof(diff));
            fprintf(report,
                    "%s: route %s (table %s): none recorded -> shard_by %s, %s, %s "
                    "(changed).\n",
                    who, rt->route, rt->table, rt->shard_by, diff, rt->map[0] ? "a map" : "no map");
            any = 1;
            continue;
        }
        bits = dd_migrate_layout_parts(rt, &ln);
        for (int part = DD_LINE_BY; part <= DD_LINE_KEY; part++) {
            if (!(bits & (1 << part))) continue;
            dd_migrate_layout_say_diff(rt, &ln, part, diff, sizeof(diff));
            fprintf(report, "%s: route %s (table %s): %s (changed).\n", who, rt->route, rt->table,
                    diff);
            any = 1;
        }
    }
    if (!any)
        fprintf(report, "%s: layout shard %d of %d, unchanged.\n", who, layout->shard,
                layout->shard_cnt);
}

/* Writes the layout: the place and the routes column; changed_at = now
 * when changed, else as it is. */
static int dd_migrate_layout_write(MYSQL *db, const dd_migrate_layout_t *layout,
                                   const dd_layout_rec_t *rec, int insert, int has_rows,
                                   int changed)
{
    dd_buf_t sql = {0}, routes = {0};
    int rc = DD_OK;

    dd_migrate_layout_merge(layout, rec, &routes);
    if (insert)
        dd_buf_printf(&sql,
                      "INSERT IGNORE INTO dedupd_shard_layout (id, shard_index, shard_count, "
                      "changed_at, routes) VALUES (1, %d, %d, %s, ",
                      layout->shard, layout->shard_cnt, has_rows ? "NOW(6)" : "NULL");
    else
        dd_buf_printf(&sql,
                      "UPDATE dedupd_shard_layout SET shard_index = %d, shard_count = %d%s, "
                      "routes = ",
                      layout->shard, layout->shard_cnt,
                      changed ? ", recorded_at = NOW(6), changed_at = NOW(6)" : "");
    dd_db_hex(&sql, routes.p, routes.len);
    dd_buf_puts(&sql, insert ? ")" : " WHERE id = 1");
    if (sql.oom || routes.oom)
        rc = DD_ERR_NOMEM;
    else if (mysql_real_query(db, sql.p, (unsigned long)sql.len) != 0)
        rc = dd_db_classify(mysql_errno(db));
    dd_buf_release(&sql);
    dd_buf_release(&routes);
    return rc;
}

/* Logs the routes recorded for the first time in a recorded layout. */
static void dd_migrate_layout_log_new(const char *who, const dd_layout_rec_t *rec,
                                      const dd_migrate_layout_t *layout)
{
    for (int r = 0; r < layout->route_cnt; r++) {
        const dd_migrate_route_layout_t *rt = &layout->route[r];
        dd_layout_line_t ln;

        if (rec->has_routes &&
            dd_migrate_layout_find(rec->routes.p, rec->routes.len, rt->table, &ln))
            continue;
        dd_log(DD_LOG_INFO,
               "%s: recorded the shard layout of route %s (table %s): shard_by %s, shard_key "
               "%s%s%s, taken as unchanged.",
               who, rt->route, rt->table, rt->shard_by, rt->shard_key[0] ? "\"" : "unset",
               rt->shard_key, rt->shard_key[0] ? "\"" : "");
    }
}

/* Compares and writes; the caller holds the layout's lock. 0, or -1 with
 * the database's error standing. */
static int dd_migrate_layout_update(MYSQL *db, const char *who, const dd_migrate_layout_t *layout,
                                    int has_rows, int relayout, FILE *report)
{
    dd_layout_rec_t rec = {0};
    char why[8];
    int rc = -1, unknown = 0, differs;

    if (mysql_query(db, dd_migrate_layout_sql) != 0 ||
        mysql_query(db, dd_migrate_layout_cols_sql[0]) != 0 ||
        mysql_query(db, dd_migrate_layout_cols_sql[1]) != 0 ||
        dd_migrate_layout_read(db, &rec) != DD_OK)
        goto out;
    if (rec.cnt < 0) {
        /* Rows in the dedup tables were written under no recorded layout
         * (one database becoming a shard): they may belong elsewhere. */
        if (dd_migrate_layout_write(db, layout, &rec, 1, has_rows, 0) != DD_OK) goto out;
        if (relayout)
            fprintf(report, "%s: layout none -> shard %d of %d%s.\n", who, layout->shard,
                    layout->shard_cnt, has_rows ? " (changed: its dedup tables hold rows)" : "");
        rc = 0;
        goto out;
    }
    differs = dd_migrate_layout_compare(who, &rec, layout, &unknown, why, sizeof(why)) != DD_OK;
    rc = 0;
    if (differs && !relayout) goto out; /* refused by the check */
    /* Routes recorded nothing for: as they are on an upgrade, but changed
     * when --relayout says the layout changed (what it was is not known). */
    if (relayout) {
        dd_migrate_layout_report(report, who, &rec, layout);
        differs |= unknown > 0;
    } else {
        dd_migrate_layout_log_new(who, &rec, layout);
    }
    if ((differs || unknown || !rec.has_routes) &&
        dd_migrate_layout_write(db, layout, &rec, 0, 0, differs) != DD_OK)
        rc = -1;
out:
    dd_buf_release(&rec.routes);
    return rc;
}

int dd_migrate_layout_record(MYSQL *db, const char *who, const dd_migrate_layout_t *layout,
                             int has_rows, int relayout, FILE *report, char *errstr,
                             size_t errstr_size)
{
    int rc;

    /* Two migrates at once (another configuration over the same shards)
     * must not lose each other's lines of the routes column. */
    if (mysql_query(db, "DO GET_LOCK('dedupd_shard_layout', 60)") != 0 ||
        dd_migrate_layout_update(db, who, layout, has_rows, relayout, report) != 0) {
        dd_errstr_set(errstr, errstr_size, "%s: recording the shard layout: %u: %s", who,
                      mysql_errno(db), mysql_error(db));
        rc = dd_db_classify(mysql_errno(db));
        mysql_query(db, "DO RELEASE_LOCK('dedupd_shard_layout')");
        return rc ? rc : DD_ERR_NOMEM;
    }
    mysql_query(db, "DO RELEASE_LOCK('dedupd_shard_layout')");
    return dd_migrate_layout_check(db, who, layout, 1, NULL, errstr, errstr_size);
}

int dd_migrate_layout_changed(MYSQL *db, int64_t ttl_s, int64_t *left_s, char *changed,
                              size_t changed_size, char *until, size_t until_size, char *errstr,
                              size_t errstr_size)
{
    char sql[400];
    MYSQL_RES *res = NULL;
    MYSQL_ROW row;
    int rc = DD_OK;

    *left_s = -1;
    changed[0] = until[0] = '\0';
    /* On the database's clock, which wrote changed_at. */
    snprintf(sql, sizeof(sql),
             "SELECT TIMESTAMPDIFF(SECOND, NOW(6), changed_at + INTERVAL %lld SECOND),"
             " DATE_FORMAT(changed_at, '%%Y-%%m-%%d %%H:%%i:%%s'),"
             " DATE_FORMAT(changed_at + INTERVAL %lld SECOND, '%%Y-%%m-%%d %%H:%%i:%%s')"
             " FROM dedupd_shard_layout WHERE id = 1 AND changed_at IS NOT NULL",
             (long long)ttl_s, (long long)ttl_s);
    if (mysql_query(db, sql) != 0 || !(res = mysql_store_result(db))) {
        dd_errstr_set(errstr, errstr_size, "%u: %s", mysql_errno(db), mysql_error(db));
        rc =
            mysql_errno(db) == ER_BAD_FIELD_ERROR ? DD_ERR_CONFIG : dd_db_classify(mysql_errno(db));
    } else if ((row = mysql_fetch_row(res)) && row[0] && row[1] && row[2]) {
        *left_s = strtoll(row[0], NULL, 10);
        snprintf(changed, changed_size, "%s", row[1]);
        snprintf(until, until_size, "%s", row[2]);
    }
    mysql_free_result(res);
    return rc;
}
