/*
 * `dedupd migrate`: creates or upgrades the dedup table of every route
 * (dd_migrate), with the index of processing rows for a route whose handler
 * is in external mode, then lets each route's handler create or upgrade
 * its own tables (its migrate()); in every database shard, each recording
 * its place in the shard layout.
 */
#include <getopt.h>
#include <stdio.h>

#include "dd_cmd.h"
#include "dd_common.h"
#include "dd_db.h"
#include "dd_handler.h"
#include "dd_key.h"
#include "dd_log.h"
#include "dd_migrate.h"
#include "dd_routes.h"

typedef struct {
    int relayout;
} dd_migrate_opts_t;

static int dd_migrate_cmd_parse(void *opts, int argc, char **argv)
{
    static const struct option longopts[] = {{"relayout", no_argument, NULL, 'r'},
                                             {NULL, 0, NULL, 0}};
    dd_migrate_opts_t *o = opts;
    int c;

    optind = 1;
    while ((c = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
        if (c != 'r') return DD_EXIT_USAGE;
        o->relayout = 1;
    }
    if (optind < argc) {
        fprintf(stderr, "dedupd migrate: unexpected argument '%s'\n", argv[optind]);
        return DD_EXIT_USAGE;
    }
    return DD_EXIT_OK;
}

/* Records the shard's place in the layout. The dedup tables are looked at
 * first: rows there under no recorded layout may belong to another shard,
 * which the wrong-shard check must look for (mysql.shard_check = auto). */
static int dd_migrate_cmd_layout(const dd_conf_t *conf, MYSQL *db, const char *who, int s,
                                 int relayout, char *err, size_t err_size)
{
    int rc = DD_OK, rows = 0, was = -1, was_cnt = -1;

    for (int r = 0; !rc && !rows && r < conf->route_cnt; r++)
        rc = dd_migrate_table_has_rows(db, conf->routes[r].dedup.table, &rows, err, err_size);
    if (!rc)
        rc = dd_migrate_layout_record(db, who, s, conf->shard_cnt, rows, relayout, &was, &was_cnt,
                                      err, err_size);
    if (!rc && relayout && was_cnt < 0)
        printf("%s: layout none -> shard %d of %d%s.\n", who, s, conf->shard_cnt,
               rows ? " (changed: its dedup tables hold rows)" : "");
    else if (!rc && relayout && (was != s || was_cnt != conf->shard_cnt))
        printf("%s: layout shard %d of %d -> shard %d of %d (changed).\n", who, was, was_cnt, s,
               conf->shard_cnt);
    else if (!rc && relayout)
        printf("%s: layout shard %d of %d, unchanged.\n", who, s, conf->shard_cnt);
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
    rc = dd_db_new_shard(&db, conf, s, err, sizeof(err));
    if (!rc) rc = dd_migrate_cmd_layout(conf, dd_db_mysql(db), who, s, relayout, err, sizeof(err));
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
    dd_db_destroy(db);
    return rc;
}

static int dd_migrate_cmd_run(const dd_conf_t *conf, void *opts)
{
    const dd_migrate_opts_t *o = opts;
    dd_handler_t *hs[DD_CONF_ROUTE_MAX] = {0};
    char err[1024];
    int rc;

    if ((rc = dd_routes_load_handlers(conf, hs, err, sizeof(err))))
        dd_log(DD_LOG_ERROR, "dedupd migrate: %s", err);
    for (int s = 0; !rc && s < conf->shard_cnt; s++)
        rc = dd_migrate_cmd_shard(conf, hs, s, o->relayout);
    dd_routes_destroy_handlers(hs, conf->route_cnt);
    return rc ? DD_EXIT_FAIL : DD_EXIT_OK;
}

const dd_cmd_t dd_cmd_migrate = {
    .name = "migrate",
    .args = "-c FILE [--relayout]",
    .summary = "create or upgrade the dedup table, then the handler's tables",
    .help = "usage: dedupd migrate -c FILE [--relayout]\n"
            "\n"
            "Creates or upgrades the dedup table (dedup.table; every route's table with\n"
            "routes) and records its key format (for a handler in external mode also\n"
            "the index of processing rows), then calls the handler's migrate() (each\n"
            "route's) for its own tables. With mysql.shards, in every shard, which also\n"
            "records its place in the layout (shard index and count; a shard recording\n"
            "another is refused without --relayout). Safe to run again, and from several\n"
            "instances at once.\n"
            "\n"
            "Options:\n"
            "  -c, --config FILE   configuration file (libconfig)\n"
            "  --relayout          record the configuration's layout in every shard even\n"
            "                      where another is recorded (after moving the rows;\n"
            "                      docs/SHARDS.md), marking it changed, a line per shard\n"
            "  -h, --help          this text\n"
            "\n"
            "Exit status:\n"
            "  0  migrated (or already at the current version)\n"
            "  1  failure: the database, a missing privilege, the handler's migrate()\n"
            "  2  usage error\n",
    .flags = DD_CMD_CONFIG,
    .opts_size = sizeof(dd_migrate_opts_t),
    .parse = dd_migrate_cmd_parse,
    .run = dd_migrate_cmd_run,
};
