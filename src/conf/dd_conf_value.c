/*
 * One setting's value into its place (dd_conf_apply): the table default,
 * then the file, then the environment, each given as text or as a
 * libconfig setting and stored by one function per type, so the bounds
 * are checked once whichever way a value comes. The loader (dd_conf.c)
 * applies the top-level settings and the list engine (dd_conf_list.c)
 * those of each element; both call down into this file.
 */
#include "dd_conf_int.h"

#include <ctype.h>
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "dd_common.h"

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
    case DD_CT_GROUPS:
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
    case DD_CT_GROUPS:
        break;
    }
    return 0;
}

/* Default, then file, then environment, for one setting. An empty
 * variable unsets the setting: it takes its default (none when it has
 * none: DEDUPD_HTTP_LISTEN= turns the endpoint off), whatever the file
 * says; a required setting cannot be unset. Inside an element of a list
 * of groups, the element is the file, and the environment has no say; in
 * a list that inherits, the default is the top-level value, set by the
 * caller. */
int dd_conf_apply(dd_conf_ctx_t *ctx, int idx)
{
    const dd_conf_item_t *it = &dd_conf_items[idx];
    dd_conf_origin_t *o = dd_conf_origin(ctx, idx);
    config_setting_t *elem = (config_setting_t *)ctx->elem_setting;
    const config_setting_t *s =
        ctx->list ? config_setting_lookup(elem, it->elem) : config_lookup(ctx->conf->lc, it->path);
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
    if (it->def && !(ctx->list && ctx->list->inherit)) {
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
