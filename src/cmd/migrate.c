/*
 * `dedupd migrate`: creates or upgrades the dedup table of every route
 * (dd_migrate), with the index of processing rows for a route whose handler
 * is in external mode, then lets each route's handler create or upgrade
 * its own tables (its migrate()); in every database shard, each recording
 * its place in the shard layout.
 */
#include <stdio.h>

#include "dd_cmd.h"
#include "dd_common.h"
#include "dd_db.h"
#include "dd_handler.h"
#include "dd_key.h"
#include "dd_log.h"
#include "dd_migrate.h"
#include "dd_outbox.h"
#include "dd_position.h"
#include "dd_schemafp.h"
#include "dd_migrate_lock.h"
#include "dd_routes.h"

typedef struct {
    int relayout;
} dd_migrate_opts_t;

static const dd_cmd_opt_t dd_migrate_cmd_opts[] = {
    DD_CMD_FLAG("relayout", dd_migrate_opts_t, relayout,
                "record the configuration's layout in every shard even\n"
                "where another is recorded (after moving the rows;\n"
                "docs/SHARDS.md), marking it changed; a line per shard\n"
                "and per change (its place, a route's shard_by,\n"
                "shard_key or map)"),
    DD_CMD_OPT_END,
};

#define DD_MIGRATE_CMD_ATTEMPTS 5

/* Takes (take = 1) or gives back the migration lock of db's database
 * (dd_migrate_lock.h), held by this process. */
static int dd_migrate_cmd_lock(dd_db_t *db, int take, char *err, size_t err_size)
{
    char who[128];

    dd_instance_name(who, sizeof(who));
    if (!take) {
        dd_migrate_lock_give(dd_db_mysql(db), who);
        return DD_OK;
    }
    return dd_migrate_lock_take(dd_db_mysql(db), who, err, err_size);
}

/* Records the shard's layout. The dedup tables are looked at first: rows
 * there under no recorded layout may belong to another shard, which the
 * wrong-shard check must look for (mysql.shard_check = auto). With
 * relayout, a line per shard says what changed. */
static int dd_migrate_cmd_layout(const dd_conf_t *conf, MYSQL *db, const char *who, int s,
                                 int relayout, char *err, size_t err_size)
{
    dd_migrate_layout_t layout;
    int rc = dd_migrate_layout_of(conf, s, &layout, err, err_size), rows = 0;

    for (int r = 0; !rc && !rows && r < conf->route_cnt; r++)
        rc = dd_migrate_table_has_rows(db, conf->routes[r].dedup.table, &rows, err, err_size);
    if (!rc) rc = dd_migrate_layout_record(db, who, &layout, rows, relayout, stdout, err, err_size);
    return rc;
}

/* One shard (the database, without mysql.shards): its layout, every
 * route's dedup table, every route's handler's migrate(); a line per route
 * (each starting "shard N: " with several shards). */
static int dd_migrate_cmd_shard(const dd_conf_t *conf, dd_handler_t *const *hs, int s, int relayout)
{
    dd_db_t *db = NULL;
    char err[1024], who[340], pfx[32] = "";
    int rc, version[DD_CONF_ROUTE_MAX] = {0}, index = 0;

    if (conf->shard_cnt > 1) snprintf(pfx, sizeof(pfx), "shard %d: ", s);
    dd_conf_shard_name(conf, s, who, sizeof(who));
    rc = dd_db_new_shard_timeout(&db, conf, s, DD_DB_NO_READ_TIMEOUT, err, sizeof(err));
    if (!rc) rc = dd_migrate_cmd_lock(db, 1, err, sizeof(err));
    if (!rc) rc = dd_migrate_cmd_layout(conf, dd_db_mysql(db), who, s, relayout, err, sizeof(err));
    if (!rc) rc = dd_position_migrate(dd_db_mysql(db), err, sizeof(err));
    if (!rc) rc = dd_schemafp_migrate(dd_db_mysql(db), err, sizeof(err));
    /* Every route's dedup table first, then every route's handler: each
     * instance its own migrate(), so a handler two routes use runs it
     * twice (a migrate is written to be run again). */
    for (int r = 0; !rc && r < conf->route_cnt; r++) {
        const char *table = conf->routes[r].dedup.table;
        rc = dd_migrate_run(dd_db_mysql(db), table, err, sizeof(err));
        if (!rc) rc = dd_migrate_version(dd_db_mysql(db), table, &version[r], err, sizeof(err));
        if (!rc && dd_handler_mode(hs[r]) == DEDUPD_MODE_EXTERNAL)
            rc = dd_migrate_processing_index(dd_db_mysql(db), table, 1, &index, err, sizeof(err));
    }
    if (!rc && conf->outbox.enabled)
        rc = dd_outbox_migrate(dd_db_mysql(db), NULL, err, sizeof(err));
    for (int r = 0; !rc && r < conf->route_cnt; r++) {
        char msg[900];
        if ((rc = dd_handler_migrate(hs[r], dd_db_mysql(db), msg, sizeof(msg))) && conf->has_routes)
            snprintf(err, sizeof(err), "route %s: %s", conf->routes[r].name, msg);
        else if (rc)
            snprintf(err, sizeof(err), "%s", msg);
    }
    if (rc) dd_log(DD_LOG_ERROR, "dedupd migrate: %s%s", pfx, err);
    for (int r = 0; !rc && r < conf->route_cnt; r++)
        printf(
            "%s%s%s%sdedup table %s is at schema version %d, key format %d; handler %s migrated.\n",
            pfx, conf->has_routes ? "route " : "", conf->has_routes ? conf->routes[r].name : "",
            conf->has_routes ? ": " : "", conf->routes[r].dedup.table, version[r], DD_KEY_FORMAT,
            dd_handler_name(hs[r]));
    if (!rc && conf->outbox.enabled) printf("%soutbox table " DD_OUTBOX_TABLE " ready.\n", pfx);
    if (db) dd_migrate_cmd_lock(db, 0, NULL, 0);
    dd_db_destroy(db);
    return rc;
}

/* dd_migrate_cmd_shard again while it fails for a reason that passes: a
 * certification failure of a cluster (1213), a node that went away. Every
 * step is safe to run again. */
static int dd_migrate_cmd_shard_retried(const dd_conf_t *conf, dd_handler_t *const *hs, int s,
                                        int relayout)
{
    int rc = DD_ERR_RETRIABLE;

    for (int attempt = 1; rc == DD_ERR_RETRIABLE && attempt <= DD_MIGRATE_CMD_ATTEMPTS; attempt++) {
        if (attempt > 1) {
            dd_log(DD_LOG_WARN, "dedupd migrate: running it again (attempt %d of %d).", attempt,
                   DD_MIGRATE_CMD_ATTEMPTS);
            dd_sleep_ms(500L * attempt, NULL);
        }
        rc = dd_migrate_cmd_shard(conf, hs, s, relayout);
    }
    return rc;
}

static int dd_migrate_cmd_run(const dd_cmd_ctx_t *ctx, void *opts)
{
    const dd_conf_t *conf = ctx->conf;
    const dd_migrate_opts_t *o = opts;
    int rc = DD_OK;

    for (int s = 0; !rc && s < conf->shard_cnt; s++)
        rc = dd_migrate_cmd_shard_retried(conf, ctx->hs, s, o->relayout);
    return rc ? DD_EXIT_FAIL : DD_EXIT_OK;
}

const dd_cmd_t dd_cmd_migrate = {
    .name = "migrate",
    .args = "-c FILE [--relayout]",
    .summary = "create or upgrade the dedup table, then the handler's tables",
    .usage = "usage: dedupd migrate -c FILE [--relayout]\n"
             "\n"
             "Creates or upgrades the dedup table (dedup.table; every route's table with\n"
             "routes) and records its key format (for a handler in external mode also\n"
             "the index of processing rows), creates the table of the consumer's\n"
             "positions (dedupd_position), then calls the handler's migrate() (each\n"
             "route's) for its own tables. With mysql.shards, in every shard, which also\n"
             "records its layout: its index, the shard count and each route's shard_by,\n"
             "shard_key and map (a shard recording another is refused without\n"
             "--relayout). Safe to run again, and from several instances at once.\n",
    .exits = "  0  migrated (or already at the current version)\n"
             "  1  failure: the database, a missing privilege, the handler's migrate()\n"
             "  2  usage error\n",
    .flags = DD_CMD_CONFIG | DD_CMD_HANDLERS,
    .opts_size = sizeof(dd_migrate_opts_t),
    .opts = dd_migrate_cmd_opts,
    .run = dd_migrate_cmd_run,
};
