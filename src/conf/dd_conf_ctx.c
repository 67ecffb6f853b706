/*
 * What every part of the configuration module uses while a file loads
 * (dd_conf_ctx_t): the errors and warnings that name a setting where its
 * value came from (FILE:LINE, the environment variable, or the element of
 * a list of groups and its line), the settings being loaded, and the small
 * helpers that free and resolve values. It sits below the loader, the list
 * engine and the routes, shards and checks that register with it, so they
 * all call down into it; it calls only the schema. No message built here
 * quotes a setting's value, so secrets never appear in one.
 */
#include "dd_conf_int.h"

#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dd_common.h"

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

void dd_conf_free_list(char ***list, int *cnt)
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

    if (ctx->list) {
        if (o->kind == DD_ORIGIN_FILE)
            dd_conf_setting_where(ctx->conf, o->setting, at, where, sizeof(where));
        else
            snprintf(where, sizeof(where), "%s", (const char *)ctx->elem + ctx->list->where_off);
        dd_errstr_set(out, out_size, "%s: %s: setting %s: %s", where, ctx->elem_label,
                      dd_conf_items[idx].elem, msg);
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

int dd_conf_is_missing(dd_conf_ctx_t *ctx, int idx)
{
    if (dd_conf_is_explicit(ctx, idx)) return 0;
    for (int i = 0; i < dd_conf_item_cnt; i++)
        if (dd_conf_items[i].replaces &&
            strcmp(dd_conf_items[i].replaces, dd_conf_items[idx].path) == 0 &&
            dd_conf_is_explicit(ctx, i))
            return 0;
    return 1;
}

void dd_conf_missing_text(const dd_conf_item_t *it, int in_elem, char *out, size_t out_size)
{
    size_t len;
    int alts = 0;

    snprintf(out, out_size, "missing required setting %s", in_elem ? it->elem : it->path);
    for (int i = 0; i < dd_conf_item_cnt; i++) {
        const dd_conf_item_t *alt = &dd_conf_items[i];
        if (!alt->replaces || strcmp(alt->replaces, it->path) != 0) continue;
        len = strlen(out);
        snprintf(out + len, out_size - len, "%s%s", alts++ ? ", " : " (or ",
                 in_elem ? alt->elem : alt->path);
    }
    len = strlen(out);
    if (alts) snprintf(out + len, out_size - len, ")");
}

const char *dd_conf_name(dd_conf_ctx_t *ctx, const char *path, char *out, size_t out_size)
{
    int idx = dd_conf_item_idx(path);

    if (!ctx->list || idx < 0 || !(dd_conf_items[idx].per & ctx->list->per)) return path;
    snprintf(out, out_size, "%s", dd_conf_items[idx].elem);
    return out;
}

/* The element of list being loaded, or the list's top-level values. */
static void *dd_conf_cur(dd_conf_ctx_t *ctx, const dd_conf_list_t *list)
{
    return ctx->list == list ? ctx->elem : ctx->top[list->id];
}

dd_conf_dedup_t *dd_conf_cur_dedup(dd_conf_ctx_t *ctx)
{
    return &((dd_conf_route_t *)dd_conf_cur(ctx, &dd_conf_route_list))->dedup;
}

dd_conf_handler_t *dd_conf_cur_handler(dd_conf_ctx_t *ctx)
{
    return &((dd_conf_route_t *)dd_conf_cur(ctx, &dd_conf_route_list))->handler;
}

dd_conf_mysql_t *dd_conf_cur_mysql(dd_conf_ctx_t *ctx)
{
    return dd_conf_cur(ctx, &dd_conf_shard_list);
}

dd_conf_route_t *dd_conf_cur_route(dd_conf_ctx_t *ctx)
{
    return ctx->list == &dd_conf_route_list ? ctx->elem : NULL;
}

int dd_conf_in_elem(const dd_conf_ctx_t *ctx)
{
    return ctx->list != NULL;
}
