/*
 * The database shards of a configuration (see dd_conf.h), a list of
 * groups over the top-level settings (dd_conf_list.c) whose items are the
 * schema's DD_PER_SHARD ones. Without mysql.shards the mysql group is the
 * one shard. With it, each element is a shard starting from the mysql
 * group's values, so what the shards share (the user, the password, the
 * database name, TLS) is said once; but an element that sets host is
 * reached over TCP even when the group has a socket, and an element that
 * sets a password source replaces the group's.
 */
#include "dd_conf_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dd_common.h"

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

int dd_conf_shard_count(const dd_conf_t *conf)
{
    return dd_conf_list_count(conf, &dd_conf_shard_list);
}

static void dd_conf_shard_label(const config_setting_t *elem, int n, char *out, size_t out_size)
{
    (void)elem;
    snprintf(out, out_size, "shard %d", n);
}

/* 1 when the element sets one of the password's sources. */
static int dd_conf_shard_sets_password(const config_setting_t *elem)
{
    static const char *const names[] = {"password", "password_env", "password_file"};

    for (size_t i = 0; i < DD_ARRAY_LEN(names); i++)
        if (config_setting_lookup((config_setting_t *)elem, names[i])) return 1;
    return 0;
}

/* Before an element's values: the password sources and the socket it
 * does not inherit from the group. */
static int dd_conf_shard_begin(dd_conf_ctx_t *ctx, const config_setting_t *elem, void *e)
{
    if (dd_conf_shard_sets_password(elem)) {
        /* the element's source replaces the group's, whichever it was */
        static const char *const paths[] = {"mysql.password", "mysql.password_env",
                                            "mysql.password_file"};
        for (size_t i = 0; i < DD_ARRAY_LEN(paths); i++) {
            int idx = dd_conf_item_idx(paths[i]);
            const dd_conf_item_t *it = &dd_conf_items[idx];
            dd_conf_free_str(dd_conf_elem_field(e, it), it->flags & DD_CF_SECRET);
            ctx->elem_origin[idx].kind = DD_ORIGIN_UNSET;
        }
    }
    /* else the group's password, resolved and checked already (its file is
     * not read, nor warned about, once more per shard) */
    if (config_setting_lookup((config_setting_t *)elem, "host") &&
        !config_setting_lookup((config_setting_t *)elem, "socket")) {
        /* a shard's host is where it is: not the group's socket */
        int idx = dd_conf_item_idx("mysql.socket");
        dd_conf_free_str(dd_conf_elem_field(e, &dd_conf_items[idx]), 0);
        ctx->elem_origin[idx].kind = DD_ORIGIN_UNSET;
    }
    ctx->shard_pw_kept = !dd_conf_shard_sets_password(elem);
    return DD_OK;
}

/* Without mysql.shards: the mysql group is the one shard. */
static int dd_conf_shard_single(dd_conf_ctx_t *ctx, void *e)
{
    dd_conf_mysql_t *my = e;

    dd_conf_group_where(ctx->conf, config_lookup(ctx->conf->lc, "mysql"), my->where,
                        sizeof(my->where));
    return DD_OK;
}

const dd_conf_list_t dd_conf_shard_list = {
    .id = 1,
    .per = DD_PER_SHARD,
    .path = "mysql.shards",
    .noun = "shards",
    .shape = "( { host = ...; }, ... )",
    .elem_shape = "{ host = ...; ... }",
    .elem_size = sizeof(dd_conf_mysql_t),
    .where_off = offsetof(dd_conf_mysql_t, where),
    .arr_off = offsetof(dd_conf_t, shards),
    .cnt_off = offsetof(dd_conf_t, shard_cnt),
    .inherit = 1,
    .label = dd_conf_shard_label,
    .begin = dd_conf_shard_begin,
    .single = dd_conf_shard_single,
};
