/*
 * `dedupd migrate`: creates or upgrades the dedup table (dd_migrate), with
 * the index of processing rows when the handler is in external mode, then
 * lets the handler create or upgrade its own tables (its migrate()).
 */
#include <stdio.h>

#include "dd_cmd.h"
#include "dd_common.h"
#include "dd_db.h"
#include "dd_handler.h"
#include "dd_key.h"
#include "dd_log.h"
#include "dd_migrate.h"

static int dd_migrate_cmd_run(const dd_conf_t *conf, void *opts)
{
    dd_handler_t *h = NULL;
    dd_db_t *db = NULL;
    char err[1024];
    int rc, version = 0, index = 0;

    (void)opts;
    rc = dd_handler_load(&h, conf->handler.path, conf->handler.config, err, sizeof(err));
    if (!rc) rc = dd_db_new(&db, conf, err, sizeof(err));
    if (!rc) rc = dd_migrate_run(dd_db_mysql(db), conf->dedup.table, err, sizeof(err));
    if (!rc)
        rc = dd_migrate_version(dd_db_mysql(db), conf->dedup.table, &version, err, sizeof(err));
    if (!rc && dd_handler_mode(h) == DEDUPD_MODE_EXTERNAL)
        rc = dd_migrate_processing_index(dd_db_mysql(db), conf->dedup.table, 1, &index, err,
                                         sizeof(err));
    if (!rc) rc = dd_handler_migrate(h, dd_db_mysql(db), err, sizeof(err));
    if (rc)
        dd_log(DD_LOG_ERROR, "dedupd migrate: %s", err);
    else
        printf("dedup table %s is at schema version %d, key format %d; handler %s migrated.\n",
               conf->dedup.table, version, DD_KEY_FORMAT, dd_handler_name(h));
    dd_db_destroy(db);
    dd_handler_destroy(h);
    return rc ? DD_EXIT_FAIL : DD_EXIT_OK;
}

const dd_cmd_t dd_cmd_migrate = {
    .name = "migrate",
    .args = "-c FILE",
    .summary = "create or upgrade the dedup table, then the handler's tables",
    .help = "usage: dedupd migrate -c FILE\n"
            "\n"
            "Creates or upgrades the dedup table (dedup.table) and records its key\n"
            "format (for a handler in external mode also the index of processing rows),\n"
            "then calls the handler's migrate() for its own tables. Safe to run again,\n"
            "and from several instances at once.\n"
            "\n"
            "Options:\n"
            "  -c, --config FILE   configuration file (libconfig)\n"
            "  -h, --help          this text\n"
            "\n"
            "Exit status:\n"
            "  0  migrated (or already at the current version)\n"
            "  1  failure: the database, a missing privilege, the handler's migrate()\n"
            "  2  usage error\n",
    .flags = DD_CMD_CONFIG,
    .run = dd_migrate_cmd_run,
};
