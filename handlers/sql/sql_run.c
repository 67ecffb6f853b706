/*
 * The SQL handler's statements on a connection (see sql.h): prepared once
 * per connection in conn_init, executed for one message at a time, their
 * failures and affected rows judged.
 *
 * Preparing in conn_init is what makes a typo, an unknown table or a
 * missing privilege show before the first message: dedupd runs conn_init
 * on every connection at start (and `dedupd check` on one of its own), and
 * stops, naming the statement, when it fails.
 */
#include "sql.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Keeps a statement whose prepare failed until fini: closing it now would
 * clear the connection's error, which dedupd reads to tell a lost
 * connection (try again) from the rest (stop). */
static void sql_conn_bury(sql_state *st, MYSQL_STMT *stmt)
{
    void **d;

    pthread_mutex_lock(&st->dead_mu);
    if ((d = realloc(st->dead, (st->dead_cnt + 1) * sizeof(*d)))) {
        st->dead = d;
        st->dead[st->dead_cnt++] = stmt;
    }
    pthread_mutex_unlock(&st->dead_mu);
    if (!d) mysql_stmt_close(stmt);
}

/* 1 when the server executes a statement for arrays of parameter rows
 * (MariaDB 10.2 and later). DEDUPD_TEST_FAULTS=no_bulk says it does not,
 * as it does for dedupd. */
static int sql_has_bulk(MYSQL *db)
{
    const char *info = mysql_get_server_info(db), *faults = getenv("DEDUPD_TEST_FAULTS");
    unsigned long caps = 0;

    if ((faults && strstr(faults, "no_bulk")) || !info || !strstr(info, "MariaDB")) return 0;
    if (mariadb_get_infov(db, MARIADB_CONNECTION_EXTENDED_SERVER_CAPABILITIES, &caps) != 0)
        return 0;
    return (caps & (MARIADB_CLIENT_STMT_BULK_OPERATIONS >> 32)) != 0;
}

/* Prepares statement s on db into *out, checking that the server reads as
 * many parameters as s has placeholders and a result set only for the
 * response. */
static int sql_prepare(sql_state *st, const sql_stmt *s, int query, MYSQL *db, MYSQL_STMT **out,
                       char *errstr, size_t errstr_size)
{
    MYSQL_STMT *stmt = mysql_stmt_init(db);
    unsigned long params, fields;

    *out = NULL;
    if (!stmt) {
        snprintf(errstr, errstr_size, "statement %s: out of memory", s->name);
        return -1;
    }
    if (mysql_stmt_prepare(stmt, s->text.sql, (unsigned long)strlen(s->text.sql)) != 0) {
        snprintf(errstr, errstr_size, "statement %s: %s (%u)", s->name, mysql_stmt_error(stmt),
                 mysql_stmt_errno(stmt));
        sql_conn_bury(st, stmt);
        return -1;
    }
    *out = stmt;
    params = mysql_stmt_param_count(stmt);
    fields = mysql_stmt_field_count(stmt);
    if (params != s->text.ph_cnt) {
        snprintf(errstr, errstr_size,
                 "statement %s: the server reads %lu parameter(s) where it has %zu placeholder(s): "
                 "a quote or comment the server reads otherwise (sql_mode NO_BACKSLASH_ESCAPES?)",
                 s->name, params, s->text.ph_cnt);
        return -1;
    }
    if (!query != !fields) {
        snprintf(errstr, errstr_size, "statement %s: %s", s->name,
                 query ? "the response query returns no rows"
                       : "returns rows (a query goes in response)");
        return -1;
    }
    return 0;
}

int sql_conn_init(void *state, MYSQL *db, void **conn_state, char *errstr, size_t errstr_size)
{
    sql_state *st = state;
    sql_conn *c = calloc(1, sizeof(*c));
    size_t i;

    if (!c || !(c->stmt = calloc(st->stmt_cnt + 1, sizeof(*c->stmt)))) {
        free(c);
        snprintf(errstr, errstr_size, "out of memory");
        return -1;
    }
    for (i = 0; i < st->stmt_cnt; i++)
        if (sql_prepare(st, &st->stmts[i], 0, db, &c->stmt[i], errstr, errstr_size)) break;
    if (i == st->stmt_cnt &&
        (!st->has_response ||
         !sql_prepare(st, &st->response, 1, db, &c->stmt[i], errstr, errstr_size))) {
        c->bulk = sql_has_bulk(db);
        *conn_state = c;
        return 0;
    }
    /* kept for fini: closing them would clear the error on db */
    for (i = 0; i <= st->stmt_cnt; i++)
        if (c->stmt[i]) sql_conn_bury(st, c->stmt[i]);
    free(c->stmt);
    free(c);
    return -1;
}

void sql_conn_fini(void *state, MYSQL *db, void *conn_state)
{
    sql_state *st = state;
    sql_conn *c = conn_state;

    (void)db;
    if (!c) return;
    for (size_t i = 0; i <= st->stmt_cnt; i++)
        if (c->stmt[i]) mysql_stmt_close(c->stmt[i]);
    free(c->stmt);
    free(c);
}

int sql_exec_one(MYSQL_STMT *stmt, const sql_param *p, size_t n, unsigned long long *affected,
                 char *err, size_t err_size)
{
    MYSQL_BIND *b = n ? calloc(n, sizeof(*b)) : NULL;
    unsigned long *len = n ? calloc(n, sizeof(*len)) : NULL;
    unsigned int single = 0;
    int rc = -1;

    if (n && (!b || !len)) {
        snprintf(err, err_size, "out of memory");
        goto out;
    }
    for (size_t k = 0; k < n; k++) {
        len[k] = (unsigned long)p[k].len;
        b[k].buffer_type = p[k].type == SQL_P_NULL      ? MYSQL_TYPE_NULL
                           : p[k].type == SQL_P_DECIMAL ? MYSQL_TYPE_NEWDECIMAL
                                                        : MYSQL_TYPE_STRING;
        b[k].buffer = (void *)(uintptr_t)p[k].text;
        b[k].buffer_length = len[k];
        b[k].length = &len[k];
    }
    /* a statement last executed for arrays (sql_batch.c) is for one row now */
    if (mysql_stmt_attr_set(stmt, STMT_ATTR_ARRAY_SIZE, &single) != 0 ||
        mysql_stmt_bind_param(stmt, b) != 0 || mysql_stmt_execute(stmt) != 0) {
        snprintf(err, err_size, "%s (%u)", mysql_stmt_error(stmt), mysql_stmt_errno(stmt));
        goto out;
    }
    *affected = mysql_stmt_affected_rows(stmt);
    rc = 0;
out:
    free(b);
    free(len);
    return rc;
}

/* The server's errors that say a value is not one the table takes: the
 * same message fails the same way every time. */
static int sql_permanent(unsigned int e)
{
    static const unsigned int errs[] = {
        1048, /* column cannot be null */
        1062, /* duplicate entry */
        1263, /* NULL supplied to a NOT NULL column */
        1264, /* out of range */
        1265, /* data truncated */
        1292, /* incorrect value */
        1366, /* incorrect string or number value */
        1367, /* illegal value */
        1406, /* data too long */
        1411, /* incorrect value for a function */
        1644, /* SIGNAL of a trigger or procedure */
        1690, /* value out of range in an expression */
        1918, /* illegal value converting to DECIMAL */
        3819, /* CHECK constraint (MySQL) */
        4025, /* CONSTRAINT failed (MariaDB) */
    };

    for (size_t i = 0; i < sizeof(errs) / sizeof(errs[0]); i++)
        if (errs[i] == e) return 1;
    return 0;
}

dedupd_status sql_failed(const sql_stmt *s, MYSQL_STMT *stmt, dedupd_result *res)
{
    unsigned int e = mysql_stmt_errno(stmt);

    snprintf(res->error, sizeof(res->error), "statement %s: %s (%u)", s->name,
             e ? mysql_stmt_error(stmt) : "out of memory", e);
    return e && sql_permanent(e) ? DEDUPD_REJECT : DEDUPD_RETRY;
}

int sql_expected(const sql_stmt *s, unsigned long long affected)
{
    if (!s->has_expect) return 1;
    return affected >= (unsigned long long)s->expect_min &&
           (s->expect_max < 0 || affected <= (unsigned long long)s->expect_max);
}

void sql_expect_error(const sql_stmt *s, unsigned long long affected, char *err, size_t err_size)
{
    if (s->expect_min == s->expect_max)
        snprintf(err, err_size, "statement %s: %llu row(s) affected, expected %lld", s->name,
                 affected, s->expect_min);
    else if (s->expect_max < 0)
        snprintf(err, err_size, "statement %s: %llu row(s) affected, expected %lld or more",
                 s->name, affected, s->expect_min);
    else
        snprintf(err, err_size, "statement %s: %llu row(s) affected, expected %lld to %lld",
                 s->name, affected, s->expect_min, s->expect_max);
}
