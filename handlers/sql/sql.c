/*
 * The SQL handler that ships with dedupd: a team's business writes as
 * configuration (handler = { sql = { statements = ( ... ); }; }), no C.
 * docs/SQL.md is its manual.
 *
 * Each message runs the configured statements in order, inside dedupd's
 * transaction, as prepared statements whose ${...} are parameters bound
 * from the message's payload (sql_bind.c). A statement may say how many
 * rows it must change (expect) and what else happens (otherwise: reject or
 * retry), which turns a state machine's "UPDATE ... WHERE status =
 * 'UNPAID'" or a version check into configuration. Then the events, if
 * any (sql_event.c), and the response query (sql_resp.c).
 *
 * It is a handler like anyone's, built against include/dedupd/ alone, so
 * everything dedupd does for a handler (routes, shards, batches, replay,
 * redrive, handler-test, events out) works for it. handle() is the
 * semantics; handle_batch() (sql_batch.c) does the same for a whole batch
 * in a few round trips.
 */
#include "sql.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int sql_init(void **statep, const dedupd_host *host, char *errstr, size_t errstr_size)
{
    sql_state *st = calloc(1, sizeof(*st));

    if (!st) {
        snprintf(errstr, errstr_size, "out of memory");
        return -1;
    }
    pthread_mutex_init(&st->dead_mu, NULL);
    if (sql_conf_load(st, host, errstr, errstr_size) != 0) {
        sql_conf_release(st);
        pthread_mutex_destroy(&st->dead_mu);
        free(st);
        return -1;
    }
    *statep = st;
    return 0;
}

/* Every connection is closed by now: the statements kept because their
 * prepare failed (sql_run.c) can go. */
static void sql_fini(void *state)
{
    sql_state *st = state;

    for (size_t i = 0; i < st->dead_cnt; i++)
        mysql_stmt_close(st->dead[i]);
    free(st->dead);
    sql_conf_release(st);
    pthread_mutex_destroy(&st->dead_mu);
    free(st);
}

/* `dedupd migrate`: the migrate statements, in order, as the migration
 * user. Written to be run again (CREATE TABLE IF NOT EXISTS): migrate runs
 * on every shard, and once per route using the handler. */
static int sql_migrate(void *state, MYSQL *db, char *errstr, size_t errstr_size)
{
    const sql_state *st = state;

    for (size_t i = 0; i < st->migrate_cnt; i++) {
        if (mysql_real_query(db, st->migrate[i].sql, (unsigned long)strlen(st->migrate[i].sql))) {
            snprintf(errstr, errstr_size, "%s: migrate statement %zu: %s (%u)", st->where, i + 1,
                     mysql_error(db), mysql_errno(db));
            return -1;
        }
        /* what a statement returns (rows of a SHOW, a CALL's results): dropped */
        mysql_free_result(mysql_store_result(db));
        while (mysql_more_results(db) && mysql_next_result(db) == 0)
            mysql_free_result(mysql_store_result(db));
    }
    return 0;
}

/* The parameters of every statement and of the response for msg, into
 * p (ph_max of them per statement); 0, or -1 with the reason in res. */
int sql_bind_msg(const sql_state *st, const dedupd_msg *msg, sql_param *p, sql_arena **arena,
                 dedupd_result *res)
{
    char err[DEDUPD_ERROR_SIZE];

    for (size_t i = 0; i <= st->stmt_cnt; i++) {
        const sql_stmt *s = i < st->stmt_cnt ? &st->stmts[i] : &st->response;
        if (i == st->stmt_cnt && !st->has_response) break;
        if (sql_bind_all(st, &s->text, msg, p + i * st->ph_max, arena, err, sizeof(err))) {
            snprintf(res->error, sizeof(res->error), "statement %s: %.170s", s->name, err);
            return -1;
        }
    }
    return 0;
}

/* The statements of one message, in order, judged. */
dedupd_status sql_run_stmts(const sql_state *st, sql_conn *c, const sql_param *p,
                            dedupd_result *res)
{
    char err[DEDUPD_ERROR_SIZE];
    unsigned long long affected;

    for (size_t i = 0; i < st->stmt_cnt; i++) {
        const sql_stmt *s = &st->stmts[i];
        if (sql_exec_one(c->stmt[i], p + i * st->ph_max, s->text.ph_cnt, &affected, err,
                         sizeof(err)) != 0)
            return sql_failed(s, c->stmt[i], res);
        if (!sql_expected(s, affected)) {
            sql_expect_error(s, affected, res->error, sizeof(res->error));
            return s->retry ? DEDUPD_RETRY : DEDUPD_REJECT;
        }
    }
    return DEDUPD_OK;
}

static dedupd_status sql_handle(void *state, void *conn_state, MYSQL *db, const dedupd_msg *msg,
                                dedupd_result *res)
{
    const sql_state *st = state;
    sql_param *p = calloc((st->stmt_cnt + 1) * (st->ph_max ? st->ph_max : 1), sizeof(*p));
    sql_arena *arena = NULL;
    dedupd_status rc = DEDUPD_REJECT;

    if (!p) {
        snprintf(res->error, sizeof(res->error), "out of memory");
        return DEDUPD_RETRY;
    }
    if (sql_bind_msg(st, msg, p, &arena, res) == 0 &&
        (rc = sql_run_stmts(st, conn_state, p, res)) == DEDUPD_OK &&
        (rc = sql_events_emit(st, db, msg, res)) == DEDUPD_OK)
        rc = sql_response(st, conn_state, p + st->stmt_cnt * st->ph_max, &res->response, res);
    sql_arena_free(&arena);
    free(p);
    return rc;
}

static const dedupd_handler sql_handler = {
    .abi_version = DEDUPD_HANDLER_ABI_VERSION,
    .name = "sql",
    .init_host = sql_init,
    .migrate = sql_migrate,
    .fini = sql_fini,
    .conn_init = sql_conn_init,
    .conn_fini = sql_conn_fini,
    .handle_conn = sql_handle,
    .handle_batch_conn = sql_handle_batch,
};

const dedupd_handler *dedupd_handler_v1(void)
{
    return &sql_handler;
}
