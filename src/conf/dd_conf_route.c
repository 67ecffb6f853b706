/*
 * The routes of a configuration (see dd_conf.h), a list of groups over the
 * top-level settings (dd_conf_list.c) whose items are the schema's
 * DD_PER_ROUTE ones. Without `routes`, the top-level kafka.topics, dedup,
 * handler and dlq are one route, named "default". With it, each element is
 * a route, starting from the defaults; the top-level route settings are
 * then refused, so a configuration never says two things about one route.
 *
 * A topic belongs to one route, so the routes are checked against each
 * other once all are loaded: their names differ, their dedup tables differ
 * ignoring case (the keys of two routes live in two tables and never meet,
 * whatever the server's lower_case_table_names), and no topic
 * name is listed by two routes or matched by another route's pattern. Two
 * patterns may overlap on topics that do not exist yet: that is judged
 * when a topic is assigned (dd_conf_route_find).
 */
#include "dd_conf_int.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

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

/* "FILE:LINE" of route r's setting rpath (of its element k when k >= 0),
 * or of the route's group when it has no such setting. */
static void dd_conf_route_where(const dd_conf_t *conf, int r, const char *rpath, int k, char *out,
                                size_t out_size)
{
    config_setting_t *elem = config_setting_get_elem(dd_conf_routes_setting(conf), (unsigned)r);
    const config_setting_t *s = rpath ? config_setting_lookup(elem, rpath) : NULL;

    if (!s) {
        dd_conf_group_where(conf, elem, out, out_size);
        return;
    }
    dd_conf_setting_where(conf, s, k >= 0 ? config_setting_get_elem(s, (unsigned)k) : NULL, out,
                          out_size);
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

/* Refuses a top-level route setting (kafka.topics, dedup.*, handler.*,
 * dlq.*) set in the file or the environment beside `routes`. */
static int dd_conf_routes_refuse(dd_conf_ctx_t *ctx, int idx)
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
                      where, it->path, routes, it->elem);
        return DD_ERR_CONFIG;
    }
    if (!dd_conf_has_env(it)) return DD_OK;
    dd_conf_env_name(it, env, sizeof(env));
    if (!(val = getenv(env)) || !*val) return DD_OK;
    dd_errstr_set(ctx->errstr, ctx->errstr_size,
                  "environment variable %s (setting %s): the configuration has routes (%s), and "
                  "each route has its own (routes[].%s), which the environment cannot set: unset "
                  "the variable",
                  env, it->path, routes, it->elem);
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

/* The route of the top-level settings. */
static int dd_conf_route_default(dd_conf_ctx_t *ctx, void *e)
{
    dd_conf_route_t *route = e;
    const dd_conf_origin_t *o = &ctx->origin[dd_conf_item_idx("kafka.topics")];

    if (!(route->name = strdup("default"))) return dd_conf_nomem(ctx);
    if (o->kind == DD_ORIGIN_FILE)
        dd_conf_setting_where(ctx->conf, o->setting, NULL, route->where, sizeof(route->where));
    else
        snprintf(route->where, sizeof(route->where), "%s", ctx->conf->path);
    return dd_conf_route_compile(ctx, route);
}

static int dd_conf_route_finish(dd_conf_ctx_t *ctx, void *e)
{
    return dd_conf_route_compile(ctx, e);
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
 * as messages, fail again and go round. (The "<topic>.dlq" of a route
 * without dlq.topic: dd_conf_routes_dlq_loops.) */
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

/* Route b (later in the file) against route a: two dedup tables. Equal
 * ignoring case is one table on a server with lower_case_table_names. */
static int dd_conf_routes_tables(dd_conf_ctx_t *ctx, int a, int b)
{
    const dd_conf_route_t *ra = &ctx->conf->routes[a], *rb = &ctx->conf->routes[b];
    char wa[PATH_MAX + 32], wb[PATH_MAX + 32];

    if (strcasecmp(ra->dedup.table, rb->dedup.table) != 0) return DD_OK;
    dd_conf_route_where(ctx->conf, a, "table", -1, wa, sizeof(wa));
    dd_conf_route_where(ctx->conf, b, "table", -1, wb, sizeof(wb));
    dd_errstr_set(ctx->errstr, ctx->errstr_size,
                  "%s: route %s: setting table: route %s (%s) has the dedup table %s%s; each "
                  "route needs its own, or the keys of the two would meet",
                  wb, rb->name, ra->name, wa, ra->dedup.table,
                  strcmp(ra->dedup.table, rb->dedup.table) ? ", the same name but for case, "
                                                             "which the server may not tell apart"
                                                           : " too");
    return DD_ERR_CONFIG;
}

/* 1 when route consumes the topic named t: one of its names, or matched by
 * one of its patterns. */
static int dd_conf_route_takes(const dd_conf_route_t *route, const char *t)
{
    for (int i = 0; i < route->topic_cnt; i++)
        if (dd_conf_topic_is_pattern(route->topics[i]) ? dd_conf_pattern_matches(route, i, t)
                                                       : strcmp(route->topics[i], t) == 0)
            return 1;
    return 0;
}

int dd_conf_dlq_route(const dd_conf_t *conf, const char *topic)
{
    size_t len = strlen(topic);
    char src[512];

    for (int r = 0; r < conf->route_cnt; r++) {
        const dd_conf_route_t *route = &conf->routes[r];
        if (route->dlq.topic) {
            if (strcmp(route->dlq.topic, topic) == 0) return r;
            continue;
        }
        if (len <= 4 || len - 4 >= sizeof(src) || strcmp(topic + len - 4, ".dlq") != 0) continue;
        memcpy(src, topic, len - 4);
        src[len - 4] = '\0';
        if (dd_conf_route_takes(route, src)) return r;
    }
    return -1;
}

/* Refuses topic k of route a: it is route d's dead-letter topic (why: how). */
static int dd_conf_dlq_refuse(dd_conf_ctx_t *ctx, int a, int k, int d, const char *what,
                              const char *how)
{
    const dd_conf_t *conf = ctx->conf;
    const char *t = conf->routes[a].topics[k];
    char wa[PATH_MAX + 32];
    int idx = dd_conf_item_idx("kafka.topics");
    const dd_conf_origin_t *o = &ctx->origin[idx];

    if (!conf->has_routes)
        return dd_conf_fail(
            ctx, idx,
            o->kind == DD_ORIGIN_FILE ? config_setting_get_elem(o->setting, (unsigned)k) : NULL,
            "%s %s %s a dead-letter topic of these topics (dlq.topic is unset: \"<topic>.dlq\"): "
            "dead letters would be consumed again",
            what, t, how);
    dd_conf_route_where(conf, a, "topics", k, wa, sizeof(wa));
    dd_errstr_set(ctx->errstr, ctx->errstr_size,
                  "%s: route %s: setting topics: %s %s %s a dead-letter topic of route %s "
                  "(%s): dead letters would be consumed again",
                  wa, conf->routes[a].name, what, t, how, conf->routes[d].name,
                  conf->routes[d].where);
    return DD_ERR_CONFIG;
}

/* Name k of route a has no dead-letter topic Kafka takes: "<name>.dlq" is
 * longer than 249 bytes, and every dead letter would be refused. */
static int dd_conf_dlq_too_long(dd_conf_ctx_t *ctx, int a, int k)
{
    const dd_conf_route_t *ra = &ctx->conf->routes[a];
    int idx = dd_conf_item_idx("kafka.topics");
    const dd_conf_origin_t *o = dd_conf_origin(ctx, idx);
    char wa[PATH_MAX + 32];
    static const char why[] =
        "topic %.40s... (%zu bytes) has no dead-letter topic: \"<topic>.dlq\" "
        "would be longer than the 249 bytes Kafka takes; set dlq.topic";

    if (!ctx->conf->has_routes)
        return dd_conf_fail(
            ctx, idx,
            o->kind == DD_ORIGIN_FILE ? config_setting_get_elem(o->setting, (unsigned)k) : NULL,
            why, ra->topics[k], strlen(ra->topics[k]));
    dd_conf_route_where(ctx->conf, a, "topics", k, wa, sizeof(wa));
    snprintf(ctx->errstr, ctx->errstr_size, "%s: route %s: setting topics: ", wa, ra->name);
    dd_errstr_set(ctx->errstr + strlen(ctx->errstr), ctx->errstr_size - strlen(ctx->errstr), why,
                  ra->topics[k], strlen(ra->topics[k]));
    return DD_ERR_CONFIG;
}

/* Pattern k of route a against the default dead-letter topics of the
 * routes' names ("<name>.dlq" of a route without dlq.topic). */
static int dd_conf_dlq_pattern(dd_conf_ctx_t *ctx, int a, int k)
{
    const dd_conf_t *conf = ctx->conf;
    char dlq[512], how[600];

    for (int d = 0; d < conf->route_cnt; d++) {
        const dd_conf_route_t *rd = &conf->routes[d];
        for (int i = 0; !rd->dlq.topic && i < rd->topic_cnt; i++) {
            if (dd_conf_topic_is_pattern(rd->topics[i]) ||
                !dd_conf_dlq_topic(rd, rd->topics[i], dlq, sizeof(dlq)) ||
                !dd_conf_pattern_matches(&conf->routes[a], k, dlq))
                continue;
            snprintf(how, sizeof(how), "matches %s,", dlq);
            return dd_conf_dlq_refuse(ctx, a, k, d, "pattern", how);
        }
    }
    return DD_OK;
}

/* Pattern k of route a must not match Kafka's internal topics: librdkafka
 * matches a subscription's patterns against every topic of the cluster,
 * and a message of __consumer_offsets is no payment (every one would be
 * dead-lettered, as bad JSON, to a topic the pattern matches too). */
static int dd_conf_pattern_internal(dd_conf_ctx_t *ctx, int a, int k)
{
    static const char *const internal[] = {"__consumer_offsets", "__transaction_state",
                                           "__cluster_metadata", "__share_group_state"};
    const dd_conf_route_t *ra = &ctx->conf->routes[a];
    int idx = dd_conf_item_idx("kafka.topics");
    const dd_conf_origin_t *o = dd_conf_origin(ctx, idx);
    char wa[PATH_MAX + 32];

    for (size_t i = 0; i < DD_ARRAY_LEN(internal); i++) {
        if (!dd_conf_pattern_matches(ra, k, internal[i])) continue;
        if (!ctx->conf->has_routes)
            return dd_conf_fail(
                ctx, idx,
                o->kind == DD_ORIGIN_FILE ? config_setting_get_elem(o->setting, (unsigned)k) : NULL,
                "pattern %s matches %s, an internal topic of Kafka: make it match no topic "
                "starting with __",
                ra->topics[k], internal[i]);
        dd_conf_route_where(ctx->conf, a, "topics", k, wa, sizeof(wa));
        dd_errstr_set(ctx->errstr, ctx->errstr_size,
                      "%s: route %s: setting topics: pattern %s matches %s, an internal topic of "
                      "Kafka: make it match no topic starting with __",
                      wa, ra->name, ra->topics[k], internal[i]);
        return DD_ERR_CONFIG;
    }
    return DD_OK;
}

/* No route consumes a dead-letter topic, explicit (dd_conf_routes_dlq) or
 * "<topic>.dlq": a name that is one, a pattern matching the one of a name.
 * A pattern's "<topic>.dlq" that another pattern matches can only be found
 * when such a topic is assigned (dd_conf_dlq_route). */
static int dd_conf_routes_dlq_loops(dd_conf_ctx_t *ctx)
{
    const dd_conf_t *conf = ctx->conf;
    int err, d;

    for (int a = 0; a < conf->route_cnt; a++) {
        const dd_conf_route_t *ra = &conf->routes[a];
        for (int k = 0; k < ra->topic_cnt; k++) {
            if (dd_conf_topic_is_pattern(ra->topics[k])) {
                if ((err = dd_conf_pattern_internal(ctx, a, k))) return err;
                if ((err = dd_conf_dlq_pattern(ctx, a, k))) return err;
            } else if ((d = dd_conf_dlq_route(conf, ra->topics[k])) >= 0) {
                return dd_conf_dlq_refuse(ctx, a, k, d, "topic", "is");
            } else if (!ra->dlq.topic && strlen(ra->topics[k]) > 249 - 4) {
                return dd_conf_dlq_too_long(ctx, a, k);
            }
        }
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
            if ((err = dd_conf_routes_tables(ctx, a, b))) return err;
            if ((err = dd_conf_routes_overlap(ctx, a, b))) return err;
        }
    }
    if ((err = dd_conf_routes_dlq(ctx))) return err;
    return dd_conf_routes_dlq_loops(ctx);
}

/* All routes loaded: the default one's dead-letter topics, or the routes
 * against each other. */
static int dd_conf_routes_whole(dd_conf_ctx_t *ctx)
{
    int err;

    if (ctx->conf->has_routes) return dd_conf_routes_cross(ctx);
    if ((err = dd_conf_routes_dlq(ctx))) return err;
    return dd_conf_routes_dlq_loops(ctx);
}

static void dd_conf_route_release(void *e)
{
    dd_conf_route_t *route = e;

    for (int i = 0; route->re && i < route->topic_cnt; i++)
        if (dd_conf_topic_is_pattern(route->topics[i])) regfree(&route->re[i]);
    free(route->re);
    route->re = NULL;
}

const dd_conf_list_t dd_conf_route_list = {
    .id = 0,
    .per = DD_PER_ROUTE,
    .path = "routes",
    .noun = "routes",
    .shape = "( { name = ...; topics = [...]; ... }, ... )",
    .elem_shape = "{ name = ...; topics = [...]; ... }",
    .elem_size = sizeof(dd_conf_route_t),
    .where_off = offsetof(dd_conf_route_t, where),
    .arr_off = offsetof(dd_conf_t, routes),
    .cnt_off = offsetof(dd_conf_t, route_cnt),
    .refuse = dd_conf_routes_refuse,
    .label = dd_conf_route_label,
    .finish = dd_conf_route_finish,
    .single = dd_conf_route_default,
    .whole = dd_conf_routes_whole,
    .release = dd_conf_route_release,
};

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
