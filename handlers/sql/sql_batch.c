/*
 * handle_batch() of the SQL handler (see sql.h): the statements of a whole
 * batch in a few round trips instead of one per statement per message.
 *
 * Each statement runs once for all the batch's messages, in their order,
 * before the next statement: on MariaDB as one bulk execution (the
 * prepared statement with an array of parameter rows, STMT_ATTR_ARRAY_SIZE),
 * elsewhere once per message. So each message's statements still run in
 * their order, and each statement sees what the earlier statements wrote
 * for every message of the batch; docs/SQL.md, "Batches", says when that
 * is not what one message at a time gives, and handler.batch = false.
 *
 * With a response query, the batch goes message by message instead (each
 * message's statements, then its response), so that a response reads the
 * rows as its own message left them, as handle() gives it.
 *
 * What it does not know for every message it does not decide: dedupd
 * then rolls the batch back and calls handle() message by message
 * (a decline). A bulk execution reports the rows all its rows changed,
 * not each one's, so a statement with expect runs once per message, each
 * count judged, and any deviation declines. So does a message whose
 * values cannot be bound (handle() rejects it alone), a failed statement
 * (its error stays on db: a deadlock replays the batch), and a failed
 * event or response.
 */
#include "sql.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A batch under way: its messages and their parameters. */
typedef struct sql_batch {
    const sql_state *st;
    sql_conn *c;
    MYSQL *db;
    const dedupd_msg *const *msgs;
    size_t n;
    size_t per;   /* parameters per message: (stmt_cnt + 1) * ph_max */
    sql_param *p; /* n * per */
    dedupd_result *res;
} sql_batch;

/* The parameters of message i for statement s. */
static const sql_param *sql_batch_params(const sql_batch *b, size_t i, size_t s)
{
    return b->p + i * b->per + s * b->st->ph_max;
}

/* Declines: why, for dedupd's debug log, naming the message. */
static dedupd_status sql_batch_decline(const sql_batch *b, size_t i, dedupd_status rc,
                                       const char *why)
{
    snprintf(b->res[0].error, sizeof(b->res[0].error), "offset %lld: %.220s",
             (long long)b->msgs[i]->offset, why);
    return rc == DEDUPD_OK ? DEDUPD_REJECT : rc;
}

/* The type column k of statement s has in every row (NULLs take any), or
 * -1 when rows differ (a number in one message, a string in another). */
static int sql_batch_coltype(const sql_batch *b, size_t s, size_t k)
{
    int type = SQL_P_NULL;

    for (size_t i = 0; i < b->n; i++) {
        int t = sql_batch_params(b, i, s)[k].type;
        if (t == SQL_P_NULL) continue;
        if (type != SQL_P_NULL && t != type) return -1;
        type = t;
    }
    return type;
}

/* Statement s once per message, each count judged. */
static dedupd_status sql_batch_each(const sql_batch *b, size_t s)
{
    const sql_stmt *stmt = &b->st->stmts[s];
    char err[DEDUPD_ERROR_SIZE];
    unsigned long long affected;

    for (size_t i = 0; i < b->n; i++) {
        dedupd_result r = {0};
        if (sql_exec_one(b->c->stmt[s], sql_batch_params(b, i, s), stmt->text.ph_cnt, &affected,
                         err, sizeof(err)) != 0)
            return sql_batch_decline(b, i, sql_failed(stmt, b->c->stmt[s], &r), r.error);
        if (!sql_expected(stmt, affected)) {
            sql_expect_error(stmt, affected, err, sizeof(err));
            return sql_batch_decline(b, i, DEDUPD_REJECT, err);
        }
    }
    return DEDUPD_OK;
}

/* Column-wise parameter arrays of a bulk execution: for each '?', a
 * pointer, a length and an indicator per row. */
typedef struct sql_cols {
    const char **ptr;
    unsigned long *len;
    char *ind;
    MYSQL_BIND *bind;
} sql_cols;

static void sql_cols_free(sql_cols *c)
{
    free(c->ptr);
    free(c->len);
    free(c->ind);
    free(c->bind);
}

/* Rows [off, off + m) of statement s into cols, whose column k has type
 * types[k]. */
static void sql_cols_fill(const sql_batch *b, size_t s, const int *types, size_t off, size_t m,
                          sql_cols *cols)
{
    size_t np = b->st->stmts[s].text.ph_cnt;

    for (size_t k = 0; k < np; k++) {
        for (size_t r = 0; r < m; r++) {
            const sql_param *p = &sql_batch_params(b, off + r, s)[k];
            cols->ptr[k * m + r] = p->type == SQL_P_NULL ? "" : p->text;
            cols->len[k * m + r] = (unsigned long)p->len;
            cols->ind[k * m + r] =
                p->type == SQL_P_NULL ? STMT_INDICATOR_NULL : STMT_INDICATOR_NONE;
        }
        memset(&cols->bind[k], 0, sizeof(cols->bind[k]));
        cols->bind[k].buffer_type =
            types[k] == SQL_P_DECIMAL ? MYSQL_TYPE_NEWDECIMAL : MYSQL_TYPE_STRING;
        cols->bind[k].buffer = (void *)&cols->ptr[k * m];
        cols->bind[k].length = &cols->len[k * m];
        cols->bind[k].u.indicator = &cols->ind[k * m];
    }
}

/* Statement s for every message in bulk executions of SQL_BULK_CHUNK rows
 * at most. */
static dedupd_status sql_batch_bulk(const sql_batch *b, size_t s, const int *types)
{
    MYSQL_STMT *stmt = b->c->stmt[s];
    size_t np = b->st->stmts[s].text.ph_cnt, m = b->n < SQL_BULK_CHUNK ? b->n : SQL_BULK_CHUNK;
    sql_cols cols = {calloc(np * m, sizeof(char *)), calloc(np * m, sizeof(unsigned long)),
                     calloc(np * m, 1), calloc(np, sizeof(MYSQL_BIND))};
    dedupd_status rc = DEDUPD_OK;

    if (!cols.ptr || !cols.len || !cols.ind || !cols.bind)
        rc = sql_batch_decline(b, 0, DEDUPD_RETRY, "out of memory");
    for (size_t off = 0; rc == DEDUPD_OK && off < b->n; off += m) {
        unsigned int rows = (unsigned int)(b->n - off < m ? b->n - off : m);
        sql_cols_fill(b, s, types, off, rows, &cols);
        if (mysql_stmt_attr_set(stmt, STMT_ATTR_ARRAY_SIZE, &rows) != 0 ||
            mysql_stmt_bind_param(stmt, cols.bind) != 0 || mysql_stmt_execute(stmt) != 0) {
            dedupd_result r = {0};
            rc = sql_batch_decline(b, off, sql_failed(&b->st->stmts[s], stmt, &r), r.error);
        }
    }
    sql_cols_free(&cols);
    return rc;
}

/* Statement s for every message: in bulk when the server can, the rows'
 * types agree and no count is to be judged; else once per message. */
static dedupd_status sql_batch_stmt(const sql_batch *b, size_t s)
{
    const sql_stmt *stmt = &b->st->stmts[s];
    int *types = calloc(stmt->text.ph_cnt + 1, sizeof(*types));
    int bulk = b->c->bulk && !stmt->has_expect && b->n > 1 && stmt->text.ph_cnt > 0 && types;
    dedupd_status rc;

    for (size_t k = 0; bulk && k < stmt->text.ph_cnt; k++)
        bulk = (types[k] = sql_batch_coltype(b, s, k)) >= 0;
    rc = bulk ? sql_batch_bulk(b, s, types) : sql_batch_each(b, s);
    free(types);
    return rc;
}

/* Each message's events and response, after the statements of all
 * (with_stmts 0), or each message's statements first (with_stmts 1: with
 * a response query, whose row must be as its own statements left it, as
 * handle() gives it; without handle()'s savepoints, any deviation
 * declines). */
static dedupd_status sql_batch_each_message(const sql_batch *b, int with_stmts)
{
    const sql_state *st = b->st;
    dedupd_status rc = DEDUPD_OK;

    for (size_t i = 0; i < b->n; i++) {
        dedupd_result r = {0};
        if ((with_stmts && (rc = sql_run_stmts(st, b->c, b->p + i * b->per, &r)) != DEDUPD_OK) ||
            (rc = sql_events_emit(st, b->db, b->msgs[i], &r)) != DEDUPD_OK ||
            (rc = sql_response(st, b->c, sql_batch_params(b, i, st->stmt_cnt), &b->res[i].response,
                               &r)) != DEDUPD_OK)
            return sql_batch_decline(b, i, rc, r.error);
    }
    return DEDUPD_OK;
}

dedupd_status sql_handle_batch(void *state, void *conn_state, MYSQL *db,
                               const dedupd_msg *const *msgs, size_t n, dedupd_result *res)
{
    const sql_state *st = state;
    sql_batch b = {
        st, conn_state, db, msgs, n, (st->stmt_cnt + 1) * (st->ph_max ? st->ph_max : 1), NULL, res};
    sql_arena *arena = NULL;
    dedupd_status rc = DEDUPD_OK;

    if (!(b.p = calloc(n * b.per, sizeof(*b.p)))) {
        snprintf(res[0].error, sizeof(res[0].error), "out of memory");
        return DEDUPD_RETRY;
    }
    for (size_t i = 0; rc == DEDUPD_OK && i < n; i++) {
        dedupd_result r = {0};
        if (sql_bind_msg(st, msgs[i], b.p + i * b.per, &arena, &r) != 0)
            rc = sql_batch_decline(&b, i, DEDUPD_REJECT, r.error);
    }
    for (size_t s = 0; rc == DEDUPD_OK && !st->has_response && s < st->stmt_cnt; s++)
        rc = sql_batch_stmt(&b, s);
    if (rc == DEDUPD_OK) rc = sql_batch_each_message(&b, st->has_response);
    sql_arena_free(&arena);
    free(b.p);
    return rc;
}
