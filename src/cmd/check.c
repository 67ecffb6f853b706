/*
 * `dedupd check`: what `dedupd run` would find wrong, before it runs. The
 * start-up validation of run (dd_validate, in the same words), then the
 * database (connection, schema version, key format) and Kafka (every
 * configured topic's metadata, with the user's properties: a secured
 * cluster needs its SASL/TLS settings). One "ok"/"WARN"/"FAIL" line per
 * finding, every finding shown even after a failure.
 */
#include <stdio.h>

#include <librdkafka/rdkafka.h>

#include "dd_cmd.h"
#include "dd_common.h"
#include "dd_db.h"
#include "dd_grants.h"
#include "dd_handler.h"
#include "dd_kafka.h"
#include "dd_key.h"
#include "dd_migrate.h"
#include "dd_outbox.h"
#include "dd_position.h"
#include "dd_routes.h"
#include "dd_tls.h"
#include "dd_validate.h"

/* "route NAME: " before what a line is about, when there are routes. */
static const char *dd_check_route(const dd_conf_t *conf, int r, char *out, size_t out_size)
{
    if (!conf->has_routes) return "";
    snprintf(out, out_size, "route %s: ", conf->routes[r].name);
    return out;
}

/* A route's "^" pattern: the topics it matches now (dedupd subscribes to
 * those, and to those that come later); a topic two routes match stops
 * dedupd when it is assigned, so it fails here. Returns 1 when one did. */
static int dd_check_pattern(const dd_conf_t *conf, rd_kafka_t *rk, int r, int k, int *warnings)
{
    const dd_conf_route_t *route = &conf->routes[r];
    const char *pattern = route->topics[k];
    char **topics = NULL, err[512], who[96], list[600] = "";
    int cnt = 0, bad = 0;
    size_t pos = 0;

    if (dd_kafka_route_topics(rk, conf, r, 10000, &topics, &cnt, err, sizeof(err)) != DD_OK) {
        printf("FAIL kafka: %s%s at %s\n", dd_check_route(conf, r, who, sizeof(who)), err,
               conf->kafka.brokers);
        dd_kafka_topics_free(topics, cnt);
        return 1;
    }
    for (int i = 0; i < cnt; i++) {
        int other, found;
        if (regexec(&route->re[k], topics[i], 0, NULL, 0) != 0) continue;
        found = dd_conf_route_find(conf, topics[i], &other);
        if (other >= 0) {
            printf("FAIL kafka: topic %s matches the topics of two routes: route %s (%s) and "
                   "route %s (%s); a topic must belong to one route\n",
                   topics[i], conf->routes[found].name, conf->routes[found].where,
                   conf->routes[other].name, conf->routes[other].where);
            bad = 1;
        }
        if (pos < sizeof(list))
            pos += (size_t)snprintf(list + pos, sizeof(list) - pos, "%s%s", pos ? ", " : "",
                                    topics[i]);
    }
    if (pos)
        printf("ok   kafka: %spattern %s matches %s at %s\n",
               dd_check_route(conf, r, who, sizeof(who)), pattern, list, conf->kafka.brokers);
    else
        printf("WARN kafka: %spattern %s matches no topic at %s yet\n",
               dd_check_route(conf, r, who, sizeof(who)), pattern, conf->kafka.brokers);
    *warnings += !pos;
    dd_kafka_topics_free(topics, cnt);
    return bad;
}

/* Every topic a route names exists, and every pattern matches topics of
 * one route only. Looked up in the metadata of all topics: a request
 * naming a misspelled topic would create it on a cluster that creates
 * topics on demand, and check would pass. Returns 1 when one failed. */
static int dd_check_kafka(const dd_conf_t *conf, int *warnings)
{
    rd_kafka_t *rk = NULL;
    char err[512], who[96];
    int bad = 0, cnt;

    if (dd_kafka_reader_new(&rk, conf, NULL, err, sizeof(err)) != DD_OK) {
        printf("FAIL kafka: %s\n", err);
        return 1;
    }
    for (int r = 0; r < conf->route_cnt; r++) {
        const dd_conf_route_t *route = &conf->routes[r];
        int patterns = 0;
        for (int i = 0; i < route->topic_cnt; i++) {
            const char *topic = route->topics[i];
            if (dd_conf_topic_is_pattern(topic)) {
                patterns = 1;
                continue;
            }
            if (dd_kafka_topic_partitions(rk, topic, 10000, &cnt, err, sizeof(err)) == DD_OK) {
                printf("ok   kafka: %stopic %s has %d partition(s) at %s\n",
                       dd_check_route(conf, r, who, sizeof(who)), topic, cnt, conf->kafka.brokers);
            } else {
                printf("FAIL kafka: %s%s at %s\n", dd_check_route(conf, r, who, sizeof(who)), err,
                       conf->kafka.brokers);
                bad = 1;
            }
        }
        for (int i = 0; patterns && i < route->topic_cnt; i++) {
            if (!dd_conf_topic_is_pattern(route->topics[i])) continue;
            bad |= dd_check_pattern(conf, rk, r, i, warnings);
        }
    }
    rd_kafka_destroy(rk);
    return bad;
}

/* The privileges route r's handler declares (handler.grants), if any. */
static int dd_check_handler_grants(const dd_conf_t *conf, dd_db_t *db, int r, const char *who)
{
    const char *file = conf->routes[r].handler.grants;
    char err[1024];

    if (!file) return 0;
    if (dd_grants_check_declared(db, file, err, sizeof(err)) == DD_OK) {
        printf("ok   %shandler privileges: %s holds those %s declares\n", who,
               dd_db_settings(db)->user, file);
        return 0;
    }
    printf("FAIL %shandler privileges: %s\n", who, err);
    return 1;
}

/* Route r's handler on a connection of the runtime user: its conn_init,
 * which prepares what it needs there (the SQL handler's statements), so
 * an unknown table or a missing privilege shows now, not at the first
 * message. Returns 1 when it failed. */
static int dd_check_handler_conn(dd_handler_t *h, dd_db_t *db, const char *who)
{
    char err[1024];
    void *conn_state;

    if (!h || !dd_handler_has_conn_init(h)) return 0;
    if (dd_handler_conn_init(h, dd_db_mysql(db), &conn_state, err, sizeof(err)) != DD_OK) {
        printf("FAIL %shandler connection: %s\n", who, err);
        return 1;
    }
    dd_handler_conn_fini(h, dd_db_mysql(db), conn_state);
    printf("ok   %shandler connection: %s's conn_init succeeded as %s\n", who, dd_handler_name(h),
           dd_db_settings(db)->user);
    return 0;
}

/* Route r's dedup table: at the newest schema version, recording this key
 * format, granted; its handler's privileges and connection. Returns 1 when
 * something failed. */
static int dd_check_table(const dd_conf_t *conf, dd_db_t *db, int r, dd_handler_t *h)
{
    const char *table = conf->routes[r].dedup.table;
    char err[1024], who[96], route[96];
    int version = 0, bad = 0;

    dd_check_route(conf, r, route, sizeof(route));
    if (!conf->has_routes) route[0] = '\0';
    if (conf->shard_cnt > 1)
        snprintf(who, sizeof(who), "shard %d: %s", dd_db_shard(db), route);
    else
        snprintf(who, sizeof(who), "%s", route);
    if (dd_migrate_version(dd_db_mysql(db), table, &version, err, sizeof(err)) == DD_OK &&
        version == dd_migrations[dd_migration_cnt - 1].version) {
        printf("ok   %sdedup table: %s at schema version %d\n", who, table, version);
    } else {
        printf("FAIL %sdedup table: %s is at schema version %d, run `dedupd migrate`\n", who, table,
               version);
        bad = 1;
    }
    if (dd_migrate_check_key_format(dd_db_mysql(db), table, err, sizeof(err)) == DD_OK) {
        printf("ok   %skey format: %s records format %d\n", who, table, DD_KEY_FORMAT);
    } else {
        printf("FAIL %skey format: %s\n", who, err);
        bad = 1;
    }
    if (dd_grants_check(db, conf, table, dd_grants_run_needs(conf) & DD_GRANTS_DEDUP_NEEDS, err,
                        sizeof(err)) == DD_OK) {
        printf("ok   %sprivileges: %s may do what dedupd run does on %s\n", who,
               dd_db_settings(db)->user, table);
    } else {
        printf("FAIL %sprivileges: %s\n", who, err);
        bad = 1;
    }
    bad |= dd_check_handler_grants(conf, db, r, who);
    return bad | dd_check_handler_conn(h, db, who);
}

/* Shard s records the configuration's layout. Returns 1 when it does not. */
static int dd_check_layout(const dd_conf_t *conf, dd_db_t *db, int s, const char *which)
{
    dd_migrate_layout_t layout;
    char who[340], err[1024];
    int unknown = 0;

    dd_conf_shard_name(conf, s, who, sizeof(who));
    if (dd_migrate_layout_of(conf, s, &layout, err, sizeof(err)) != DD_OK ||
        dd_migrate_layout_check(dd_db_mysql(db), who, &layout, 1, &unknown, err, sizeof(err)) !=
            DD_OK) {
        printf("FAIL database: %s\n", err);
        return 1;
    }
    printf("ok   database: %srecords the layout shard %d of %d\n", which, s, conf->shard_cnt);
    if (unknown)
        printf("WARN database: %srecords no shard_by, shard_key or map of %d route(s) yet (a "
               "layout recorded before they were, or a new route): `dedupd migrate` records "
               "them\n",
               which, unknown);
    return 0;
}

/* dedupd's own tables in one shard: granted for what run does with them,
 * the positions' table there. Returns 1 when something failed. */
static int dd_check_own_tables(const dd_conf_t *conf, dd_db_t *db, const char *which, int *warnings)
{
    char err[1024];
    int exists = 0;

    if (dd_grants_check(db, conf, NULL, dd_grants_run_needs(conf), err, sizeof(err)) != DD_OK) {
        printf("FAIL %sprivileges: %s\n", which, err);
        return 1;
    }
    printf("ok   %sprivileges: %s may do what dedupd run does on dedupd's tables%s\n", which,
           dd_db_settings(db)->user, conf->outbox.enabled ? " (the outbox too)" : "");
    if (conf->outbox.enabled) {
        char ns[DD_OUTBOX_NS_LEN + 1];
        if (dd_outbox_namespace(dd_db_mysql(db), ns, err, sizeof(err)) != DD_OK) {
            printf("FAIL %soutbox: %s\n", which, err);
            return 1;
        }
        printf("ok   %soutbox: " DD_OUTBOX_TABLE " records the event namespace %s\n", which, ns);
    }
    if (dd_position_check(db, conf, &exists, err, sizeof(err)) != DD_OK) {
        printf("FAIL %spositions: %s\n", which, err);
        return 1;
    }
    if (exists)
        printf("ok   %spositions: %s may read and write dedupd_position\n", which,
               dd_db_settings(db)->user);
    else
        printf("WARN %spositions: no table dedupd_position, so the consumer's positions are "
               "not kept in the database: run `dedupd migrate` with this configuration\n",
               which);
    *warnings += !exists;
    return 0;
}

/* One database shard (the database, without mysql.shards): connected to,
 * dedupd's tables, each route's table in it (its handler's conn_init
 * there), and its recorded layout. Returns 1 when something failed. */
static int dd_check_shard(const dd_conf_t *conf, int s, dd_handler_t **hs, int *warnings)
{
    const dd_conf_mysql_t *my = &conf->shards[s];
    char err[1024], tls[200] = "unix socket, no TLS", which[400] = "", addr[300];
    dd_db_t *db = NULL;
    int bad = 0;

    if (conf->shard_cnt > 1)
        snprintf(which, sizeof(which), "shard %d (%s): ", s,
                 dd_conf_mysql_addr(my, addr, sizeof(addr)));
    if (dd_db_new_shard(&db, conf, s, err, sizeof(err)) != DD_OK) {
        printf("FAIL database: %s\n", err);
        return 1;
    }
    if (!my->socket) dd_tls_describe(dd_db_mysql(db), tls, sizeof(tls));
    printf("ok   database: %sconnected to %s as %s (%s)\n", which, my->database, my->user, tls);
    bad |= dd_check_own_tables(conf, db, which, warnings);
    if (conf->shard_cnt > 1) bad |= dd_check_layout(conf, db, s, which);
    for (int r = 0; r < conf->route_cnt; r++)
        bad |= dd_check_table(conf, db, r, hs[r]);
    dd_db_destroy(db);
    return bad;
}

/* What each route's handler reaches outside the database (a service's
 * URL), as its check() (ABI 7) found it. Returns 1 when one failed. */
static int dd_check_handlers(const dd_conf_t *conf, dd_handler_t **hs, int *warnings)
{
    static const char *const tags[] = {"ok  ", "WARN", "FAIL"};
    char report[1024], who[96];
    int bad = 0, level;

    for (int r = 0; r < conf->route_cnt; r++) {
        if (!hs[r] || (level = dd_handler_probe(hs[r], report, sizeof(report))) < 0) continue;
        printf("%s %shandler %s: %s\n", tags[level], dd_check_route(conf, r, who, sizeof(who)),
               dd_handler_name(hs[r]), report);
        *warnings += level == DEDUPD_CHECK_WARN;
        bad |= level == DEDUPD_CHECK_FAIL;
    }
    return bad;
}

/* Every finding of the start-up validation is printed. */
static void dd_check_report(void *opaque, dd_validate_level_t level, const char *what,
                            const char *text)
{
    static const char *const tags[] = {"ok  ", "WARN", "FAIL"};
    int *warnings = opaque;

    printf("%s %s: %s\n", tags[level], what, text);
    *warnings += level == DD_VALIDATE_WARN;
}

static int dd_check_run(const dd_cmd_ctx_t *ctx, void *opts)
{
    const dd_conf_t *conf = ctx->conf;
    dd_handler_t *hs[DD_CONF_ROUTE_MAX] = {0};
    char err[1024];
    int bad = 0, warnings = 0;

    (void)opts;
    printf("ok   config: %s\n", conf->path);
    for (int r = 0; conf->has_routes && r < conf->route_cnt; r++)
        printf("ok   route %s: %s\n", conf->routes[r].name, conf->routes[r].where);
    /* What `dedupd run` checks before it starts, in the same words. */
    if (dd_validate_conf(conf, hs, dd_check_report, &warnings, err, sizeof(err)) != DD_OK) bad = 1;
    bad |= dd_check_handlers(conf, hs, &warnings);
    for (int s = 0; s < conf->shard_cnt; s++)
        bad |= dd_check_shard(conf, s, hs, &warnings);
    bad |= dd_check_kafka(conf, &warnings);
    dd_routes_destroy_handlers(hs, conf->route_cnt);
    if (bad)
        printf("check failed\n");
    else if (warnings)
        printf("check passed, with %d warning(s)\n", warnings);
    else
        printf("check passed\n");
    return bad ? DD_EXIT_FAIL : DD_EXIT_OK;
}

const dd_cmd_t dd_cmd_check = {
    .name = "check",
    .args = "-c FILE",
    .summary = "validate config, handler, Kafka and database",
    .usage = "usage: dedupd check -c FILE\n"
             "\n"
             "Validates what `dedupd run` validates before it starts, for every route, then\n"
             "asks each handler that can whether what it reaches outside the database\n"
             "answers (the HTTP handler's URL), connects to the database (the privileges\n"
             "on dedupd's tables, the positions' table, each dedup table's schema version,\n"
             "key format and privileges, each handler's conn_init, which prepares its\n"
             "statements) and looks every topic up in the cluster's metadata (without\n"
             "creating it; a pattern's topics must match one route only). One line per\n"
             "finding: ok, WARN or FAIL.\n",
    .exits = "  0  passed (maybe with warnings)\n"
             "  1  a check failed\n"
             "  2  usage error\n",
    .flags = DD_CMD_CONFIG,
    .run = dd_check_run,
};
