/*
 * The ledger example's database plumbing (see ledger.h): statements sent
 * in one round trip, their results, and literals. Nothing here knows about
 * payments.
 *
 * Every result is read, so the connection is left in sync for dedupd; a
 * failed statement leaves the server's error on the connection, where
 * dedupd looks for deadlocks, lock wait timeouts and lost connections.
 */
#include "ledger.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Single-quoted, escaped literal of s (at most LEDGER_ID_MAX bytes). */
void ledger_quote(MYSQL *db, const char *s, char out[2 * LEDGER_ID_MAX + 3])
{
    unsigned long n;

    out[0] = '\'';
    n = mysql_real_escape_string(db, out + 1, s, (unsigned long)strlen(s));
    out[n + 1] = '\'';
    out[n + 2] = '\0';
}

/* X'..' literal: the key's bytes, exactly, whatever the connection charset. */
void ledger_hex(const char *s, char *out)
{
    static const char digits[] = "0123456789ABCDEF";
    const unsigned char *p = (const unsigned char *)s;

    *out++ = 'X';
    *out++ = '\'';
    for (; *p; p++) {
        *out++ = digits[*p >> 4];
        *out++ = digits[*p & 15];
    }
    *out++ = '\'';
    *out = '\0';
}

int ledger_conn_has(MYSQL *db, unsigned long flag)
{
    unsigned long caps = 0;

    if (mariadb_get_infov(db, MARIADB_CONNECTION_CLIENT_CAPABILITIES, &caps) != 0) return 0;
    return (caps & flag) != 0;
}

/* The "Duplicates: N" of a multi-row INSERT's info text: with ON DUPLICATE
 * KEY UPDATE, the rows that existed and were changed. -1 when the text is
 * missing or not in the expected (English) form. */
long long ledger_info_updated(const char *info)
{
    const char *p = info ? strstr(info, "Duplicates: ") : NULL;

    return p ? strtoll(p + strlen("Duplicates: "), NULL, 10) : -1;
}

/* Collects one statement's result: a result set only where one is wanted. */
static int ledger_collect(MYSQL *db, ledger_sql *q)
{
    if (mysql_field_count(db) != 0) {
        MYSQL_RES *r = mysql_store_result(db);
        if (!q->want_rows || !r) {
            mysql_free_result(r);
            return -1;
        }
        q->rows = r;
        return 0;
    }
    if (q->want_rows) return -1;
    q->affected = mysql_affected_rows(db);
    q->insert_id = mysql_insert_id(db);
    q->updated = ledger_info_updated(mysql_info(db));
    return 0;
}

void ledger_free_rows(ledger_sql *q, int n)
{
    for (int i = 0; i < n; i++) {
        mysql_free_result(q[i].rows);
        q[i].rows = NULL;
    }
}

/* Runs the statements in order, stopping at the first error. With
 * multi-statements they go out in one round trip; a failing statement stops
 * the server from running the rest, and every result is read so the
 * connection is left in sync for dedupd. On failure mysql_errno(db) says
 * why, unless it is 0 (out of memory, or an unexpected result). */
int ledger_run(MYSQL *db, ledger_sql *q, int n)
{
    size_t len = 0, off = 0;
    char *all;
    int i, rc = 0;

    for (i = 0; i < n; i++)
        q[i].rows = NULL;
    if (!ledger_conn_has(db, CLIENT_MULTI_STATEMENTS)) {
        for (i = 0; i < n && rc == 0; i++)
            if (mysql_query(db, q[i].text) != 0 || ledger_collect(db, &q[i]) != 0) rc = -1;
        if (rc) ledger_free_rows(q, n);
        return rc;
    }
    for (i = 0; i < n; i++)
        len += strlen(q[i].text) + 1;
    if (!(all = malloc(len + 1))) return -1;
    for (i = 0; i < n; i++) {
        size_t k = strlen(q[i].text);
        if (i) all[off++] = ';';
        memcpy(all + off, q[i].text, k);
        off += k;
    }
    all[off] = '\0';
    rc = mysql_real_query(db, all, (unsigned long)off) != 0 ? -1 : 0;
    free(all);
    if (rc) return -1;
    for (i = 0; i < n && rc == 0; i++) {
        if (i > 0 && mysql_next_result(db) != 0) {
            rc = -1; /* the server stopped at this statement's error */
            break;
        }
        rc = ledger_collect(db, &q[i]);
    }
    while (mysql_more_results(db) && mysql_next_result(db) == 0)
        mysql_free_result(mysql_store_result(db));
    if (rc) ledger_free_rows(q, n);
    return rc;
}

/* A failed round trip as the handler's answer. */
dedupd_status ledger_db_fail(MYSQL *db, dedupd_result *res)
{
    if (mysql_errno(db))
        snprintf(res->error, sizeof(res->error), "ledger: %s (%u)", mysql_error(db),
                 mysql_errno(db));
    else
        snprintf(res->error, sizeof(res->error), "ledger: out of memory or unexpected result");
    return DEDUPD_RETRY;
}
