/*
 * The SQL handler's configuration: the group handler.sql (or a route's),
 * which dedupd passes as host->config without reading it (docs/SQL.md has
 * every setting).
 *
 * Everything that can be wrong with it is found here, when dedupd loads
 * the handler (migrate, check and run alike), and named with the file and
 * line of the setting and the statement's name: a typo in a name, a
 * statement the server would read otherwise than written (sql_parse.c), a
 * malformed path (compiled here by the host, as the key template's are),
 * an expect that is not a count or a range. What only the database can
 * tell (a table, a column, a privilege) is found when the statements are
 * prepared: conn_init, which `dedupd check` runs too.
 */
#include "sql.h"

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* "FILE:LINE: " of setting s, then fmt. Returns -1. */
static int sql_conf_fail(const config_setting_t *s, char *errstr, size_t errstr_size,
                         const char *fmt, ...) DEDUPD_PRINTF(4, 5);
static int sql_conf_fail(const config_setting_t *s, char *errstr, size_t errstr_size,
                         const char *fmt, ...)
{
    const char *file = s ? config_setting_source_file(s) : NULL;
    int n = snprintf(errstr, errstr_size, "%s:%u: ", file ? file : "config",
                     s ? config_setting_source_line(s) : 0);
    va_list ap;

    if (n < 0 || (size_t)n >= errstr_size) return -1;
    va_start(ap, fmt);
    vsnprintf(errstr + n, errstr_size - (size_t)n, fmt, ap);
    va_end(ap);
    return -1;
}

/* Compiles the paths of placeholders ph[0..n) of src (the host's syntax,
 * the key template's). what names the statement or template. */
static int sql_conf_paths(sql_state *st, const config_setting_t *s, const char *what,
                          const char *src, sql_ph *ph, size_t n, char *errstr, size_t errstr_size)
{
    char err[DEDUPD_ERROR_SIZE];

    for (size_t k = 0; k < n; k++) {
        if (ph[k].meta) continue;
        ph[k].path = st->host->path_new(st->host, src + ph[k].at, ph[k].len, err, sizeof(err));
        if (!ph[k].path)
            return sql_conf_fail(s, errstr, errstr_size, "%s: the placeholder at column %zu: %s",
                                 what, ph[k].col, err);
    }
    return 0;
}

/* A string setting of group g, or NULL (absent); -1 in *bad when it is
 * there but not a string. */
static const char *sql_conf_str(const config_setting_t *g, const char *name, int *bad)
{
    const config_setting_t *s = config_setting_get_member(g, name);

    if (!s) return NULL;
    if (config_setting_type(s) != CONFIG_TYPE_STRING) {
        *bad = 1;
        return NULL;
    }
    return config_setting_get_string(s);
}

/* "N", "N..M" or "N.." (a count of affected rows, or a range). */
static int sql_conf_range(const char *text, long long *min, long long *max)
{
    char *end;

    if (!isdigit((unsigned char)*text)) return -1;
    errno = 0;
    *min = strtoll(text, &end, 10);
    if (errno) return -1;
    if (*end == '\0') {
        *max = *min;
        return 0;
    }
    if (strncmp(end, "..", 2) != 0) return -1;
    if (end[2] == '\0') {
        *max = -1;
        return 0;
    }
    if (!isdigit((unsigned char)end[2])) return -1;
    *max = strtoll(end + 2, &end, 10);
    return errno || *end || *max < *min ? -1 : 0;
}

/* expect and otherwise of statement group g into s. */
static int sql_conf_expect(sql_stmt *s, const config_setting_t *g, char *errstr, size_t errstr_size)
{
    const config_setting_t *e = config_setting_get_member(g, "expect");
    const config_setting_t *o = config_setting_get_member(g, "otherwise");
    int type = e ? config_setting_type(e) : CONFIG_TYPE_NONE;

    if (type == CONFIG_TYPE_INT || type == CONFIG_TYPE_INT64) {
        s->expect_min = s->expect_max = config_setting_get_int64(e);
        s->has_expect = s->expect_min >= 0;
    } else if (type == CONFIG_TYPE_STRING) {
        s->has_expect =
            sql_conf_range(config_setting_get_string(e), &s->expect_min, &s->expect_max) == 0;
    }
    if (e && !s->has_expect)
        return sql_conf_fail(e, errstr, errstr_size,
                             "statement %s: expect is a count of affected rows (1), or a range as "
                             "a string (\"0..1\", \"1..\")",
                             s->name);
    if (!o) return 0;
    if (!e)
        return sql_conf_fail(o, errstr, errstr_size, "statement %s: otherwise needs an expect",
                             s->name);
    if (config_setting_type(o) == CONFIG_TYPE_STRING &&
        (strcmp(config_setting_get_string(o), "reject") == 0 ||
         strcmp(config_setting_get_string(o), "retry") == 0)) {
        s->retry = strcmp(config_setting_get_string(o), "retry") == 0;
        return 0;
    }
    return sql_conf_fail(o, errstr, errstr_size,
                         "statement %s: otherwise is \"reject\" (the default) or \"retry\"",
                         s->name);
}

/* Only the names given may be in group g. */
static int sql_conf_known(const config_setting_t *g, const char *what, const char *const *names,
                          char *errstr, size_t errstr_size)
{
    for (int i = 0; i < config_setting_length(g); i++) {
        const config_setting_t *m = config_setting_get_elem(g, (unsigned)i);
        const char *const *k = names;

        while (*k && strcmp(*k, config_setting_name(m)) != 0)
            k++;
        if (!*k)
            return sql_conf_fail(m, errstr, errstr_size, "unknown setting %s in %s",
                                 config_setting_name(m), what);
    }
    return 0;
}

/* A statement's name: 1 to SQL_NAME_MAX of [A-Za-z0-9_-], unique. */
static int sql_conf_name(sql_state *st, const config_setting_t *g, sql_stmt *s, size_t i,
                         char *errstr, size_t errstr_size)
{
    int bad = 0;
    const char *name = sql_conf_str(g, "name", &bad);
    size_t len = name ? strlen(name) : 0;

    if (!name || len == 0 || len > SQL_NAME_MAX ||
        strspn(name, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-") != len)
        return sql_conf_fail(g, errstr, errstr_size,
                             "statement %zu: name is required, 1 to %d letters, digits, '_' or "
                             "'-'",
                             i + 1, SQL_NAME_MAX);
    for (size_t k = 0; k < i; k++)
        if (strcmp(st->stmts[k].name, name) == 0)
            return sql_conf_fail(g, errstr, errstr_size, "two statements are named %s", name);
    memcpy(s->name, name, len + 1);
    return 0;
}

/* One element of statements. */
static int sql_conf_stmt(sql_state *st, const config_setting_t *g, size_t i, char *errstr,
                         size_t errstr_size)
{
    static const char *const names[] = {"name", "sql", "expect", "otherwise", NULL};
    sql_stmt *s = &st->stmts[i];
    char err[DEDUPD_ERROR_SIZE];
    const char *sql;
    int bad = 0;

    if (!config_setting_is_group(g))
        return sql_conf_fail(g, errstr, errstr_size,
                             "statement %zu is a group { name = \"...\"; sql = \"...\"; }", i + 1);
    if (sql_conf_known(g, "a statement", names, errstr, errstr_size) ||
        sql_conf_name(st, g, s, i, errstr, errstr_size))
        return -1;
    if (!(sql = sql_conf_str(g, "sql", &bad)))
        return sql_conf_fail(g, errstr, errstr_size, "statement %s: sql is required (a string)",
                             s->name);
    if (sql_text_parse(&s->text, sql, SQL_KIND_WRITE, err, sizeof(err)))
        return sql_conf_fail(config_setting_get_member(g, "sql"), errstr, errstr_size,
                             "statement %s: %s", s->name, err);
    if (s->text.ph_cnt > st->ph_max) st->ph_max = s->text.ph_cnt;
    snprintf(err, sizeof(err), "statement %s", s->name);
    return sql_conf_expect(s, g, errstr, errstr_size) ||
           sql_conf_paths(st, config_setting_get_member(g, "sql"), err, s->text.src, s->text.ph,
                          s->text.ph_cnt, errstr, errstr_size);
}

static int sql_conf_stmts(sql_state *st, const config_setting_t *list, char *errstr,
                          size_t errstr_size)
{
    int n = list ? config_setting_length(list) : 0;

    if (!list || !(config_setting_is_list(list) || config_setting_is_array(list)) || n == 0)
        return sql_conf_fail(list ? list : st->host->config, errstr, errstr_size,
                             "handler.sql.statements is required: a list of at least one "
                             "statement, ( { name = \"...\"; sql = \"...\"; }, ... )");
    if (!(st->stmts = calloc((size_t)n, sizeof(*st->stmts))))
        return sql_conf_fail(list, errstr, errstr_size, "out of memory");
    for (int i = 0; i < n; i++) {
        st->stmt_cnt++; /* released also when it fails half way */
        if (sql_conf_stmt(st, config_setting_get_elem(list, (unsigned)i), (size_t)i, errstr,
                          errstr_size))
            return -1;
    }
    return 0;
}

static int sql_conf_migrate(sql_state *st, const config_setting_t *list, char *errstr,
                            size_t errstr_size)
{
    char err[DEDUPD_ERROR_SIZE];
    int n = list ? config_setting_length(list) : 0;

    if (!list) return 0;
    if (!config_setting_is_list(list) && !config_setting_is_array(list))
        return sql_conf_fail(list, errstr, errstr_size,
                             "handler.sql.migrate is a list of statements ( \"CREATE TABLE ...\", "
                             "... )");
    if (n && !(st->migrate = calloc((size_t)n, sizeof(*st->migrate))))
        return sql_conf_fail(list, errstr, errstr_size, "out of memory");
    for (int i = 0; i < n; i++) {
        const config_setting_t *e = config_setting_get_elem(list, (unsigned)i);
        if (config_setting_type(e) != CONFIG_TYPE_STRING)
            return sql_conf_fail(e, errstr, errstr_size, "migrate statement %d is not a string",
                                 i + 1);
        if (sql_text_parse(&st->migrate[i], config_setting_get_string(e), SQL_KIND_MIGRATE, err,
                           sizeof(err)))
            return sql_conf_fail(e, errstr, errstr_size, "migrate statement %d: %s", i + 1, err);
        st->migrate_cnt++; /* parsed whole, or left zeroed by the parse */
    }
    return 0;
}

static int sql_conf_response(sql_state *st, const config_setting_t *r, char *errstr,
                             size_t errstr_size)
{
    char err[DEDUPD_ERROR_SIZE];

    if (!r) return 0;
    strcpy(st->response.name, "response");
    if (config_setting_type(r) != CONFIG_TYPE_STRING)
        return sql_conf_fail(r, errstr, errstr_size, "handler.sql.response is a query (a string)");
    if (sql_text_parse(&st->response.text, config_setting_get_string(r), SQL_KIND_QUERY, err,
                       sizeof(err)))
        return sql_conf_fail(r, errstr, errstr_size, "response: %s", err);
    st->has_response = 1;
    if (st->response.text.ph_cnt > st->ph_max) st->ph_max = st->response.text.ph_cnt;
    return sql_conf_paths(st, r, "response", st->response.text.src, st->response.text.ph,
                          st->response.text.ph_cnt, errstr, errstr_size);
}

/* One template of an event: topic, key or value. */
static int sql_conf_tmpl(sql_state *st, const config_setting_t *g, const char *name, size_t i,
                         sql_tmpl *t, int *has, char *errstr, size_t errstr_size)
{
    const config_setting_t *s = config_setting_get_member(g, name);
    char err[DEDUPD_ERROR_SIZE], what[64];
    int json = strcmp(name, "value") == 0;

    snprintf(what, sizeof(what), "event %zu: %s", i + 1, name);
    if (!s) return 0;
    if (config_setting_type(s) != CONFIG_TYPE_STRING)
        return sql_conf_fail(s, errstr, errstr_size, "%s is a template (a string)", what);
    if (sql_tmpl_parse(t, config_setting_get_string(s), json, err, sizeof(err)) ||
        (json && sql_event_check(t, err, sizeof(err))))
        return sql_conf_fail(s, errstr, errstr_size, "%s: %s", what, err);
    *has = 1;
    return sql_conf_paths(st, s, what, t->src, t->ph, t->ph_cnt, errstr, errstr_size);
}

static int sql_conf_events(sql_state *st, const config_setting_t *list, char *errstr,
                           size_t errstr_size)
{
    static const char *const names[] = {"topic", "key", "value", NULL};
    int n = list ? config_setting_length(list) : 0, has_topic;

    if (!list) return 0;
    if (!config_setting_is_list(list))
        return sql_conf_fail(list, errstr, errstr_size,
                             "handler.sql.events is a list ( { topic = \"...\"; ... }, ... )");
    if (n && !(st->events = calloc((size_t)n, sizeof(*st->events))))
        return sql_conf_fail(list, errstr, errstr_size, "out of memory");
    if (n && st->host->version < 2)
        return sql_conf_fail(list, errstr, errstr_size, "events need a dedupd with host->emit");
    for (int i = 0; i < n; i++) {
        const config_setting_t *g = config_setting_get_elem(list, (unsigned)i);
        sql_event *ev = &st->events[i];
        if (!config_setting_is_group(g))
            return sql_conf_fail(g, errstr, errstr_size, "event %d is a group", i + 1);
        if (sql_conf_known(g, "an event", names, errstr, errstr_size)) return -1;
        st->event_cnt++;
        has_topic = 0;
        if (sql_conf_tmpl(st, g, "topic", (size_t)i, &ev->topic, &has_topic, errstr, errstr_size) ||
            sql_conf_tmpl(st, g, "key", (size_t)i, &ev->key, &ev->has_key, errstr, errstr_size) ||
            sql_conf_tmpl(st, g, "value", (size_t)i, &ev->value, &ev->has_value, errstr,
                          errstr_size))
            return -1;
        if (!has_topic)
            return sql_conf_fail(g, errstr, errstr_size, "event %d: topic is required", i + 1);
    }
    return 0;
}

int sql_conf_load(sql_state *st, const dedupd_host *host, char *errstr, size_t errstr_size)
{
    static const char *const names[] = {"statements", "migrate", "response", "events", NULL};
    const config_setting_t *g = host->config;

    st->host = host;
    if (host->version < 3) {
        snprintf(errstr, errstr_size, "the SQL handler needs a dedupd with host->path_value");
        return -1;
    }
    if (!g || !config_setting_is_group(g))
        return sql_conf_fail(g, errstr, errstr_size,
                             "handler.sql is a group { statements = ( ... ); }");
    snprintf(st->where, sizeof(st->where), "%s:%u",
             config_setting_source_file(g) ? config_setting_source_file(g) : "config",
             config_setting_source_line(g));
    return sql_conf_known(g, "handler.sql", names, errstr, errstr_size) ||
           sql_conf_stmts(st, config_setting_get_member(g, "statements"), errstr, errstr_size) ||
           sql_conf_migrate(st, config_setting_get_member(g, "migrate"), errstr, errstr_size) ||
           sql_conf_response(st, config_setting_get_member(g, "response"), errstr, errstr_size) ||
           sql_conf_events(st, config_setting_get_member(g, "events"), errstr, errstr_size);
}

void sql_conf_release(sql_state *st)
{
    for (size_t i = 0; i < st->stmt_cnt; i++)
        sql_text_release(&st->stmts[i].text, st->host);
    free(st->stmts);
    for (size_t i = 0; i < st->migrate_cnt; i++)
        sql_text_release(&st->migrate[i], NULL);
    free(st->migrate);
    sql_text_release(&st->response.text, st->host);
    for (size_t i = 0; i < st->event_cnt; i++) {
        sql_tmpl_release(&st->events[i].topic, st->host);
        sql_tmpl_release(&st->events[i].key, st->host);
        sql_tmpl_release(&st->events[i].value, st->host);
    }
    free(st->events);
}
