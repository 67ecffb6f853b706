/*
 * Lists of groups laid over the top-level settings (see dd_conf_int.h).
 * `routes` and mysql.shards have the same shape: without the list, the
 * top-level settings are its one element; with it, each element is loaded
 * through the schema's items whose `per` has the list's bit, with the same
 * types, bounds and checks as the top-level settings and messages naming
 * the element and its line. What differs is registered (dd_conf_list_t):
 * whether an element starts from the top-level values (shards) or from the
 * defaults with the top-level ones refused (routes), its label, and the
 * checks of the elements against each other.
 *
 * The walk that rejects unknown settings (dd_conf_walk) lives here too:
 * it enters each element of a list, which it walks again with the list's
 * paths. The loader (dd_conf.c) calls down into this engine, and the
 * engine into dd_conf_value.c and dd_conf_ctx.c, never back.
 */
#include "dd_conf_int.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dd_common.h"

int dd_conf_list_item_idx(const dd_conf_list_t *list, const char *epath)
{
    for (int i = 0; i < dd_conf_item_cnt; i++)
        if ((dd_conf_items[i].per & list->per) && strcmp(dd_conf_items[i].elem, epath) == 0)
            return i;
    return -1;
}

const config_setting_t *dd_conf_list_setting(const dd_conf_t *conf, const dd_conf_list_t *list)
{
    return config_lookup(conf->lc, list->path);
}

int dd_conf_list_count(const dd_conf_t *conf, const dd_conf_list_t *list)
{
    const config_setting_t *s = dd_conf_list_setting(conf, list);
    int n = s ? config_setting_length(s) : 1;

    return n < 1 ? 1 : n;
}

void dd_conf_group_where(const dd_conf_t *conf, const config_setting_t *g, char *out,
                         size_t out_size)
{
    const config_setting_t *first = g ? config_setting_get_elem(g, 0) : NULL;

    if (!g)
        snprintf(out, out_size, "%s", conf->path);
    else
        dd_conf_setting_where(conf, first ? first : g, NULL, out, out_size);
}

/* Rejects settings the table does not know and groups given as scalars,
 * recursing into groups except those owned by someone else. Inside an
 * element of a list of groups (route: its label), settings are looked up
 * by their path in an element. */
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
        idx = !route ? dd_conf_item_idx(path) : dd_conf_list_item_idx(ctx->walking, path);
        if (idx < 0 || (!route && (dd_conf_items[idx].flags & DD_CF_ROUTE_ONLY))) {
            dd_errstr_set(ctx->errstr, ctx->errstr_size, "%s:%u: %sunknown setting %s", file,
                          (unsigned)config_setting_source_line(s), who, path);
            return DD_ERR_CONFIG;
        }
        if (dd_conf_items[idx].type == DD_CT_GROUPS) {
            if ((err = dd_conf_list_walk(ctx, idx, s))) return err;
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

int dd_conf_list_walk(dd_conf_ctx_t *ctx, int idx, const config_setting_t *s)
{
    const dd_conf_list_t *list = dd_conf_items[idx].list;
    int n = config_setting_length(s), err = DD_OK;
    char where[PATH_MAX + 32], label[96];

    dd_conf_setting_where(ctx->conf, s, NULL, where, sizeof(where));
    if (config_setting_type(s) != CONFIG_TYPE_LIST || n < 1) {
        dd_errstr_set(ctx->errstr, ctx->errstr_size,
                      "%s: setting %s: expected a list of one or more groups, %s", where,
                      list->path, list->shape);
        return DD_ERR_CONFIG;
    }
    if (n > dd_conf_items[idx].max) {
        dd_errstr_set(ctx->errstr, ctx->errstr_size,
                      "%s: setting %s: has %d %s, at most %d are allowed", where, list->path, n,
                      list->noun, (int)dd_conf_items[idx].max);
        return DD_ERR_CONFIG;
    }
    ctx->walking = list;
    for (int i = 0; !err && i < n; i++) {
        const config_setting_t *elem = config_setting_get_elem(s, (unsigned)i);

        if (config_setting_type(elem) != CONFIG_TYPE_GROUP) {
            dd_conf_setting_where(ctx->conf, s, elem, where, sizeof(where));
            dd_errstr_set(ctx->errstr, ctx->errstr_size,
                          "%s: setting %s: element %d: expected a group, %s", where, list->path,
                          i + 1, list->elem_shape);
            err = DD_ERR_CONFIG;
            break;
        }
        list->label(elem, i, label, sizeof(label));
        err = dd_conf_walk(ctx, elem, "", label);
    }
    ctx->walking = NULL;
    return err;
}

int dd_conf_lists_init(dd_conf_ctx_t *ctx)
{
    for (int i = 0; i < dd_conf_item_cnt; i++) {
        const dd_conf_list_t *list = dd_conf_items[i].list;
        if (list && !(ctx->top[list->id] = calloc(1, list->elem_size))) return dd_conf_nomem(ctx);
    }
    return DD_OK;
}

/* The list item idx belongs to when the file has that list and it refuses
 * its items at the top level; else NULL. */
static const dd_conf_list_t *dd_conf_list_refusing(const dd_conf_t *conf, int idx)
{
    const dd_conf_list_t *list = dd_conf_list_of(&dd_conf_items[idx]);

    return list && list->refuse && dd_conf_list_setting(conf, list) ? list : NULL;
}

int dd_conf_lists_refuse(dd_conf_ctx_t *ctx, int idx)
{
    const dd_conf_list_t *list = dd_conf_list_refusing(ctx->conf, idx);

    return list ? list->refuse(ctx, idx) : DD_OK;
}

int dd_conf_list_hides(const dd_conf_t *conf, int idx)
{
    return dd_conf_list_refusing(conf, idx) != NULL;
}

/* dst = a copy of src's values of the list's items. */
static int dd_conf_elem_copy(const dd_conf_list_t *list, void *dst, void *src)
{
    for (int i = 0; i < dd_conf_item_cnt; i++) {
        const dd_conf_item_t *it = &dd_conf_items[i];
        void *d = dd_conf_elem_field(dst, it), *s = dd_conf_elem_field(src, it);

        if (!(it->per & list->per) || !it->size) continue;
        if (it->type == DD_CT_STRING) {
            const char *v = *(char **)s;
            if (v && !(*(char **)d = strdup(v))) return DD_ERR_NOMEM;
        } else if (it->type != DD_CT_LIST) { /* no list is inherited */
            memcpy(d, s, it->size);
        }
    }
    return DD_OK;
}

/* Frees what element e holds: the list's own (which may read the items),
 * then its items' strings and lists. */
static void dd_conf_elem_free(const dd_conf_list_t *list, void *e)
{
    if (list->release) list->release(e); /* first: it may read the settings */
    for (int i = 0; i < dd_conf_item_cnt; i++) {
        const dd_conf_item_t *it = &dd_conf_items[i];
        void *field = dd_conf_elem_field(e, it);

        if (!(it->per & list->per)) continue;
        if (it->type == DD_CT_STRING)
            dd_conf_free_str(field, it->flags & DD_CF_SECRET);
        else if (it->type == DD_CT_LIST)
            dd_conf_free_list(field, (int *)((char *)e + it->elem_cnt_off));
    }
}

/* The element's required settings, then the checks of its items. */
static int dd_conf_elem_check(dd_conf_ctx_t *ctx, const dd_conf_list_t *list)
{
    const char *where = (const char *)ctx->elem + list->where_off;
    int err = DD_OK;

    for (int i = 0; !err && i < dd_conf_item_cnt; i++) {
        const dd_conf_item_t *it = &dd_conf_items[i];
        char what[256];
        if (!(it->per & list->per) || !(it->flags & (DD_CF_REQUIRED | DD_CF_ROUTE_REQ)) ||
            !dd_conf_is_missing(ctx, i))
            continue;
        dd_conf_missing_text(it, 1, what, sizeof(what));
        dd_errstr_set(ctx->errstr, ctx->errstr_size, "%s: %s: %s", where, ctx->elem_label, what);
        err = DD_ERR_CONFIG;
    }
    for (int i = 0; !err && i < dd_conf_item_cnt; i++)
        if ((dd_conf_items[i].per & list->per) && dd_conf_items[i].check)
            err = dd_conf_items[i].check(ctx, i);
    return err;
}

/* One element of the list into e: the top-level values (inherit) or the
 * defaults, the element's values, the checks. */
static int dd_conf_elem_load(dd_conf_ctx_t *ctx, const dd_conf_list_t *list,
                             const config_setting_t *elem, int n, void *e)
{
    int err = DD_OK;

    if (list->inherit && dd_conf_elem_copy(list, e, ctx->top[list->id])) return dd_conf_nomem(ctx);
    if (list->inherit)
        memcpy(ctx->elem_origin, ctx->origin, sizeof(ctx->elem_origin));
    else
        memset(ctx->elem_origin, 0, sizeof(ctx->elem_origin));
    ctx->list = list;
    ctx->elem = e;
    ctx->elem_setting = elem;
    list->label(elem, n, ctx->elem_label, sizeof(ctx->elem_label));
    dd_conf_group_where(ctx->conf, elem, (char *)e + list->where_off, DD_CONF_WHERE_MAX);
    if (list->begin) err = list->begin(ctx, elem, e);
    for (int i = 0; !err && i < dd_conf_item_cnt; i++)
        if (dd_conf_items[i].per & list->per) err = dd_conf_apply(ctx, i);
    if (!err) err = dd_conf_elem_check(ctx, list);
    if (!err && list->finish) err = list->finish(ctx, e);
    ctx->list = NULL;
    ctx->elem = NULL;
    ctx->elem_setting = NULL;
    ctx->shard_pw_kept = 0;
    return err;
}

int dd_conf_list_load(dd_conf_ctx_t *ctx, const dd_conf_list_t *list)
{
    const config_setting_t *s = dd_conf_list_setting(ctx->conf, list);
    int n = dd_conf_list_count(ctx->conf, list), err = DD_OK;
    char *arr = calloc((size_t)n, list->elem_size);
    int *cnt = (int *)((char *)ctx->conf + list->cnt_off);

    if (!arr) return dd_conf_nomem(ctx);
    *(char **)((char *)ctx->conf + list->arr_off) = arr;
    if (!s) {
        /* the top-level values are the one element: moved, not copied */
        memcpy(arr, ctx->top[list->id], list->elem_size);
        memset(ctx->top[list->id], 0, list->elem_size);
        *cnt = 1;
        if (list->single) err = list->single(ctx, arr);
    }
    for (int i = 0; s && !err && i < n; i++) {
        *cnt = i + 1; /* freed with the others if it fails half-way */
        err = dd_conf_elem_load(ctx, list, config_setting_get_elem(s, (unsigned)i), i,
                                arr + (size_t)i * list->elem_size);
    }
    if (!err && list->whole) err = list->whole(ctx);
    return err;
}

void dd_conf_lists_release(dd_conf_ctx_t *ctx)
{
    for (int i = 0; i < dd_conf_item_cnt; i++) {
        const dd_conf_list_t *list = dd_conf_items[i].list;
        if (!list || !ctx->top[list->id]) continue;
        dd_conf_elem_free(list, ctx->top[list->id]);
        free(ctx->top[list->id]);
        ctx->top[list->id] = NULL;
    }
}

void dd_conf_lists_free(dd_conf_t *conf)
{
    for (int i = 0; i < dd_conf_item_cnt; i++) {
        const dd_conf_list_t *list = dd_conf_items[i].list;
        char **arr;
        int *cnt;

        if (!list) continue;
        arr = (char **)((char *)conf + list->arr_off);
        cnt = (int *)((char *)conf + list->cnt_off);
        for (int e = 0; *arr && e < *cnt; e++)
            dd_conf_elem_free(list, *arr + (size_t)e * list->elem_size);
        free(*arr);
        *arr = NULL;
        *cnt = 0;
    }
}
