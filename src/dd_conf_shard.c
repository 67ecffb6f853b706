/*
 * The database shards of a configuration (see dd_conf.h). Without
 * mysql.shards the mysql group is the one shard. With it, each element is
 * a shard, loaded through the schema's mysql items: the same types,
 * bounds and checks (password sources, TLS rules) as the mysql group's,
 * with messages naming the shard and the element's line. A setting an
 * element does not set is the mysql group's, so what the shards share
 * (the user, the password, the database name, TLS) is said once.
 */
#include "dd_conf_int.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dd_common.h"

#define DD_CONF_MYSQL_PREFIX "mysql."

static const char *const dd_conf_shard_checks[] = {"skip", "wait", "off", "auto"};

int dd_conf_shard_check_parse(const char *name)
{
    for (int i = 0; i < (int)DD_ARRAY_LEN(dd_conf_shard_checks); i++)
        if (strcmp(name, dd_conf_shard_checks[i]) == 0) return i;
    return -1;
}

const char *dd_conf_shard_check_name(int check)
{
    return check >= 0 && check < (int)DD_ARRAY_LEN(dd_conf_shard_checks)
               ? dd_conf_shard_checks[check]
               : "?";
}

/* mysql.shard_check is about the shards together: no element has one. */
int dd_conf_is_shard_item(const dd_conf_item_t *it)
{
    return strncmp(it->path, DD_CONF_MYSQL_PREFIX, strlen(DD_CONF_MYSQL_PREFIX)) == 0 &&
           it->type != DD_CT_SHARDS && strcmp(it->path, "mysql.shard_check") != 0;
}

int dd_conf_shard_item_idx(const char *spath)
{
    char path[256];
    int idx;

    snprintf(path, sizeof(path), DD_CONF_MYSQL_PREFIX "%s", spath);
    idx = dd_conf_item_idx(path);
    return idx >= 0 && dd_conf_is_shard_item(&dd_conf_items[idx]) ? idx : -1;
}

static const config_setting_t *dd_conf_shards_setting(const dd_conf_t *conf)
{
    return config_lookup(conf->lc, "mysql.shards");
}

int dd_conf_shard_count(const dd_conf_t *conf)
{
    const config_setting_t *s = dd_conf_shards_setting(conf);
    int n = s ? config_setting_length(s) : 1;

    return n < 1 ? 1 : n;
}

/* Where item it's value lives in one database's settings. */
static void *dd_conf_mysql_field(dd_conf_mysql_t *my, const dd_conf_item_t *it)
{
    return (char *)my + (it->off - offsetof(dd_conf_t, mysql));
}

/* "FILE:LINE" of a group: of its first setting, the line it starts on
 * (libconfig records a group's line where it ends). */
static void dd_conf_group_where(const dd_conf_t *conf, const config_setting_t *g, char *out,
                                size_t out_size)
{
    const config_setting_t *first = g ? config_setting_get_elem(g, 0) : NULL;

    if (!g)
        snprintf(out, out_size, "%s", conf->path);
    else
        dd_conf_setting_where(conf, first ? first : g, NULL, out, out_size);
}

int dd_conf_shards_walk(dd_conf_ctx_t *ctx, const config_setting_t *shards)
{
    int n = config_setting_length(shards), err = DD_OK;
    char where[PATH_MAX + 32], label[32];

    dd_conf_setting_where(ctx->conf, shards, NULL, where, sizeof(where));
    if (config_setting_type(shards) != CONFIG_TYPE_LIST || n < 1) {
        dd_errstr_set(ctx->errstr, ctx->errstr_size,
                      "%s: setting mysql.shards: expected a list of one or more groups, "
                      "( { host = ...; }, ... )",
                      where);
        return DD_ERR_CONFIG;
    }
    if (n > DD_CONF_SHARD_MAX) {
        dd_errstr_set(ctx->errstr, ctx->errstr_size,
                      "%s: setting mysql.shards: has %d shards, at most %d are allowed", where, n,
                      DD_CONF_SHARD_MAX);
        return DD_ERR_CONFIG;
    }
    ctx->in_shards = 1;
    for (int i = 0; !err && i < n; i++) {
        const config_setting_t *elem = config_setting_get_elem(shards, (unsigned)i);

        if (config_setting_type(elem) != CONFIG_TYPE_GROUP) {
            dd_conf_setting_where(ctx->conf, shards, elem, where, sizeof(where));
            dd_errstr_set(ctx->errstr, ctx->errstr_size,
                          "%s: setting mysql.shards: element %d: expected a group, "
                          "{ host = ...; ... }",
                          where, i + 1);
            err = DD_ERR_CONFIG;
            break;
        }
        snprintf(label, sizeof(label), "shard %d", i);
        err = dd_conf_walk(ctx, elem, "", label);
    }
    ctx->in_shards = 0;
    return err;
}

/* dst = a copy of src's values. */
static int dd_conf_mysql_copy(dd_conf_mysql_t *dst, dd_conf_mysql_t *src)
{
    for (int i = 0; i < dd_conf_item_cnt; i++) {
        const dd_conf_item_t *it = &dd_conf_items[i];
        void *d, *s;

        if (!dd_conf_is_shard_item(it) || !it->size) continue;
        d = dd_conf_mysql_field(dst, it);
        s = dd_conf_mysql_field(src, it);
        if (it->type == DD_CT_STRING) {
            const char *v = *(char **)s;
            if (v && !(*(char **)d = strdup(v))) return DD_ERR_NOMEM;
        } else {
            memcpy(d, s, it->size);
        }
    }
    memcpy(dst->where, src->where, sizeof(dst->where));
    return DD_OK;
}

/* 1 when the element sets one of the password's sources. */
static int dd_conf_shard_sets_password(const config_setting_t *elem)
{
    static const char *const names[] = {"password", "password_env", "password_file"};

    for (size_t i = 0; i < DD_ARRAY_LEN(names); i++)
        if (config_setting_lookup((config_setting_t *)elem, names[i])) return 1;
    return 0;
}

/* One element of mysql.shards into shard: the mysql group's values, the
 * element's over them, the checks. */
static int dd_conf_shard_load(dd_conf_ctx_t *ctx, const config_setting_t *elem, int n,
                              dd_conf_mysql_t *shard)
{
    int err;

    if (dd_conf_mysql_copy(shard, &ctx->conf->mysql)) return dd_conf_nomem(ctx);
    ctx->shard = shard;
    ctx->route_setting = elem;
    memcpy(ctx->route_origin, ctx->origin, sizeof(ctx->route_origin));
    snprintf(ctx->route_label, sizeof(ctx->route_label), "shard %d", n);
    dd_conf_group_where(ctx->conf, elem, shard->where, sizeof(shard->where));
    if (dd_conf_shard_sets_password(elem)) {
        /* the element's source replaces the group's, whichever it was */
        static const char *const paths[] = {"mysql.password", "mysql.password_env",
                                            "mysql.password_file"};
        for (size_t i = 0; i < DD_ARRAY_LEN(paths); i++) {
            int idx = dd_conf_item_idx(paths[i]);
            const dd_conf_item_t *it = &dd_conf_items[idx];
            dd_conf_free_str(dd_conf_mysql_field(shard, it), it->flags & DD_CF_SECRET);
            ctx->route_origin[idx].kind = DD_ORIGIN_UNSET;
        }
    }
    /* else the group's password, resolved and checked already (its file is
     * not read, nor warned about, once more per shard) */
    ctx->shard_pw_kept = !dd_conf_shard_sets_password(elem);
    err = DD_OK;
    for (int i = 0; !err && i < dd_conf_item_cnt; i++)
        if (dd_conf_is_shard_item(&dd_conf_items[i])) err = dd_conf_apply(ctx, i);
    for (int i = 0; !err && i < dd_conf_item_cnt; i++)
        if (dd_conf_is_shard_item(&dd_conf_items[i]) && dd_conf_items[i].check)
            err = dd_conf_items[i].check(ctx, i);
    ctx->shard = NULL;
    ctx->route_setting = NULL;
    ctx->shard_pw_kept = 0;
    return err;
}

int dd_conf_shards_load(dd_conf_ctx_t *ctx)
{
    dd_conf_t *conf = ctx->conf;
    const config_setting_t *shards = dd_conf_shards_setting(conf);
    int n = shards ? config_setting_length(shards) : 1, err = DD_OK;

    dd_conf_group_where(conf, config_lookup(conf->lc, "mysql"), conf->mysql.where,
                        sizeof(conf->mysql.where));
    if (!(conf->shards = calloc((size_t)n, sizeof(*conf->shards)))) return dd_conf_nomem(ctx);
    if (!shards) {
        conf->shard_cnt = 1;
        return dd_conf_mysql_copy(&conf->shards[0], &conf->mysql) ? dd_conf_nomem(ctx) : DD_OK;
    }
    for (int i = 0; !err && i < n; i++) {
        conf->shard_cnt = i + 1; /* freed with the others if it fails half-way */
        err = dd_conf_shard_load(ctx, config_setting_get_elem(shards, (unsigned)i), i,
                                 &conf->shards[i]);
    }
    return err;
}

void dd_conf_mysql_free(dd_conf_mysql_t *my)
{
    for (int i = 0; i < dd_conf_item_cnt; i++) {
        const dd_conf_item_t *it = &dd_conf_items[i];
        if (dd_conf_is_shard_item(it) && it->type == DD_CT_STRING)
            dd_conf_free_str(dd_conf_mysql_field(my, it), it->flags & DD_CF_SECRET);
    }
}

void dd_conf_shards_free(dd_conf_t *conf)
{
    for (int i = 0; i < conf->shard_cnt; i++)
        dd_conf_mysql_free(&conf->shards[i]);
    free(conf->shards);
    conf->shards = NULL;
    conf->shard_cnt = 0;
}
