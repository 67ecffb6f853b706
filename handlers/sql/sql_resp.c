/*
 * The response snapshot of the SQL handler (see sql.h): the first row of
 * the response query, after the statements, as a JSON object of its
 * columns. Numbers (integers, DECIMAL, floating point) are JSON numbers in
 * the server's text, NULL is null, everything else a string, which must be
 * UTF-8 text: a binary column is refused (select HEX(x) instead), since the
 * snapshot is stored as text.
 */
#include "sql.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Length of the UTF-8 sequence at s (n bytes left), 0 when invalid. */
static size_t sql_utf8_len(const unsigned char *s, size_t n)
{
    size_t k = s[0] < 0x80                    ? 1
               : s[0] >= 0xc2 && s[0] <= 0xdf ? 2
               : s[0] >= 0xe0 && s[0] <= 0xef ? 3
               : s[0] >= 0xf0 && s[0] <= 0xf4 ? 4
                                              : 0;
    unsigned long cp;

    if (!k || k > n) return 0;
    cp = k == 1 ? s[0] : s[0] & (0xff >> (k + 1));
    for (size_t i = 1; i < k; i++) {
        if ((s[i] & 0xc0) != 0x80) return 0;
        cp = (cp << 6) | (s[i] & 0x3f);
    }
    if ((k == 2 && cp < 0x80) || (k == 3 && (cp < 0x800 || (cp >= 0xd800 && cp <= 0xdfff))) ||
        (k == 4 && (cp < 0x10000 || cp > 0x10ffff)))
        return 0;
    return k;
}

/* s[0..n) as a JSON string; -1 when it is not UTF-8 (or out of memory). */
static int sql_json_str(sql_buf *j, const char *s, size_t n)
{
    const unsigned char *u = (const unsigned char *)s;
    char *tmp;
    size_t k;

    for (size_t i = 0; i < n; i += k)
        if (!(k = sql_utf8_len(u + i, n - i))) return -1;
    if (!(tmp = malloc(6 * n + 2))) {
        j->oom = 1;
        return -1;
    }
    sql_buf_put(j, tmp, sql_json_escape(s, n, tmp));
    free(tmp);
    return 0;
}

static int sql_is_number(enum enum_field_types t)
{
    return t == MYSQL_TYPE_TINY || t == MYSQL_TYPE_SHORT || t == MYSQL_TYPE_LONG ||
           t == MYSQL_TYPE_LONGLONG || t == MYSQL_TYPE_INT24 || t == MYSQL_TYPE_DECIMAL ||
           t == MYSQL_TYPE_NEWDECIMAL || t == MYSQL_TYPE_FLOAT || t == MYSQL_TYPE_DOUBLE ||
           t == MYSQL_TYPE_YEAR;
}

/* Column i of the row fetched into j as "name":value; -1 (err set) when
 * it cannot be read or is not text. */
static int sql_resp_col(MYSQL_STMT *stmt, const MYSQL_FIELD *f, unsigned i, my_bool is_null,
                        unsigned long len, sql_buf *j, char *err, size_t err_size)
{
    MYSQL_BIND b;
    char *v;
    int rc = 0;

    if (i) sql_buf_put(j, ",", 1);
    sql_json_str(j, f->name, f->name_length);
    sql_buf_put(j, ":", 1);
    if (is_null) {
        sql_buf_put(j, "null", 4);
        return 0;
    }
    if (!(v = malloc(len + 1))) {
        snprintf(err, err_size, "out of memory");
        return -1;
    }
    memset(&b, 0, sizeof(b));
    b.buffer_type = MYSQL_TYPE_STRING;
    b.buffer = v;
    b.buffer_length = len + 1;
    if (len && mysql_stmt_fetch_column(stmt, &b, i, 0) != 0) {
        snprintf(err, err_size, "response: column %s: %s", f->name, mysql_stmt_error(stmt));
        rc = -1;
    } else if (sql_is_number(f->type)) {
        sql_buf_put(j, v, len);
    } else if (sql_json_str(j, v, len) != 0) {
        snprintf(err, err_size,
                 "response: column %s is not UTF-8 text (select HEX(%s) or convert it)", f->name,
                 f->name);
        rc = -1;
    }
    free(v);
    return rc;
}

/* The row the cursor is on, as a JSON object. */
static int sql_resp_row(MYSQL_STMT *stmt, MYSQL_RES *meta, const my_bool *nulls,
                        const unsigned long *lens, sql_buf *j, char *err, size_t err_size)
{
    const MYSQL_FIELD *f = mysql_fetch_fields(meta);
    unsigned n = mysql_num_fields(meta);

    sql_buf_put(j, "{", 1);
    for (unsigned i = 0; i < n; i++)
        if (sql_resp_col(stmt, &f[i], i, nulls[i], lens[i], j, err, err_size)) return -1;
    sql_buf_put(j, "}", 1);
    if (j->oom) snprintf(err, err_size, "out of memory");
    return j->oom ? -1 : 0;
}

/* Fetches the first row (its lengths and nulls first) and builds it. */
static dedupd_status sql_resp_fetch(const sql_state *st, MYSQL_STMT *stmt, char **out,
                                    dedupd_result *res)
{
    MYSQL_RES *meta = mysql_stmt_result_metadata(stmt);
    unsigned n = meta ? mysql_num_fields(meta) : 0;
    MYSQL_BIND *b = calloc(n ? n : 1, sizeof(*b));
    unsigned long *lens = calloc(n ? n : 1, sizeof(*lens));
    my_bool *nulls = calloc(n ? n : 1, sizeof(*nulls));
    sql_buf j = {0};
    dedupd_status rc = DEDUPD_RETRY;
    int f;

    if (!meta || !b || !lens || !nulls) {
        snprintf(res->error, sizeof(res->error), "response: out of memory");
        goto out;
    }
    for (unsigned i = 0; i < n; i++) {
        b[i].buffer_type = MYSQL_TYPE_STRING;
        b[i].length = &lens[i];
        b[i].is_null = &nulls[i];
    }
    if (mysql_stmt_bind_result(stmt, b) != 0) {
        rc = sql_failed(&st->response, stmt, res);
        goto out;
    }
    f = mysql_stmt_fetch(stmt);
    if (f == 1) { /* the server's error (a lock wait): left on db */
        rc = sql_failed(&st->response, stmt, res);
        goto out;
    }
    if (f != MYSQL_NO_DATA &&
        sql_resp_row(stmt, meta, nulls, lens, &j, res->error, sizeof(res->error)) != 0) {
        rc = j.oom ? DEDUPD_RETRY : DEDUPD_REJECT;
        mysql_stmt_free_result(stmt);
        goto out;
    }
    mysql_stmt_free_result(stmt); /* reads the rows left */
    *out = f == MYSQL_NO_DATA ? NULL : j.p;
    j.p = NULL;
    rc = DEDUPD_OK;
out:
    free(j.p);
    mysql_free_result(meta);
    free(b);
    free(lens);
    free(nulls);
    return rc;
}

dedupd_status sql_response(const sql_state *st, sql_conn *c, const sql_param *p, char **out,
                           dedupd_result *res)
{
    MYSQL_STMT *stmt = c->stmt[st->stmt_cnt];
    unsigned long long affected;
    char err[DEDUPD_ERROR_SIZE];

    *out = NULL;
    if (!st->has_response) return DEDUPD_OK;
    if (sql_exec_one(stmt, p, st->response.text.ph_cnt, &affected, err, sizeof(err)) != 0)
        return sql_failed(&st->response, stmt, res);
    return sql_resp_fetch(st, stmt, out, res);
}
