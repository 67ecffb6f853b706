/*
 * Configuration loader (see dd_conf.h): the libconfig file, the defaults
 * and the DEDUPD_<SECTION>_<NAME> environment overrides, all through the
 * schema table (dd_conf_schema.c), so every setting is read, checked,
 * defaulted and freed the same way.
 *
 * Order of precedence: table default, then the file, then the environment;
 * the checks that involve several settings (dd_conf_check.c) run last, on
 * the final values. Every error names FILE:LINE (or the environment
 * variable). Secret values (the MySQL password, values of sensitive
 * librdkafka properties) never appear in any message.
 */
#include "dd_conf_int.h"

#include <ctype.h>
#include <errno.h>
#include <libgen.h>
#include <limits.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "dd_common.h"
#include "dd_log.h"

/*
 * Small helpers
 */

char *dd_conf_resolve(const dd_conf_t *conf, const char *path)
{
    char *out = NULL;

    if (path[0] == '/') return strdup(path);
    if (asprintf(&out, "%s/%s", conf->dir, path) < 0) return NULL;
    return out;
}

void dd_conf_free_str(char **s, int secret)
{
    if (*s && secret) explicit_bzero(*s, strlen(*s));
    free(*s);
    *s = NULL;
}

static void dd_conf_free_list(char ***list, int *cnt)
{
    for (int i = 0; *list && i < *cnt; i++)
        free((*list)[i]);
    free(*list);
    *list = NULL;
    *cnt = 0;
}

/*
 * Errors
 */

/* The name of the file a setting (or a syntax error) comes from, as users
 * should see it. libconfig records @include'd files by the name written in
 * the directive, which is relative to the config file's directory. */
void dd_conf_file_name(const dd_conf_t *conf, const char *file, char *out, size_t out_size)
{
    if (!file || strcmp(file, conf->path) == 0)
        snprintf(out, out_size, "%s", conf->path);
    else if (file[0] != '/' && conf->dir)
        snprintf(out, out_size, "%s/%s", conf->dir, file);
    else
        snprintf(out, out_size, "%s", file);
}

/* The line of a list element. libconfig records an element's line after
 * reading the token that follows it, so the last element of a list whose
 * closing bracket sits on its own line gets the bracket's line. For string
 * elements, step back to the last line up to that one holding a quote. */
static unsigned dd_conf_elem_line(const char *file, unsigned list_line, unsigned line)
{
    unsigned best = line, cur = 0;
    char buf[4096];
    FILE *fp;

    if (line <= list_line || !(fp = fopen(file, "r"))) return line;
    while (cur < line && fgets(buf, sizeof(buf), fp)) {
        if (strchr(buf, '\n') || feof(fp)) cur++;
        if (cur >= list_line && strchr(buf, '"')) best = cur;
    }
    fclose(fp);
    return best;
}

/* Line of a file setting, or of one of its elements when `at` is given. */
static unsigned dd_conf_line(const char *file, const config_setting_t *s,
                             const config_setting_t *at)
{
    unsigned line = config_setting_source_line(s);

    if (!at || config_setting_source_line(at) == 0) return line;
    if (config_setting_type(at) != CONFIG_TYPE_STRING) return config_setting_source_line(at);
    return dd_conf_elem_line(file, line, config_setting_source_line(at));
}

void dd_conf_setting_where(const dd_conf_t *conf, const config_setting_t *s,
                           const config_setting_t *at, char *out, size_t out_size)
{
    char file[PATH_MAX];

    dd_conf_file_name(conf, config_setting_source_file(s), file, sizeof(file));
    snprintf(out, out_size, "%s:%u", file, dd_conf_line(file, s, at));
}

/* Writes "<where>: <msg>" for setting idx to out, where <where> follows the
 * origin of its current value: FILE:LINE, the environment variable, or the
 * file alone for defaults (the route's element inside `routes`). `at`
 * narrows a file location to a list element. */
static void dd_conf_where(dd_conf_ctx_t *ctx, int idx, const config_setting_t *at, char *out,
                          size_t out_size, const char *msg)
{
    const dd_conf_origin_t *o = dd_conf_origin(ctx, idx);
    const char *path = dd_conf_items[idx].path;
    char where[PATH_MAX + 32];

    if (ctx->route || ctx->shard) {
        if (o->kind == DD_ORIGIN_FILE)
            dd_conf_setting_where(ctx->conf, o->setting, at, where, sizeof(where));
        else
            snprintf(where, sizeof(where), "%s",
                     ctx->route ? ctx->route->where : ctx->shard->where);
        dd_errstr_set(out, out_size, "%s: %s: setting %s: %s", where, ctx->route_label,
                      ctx->route ? dd_conf_items[idx].route : path + strlen("mysql."), msg);
    } else if (o->kind == DD_ORIGIN_ENV || o->kind == DD_ORIGIN_ENV_UNSET) {
        dd_errstr_set(out, out_size, "environment variable %s (setting %s): %s", o->env, path, msg);
    } else if (o->kind == DD_ORIGIN_FILE) {
        dd_conf_setting_where(ctx->conf, o->setting, at, where, sizeof(where));
        dd_errstr_set(out, out_size, "%s: setting %s: %s", where, path, msg);
    } else {
        dd_errstr_set(out, out_size, "%s: setting %s: %s", ctx->conf->path, path, msg);
    }
}

int dd_conf_fail(dd_conf_ctx_t *ctx, int idx, const config_setting_t *at, const char *fmt, ...)
{
    char msg[768];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    dd_conf_where(ctx, idx, at, ctx->errstr, ctx->errstr_size, msg);
    return DD_ERR_CONFIG;
}

int dd_conf_warn(dd_conf_ctx_t *ctx, int idx, const char *fmt, ...)
{
    dd_conf_t *conf = ctx->conf;
    char msg[768], text[1024];
    va_list ap;

    if (conf->warning_cnt >= (int)DD_ARRAY_LEN(conf->warnings)) return 0;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    dd_conf_where(ctx, idx, NULL, text, sizeof(text), msg);
    if (!(conf->warnings[conf->warning_cnt] = strdup(text))) return DD_ERR_NOMEM;
    conf->warning_cnt++;
    return 0;
}

int dd_conf_nomem(dd_conf_ctx_t *ctx)
{
    dd_errstr_set(ctx->errstr, ctx->errstr_size, "%s: out of memory", ctx->conf->path);
    return DD_ERR_NOMEM;
}

int dd_conf_is_explicit(dd_conf_ctx_t *ctx, int idx)
{
    const dd_conf_origin_t *o = dd_conf_origin(ctx, idx);

    return o->kind == DD_ORIGIN_FILE || o->kind == DD_ORIGIN_ENV;
}

const char *dd_conf_name(dd_conf_ctx_t *ctx, const char *path, char *out, size_t out_size)
{
    int idx = dd_conf_item_idx(path);

    if (!ctx->route || idx < 0 || !dd_conf_items[idx].route) return path;
    snprintf(out, out_size, "%s", dd_conf_items[idx].route);
    return out;
}

dd_conf_dedup_t *dd_conf_cur_dedup(dd_conf_ctx_t *ctx)
{
    return ctx->route ? &ctx->route->dedup : &ctx->conf->dedup;
}

dd_conf_handler_t *dd_conf_cur_handler(dd_conf_ctx_t *ctx)
{
    return ctx->route ? &ctx->route->handler : &ctx->conf->handler;
}

dd_conf_mysql_t *dd_conf_cur_mysql(dd_conf_ctx_t *ctx)
{
    return ctx->shard ? ctx->shard : &ctx->conf->mysql;
}

int dd_conf_in_elem(const dd_conf_ctx_t *ctx)
{
    return ctx->route || ctx->shard;
}

/*
 * Storing values (every path ends here, so bounds are checked once)
 */

static int dd_conf_store_str(dd_conf_ctx_t *ctx, int idx, const char *val)
{
    const dd_conf_item_t *it = &dd_conf_items[idx];
    char **field = dd_conf_slot(ctx, it);

    if (!*val && !(it->flags & DD_CF_EMPTY_OK))
        return dd_conf_fail(ctx, idx, NULL, "must not be empty");
    dd_conf_free_str(field, it->flags & DD_CF_SECRET);
    if (!(*field = strdup(val))) return dd_conf_nomem(ctx);
    return 0;
}

static int dd_conf_store_int(dd_conf_ctx_t *ctx, int idx, int64_t v)
{
    const dd_conf_item_t *it = &dd_conf_items[idx];
    void *field = dd_conf_slot(ctx, it);

    if (v < it->min || v > it->max)
        return dd_conf_fail(ctx, idx, NULL, "must be between %lld and %lld, got %lld",
                            (long long)it->min, (long long)it->max, (long long)v);
    if (it->size == sizeof(int64_t))
        *(int64_t *)field = v;
    else
        *(int *)field = (int)v;
    return 0;
}

static int dd_conf_store_duration(dd_conf_ctx_t *ctx, int idx, int64_t ms)
{
    const dd_conf_item_t *it = &dd_conf_items[idx];
    void *field = dd_conf_slot(ctx, it);
    char min[32], max[32], got[32];

    if (ms < it->min || ms > it->max) {
        dd_conf_fmt_duration(it->min, min, sizeof(min));
        dd_conf_fmt_duration(it->max, max, sizeof(max));
        dd_conf_fmt_duration(ms, got, sizeof(got));
        return dd_conf_fail(ctx, idx, NULL, "must be between %s and %s, got %s", min, max, got);
    }
    if (ms % it->unit_ms != 0)
        return dd_conf_fail(ctx, idx, NULL, "must be a whole number of seconds");
    if (it->size == sizeof(int64_t))
        *(int64_t *)field = ms / it->unit_ms;
    else
        *(int *)field = (int)(ms / it->unit_ms);
    return 0;
}

static int dd_conf_store_enum(dd_conf_ctx_t *ctx, int idx, const char *val)
{
    const dd_conf_item_t *it = &dd_conf_items[idx];
    int v = it->parse(val);

    if (v < 0)
        return dd_conf_fail(ctx, idx, NULL, "expected one of %s, got \"%s\"", it->allowed, val);
    *(int *)dd_conf_slot(ctx, it) = v;
    return 0;
}

/* Takes ownership of list (cnt strings) in every case. */
static int dd_conf_store_list(dd_conf_ctx_t *ctx, int idx, char **list, int cnt)
{
    const dd_conf_item_t *it = &dd_conf_items[idx];
    char ***field = dd_conf_slot(ctx, it);
    int *field_cnt = dd_conf_slot_cnt(ctx, it);

    dd_conf_free_list(field, field_cnt);
    *field = list;
    *field_cnt = cnt;
    if (cnt < it->min)
        return dd_conf_fail(ctx, idx, NULL, "must have at least %lld element(s)",
                            (long long)it->min);
    if (cnt > it->max)
        return dd_conf_fail(ctx, idx, NULL, "must have at most %lld elements", (long long)it->max);
    return 0;
}

/*
 * Values given as text: defaults and environment variables
 */

static int dd_conf_parse_bool(const char *s, int *v)
{
    static const char *const yes[] = {"true", "yes", "on", "1"};
    static const char *const no[] = {"false", "no", "off", "0"};

    for (size_t i = 0; i < DD_ARRAY_LEN(yes); i++) {
        if (strcasecmp(s, yes[i]) == 0) return *v = 1, 0;
        if (strcasecmp(s, no[i]) == 0) return *v = 0, 0;
    }
    return -1;
}

/* "a, b,c" -> {"a", "b", "c"}; "" -> no elements. */
static int dd_conf_list_from_text(dd_conf_ctx_t *ctx, int idx, const char *text)
{
    char **list = NULL, **grown;
    int cnt = 0, err = 0;
    const char *p = text, *end = text;

    while (*text && end) {
        size_t len;

        end = strchr(p, ',');
        len = end ? (size_t)(end - p) : strlen(p);
        while (len > 0 && isspace((unsigned char)*p))
            p++, len--;
        while (len > 0 && isspace((unsigned char)p[len - 1]))
            len--;
        if (len == 0) {
            err = dd_conf_fail(ctx, idx, NULL, "element %d is empty", cnt + 1);
            break;
        }
        if (!(grown = realloc(list, sizeof(*list) * (size_t)(cnt + 1))) ||
            !(grown[cnt] = strndup(p, len))) {
            list = grown ? grown : list;
            err = dd_conf_nomem(ctx);
            break;
        }
        list = grown;
        cnt++;
        p = end + 1;
    }
    if (err) {
        dd_conf_free_list(&list, &cnt);
        return err;
    }
    return dd_conf_store_list(ctx, idx, list, cnt);
}

static int dd_conf_take_text(dd_conf_ctx_t *ctx, int idx, const char *text)
{
    const dd_conf_item_t *it = &dd_conf_items[idx];
    int64_t v;
    int b;

    switch (it->type) {
    case DD_CT_STRING:
        return dd_conf_store_str(ctx, idx, text);
    case DD_CT_ENUM:
        return dd_conf_store_enum(ctx, idx, text);
    case DD_CT_INT:
        if (dd_conf_parse_int(text, &v) != 0)
            return dd_conf_fail(ctx, idx, NULL, "expected an integer, got \"%s\"", text);
        return dd_conf_store_int(ctx, idx, v);
    case DD_CT_BOOL:
        if (dd_conf_parse_bool(text, &b) != 0)
            return dd_conf_fail(ctx, idx, NULL, "expected true or false, got \"%s\"", text);
        *(int *)dd_conf_slot(ctx, it) = b;
        return 0;
    case DD_CT_DURATION:
        if (dd_conf_parse_duration_ms(text, &v) != 0)
            return dd_conf_fail(ctx, idx, NULL,
                                "expected a duration like \"250ms\", \"30s\" or \"1h30m\", "
                                "got \"%s\"",
                                text);
        return dd_conf_store_duration(ctx, idx, v);
    case DD_CT_LIST:
        return dd_conf_list_from_text(ctx, idx, text);
    case DD_CT_GROUP:
    case DD_CT_ROUTES:
    case DD_CT_SHARDS:
        break;
    }
    return 0;
}

/*
 * Values from the libconfig file
 */

static int dd_conf_list_from_setting(dd_conf_ctx_t *ctx, int idx, const config_setting_t *s)
{
    int t = config_setting_type(s), n, cnt = 0, err = 0;
    char **list = NULL;

    if (t != CONFIG_TYPE_ARRAY && t != CONFIG_TYPE_LIST)
        return dd_conf_fail(ctx, idx, NULL, "expected a list of strings");
    n = config_setting_length(s);
    if (n > 0 && !(list = calloc((size_t)n, sizeof(*list)))) return dd_conf_nomem(ctx);
    for (cnt = 0; cnt < n; cnt++) {
        const config_setting_t *e = config_setting_get_elem(s, (unsigned)cnt);
        const char *val = config_setting_get_string(e);

        if (config_setting_type(e) != CONFIG_TYPE_STRING) {
            err = dd_conf_fail(ctx, idx, e, "element %d: expected a string", cnt + 1);
            break;
        }
        if (!*val) {
            err = dd_conf_fail(ctx, idx, e, "element %d is empty", cnt + 1);
            break;
        }
        if (!(list[cnt] = strdup(val))) {
            err = dd_conf_nomem(ctx);
            break;
        }
    }
    if (err) {
        dd_conf_free_list(&list, &cnt);
        return err;
    }
    return dd_conf_store_list(ctx, idx, list, cnt);
}

static int dd_conf_duration_from_setting(dd_conf_ctx_t *ctx, int idx, const config_setting_t *s)
{
    int t = config_setting_type(s);
    int64_t v;

    if (t == CONFIG_TYPE_INT || t == CONFIG_TYPE_INT64) {
        v = config_setting_get_int64(s); /* plain numbers are seconds */
        if (v < 0 || v > INT64_MAX / DD_MS_SEC)
            return dd_conf_fail(ctx, idx, NULL, "duration out of range");
        return dd_conf_store_duration(ctx, idx, v * DD_MS_SEC);
    }
    if (t == CONFIG_TYPE_STRING) return dd_conf_take_text(ctx, idx, config_setting_get_string(s));
    return dd_conf_fail(ctx, idx, NULL, "expected a duration like \"30s\" or a number of seconds");
}

static int dd_conf_take_setting(dd_conf_ctx_t *ctx, int idx, const config_setting_t *s)
{
    const dd_conf_item_t *it = &dd_conf_items[idx];
    int t = config_setting_type(s);

    switch (it->type) {
    case DD_CT_STRING:
    case DD_CT_ENUM:
        if (t != CONFIG_TYPE_STRING) return dd_conf_fail(ctx, idx, NULL, "expected a string");
        return dd_conf_take_text(ctx, idx, config_setting_get_string(s));
    case DD_CT_INT:
        if (t != CONFIG_TYPE_INT && t != CONFIG_TYPE_INT64)
            return dd_conf_fail(ctx, idx, NULL, "expected an integer");
        return dd_conf_store_int(ctx, idx, config_setting_get_int64(s));
    case DD_CT_BOOL:
        if (t != CONFIG_TYPE_BOOL) return dd_conf_fail(ctx, idx, NULL, "expected true or false");
        *(int *)dd_conf_slot(ctx, it) = config_setting_get_bool(s);
        return 0;
    case DD_CT_DURATION:
        return dd_conf_duration_from_setting(ctx, idx, s);
    case DD_CT_LIST:
        return dd_conf_list_from_setting(ctx, idx, s);
    case DD_CT_GROUP:
        if (it->size) /* the group is handed to its owner as is */
            *(const config_setting_t **)dd_conf_slot(ctx, it) = s;
        return 0;
    case DD_CT_ROUTES:
    case DD_CT_SHARDS:
        break;
    }
    return 0;
}

/*
 * Loading
 */

/* Rejects settings the table does not know and groups given as scalars,
 * recursing into groups except those owned by someone else. Inside an
 * element of `routes` (route: its label), settings are looked up by their
 * path in a route. */
int dd_conf_walk(dd_conf_ctx_t *ctx, const config_setting_t *group, const char *prefix,
                 const char *route)
{
    int n = config_setting_length(group);

    for (int i = 0; i < n; i++) {
        const config_setting_t *s = config_setting_get_elem(group, (unsigned)i);
        char path[256], file[PATH_MAX], who[128];
        int idx, err;

        snprintf(path, sizeof(path), "%s%s%s", prefix, *prefix ? "." : "",
                 config_setting_name(s) ? config_setting_name(s) : "?");
        snprintf(who, sizeof(who), "%s%s", route ? route : "", route ? ": " : "");
        dd_conf_file_name(ctx->conf, config_setting_source_file(s), file, sizeof(file));
        idx = !route           ? dd_conf_item_idx(path)
              : ctx->in_shards ? dd_conf_shard_item_idx(path)
                               : dd_conf_route_item_idx(path);
        if (idx < 0 || (!route && (dd_conf_items[idx].flags & DD_CF_ROUTE_ONLY))) {
            dd_errstr_set(ctx->errstr, ctx->errstr_size, "%s:%u: %sunknown setting %s", file,
                          (unsigned)config_setting_source_line(s), who, path);
            return DD_ERR_CONFIG;
        }
        if (dd_conf_items[idx].type == DD_CT_ROUTES) {
            if ((err = dd_conf_routes_walk(ctx, s))) return err;
            continue;
        }
        if (dd_conf_items[idx].type == DD_CT_SHARDS) {
            if ((err = dd_conf_shards_walk(ctx, s))) return err;
            continue;
        }
        if (dd_conf_items[idx].type != DD_CT_GROUP) continue;
        if (config_setting_type(s) != CONFIG_TYPE_GROUP) {
            dd_errstr_set(ctx->errstr, ctx->errstr_size, "%s:%u: %ssetting %s: expected a group",
                          file, (unsigned)config_setting_source_line(s), who, path);
            return DD_ERR_CONFIG;
        }
        if (!(dd_conf_items[idx].flags & DD_CF_ANY) && (err = dd_conf_walk(ctx, s, path, route)))
            return err;
    }
    return 0;
}

/* Default, then file, then environment, for one setting. An empty
 * variable unsets the setting: it takes its default (none when it has
 * none: DEDUPD_HTTP_LISTEN= turns the endpoint off), whatever the file
 * says; a required setting cannot be unset. Inside an element of `routes`
 * or of mysql.shards, the element is the file, and the environment has no
 * say; a shard's default is the mysql group's value, set by the caller. */
int dd_conf_apply(dd_conf_ctx_t *ctx, int idx)
{
    const dd_conf_item_t *it = &dd_conf_items[idx];
    dd_conf_origin_t *o = dd_conf_origin(ctx, idx);
    config_setting_t *elem = (config_setting_t *)ctx->route_setting;
    const config_setting_t *s = ctx->route   ? config_setting_lookup(elem, it->route)
                                : ctx->shard ? config_setting_lookup(elem, it->path + 6)
                                             : config_lookup(ctx->conf->lc, it->path);
    const char *val = NULL;
    int err;

    if (!dd_conf_in_elem(ctx) && dd_conf_has_env(it)) {
        dd_conf_env_name(it, o->env, sizeof(o->env));
        val = getenv(o->env);
    }
    if (val && !*val && (it->flags & DD_CF_REQUIRED)) {
        o->kind = DD_ORIGIN_ENV_UNSET;
        return dd_conf_fail(ctx, idx, NULL,
                            "is empty, and %s is required (an empty variable unsets an optional "
                            "setting only)",
                            it->path);
    }
    if (it->def && !ctx->shard) {
        o->kind = DD_ORIGIN_DEFAULT;
        if ((err = dd_conf_take_text(ctx, idx, it->def))) return err;
    }
    if (val && !*val) {
        o->kind = DD_ORIGIN_ENV_UNSET;
        return 0;
    }
    if (s) {
        o->kind = DD_ORIGIN_FILE;
        o->setting = s;
        if ((err = dd_conf_take_setting(ctx, idx, s))) return err;
    }
    if (val) {
        o->kind = DD_ORIGIN_ENV;
        if ((err = dd_conf_take_text(ctx, idx, val))) return err;
    }
    return 0;
}

/* 1 when item i is not a top-level setting of this configuration: it
 * belongs to an element of `routes`, or is a route setting the
 * configuration's routes hold instead. */
static int dd_conf_not_here(const dd_conf_ctx_t *ctx, int i)
{
    const dd_conf_item_t *it = &dd_conf_items[i];

    return it->type == DD_CT_ROUTES || it->type == DD_CT_SHARDS || (it->flags & DD_CF_ROUTE_ONLY) ||
           (it->route && ctx->conf->has_routes);
}

static int dd_conf_apply_all(dd_conf_ctx_t *ctx)
{
    int err;

    ctx->conf->has_routes = dd_conf_has_routes(ctx->conf);
    for (int i = 0; i < dd_conf_item_cnt; i++) {
        if (dd_conf_items[i].route && ctx->conf->has_routes &&
            (err = dd_conf_routes_refuse(ctx, i)))
            return err;
        if (!dd_conf_not_here(ctx, i) && (err = dd_conf_apply(ctx, i))) return err;
    }
    for (int i = 0; i < dd_conf_item_cnt; i++) {
        if (dd_conf_not_here(ctx, i)) continue;
        if ((dd_conf_items[i].flags & DD_CF_REQUIRED) && !dd_conf_is_explicit(ctx, i)) {
            dd_errstr_set(ctx->errstr, ctx->errstr_size, "%s: missing required setting %s",
                          ctx->conf->path, dd_conf_items[i].path);
            return DD_ERR_CONFIG;
        }
    }
    for (int i = 0; i < dd_conf_item_cnt; i++)
        if (!dd_conf_not_here(ctx, i) && dd_conf_items[i].check &&
            (err = dd_conf_items[i].check(ctx, i)))
            return err;
    return 0;
}

/* Sets path and dir, and parses the file into conf->lc. */
static int dd_conf_read(dd_conf_t *conf, const char *path, char *errstr, size_t errstr_size)
{
    char *copy = NULL, file[PATH_MAX];
    int err = DD_ERR_CONFIG;
    struct stat st;

    if (!(conf->path = strdup(path)) || !(copy = strdup(path)) ||
        !(conf->lc = malloc(sizeof(*conf->lc)))) {
        dd_errstr_set(errstr, errstr_size, "%s: out of memory", path);
        err = DD_ERR_NOMEM;
        goto done;
    }
    config_init(conf->lc);
    if (stat(path, &st) != 0) {
        dd_errstr_set(errstr, errstr_size, "%s: cannot read: %s", path, strerror(errno));
        goto done;
    }
    if (!S_ISREG(st.st_mode)) {
        dd_errstr_set(errstr, errstr_size, "%s: cannot read: not a regular file", path);
        goto done;
    }
    if (!(conf->dir = realpath(dirname(copy), NULL))) {
        dd_errstr_set(errstr, errstr_size, "%s: cannot resolve its directory: %s", path,
                      strerror(errno));
        goto done;
    }
    config_set_include_dir(conf->lc, conf->dir);
    if (!config_read_file(conf->lc, path)) {
        dd_conf_file_name(conf, config_error_file(conf->lc), file, sizeof(file));
        dd_errstr_set(errstr, errstr_size, "%s:%d: %s", file, config_error_line(conf->lc),
                      config_error_text(conf->lc));
        goto done;
    }
    err = 0;
done:
    free(copy);
    return err;
}

int dd_conf_load(dd_conf_t **confp, const char *path, char *errstr, size_t errstr_size)
{
    dd_conf_ctx_t *ctx = NULL;
    dd_conf_t *conf = NULL;
    int err;

    *confp = NULL;
    if (!(conf = calloc(1, sizeof(*conf))) || !(ctx = calloc(1, sizeof(*ctx)))) {
        dd_errstr_set(errstr, errstr_size, "%s: out of memory", path);
        err = DD_ERR_NOMEM;
        goto done;
    }
    ctx->conf = conf;
    ctx->errstr = errstr;
    ctx->errstr_size = errstr_size;
    if ((err = dd_conf_read(conf, path, errstr, errstr_size))) goto done;
    if ((err = dd_conf_walk(ctx, config_root_setting(conf->lc), "", NULL))) goto done;
    if ((err = dd_conf_apply_all(ctx))) goto done;
    if ((err = dd_conf_shards_load(ctx))) goto done;
    if ((err = dd_conf_routes_load(ctx))) goto done;
    *confp = conf;
    conf = NULL;
done:
    free(ctx);
    dd_conf_destroy(conf);
    return err;
}

void dd_conf_route_free_values(dd_conf_route_t *route)
{
    for (int i = 0; i < dd_conf_item_cnt; i++) {
        const dd_conf_item_t *it = &dd_conf_items[i];
        void *field = (char *)route + it->route_off;

        if (!it->route) continue;
        if (it->type == DD_CT_STRING)
            dd_conf_free_str(field, 0);
        else if (it->type == DD_CT_LIST)
            dd_conf_free_list(field, (int *)((char *)route + it->route_cnt_off));
    }
}

void dd_conf_destroy(dd_conf_t *conf)
{
    if (!conf) return;
    dd_conf_routes_free(conf);
    dd_conf_shards_free(conf);
    for (int i = 0; i < dd_conf_item_cnt; i++) {
        const dd_conf_item_t *it = &dd_conf_items[i];

        if (it->flags & DD_CF_ROUTE_ONLY) continue;
        if (it->type == DD_CT_STRING)
            dd_conf_free_str(dd_conf_field(conf, it), it->flags & DD_CF_SECRET);
        else if (it->type == DD_CT_LIST)
            dd_conf_free_list(dd_conf_field(conf, it), (int *)((char *)conf + it->cnt_off));
    }
    for (int i = 0; i < conf->warning_cnt; i++)
        free(conf->warnings[i]);
    if (conf->lc) {
        config_destroy(conf->lc);
        free(conf->lc);
    }
    free(conf->path);
    free(conf->dir);
    free(conf);
}

/*
 * Public helpers
 */

const char *dd_conf_dlq_topic(const dd_conf_route_t *route, const char *topic, char *out,
                              size_t out_size)
{
    int n;

    if (route->dlq.topic)
        n = snprintf(out, out_size, "%s", route->dlq.topic);
    else
        n = snprintf(out, out_size, "%s.dlq", topic);
    return n >= 0 && (size_t)n < out_size ? out : NULL;
}
