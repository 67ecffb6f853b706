/*
 * The run of `dedupd replay`, shared by `dedupd redrive` (built on it, see
 * dd_replay_redrive.c): set up, consume the range, free. A command built
 * on the run plugs in through rp->hooks: where each partition starts, what
 * becomes of each message of the range, of each message parsed, judged
 * and back from the lane; replay itself has none. Redrive reads the range
 * with a loop of its own (dd_replay_drive.c).
 */
#include "dd_replay_int.h"

#include <stdio.h>
#include <stdlib.h>

#include "dd_common.h"
#include "dd_grants.h"
#include "dd_kafka.h"
#include "dd_log.h"
#include "dd_migrate.h"

int dd_replay_take(dd_replay_t *rp, rd_kafka_message_t *rkm, char *errstr, size_t errstr_size)
{
    dd_replay_part_t *pt =
        rkm->rkt ? dd_replay_part_find(rp, rd_kafka_topic_name(rkm->rkt), rkm->partition) : NULL;

    if (rkm->err) {
        if (rkm->err == RD_KAFKA_RESP_ERR__PARTITION_EOF && pt && rkm->offset >= pt->end)
            dd_replay_advance(rp, pt, pt->end);
        else if (rkm->err != RD_KAFKA_RESP_ERR__PARTITION_EOF)
            dd_log(DD_LOG_WARN, "Consumer error: %s", rd_kafka_message_errstr(rkm));
        rd_kafka_message_destroy(rkm);
        return DD_OK;
    }
    if (!pt || pt->done || rkm->offset < pt->pos || rkm->offset >= pt->end ||
        !dd_replay_in_time(rp, pt, rkm)) {
        if (pt && !pt->done && rkm->offset >= pt->end) dd_replay_advance(rp, pt, pt->end);
        rd_kafka_message_destroy(rkm);
        return DD_OK;
    }
    if (rp->hooks) return rp->hooks->message(rp, rkm, errstr, errstr_size);
    return dd_replay_message(rp, pt->route, rkm, errstr, errstr_size);
}

int dd_replay_consume(dd_replay_t *rp, char *errstr, size_t errstr_size)
{
    int rc = DD_OK;

    dd_progress_init(&rp->progress_line, "replay");
    while (!rc && rp->parts_left > 0 && !atomic_load(&dd_stop_requested)) {
        rd_kafka_message_t *rkm = rd_kafka_consumer_poll(rp->rk, 100);
        if (rkm) rc = dd_replay_take(rp, rkm, errstr, errstr_size);
        if (!rc && rp->lanes) rc = dd_replay_apply_drain(rp, 0, errstr, errstr_size);
        dd_progress_show(&rp->progress_line, rp->progress, rp->total);
    }
    if (!rc) rc = dd_replay_flush(rp, errstr, errstr_size);
    dd_progress_end(&rp->progress_line);
    return rc;
}

/* Shard s: its recorded layout (with shards: a key looked for in a shard
 * of another layout would be reported missing, and --apply would claim it
 * anew), then each table read there: its key format and the privileges
 * replay needs there (temporary tables in shard 0, where they live, and
 * with --orphans in every shard, for its anti-join). */
static int dd_replay_check_shard(dd_replay_t *rp, int s, char *errstr, size_t errstr_size)
{
    const dd_conf_t *conf = rp->conf;
    dd_migrate_layout_t layout;
    char who[340];
    int rc = dd_migrate_layout_of(conf, s, &layout, errstr, errstr_size);

    if (!rc)
        rc = dd_migrate_layout_check(dd_db_mysql(rp->sdb[s]),
                                     dd_conf_shard_name(conf, s, who, sizeof(who)), &layout,
                                     conf->shard_cnt > 1, NULL, errstr, errstr_size);

    if (rc) return rc; /* the message names the shard */
    for (int r = 0; !rc && r < conf->route_cnt; r++) {
        const char *table = conf->routes[r].dedup.table;
        if (rp->only >= 0 && r != rp->only) continue;
        rc = dd_migrate_check_key_format(dd_db_mysql(rp->sdb[s]), table, errstr, errstr_size);
        if (!rc)
            rc = dd_grants_check(rp->sdb[s], conf, table,
                                 DD_GRANTS_READ |
                                     (s == 0 || rp->args->orphans ? DD_GRANTS_TEMP : 0) |
                                     (rp->args->apply ? DD_GRANTS_CLAIM : 0),
                                 errstr, errstr_size);
    }
    if (!rc && dd_conf_reads_avro(conf))
        rc = dd_schemafp_check(rp->sdb[s], conf, rp->args->apply, errstr, errstr_size);
    if (rc && conf->shard_cnt > 1) {
        char msg[800];
        snprintf(msg, sizeof(msg), "%.700s", errstr);
        snprintf(errstr, errstr_size, "shard %d: %s", s, msg);
    }
    return rc;
}

/* The registry, waiting for each fetch; a schema is checked against the
 * database's record of its id's fingerprint, recorded with --apply. */
static int dd_replay_registry(dd_replay_t *rp, char *errstr, size_t errstr_size)
{
    const dd_conf_t *conf = rp->conf;
    dd_registry_opts_t opts = {.backoff_initial_ms = conf->retry.backoff_initial_ms,
                               .backoff_max_ms = conf->retry.backoff_max_ms,
                               .verify = dd_schemafp_verify,
                               .verify_opaque = &rp->schemafp};

    rp->schemafp = (dd_schemafp_t){conf, rp->args->apply};
    return dd_registry_new(&rp->registry, &conf->schema_registry, &opts, errstr, errstr_size);
}

int dd_replay_setup(dd_replay_t *rp, char *errstr, size_t errstr_size)
{
    dd_replay_args_t *args = rp->args;
    const dd_conf_t *conf = rp->conf;
    int rc = DD_OK;

    rp->only = -1;
    if (args->route && (rp->only = dd_conf_route_named(conf, args->route)) < 0) {
        dd_errstr_set(errstr, errstr_size, "--route %s: %s has no route of that name", args->route,
                      conf->path);
        return DD_ERR_ARG;
    }
    if (args->apply) rc = dd_routes_load_handlers(conf, rp->hs, errstr, errstr_size);
    if (!rc)
        rc = dd_routes_new(&rp->routes, conf, args->apply ? rp->hs : NULL, errstr, errstr_size);
    if (!rc && !(rp->doc = dd_json_doc_new())) {
        dd_errstr_set(errstr, errstr_size, "out of memory");
        rc = DD_ERR_NOMEM;
    }
    if (!rc && conf->schema_registry.url) rc = dd_replay_registry(rp, errstr, errstr_size);
    if (!rc) rc = dd_db_new_shard(&rp->db, conf, 0, errstr, errstr_size);
    if (!rc) rp->sdb[0] = rp->db;
    for (int s = 1; !rc && s < conf->shard_cnt; s++)
        rc = dd_db_new_shard(&rp->sdb[s], conf, s, errstr, errstr_size);
    for (int s = 0; !rc && s < conf->shard_cnt; s++)
        rc = dd_replay_check_shard(rp, s, errstr, errstr_size);
    if (!rc) rc = dd_replay_temp_tables(rp, errstr, errstr_size);
    if (!rc) rc = dd_replay_kafka_new(rp, errstr, errstr_size);
    if (!rc) rc = dd_replay_partitions(rp, errstr, errstr_size);
    if (!rc) rc = dd_replay_ranges(rp, errstr, errstr_size);
    if (!rc) rc = dd_replay_group_offsets(rp, errstr, errstr_size);
    if (!rc && rp->hooks) rp->hooks->resume(rp);
    if (!rc && args->apply) rc = dd_replay_apply_start(rp, errstr, errstr_size);
    if (!rc) rc = dd_replay_assign(rp, errstr, errstr_size);
    return rc;
}

void dd_replay_destroy(dd_replay_t *rp)
{
    if (!rp) return;
    for (size_t i = 0; i < rp->n; i++)
        dd_item_destroy(rp->batch[i], NULL);
    dd_lanes_destroy(rp->lanes); /* before the handlers it calls */
    dd_routes_destroy(rp->routes);
    dd_routes_destroy_handlers(rp->hs, rp->conf->route_cnt);
    if (rp->rk) {
        rd_kafka_consumer_close(rp->rk);
        rd_kafka_destroy(rp->rk);
    }
    for (int s = 1; s < DD_CONF_SHARD_MAX; s++)
        dd_db_destroy(rp->sdb[s]);
    dd_db_destroy(rp->db);
    dd_buf_release(&rp->sql);
    dd_kafka_topics_free(rp->topics, rp->topic_cnt);
    dd_json_doc_destroy(rp->doc);
    dd_registry_destroy(rp->registry);
    free(rp->parts);
    free(rp);
}
