/*
 * What `dedupd handler-test` compares (see dd_htest_int.h): the database
 * of pass 1 (each message once, in order) against that of pass 2 (each
 * twice, shuffled, every transaction rolled back once after the handler).
 * Exactly once means they hold the same: the same business keys applied
 * or failed, the same dead letters, the same rows in every table of the
 * handler.
 *
 * Rows are compared as multisets of their values, byte for byte, less the
 * columns whose values differ from run to run by design: AUTO_INCREMENT
 * ids, columns defaulting to or updated with the current time, and those
 * named with --ignore-column.
 */
#include "dd_htest_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dd_common.h"
#include "dd_db.h"
#include "dd_text.h"
#include "dd_utf8.h"

#define DD_HTEST_CELL_MAX 40 /* bytes of a value printed */

/* The rows of one query, each encoded as its cells: a NULL flag byte, a
 * 4-byte length and the bytes. */
typedef struct dd_htest_row_s {
    char *p;
    size_t len;
} dd_htest_row_t;

typedef struct dd_htest_rows_s {
    dd_htest_row_t *v;
    size_t n;
    unsigned int cols;
} dd_htest_rows_t;

static void dd_htest_rows_free(dd_htest_rows_t *rows)
{
    for (size_t i = 0; i < rows->n; i++)
        free(rows->v[i].p);
    free(rows->v);
    memset(rows, 0, sizeof(*rows));
}

static int dd_htest_row_cmp(const void *a, const void *b)
{
    const dd_htest_row_t *x = a, *y = b;

    return dd_text_cmp(x->p, x->len, y->p, y->len);
}

/* Runs sql and keeps its rows, sorted. */
static int dd_htest_rows_get(MYSQL *db, const char *sql, dd_htest_rows_t *rows, char *errstr,
                             size_t errstr_size)
{
    MYSQL_RES *res;
    MYSQL_ROW r;
    int oom = 0;

    memset(rows, 0, sizeof(*rows));
    if (mysql_query(db, sql) != 0 || !(res = mysql_store_result(db))) {
        dd_errstr_set(errstr, errstr_size, "%s: %s", sql, mysql_error(db));
        return -1;
    }
    rows->cols = mysql_num_fields(res);
    rows->v = calloc(mysql_num_rows(res) + 1, sizeof(*rows->v));
    while (rows->v && (r = mysql_fetch_row(res))) {
        unsigned long *len = mysql_fetch_lengths(res);
        dd_buf_t b = {0};
        for (unsigned int c = 0; c < rows->cols; c++) {
            uint32_t l = r[c] ? (uint32_t)len[c] : 0;
            dd_buf_put(&b, r[c] ? "\1" : "\0", 1);
            dd_buf_put(&b, &l, sizeof(l));
            if (l) dd_buf_put(&b, r[c], l);
        }
        if ((oom = b.oom) != 0) {
            dd_buf_release(&b);
            break;
        }
        rows->v[rows->n].p = b.p;
        rows->v[rows->n++].len = b.len;
    }
    mysql_free_result(res);
    if (!rows->v || oom || mysql_errno(db)) {
        dd_errstr_set(errstr, errstr_size, "%s: %s", sql,
                      mysql_errno(db) ? mysql_error(db) : "out of memory");
        dd_htest_rows_free(rows);
        return -1;
    }
    qsort(rows->v, rows->n, sizeof(*rows->v), dd_htest_row_cmp);
    return 0;
}

/* One value, readable: text as it is (control bytes escaped), bytes that
 * are not UTF-8 in hex, cut at DD_HTEST_CELL_MAX. */
static void dd_htest_cell(dd_buf_t *b, const char *p, uint32_t len, int null)
{
    size_t n = len > DD_HTEST_CELL_MAX ? DD_HTEST_CELL_MAX : len;

    if (null) {
        dd_buf_puts(b, "NULL");
        return;
    }
    if (!dd_utf8_valid(p, len)) {
        char hex[2 * DD_HTEST_CELL_MAX + 1];
        n = n > DD_HTEST_CELL_MAX / 2 ? DD_HTEST_CELL_MAX / 2 : n;
        dd_text_hex(hex, p, n, 1);
        dd_buf_printf(b, "0x%.*s%s", (int)(2 * n), hex, n < len ? "..." : "");
        return;
    }
    while (n < len && n > 0 && ((unsigned char)p[n] & 0xc0) == 0x80)
        n--; /* cut between characters */
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)p[i];
        if (c < 0x20 || c == 0x7f)
            dd_buf_printf(b, "\\x%02x", c);
        else
            dd_buf_put(b, p + i, 1);
    }
    if (n < len) dd_buf_puts(b, "...");
}

/* Prints a row, tab-separated, after indent. */
static void dd_htest_row_print(FILE *out, const char *indent, const dd_htest_row_t *row,
                               unsigned int cols)
{
    dd_buf_t b = {0};
    size_t at = 0;

    for (unsigned int c = 0; c < cols && at + 5 <= row->len; c++) {
        uint32_t len;
        memcpy(&len, row->p + at + 1, sizeof(len));
        if (c) dd_buf_puts(&b, "\t");
        dd_htest_cell(&b, row->p + at + 5, len, row->p[at] == 0);
        at += 5 + len;
    }
    fprintf(out, "%s%s\n", indent, b.p ? b.p : "");
    dd_buf_release(&b);
}

/* Prints up to max rows of rows[...] flagged in pick (NULL: every row). */
static void dd_htest_rows_print(FILE *out, const char *indent, const dd_htest_rows_t *rows,
                                const char *pick, int max)
{
    size_t shown = 0, total = 0;

    for (size_t i = 0; i < rows->n; i++) {
        if (pick && !pick[i]) continue;
        if (shown < (size_t)max) {
            dd_htest_row_print(out, indent, &rows->v[i], rows->cols);
            shown++;
        }
        total++;
    }
    if (total > shown) fprintf(out, "%s... and %zu more\n", indent, total - shown);
}

/* Compares two sorted multisets: marks in only1/only2 the rows one has more
 * of than the other. Returns how many rows differ. */
static size_t dd_htest_rows_diff(const dd_htest_rows_t *r1, const dd_htest_rows_t *r2, char *only1,
                                 char *only2)
{
    size_t i = 0, j = 0, diff = 0;

    while (i < r1->n || j < r2->n) {
        int c = i >= r1->n ? 1 : j >= r2->n ? -1 : dd_htest_row_cmp(&r1->v[i], &r2->v[j]);
        if (c == 0) {
            i++, j++;
        } else if (c < 0) {
            only1[i++] = 1, diff++;
        } else {
            only2[j++] = 1, diff++;
        }
    }
    return diff;
}

/* Appends `name`, backticks in it doubled: tables and columns are the
 * handler's to name. */
static void dd_htest_ident(dd_buf_t *b, const char *name)
{
    dd_buf_puts(b, "`");
    for (const char *p = name; *p; p++) {
        if (*p == '`') dd_buf_put(b, "`", 1);
        dd_buf_put(b, p, 1);
    }
    dd_buf_puts(b, "`");
}

/* Runs the select of cols from table in both databases and compares.
 * what: the check's name; header: the columns' names for printing. Prints
 * the rows of pass 2 when print is set and they are the same. 1 when they
 * differ, 0 when not, -1 on a database error. */
static int dd_htest_cmp_select(const dd_htest_cmp_t *cmp, const char *what, const char *cols,
                               const char *table, const char *header, int print, char *errstr,
                               size_t errstr_size)
{
    dd_htest_rows_t r[2] = {{0}};
    char *only[2] = {NULL, NULL};
    dd_buf_t sql = {0};
    size_t diff;
    int rc = -1;

    for (int p = 0; p < 2; p++) {
        dd_buf_reset(&sql);
        dd_buf_printf(&sql, "SELECT %s FROM `%s`.", cols, cmp->dbs[p]);
        dd_htest_ident(&sql, table);
        if (sql.oom || dd_htest_rows_get(cmp->db, sql.p, &r[p], errstr, errstr_size)) goto out;
    }
    if (!(only[0] = calloc(r[0].n + 1, 1)) || !(only[1] = calloc(r[1].n + 1, 1))) {
        dd_errstr_set(errstr, errstr_size, "out of memory");
        goto out;
    }
    diff = dd_htest_rows_diff(&r[0], &r[1], only[0], only[1]);
    if (diff == 0) {
        fprintf(cmp->out, "ok   %s: the same %zu row(s) after both passes\n", what, r[1].n);
        if (print && r[1].n) {
            fprintf(cmp->out, "       %s\n", header);
            dd_htest_rows_print(cmp->out, "       ", &r[1], NULL, cmp->rows);
        }
        rc = 0;
        goto out;
    }
    fprintf(cmp->out, "FAIL %s: %zu row(s) after pass 1, %zu after pass 2; they differ:\n", what,
            r[0].n, r[1].n);
    fprintf(cmp->out, "       %s\n", header);
    for (int p = 0; p < 2; p++) {
        size_t k = 0;
        for (size_t i = 0; i < r[p].n; i++)
            k += (size_t)only[p][i];
        if (!k) continue;
        fprintf(cmp->out, "     only after pass %d (%zu):\n", p + 1, k);
        dd_htest_rows_print(cmp->out, "       ", &r[p], only[p], cmp->rows);
    }
    rc = 1;
out:
    for (int p = 0; p < 2; p++) {
        dd_htest_rows_free(&r[p]);
        free(only[p]);
    }
    dd_buf_release(&sql);
    return rc;
}

int dd_htest_cmp_dedup(const dd_htest_cmp_t *cmp, char *errstr, size_t errstr_size)
{
    char sql[300], what[300];
    dd_htest_rows_t open;
    int rc;

    snprintf(sql, sizeof(sql), "SELECT biz_key FROM `%s`.`%s` WHERE status = 0", cmp->dbs[1],
             cmp->table);
    if (dd_htest_rows_get(cmp->db, sql, &open, errstr, errstr_size)) return -1;
    rc = open.n != 0;
    if (rc) {
        fprintf(cmp->out, "FAIL %zu business key(s) left claimed but not finished:\n", open.n);
        dd_htest_rows_print(cmp->out, "       ", &open, NULL, cmp->rows);
    }
    dd_htest_rows_free(&open);
    snprintf(sql, sizeof(sql),
             "SELECT CONCAT(COALESCE(SUM(status = 1), 0), ' applied, ', COALESCE(SUM(status = 2), "
             "0), ' failed') FROM `%s`.`%s`",
             cmp->dbs[0], cmp->table);
    if (dd_htest_rows_get(cmp->db, sql, &open, errstr, errstr_size)) return -1;
    /* the business keys and their status, counted after pass 1 (a row's
     * cell is a flag byte and a 4-byte length before the text) */
    snprintf(what, sizeof(what), "dedup table %s (business keys: %.*s)", cmp->table,
             open.n && open.v[0].len > 5 ? (int)open.v[0].len - 5 : 0,
             open.n && open.v[0].len > 5 ? open.v[0].p + 5 : "");
    dd_htest_rows_free(&open);
    switch (dd_htest_cmp_select(cmp, what, "biz_key, status", cmp->table, "biz_key\tstatus", 0,
                                errstr, errstr_size)) {
    case -1:
        return -1;
    case 1:
        rc = 1;
    }
    return rc;
}

static int dd_htest_dl_cmp(const void *a, const void *b)
{
    const dd_htest_dl_t *x = a, *y = b;

    if (x->msg != y->msg) return x->msg < y->msg ? -1 : 1;
    return strcmp(x->reason, y->reason);
}

/* Sorts dls and drops repeats (a message of pass 2 comes twice). */
static size_t dd_htest_dl_set(dd_htest_dl_t *dls, size_t n)
{
    size_t u = 0;

    if (n > 1) qsort(dls, n, sizeof(*dls), dd_htest_dl_cmp);
    for (size_t i = 0; i < n; i++)
        if (u == 0 || dd_htest_dl_cmp(&dls[u - 1], &dls[i]) != 0) dls[u++] = dls[i];
    return u;
}

int dd_htest_cmp_dead_letters(const dd_htest_cmp_t *cmp, const dd_htest_msg_t *msgs,
                              dd_htest_dl_t *dl1, size_t n1, dd_htest_dl_t *dl2, size_t n2)
{
    size_t i = 0, j = 0, bad = 0;

    n1 = dd_htest_dl_set(dl1, n1);
    n2 = dd_htest_dl_set(dl2, n2);
    while (i < n1 || j < n2) {
        int c = i >= n1 ? 1 : j >= n2 ? -1 : dd_htest_dl_cmp(&dl1[i], &dl2[j]);
        if (c == 0) {
            i++, j++;
            continue;
        }
        if (!bad++) fprintf(cmp->out, "FAIL dead letters differ:\n");
        if (c < 0)
            fprintf(cmp->out, "       line %d: %s after pass 1 only\n", msgs[dl1[i].msg].line,
                    dl1[i].reason),
                i++;
        else
            fprintf(cmp->out, "       line %d: %s after pass 2 only\n", msgs[dl2[j].msg].line,
                    dl2[j].reason),
                j++;
    }
    if (!bad) {
        fprintf(cmp->out, "ok   dead letters: the same %zu message(s), for the same reasons\n", n1);
        for (i = 0; i < n1; i++)
            fprintf(cmp->out, "       line %d: %s\n", msgs[dl1[i].msg].line, dl1[i].reason);
    }
    return bad != 0;
}

/* 1 when table.col was named with --ignore-column. */
static int dd_htest_ignored(const dd_htest_cmp_t *cmp, const char *table, const char *col)
{
    size_t tl = strlen(table);

    for (int i = 0; i < cmp->ignore_cnt; i++)
        if (strncmp(cmp->ignore[i], table, tl) == 0 && cmp->ignore[i][tl] == '.' &&
            strcmp(cmp->ignore[i] + tl + 1, col) == 0)
            return 1;
    return 0;
}

/* The columns of table to compare (`a`, `b`), their names tab-separated,
 * and those left out. */
static int dd_htest_columns(const dd_htest_cmp_t *cmp, const char *table, dd_buf_t *cols,
                            dd_buf_t *names, dd_buf_t *skipped, char *errstr, size_t errstr_size)
{
    dd_buf_t sql = {0};
    MYSQL_RES *res;
    MYSQL_ROW r;

    dd_buf_printf(&sql,
                  "SELECT COLUMN_NAME, EXTRA, COALESCE(COLUMN_DEFAULT, '') FROM "
                  "information_schema.COLUMNS WHERE TABLE_SCHEMA = '%s' AND TABLE_NAME = ",
                  cmp->dbs[0]);
    dd_db_quote(&sql, cmp->db, table, strlen(table));
    dd_buf_puts(&sql, " ORDER BY ORDINAL_POSITION");
    if (sql.oom || mysql_query(cmp->db, sql.p) || !(res = mysql_store_result(cmp->db))) {
        dd_errstr_set(errstr, errstr_size, "columns of %s: %s", table, mysql_error(cmp->db));
        dd_buf_release(&sql);
        return -1;
    }
    dd_buf_release(&sql);
    while ((r = mysql_fetch_row(res))) {
        int skip = strstr(r[1], "auto_increment") || strstr(r[1], "on update") ||
                   strncmp(r[2], "current_timestamp", 17) == 0 ||
                   strncmp(r[2], "CURRENT_TIMESTAMP", 17) == 0 ||
                   dd_htest_ignored(cmp, table, r[0]);
        dd_buf_t *b = skip ? skipped : names;
        if (b->len) dd_buf_puts(b, skip ? ", " : "\t");
        dd_buf_puts(b, r[0]);
        if (skip) continue;
        if (cols->len) dd_buf_puts(cols, ", ");
        dd_htest_ident(cols, r[0]);
    }
    mysql_free_result(res);
    return 0;
}

int dd_htest_cmp_tables(const dd_htest_cmp_t *cmp, char *errstr, size_t errstr_size)
{
    dd_htest_rows_t tables = {0};
    dd_buf_t sql = {0};
    int rc = 0;

    dd_buf_printf(&sql,
                  "SELECT TABLE_NAME FROM information_schema.TABLES WHERE TABLE_SCHEMA = '%s' "
                  "AND TABLE_TYPE = 'BASE TABLE' AND TABLE_NAME NOT IN ('%s', 'dedupd_schema')",
                  cmp->dbs[0], cmp->table);
    if (sql.oom || dd_htest_rows_get(cmp->db, sql.p, &tables, errstr, errstr_size)) {
        dd_buf_release(&sql);
        return -1;
    }
    dd_buf_release(&sql);
    if (tables.n == 0)
        fprintf(cmp->out, "ok   the handler has no tables of its own: nothing else to compare\n");
    for (size_t i = 0; i < tables.n && rc >= 0; i++) {
        uint32_t len;
        char table[200], what[512];
        dd_buf_t cols = {0}, names = {0}, skipped = {0};
        int r;

        memcpy(&len, tables.v[i].p + 1, sizeof(len));
        snprintf(table, sizeof(table), "%.*s", (int)len, tables.v[i].p + 5);
        if (dd_htest_columns(cmp, table, &cols, &names, &skipped, errstr, errstr_size)) {
            rc = -1;
        } else if (!cols.len) {
            fprintf(cmp->out, "ok   table %s: every column ignored (%s)\n", table, skipped.p);
        } else {
            snprintf(what, sizeof(what), "table %s%s%s%s", table, skipped.len ? " (ignoring " : "",
                     skipped.len ? skipped.p : "", skipped.len ? ")" : "");
            r = dd_htest_cmp_select(cmp, what, cols.p, table, names.p, 1, errstr, errstr_size);
            rc = r < 0 ? -1 : rc | r;
        }
        dd_buf_release(&cols);
        dd_buf_release(&names);
        dd_buf_release(&skipped);
    }
    dd_htest_rows_free(&tables);
    return rc;
}
