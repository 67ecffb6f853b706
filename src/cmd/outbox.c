/*
 * `dedupd outbox list|requeue|drop`: the operator's side of the outbox.
 * An event Kafka refuses for good is parked (state 1, with the broker's
 * error) and never sent again by itself: once its cause is mended (the
 * topic's ACL, its size limit) it is re-queued for the relay, or, when it
 * must never go out, dropped. Both act on parked events only (the pending
 * ones are the relay's), chosen by filters, in every database shard, each
 * event they touch printed first, in one transaction per shard that locks
 * the rows it changes. list shows parked events (or pending ones, or all)
 * by the same filters.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dd_buf.h"
#include "dd_cmd.h"
#include "dd_common.h"
#include "dd_db.h"
#include "dd_log.h"
#include "dd_outbox.h"

#define DD_OUTBOX_CMD_LIMIT 100 /* list's default */

typedef enum { DD_OUTBOX_LIST, DD_OUTBOX_REQUEUE, DD_OUTBOX_DROP } dd_outbox_action_t;

typedef struct {
    dd_outbox_action_t action;
    const char *state; /* list: parked (default), pending or all */
    const char *topic, *ids, *event_id, *error, *limit;
    int all;
    unsigned long long id_from, id_to; /* --id; 0: any */
    long long limit_n;                 /* 0: none */
} dd_outbox_cmd_opts_t;

#define DD_OUTBOX_STR(name, arg, field, help)                                                      \
    DD_CMD_STR(name, arg, dd_outbox_cmd_opts_t, field, help)

static const dd_cmd_opt_t dd_outbox_cmd_opts[] = {
    DD_OUTBOX_STR("state", "STATE", state,
                  "list only: parked (default), pending or all; requeue\n"
                  "and drop act on parked events only"),
    DD_OUTBOX_STR("topic", "TOPIC", topic, "events to TOPIC"),
    DD_OUTBOX_STR("id", "N[-M]", ids, "the event of id N, or of ids N to M (the column id)"),
    DD_OUTBOX_STR("event-id", "ID", event_id, "the event whose dedupd.event_id is ID"),
    DD_OUTBOX_STR("error", "TEXT", error, "events whose error contains TEXT"),
    DD_OUTBOX_STR("limit", "N", limit,
                  "at most N events per shard, the lowest ids first (list:\n"
                  "100 by default; requeue, drop: no limit)"),
    DD_CMD_FLAG("all", dd_outbox_cmd_opts_t, all,
                "requeue or drop every parked event (without a filter,\n"
                "requeue and drop refuse to act)"),
    DD_CMD_OPT_END,
};

/* --id N or N-M into id_from..id_to. 0 or -1. */
static int dd_outbox_cmd_ids(dd_outbox_cmd_opts_t *o)
{
    char *end;

    errno = 0;
    o->id_from = strtoull(o->ids, &end, 10);
    o->id_to = o->id_from;
    if (*end == '-') o->id_to = strtoull(end + 1, &end, 10);
    return errno || *end || o->ids[0] < '0' || o->ids[0] > '9' || o->id_from == 0 ||
                   o->id_to < o->id_from
               ? -1
               : 0;
}

/* The operand and what the options say together. 0 or DD_EXIT_USAGE. */
static int dd_outbox_cmd_check(void *opts, int argc, char **argv)
{
    static const char *const actions[] = {"list", "requeue", "drop"};
    dd_outbox_cmd_opts_t *o = opts;
    const char *why = NULL;
    char *end;
    int a;

    if (argc != 1) {
        fprintf(stderr, "dedupd outbox: one action: list, requeue or drop (see dedupd outbox "
                        "--help)\n");
        return DD_EXIT_USAGE;
    }
    for (a = 0; a < 3 && strcmp(argv[0], actions[a]) != 0; a++)
        ;
    o->action = (dd_outbox_action_t)a;
    if (a == 3)
        why = "the action is list, requeue or drop";
    else if (o->state && a != DD_OUTBOX_LIST)
        why = "--state is list's: requeue and drop act on parked events only";
    else if (o->state && strcmp(o->state, "parked") != 0 && strcmp(o->state, "pending") != 0 &&
             strcmp(o->state, "all") != 0)
        why = "--state is parked, pending or all";
    else if (o->topic && !dd_outbox_topic_valid(o->topic))
        why = "--topic is not a Kafka topic name";
    else if (o->ids && dd_outbox_cmd_ids(o) != 0)
        why = "--id is N or N-M, ids from 1, N <= M";
    else if (o->event_id && (strlen(o->event_id) != DD_OUTBOX_ID_LEN ||
                             strspn(o->event_id, "0123456789abcdef") != DD_OUTBOX_ID_LEN))
        why = "--event-id is an event's id: 32 hex digits, lower case";
    else if (o->limit && ((o->limit_n = strtoll(o->limit, &end, 10)) < 1 || *end))
        why = "--limit is a number from 1";
    else if (a != DD_OUTBOX_LIST && !o->all && !o->topic && !o->ids && !o->event_id && !o->error)
        why = "requeue and drop need a filter (--topic, --id, --event-id, --error) or --all";
    if (why) {
        fprintf(stderr, "dedupd outbox: %s\n", why);
        return DD_EXIT_USAGE;
    }
    if (!o->limit_n && a == DD_OUTBOX_LIST) o->limit_n = DD_OUTBOX_CMD_LIMIT;
    return DD_EXIT_OK;
}

/* " WHERE ..." of the events the options choose. */
static void dd_outbox_cmd_where(const dd_outbox_cmd_opts_t *o, MYSQL *my, dd_buf_t *sql)
{
    const char *state = o->state ? o->state : "parked";

    if (strcmp(state, "all") == 0)
        dd_buf_puts(sql, " WHERE state IN (0, 1)");
    else
        dd_buf_printf(sql, " WHERE state = %d",
                      strcmp(state, "pending") == 0 ? DD_OUTBOX_PENDING : DD_OUTBOX_PARKED);
    /* topics and event ids were checked to be [A-Za-z0-9._-] and hex */
    if (o->topic) dd_buf_printf(sql, " AND topic = '%s'", o->topic);
    if (o->event_id) dd_buf_printf(sql, " AND event_id = '%s'", o->event_id);
    if (o->ids) dd_buf_printf(sql, " AND id BETWEEN %llu AND %llu", o->id_from, o->id_to);
    if (o->error) {
        dd_buf_puts(sql, " AND LOCATE(");
        dd_db_quote(sql, my, o->error, strlen(o->error));
        dd_buf_puts(sql, ", error) > 0");
    }
    dd_buf_puts(sql, " ORDER BY id");
    if (o->limit_n) dd_buf_printf(sql, " LIMIT %lld", o->limit_n);
}

/* Prints the events the options choose in shard s (locked for the change
 * to come with lock); *n gets their count. */
static int dd_outbox_cmd_show(const dd_outbox_cmd_opts_t *o, dd_db_t *db, int s, int lock,
                              long long *n, char *errstr, size_t errstr_size)
{
    MYSQL *my = dd_db_mysql(db);
    dd_buf_t sql = {0};
    MYSQL_RES *res = NULL;
    MYSQL_ROW row;
    int rc = DD_OK;

    dd_buf_puts(&sql, "SELECT id, IF(state = 1, 'parked', 'pending'), created, topic, event_id,"
                      " COALESCE(LENGTH(msg_key), 0), COALESCE(LENGTH(msg_value), 0),"
                      " COALESCE(error, '') FROM `" DD_OUTBOX_TABLE "`");
    dd_outbox_cmd_where(o, my, &sql);
    if (lock) dd_buf_puts(&sql, " FOR UPDATE");
    if (sql.oom) {
        dd_errstr_set(errstr, errstr_size, "out of memory");
        rc = DD_ERR_NOMEM;
    } else if (mysql_real_query(my, sql.p, (unsigned long)sql.len) != 0 ||
               !(res = mysql_store_result(my))) {
        dd_errstr_set(errstr, errstr_size, "reading " DD_OUTBOX_TABLE ": %u: %s", mysql_errno(my),
                      mysql_error(my));
        rc = dd_db_classify(mysql_errno(my));
    }
    *n = 0;
    while (res && (row = mysql_fetch_row(res))) {
        printf("%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", s, row[0], row[1], row[2], row[3], row[4],
               row[5], row[6], row[7]);
        (*n)++;
    }
    if (res) mysql_free_result(res);
    dd_buf_release(&sql);
    return rc;
}

/* requeue or drop in shard s: the events shown, then changed, in one
 * transaction. *n: how many. */
static int dd_outbox_cmd_change(const dd_outbox_cmd_opts_t *o, dd_db_t *db, int s, long long *n,
                                char *errstr, size_t errstr_size)
{
    MYSQL *my = dd_db_mysql(db);
    dd_buf_t sql = {0};
    long long shown = 0;
    int rc = dd_db_exec_raw(my, "START TRANSACTION", errstr, errstr_size);

    if (!rc) rc = dd_outbox_cmd_show(o, db, s, 1, &shown, errstr, errstr_size);
    if (o->action == DD_OUTBOX_REQUEUE)
        dd_buf_puts(&sql, "UPDATE `" DD_OUTBOX_TABLE "` SET state = 0, error = NULL");
    else
        dd_buf_puts(&sql, "DELETE FROM `" DD_OUTBOX_TABLE "`");
    dd_outbox_cmd_where(o, my, &sql);
    if (!rc && sql.oom) rc = DD_ERR_NOMEM;
    /* the rows shown are locked: the statement changes exactly those */
    if (!rc && shown) rc = dd_db_exec_raw(my, sql.p, errstr, errstr_size);
    if (!rc) rc = dd_db_exec_raw(my, "COMMIT", errstr, errstr_size);
    if (rc) dd_db_exec_raw(my, "ROLLBACK", NULL, 0);
    *n = rc ? 0 : shown;
    dd_buf_release(&sql);
    return rc;
}

static int dd_outbox_cmd_run(const dd_cmd_ctx_t *ctx, void *opts)
{
    static const char *const done[] = {"listed", "re-queued", "dropped"};
    const dd_conf_t *conf = ctx->conf;
    const dd_outbox_cmd_opts_t *o = opts;
    char err[1024], who[340];
    long long total = 0;
    int rc = DD_OK;

    printf("shard\tid\tstate\tcreated\ttopic\tevent_id\tkey_bytes\tvalue_bytes\terror\n");
    for (int s = 0; !rc && s < conf->shard_cnt; s++) {
        dd_db_t *db = NULL;
        long long n = 0;
        rc = dd_db_new_shard(&db, conf, s, err, sizeof(err));
        if (!rc && o->action == DD_OUTBOX_LIST)
            rc = dd_outbox_cmd_show(o, db, s, 0, &n, err, sizeof(err));
        else if (!rc)
            rc = dd_outbox_cmd_change(o, db, s, &n, err, sizeof(err));
        if (rc)
            dd_log(DD_LOG_ERROR, "dedupd outbox %s: %s: %s",
                   o->action == DD_OUTBOX_LIST      ? "list"
                   : o->action == DD_OUTBOX_REQUEUE ? "requeue"
                                                    : "drop",
                   dd_conf_shard_name(conf, s, who, sizeof(who)), err);
        total += n;
        dd_db_destroy(db);
    }
    printf("%lld event(s) %s%s\n", total, done[o->action], rc ? " before the error" : "");
    if (o->action != DD_OUTBOX_LIST && total)
        dd_log(DD_LOG_INFO, "dedupd outbox: %lld parked event(s) %s%s.", total, done[o->action],
               o->action == DD_OUTBOX_REQUEUE ? ": the relay sends them again" : "");
    return rc ? DD_EXIT_FAIL : DD_EXIT_OK;
}

const dd_cmd_t dd_cmd_outbox = {
    .name = "outbox",
    .args = "list|requeue|drop -c FILE [filters]",
    .summary = "list, re-queue or drop the outbox's parked events",
    .usage = "usage: dedupd outbox list -c FILE [--state parked|pending|all] [filters]\n"
             "       dedupd outbox requeue -c FILE filters|--all\n"
             "       dedupd outbox drop -c FILE filters|--all\n"
             "   filters: [--topic TOPIC] [--id N[-M]] [--event-id ID] [--error TEXT]\n"
             "            [--limit N]\n"
             "\n"
             "The events of the outbox (dedupd_outbox, every database shard) that Kafka\n"
             "refused for good are parked: never sent again by themselves. list prints\n"
             "them (or the pending events), one tab-separated line each under a header\n"
             "line; requeue hands the chosen parked events back to the relay, which sends\n"
             "them again with the pending ones, in id order; drop deletes them. requeue\n"
             "and drop print each event before they change it, and act on parked events\n"
             "only, every one the filters choose (all of them must match), or every one\n"
             "with --all. The last line says how many.\n",
    .exits = "  0  done (maybe with no event chosen)\n"
             "  1  a database error (what was done in the shards before it stays)\n"
             "  2  usage error\n",
    .flags = DD_CMD_CONFIG,
    .opts_size = sizeof(dd_outbox_cmd_opts_t),
    .opts = dd_outbox_cmd_opts,
    .check = dd_outbox_cmd_check,
    .run = dd_outbox_cmd_run,
};
