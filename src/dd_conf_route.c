/*
 * The routes of a configuration (see dd_conf.h). Without `routes`, the
 * top-level kafka.topics, dedup, handler and dlq are one route, named
 * "default". With it, each element is a route, loaded through the schema's
 * items that have a path in a route: the same types, bounds, defaults and
 * checks as their top-level settings, with messages naming the route and
 * the element's line. The top-level route settings are then refused, so a
 * configuration never says two things about one route.
 *
 * A topic belongs to one route, so the routes are checked against each
 * other once all are loaded: their names differ, their dedup tables differ
 * (the keys of two routes live in two tables and never meet), and no topic
 * name is listed by two routes or matched by another route's pattern. Two
 * patterns may overlap on topics that do not exist yet: that is judged
 * when a topic is assigned (dd_conf_route_find).
 */
#include "dd_conf_int.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dd_common.h"

int dd_conf_topic_is_pattern(const char *topic)
{
    return topic[0] == '^';
}

int dd_conf_has_routes(const dd_conf_t *conf)
{
    return config_lookup(conf->lc, "routes") != NULL;
}

static const config_setting_t *dd_conf_routes_setting(const dd_conf_t *conf)
{
    return config_lookup(conf->lc, "routes");
}

/* "route NAME" for messages, or "route #N" (from 1) while it has no
 * usable name. */
static void dd_conf_route_label(const config_setting_t *elem, int n, char *out, size_t out_size)
{
    const char *name = NULL;

    if (config_setting_lookup_string(elem, "name", &name) == CONFIG_TRUE && *name &&
        strlen(name) <= 64)
        snprintf(out, out_size, "route %s", name);
    else
        snprintf(out, out_size, "route #%d", n + 1);
}

/* "FILE:LINE" of an element of `routes`: of its first setting, the line
 * it starts on (libconfig records a group's line where it ends). */
static void dd_conf_elem_where(const dd_conf_t *conf, const config_setting_t *elem, char *out,
                               size_t out_size)
{
    const config_setting_t *first = config_setting_get_elem(elem, 0);

    dd_conf_setting_where(conf, first ? first : elem, NULL, out, out_size);
}

/* "FILE:LINE" of route r's setting rpath (of its element k when k >= 0),
 * or of the route's group when it has no such setting. */
static void dd_conf_route_where(const dd_conf_t *conf, int r, const char *rpath, int k, char *out,
                                size_t out_size)
{
    config_setting_t *elem = config_setting_get_elem(dd_conf_routes_setting(conf), (unsigned)r);
    const config_setting_t *s = rpath ? config_setting_lookup(elem, rpath) : NULL;

    if (!s) {
        dd_conf_elem_where(conf, elem, out, out_size);
        return;
    }
    dd_conf_setting_where(conf, s, k >= 0 ? config_setting_get_elem(s, (unsigned)k) : NULL, out,
                          out_size);
}

int dd_conf_routes_walk(dd_conf_ctx_t *ctx, const config_setting_t *routes)
{
    int n = config_setting_length(routes), err;
    char where[PATH_MAX + 32], label[96];

    dd_conf_setting_where(ctx->conf, routes, NULL, where, sizeof(where));
    if (config_setting_type(routes) != CONFIG_TYPE_LIST || n < 1) {
        dd_errstr_set(ctx->errstr, ctx->errstr_size,
                      "%s: setting routes: expected a list of one or more groups, "
                      "( { name = ...; topics = [...]; ... }, ... )",
                      where);
        return DD_ERR_CONFIG;
    }
    if (n > DD_CONF_ROUTE_MAX) {
        dd_errstr_set(ctx->errstr, ctx->errstr_size,
                      "%s: setting routes: has %d routes, at most %d are allowed", where, n,
                      DD_CONF_ROUTE_MAX);
        return DD_ERR_CONFIG;
    }
    for (int i = 0; i < n; i++) {
        const config_setting_t *elem = config_setting_get_elem(routes, (unsigned)i);

        if (config_setting_type(elem) != CONFIG_TYPE_GROUP) {
            dd_conf_setting_where(ctx->conf, routes, elem, where, sizeof(where));
            dd_errstr_set(ctx->errstr, ctx->errstr_size,
                          "%s: setting routes: element %d: expected a group, "
                          "{ name = ...; topics = [...]; ... }",
                          where, i + 1);
            return DD_ERR_CONFIG;
        }
        dd_conf_route_label(elem, i, label, sizeof(label));
        if ((err = dd_conf_walk(ctx, elem, "", label))) return err;
    }
    return DD_OK;
}

/* 1 when topic is listed, or matched by a pattern, in some element of
 * `routes` (read from the file: the routes are not loaded yet). */
static int dd_conf_raw_routed(const dd_conf_t *conf, const char *topic)
{
    const config_setting_t *routes = dd_conf_routes_setting(conf);
    int found = 0;

    for (int r = 0; !found && r < config_setting_length(routes); r++) {
        const config_setting_t *elem = config_setting_get_elem(routes, (unsigned)r);
        const config_setting_t *topics = config_setting_lookup((config_setting_t *)elem, "topics");

        for (int k = 0; !found && topics && k < config_setting_length(topics); k++) {
            const char *t = config_setting_get_string_elem(topics, k);
            regex_t re;

            if (!t) continue;
            if (!dd_conf_topic_is_pattern(t)) {
                found = strcmp(t, topic) == 0;
            } else if (regcomp(&re, t, REG_EXTENDED | REG_NOSUB) == 0) {
                found = regexec(&re, topic, 0, NULL, 0) == 0;
                regfree(&re);
            }
        }
    }
    return found;
}

int dd_conf_routes_refuse(dd_conf_ctx_t *ctx, int idx)
{
    const dd_conf_item_t *it = &dd_conf_items[idx];
    const config_setting_t *s = config_lookup(ctx->conf->lc, it->path);
    char routes[PATH_MAX + 32], where[PATH_MAX + 32], env[80], none[400] = "";
    const char *val;

    dd_conf_setting_where(ctx->conf, dd_conf_routes_setting(ctx->conf), NULL, routes,
                          sizeof(routes));
    if (s && strcmp(it->path, "kafka.topics") == 0) {
        /* The subscription is the routes' topics: a topic named here that
         * no route takes would not be consumed. */
        for (int k = 0; !none[0] && k < config_setting_length(s); k++) {
            const char *t = config_setting_get_string_elem(s, k);
            if (t && !dd_conf_raw_routed(ctx->conf, t))
                snprintf(none, sizeof(none), "; topic %s is in no route", t);
        }
        dd_conf_setting_where(ctx->conf, s, NULL, where, sizeof(where));
        dd_errstr_set(ctx->errstr, ctx->errstr_size,
                      "%s: setting kafka.topics: cannot be set beside routes (%s): dedupd "
                      "consumes the topics the routes list (routes[].topics)%s",
                      where, routes, none);
        return DD_ERR_CONFIG;
    }
    if (s) {
        dd_conf_setting_where(ctx->conf, s, NULL, where, sizeof(where));
        dd_errstr_set(ctx->errstr, ctx->errstr_size,
                      "%s: setting %s: cannot be set beside routes (%s): each route has its own "
                      "(routes[].%s); a value here would be ambiguous",
                      where, it->path, routes, it->route);
        return DD_ERR_CONFIG;
    }
    if (!dd_conf_has_env(it)) return DD_OK;
    dd_conf_env_name(it, env, sizeof(env));
    if (!(val = getenv(env)) || !*val) return DD_OK;
    dd_errstr_set(ctx->errstr, ctx->errstr_size,
                  "environment variable %s (setting %s): the configuration has routes (%s), and "
                  "each route has its own (routes[].%s), which the environment cannot set: unset "
                  "the variable",
                  env, it->path, routes, it->route);
    return DD_ERR_CONFIG;
}

/* Compiles the route's "^" topics (their syntax was checked already). */
static int dd_conf_route_compile(dd_conf_ctx_t *ctx, dd_conf_route_t *route)
{
    if (route->topic_cnt == 0) return DD_OK;
    if (!(route->re = calloc((size_t)route->topic_cnt, sizeof(*route->re))))
        return dd_conf_nomem(ctx);
    for (int i = 0; i < route->topic_cnt; i++) {
        if (!dd_conf_topic_is_pattern(route->topics[i]) ||
            regcomp(&route->re[i], route->topics[i], REG_EXTENDED | REG_NOSUB) == 0)
            continue;
        /* dd_conf_check_topics compiled it: only memory can fail */
        while (i-- > 0)
            if (dd_conf_topic_is_pattern(route->topics[i])) regfree(&route->re[i]);
        free(route->re);
        route->re = NULL;
        return dd_conf_nomem(ctx);
    }
    return DD_OK;
}

/* The route of the top-level settings. It borrows their values. */
static int dd_conf_route_default(dd_conf_ctx_t *ctx)
{
    dd_conf_t *conf = ctx->conf;
    const dd_conf_origin_t *o = &ctx->origin[dd_conf_item_idx("kafka.topics")];
    dd_conf_route_t *route = calloc(1, sizeof(*route));

    if (!route || !(route->name = strdup("default"))) {
        free(route);
        return dd_conf_nomem(ctx);
    }
    conf->routes = route;
    conf->route_cnt = 1;
    route->topics = conf->kafka.topics;
    route->topic_cnt = conf->kafka.topic_cnt;
    route->dedup = conf->dedup;
    route->handler = conf->handler;
    route->dlq = conf->dlq;
    if (o->kind == DD_ORIGIN_FILE)
        dd_conf_setting_where(conf, o->setting, NULL, route->where, sizeof(route->where));
    else
        snprintf(route->where, sizeof(route->where), "%s", conf->path);
    return dd_conf_route_compile(ctx, route);
}

/* One element of `routes` into route: defaults, the element's values,
 * the required settings, the checks. */
static int dd_conf_route_load(dd_conf_ctx_t *ctx, const config_setting_t *elem, int n,
                              dd_conf_route_t *route)
{
    char where[PATH_MAX + 32];
    int err = DD_OK;

    route->owned = 1;
    ctx->route = route;
    ctx->route_setting = elem;
    memset(ctx->route_origin, 0, sizeof(ctx->route_origin));
    dd_conf_route_label(elem, n, ctx->route_label, sizeof(ctx->route_label));
    dd_conf_elem_where(ctx->conf, elem, route->where, sizeof(route->where));
    for (int i = 0; !err && i < dd_conf_item_cnt; i++)
        if (dd_conf_items[i].route) err = dd_conf_apply(ctx, i);
    for (int i = 0; !err && i < dd_conf_item_cnt; i++) {
        const dd_conf_item_t *it = &dd_conf_items[i];
        if (!it->route || !(it->flags & (DD_CF_REQUIRED | DD_CF_ROUTE_REQ)) ||
            dd_conf_is_explicit(ctx, i))
            continue;
        snprintf(where, sizeof(where), "%s", route->where);
        dd_errstr_set(ctx->errstr, ctx->errstr_size, "%s: %s: missing required setting %s", where,
                      ctx->route_label, it->route);
        err = DD_ERR_CONFIG;
    }
    for (int i = 0; !err && i < dd_conf_item_cnt; i++)
        if (dd_conf_items[i].route && dd_conf_items[i].check) err = dd_conf_items[i].check(ctx, i);
    if (!err) err = dd_conf_route_compile(ctx, route);
    ctx->route = NULL;
    ctx->route_setting = NULL;
    return err;
}

/* 1 when a pattern of route pr matches the name t. */
static int dd_conf_pattern_matches(const dd_conf_route_t *pr, int k, const char *t)
{
    return regexec(&pr->re[k], t, 0, NULL, 0) == 0;
}

/* Route b (later in the file) against route a: no topic of both. */
static int dd_conf_routes_overlap(dd_conf_ctx_t *ctx, int a, int b)
{
    const dd_conf_route_t *ra = &ctx->conf->routes[a], *rb = &ctx->conf->routes[b];
    char wa[PATH_MAX + 32], wb[PATH_MAX + 32];

    for (int j = 0; j < rb->topic_cnt; j++) {
        const char *tb = rb->topics[j];
        int pb = dd_conf_topic_is_pattern(tb);

        for (int i = 0; i < ra->topic_cnt; i++) {
            const char *ta = ra->topics[i];
            int pa = dd_conf_topic_is_pattern(ta);
            const char *how;

            if (!pa && !pb && strcmp(ta, tb) == 0)
                how = "topic %s is route %s's too (%s: \"%s\"): a topic belongs to one route";
            else if (!pa && pb && dd_conf_pattern_matches(rb, j, ta))
                how = "pattern %s matches route %s's topic (%s: \"%s\"): a topic belongs to one "
                      "route";
            else if (pa && !pb && dd_conf_pattern_matches(ra, i, tb))
                how = "topic %s matches route %s's pattern (%s: \"%s\"): a topic belongs to one "
                      "route";
            else
                continue;
            dd_conf_route_where(ctx->conf, a, "topics", i, wa, sizeof(wa));
            dd_conf_route_where(ctx->conf, b, "topics", j, wb, sizeof(wb));
            snprintf(ctx->errstr, ctx->errstr_size, "%s: route %s: setting topics: ", wb, rb->name);
            dd_errstr_set(ctx->errstr + strlen(ctx->errstr), ctx->errstr_size - strlen(ctx->errstr),
                          how, tb, ra->name, wa, ta);
            return DD_ERR_CONFIG;
        }
    }
    return DD_OK;
}

/* A dead-letter topic no route consumes: its dead letters would come back
 * as messages, fail again and go round. (A "<topic>.dlq" a pattern matches
 * is found when the topic is assigned.) */
static int dd_conf_routes_dlq(dd_conf_ctx_t *ctx)
{
    const dd_conf_t *conf = ctx->conf;
    char wd[PATH_MAX + 32];

    for (int r = 0; r < conf->route_cnt; r++) {
        const char *dlq = conf->routes[r].dlq.topic;
        int other, c = dlq ? dd_conf_route_find(conf, dlq, &other) : -1;
        if (c < 0) continue;
        if (!conf->has_routes)
            return dd_conf_fail(ctx, dd_conf_item_idx("dlq.topic"), NULL,
                                "%s is a topic dedupd consumes (%s): its dead letters would be "
                                "consumed again",
                                dlq, conf->routes[c].where);
        dd_conf_route_where(conf, r, "dlq.topic", -1, wd, sizeof(wd));
        dd_errstr_set(ctx->errstr, ctx->errstr_size,
                      "%s: route %s: setting dlq.topic: %s is a topic of route %s (%s): its dead "
                      "letters would be consumed again",
                      wd, conf->routes[r].name, dlq, conf->routes[c].name, conf->routes[c].where);
        return DD_ERR_CONFIG;
    }
    return DD_OK;
}

/* The routes against each other: names, tables, topics; then the
 * dead-letter topics against every route's topics. */
static int dd_conf_routes_cross(dd_conf_ctx_t *ctx)
{
    const dd_conf_t *conf = ctx->conf;
    char wa[PATH_MAX + 32], wb[PATH_MAX + 32];
    int err;

    for (int b = 1; b < conf->route_cnt; b++) {
        const dd_conf_route_t *rb = &conf->routes[b];
        for (int a = 0; a < b; a++) {
            const dd_conf_route_t *ra = &conf->routes[a];
            if (strcmp(ra->name, rb->name) == 0) {
                dd_conf_route_where(conf, a, "name", -1, wa, sizeof(wa));
                dd_conf_route_where(conf, b, "name", -1, wb, sizeof(wb));
                dd_errstr_set(ctx->errstr, ctx->errstr_size,
                              "%s: route %s: setting name: the route at %s has this name too; "
                              "route names must differ",
                              wb, rb->name, wa);
                return DD_ERR_CONFIG;
            }
            if (strcmp(ra->dedup.table, rb->dedup.table) == 0) {
                dd_conf_route_where(conf, a, "table", -1, wa, sizeof(wa));
                dd_conf_route_where(conf, b, "table", -1, wb, sizeof(wb));
                dd_errstr_set(ctx->errstr, ctx->errstr_size,
                              "%s: route %s: setting table: route %s (%s) has the dedup table "
                              "%s too; each route needs its own, or the keys of the two would "
                              "meet",
                              wb, rb->name, ra->name, wa, rb->dedup.table);
                return DD_ERR_CONFIG;
            }
            if ((err = dd_conf_routes_overlap(ctx, a, b))) return err;
        }
    }
    return dd_conf_routes_dlq(ctx);
}

int dd_conf_routes_load(dd_conf_ctx_t *ctx)
{
    dd_conf_t *conf = ctx->conf;
    const config_setting_t *routes;
    int n, err = DD_OK;

    if (!conf->has_routes) {
        err = dd_conf_route_default(ctx);
        return err ? err : dd_conf_routes_dlq(ctx);
    }
    routes = dd_conf_routes_setting(conf);
    n = config_setting_length(routes);
    if (!(conf->routes = calloc((size_t)n, sizeof(*conf->routes)))) return dd_conf_nomem(ctx);
    for (int i = 0; !err && i < n; i++) {
        conf->route_cnt = i + 1; /* freed with the others if it fails half-way */
        err = dd_conf_route_load(ctx, config_setting_get_elem(routes, (unsigned)i), i,
                                 &conf->routes[i]);
    }
    return err ? err : dd_conf_routes_cross(ctx);
}

void dd_conf_routes_free(dd_conf_t *conf)
{
    for (int r = 0; r < conf->route_cnt; r++) {
        dd_conf_route_t *route = &conf->routes[r];
        for (int i = 0; route->re && i < route->topic_cnt; i++)
            if (dd_conf_topic_is_pattern(route->topics[i])) regfree(&route->re[i]);
        free(route->re);
        if (route->owned)
            dd_conf_route_free_values(route);
        else
            free(route->name);
    }
    free(conf->routes);
    conf->routes = NULL;
    conf->route_cnt = 0;
}

int dd_conf_route_find(const dd_conf_t *conf, const char *topic, int *other)
{
    int found = -1;

    if (other) *other = -1;
    for (int r = 0; r < conf->route_cnt; r++) {
        const dd_conf_route_t *route = &conf->routes[r];
        int hit = 0;
        for (int i = 0; !hit && i < route->topic_cnt; i++)
            hit = dd_conf_topic_is_pattern(route->topics[i])
                      ? regexec(&route->re[i], topic, 0, NULL, 0) == 0
                      : strcmp(route->topics[i], topic) == 0;
        if (!hit) continue;
        if (found < 0) {
            found = r;
        } else {
            if (other) *other = r;
            break;
        }
    }
    return found;
}

int dd_conf_route_named(const dd_conf_t *conf, const char *name)
{
    for (int r = 0; r < conf->route_cnt; r++)
        if (strcmp(conf->routes[r].name, name) == 0) return r;
    return -1;
}
