/*
 * Statements and templates of the SQL handler (see sql.h): where the
 * ${...} placeholders are, and what the server will read.
 *
 * A placeholder becomes a '?' of a prepared statement, so a value is never
 * text of the SQL. That holds only if this reading of the statement is the
 * server's: a '${x}' inside a quoted literal would be bound by nobody (the
 * server reads a string), one inside a comment likewise, and a second
 * statement after a ';' would run where the configuration shows one. So
 * the statement is read with MariaDB's lexical rules (quotes with both
 * backslash and doubled-quote escapes, backquoted identifiers, '#', '-- '
 * and C comments) and refused when a placeholder is anywhere but in the
 * SQL itself, when a second statement follows, or when a bare '?' or an
 * executable comment (/ *! ... * /, whose inside the server runs) is there. The
 * server's own count of parameters is compared with ours when the
 * statement is prepared (sql_run.c), which catches the one difference
 * left: a server in NO_BACKSLASH_ESCAPES mode ending a literal where this
 * reading does not.
 */
#include "sql.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* Reads ${...} at src[i] (src[i] == '$', src[i + 1] == '{') into ph;
 * *end is after its '}'. 0 or -1 with errstr. */
static int sql_ph_parse(const char *src, size_t i, int in_event, sql_ph *ph, size_t *end,
                        char *errstr, size_t errstr_size)
{
    static const char *const metas[] = {NULL, "key", "topic", "partition", "offset", "event_id"};
    const char *close = strchr(src + i + 2, '}');
    size_t at = i + 2, len;

    memset(ph, 0, sizeof(*ph));
    ph->col = i + 1;
    if (!close) {
        snprintf(errstr, errstr_size, "the placeholder at column %zu has no closing '}'", ph->col);
        return -1;
    }
    len = (size_t)(close - (src + at));
    *end = (size_t)(close - src) + 1;
    if (len >= 5 && strncmp(src + at, "json:", 5) == 0) {
        ph->json = 1;
        at += 5;
        len -= 5;
    }
    if (len > 0 && src[at + len - 1] == '?') {
        ph->optional = 1;
        len--;
    }
    ph->at = at;
    ph->len = len;
    if (len == 0) {
        snprintf(errstr, errstr_size, "the placeholder at column %zu names no field", ph->col);
        return -1;
    }
    if (src[at] != '@') return 0;
    for (int m = SQL_META_KEY; m <= SQL_META_EVENT_ID; m++)
        if (strlen(metas[m]) == len - 1 && strncmp(src + at + 1, metas[m], len - 1) == 0 &&
            (m != SQL_META_EVENT_ID || in_event)) {
            ph->meta = m;
            return 0;
        }
    snprintf(errstr, errstr_size,
             "unknown ${%.*s} at column %zu (known: @key, @topic, @partition, @offset%s)",
             (int)(len > 40 ? 40 : len), src + at, ph->col, in_event ? ", @event_id" : "");
    return -1;
}

/* The end of a quoted literal or identifier opened by src[i] (q), i.e. the
 * offset of its closing quote; -1 with errstr when it is not closed or a
 * placeholder is inside. Backquoted identifiers have no backslash escape. */
static long sql_quoted_end(const char *src, size_t n, size_t i, char q, char *errstr,
                           size_t errstr_size)
{
    size_t j = i + 1;

    while (j < n) {
        if (src[j] == '\\' && q != '`') {
            j += 2;
            continue;
        }
        if (src[j] == q) {
            if (j + 1 < n && src[j + 1] == q) {
                j += 2;
                continue;
            }
            return (long)j;
        }
        if (src[j] == '$' && j + 1 < n && src[j + 1] == '{') {
            snprintf(errstr, errstr_size,
                     "the placeholder at column %zu is inside a quoted %s (opened at column %zu): "
                     "it would be text, not a parameter; write it outside the quotes",
                     j + 1, q == '`' ? "identifier" : "literal", i + 1);
            return -1;
        }
        j++;
    }
    snprintf(errstr, errstr_size, "the quote %c at column %zu is never closed", q, i + 1);
    return -1;
}

/* 1 when src[i] starts a comment: '#', "-- " (two dashes and a space or
 * a control character, or the end) or a C comment. */
static int sql_comment_at(const char *src, size_t n, size_t i)
{
    if (src[i] == '#') return 1;
    if (src[i] == '-' && i + 1 < n && src[i + 1] == '-')
        return i + 2 >= n || (unsigned char)src[i + 2] <= 0x20;
    return src[i] == '/' && i + 1 < n && src[i + 1] == '*';
}

/* The offset after the comment at src[i]; -1 with errstr for an
 * executable comment, one left open, or a placeholder inside. */
static long sql_comment_end(const char *src, size_t n, size_t i, char *errstr, size_t errstr_size)
{
    int c_style = src[i] == '/';
    const char *end;
    size_t stop;

    if (c_style && ((i + 2 < n && src[i + 2] == '!') ||
                    (i + 3 < n && src[i + 2] == 'M' && src[i + 3] == '!'))) {
        snprintf(errstr, errstr_size,
                 "the executable comment at column %zu is not allowed (the server runs what it "
                 "holds)",
                 i + 1);
        return -1;
    }
    if (c_style) {
        if (!(end = strstr(src + i + 2, "*/"))) {
            snprintf(errstr, errstr_size, "the comment at column %zu is never closed", i + 1);
            return -1;
        }
        stop = (size_t)(end - src) + 2;
    } else {
        end = strchr(src + i, '\n');
        stop = end ? (size_t)(end - src) + 1 : n;
    }
    for (size_t j = i; j + 1 < stop; j++)
        if (src[j] == '$' && src[j + 1] == '{') {
            snprintf(errstr, errstr_size,
                     "the placeholder at column %zu is inside a comment (opened at column %zu)",
                     j + 1, i + 1);
            return -1;
        }
    return (long)stop;
}

/* After a ';' at src[i]: only spaces and comments may follow. */
static int sql_after_semicolon(const char *src, size_t n, size_t i, char *errstr,
                               size_t errstr_size)
{
    size_t j = i + 1;
    long e;

    while (j < n) {
        if ((unsigned char)src[j] <= 0x20) {
            j++;
        } else if (sql_comment_at(src, n, j)) {
            if ((e = sql_comment_end(src, n, j, errstr, errstr_size)) < 0) return -1;
            j = (size_t)e;
        } else {
            snprintf(errstr, errstr_size,
                     "two statements in one string (the ';' at column %zu is followed by more at "
                     "column %zu): give each statement its own string",
                     i + 1, j + 1);
            return -1;
        }
    }
    return 0;
}

/* The first word of the statement (at src[first]) against what kind
 * allows. */
static int sql_kind_check(const char *src, size_t first, sql_kind kind, char *errstr,
                          size_t errstr_size)
{
    static const char *const writes[] = {"INSERT", "UPDATE", "DELETE", "REPLACE", NULL};
    static const char *const queries[] = {"SELECT", "WITH", NULL};
    const char *const *ok = kind == SQL_KIND_WRITE ? writes : queries;
    size_t len = 0;

    if (kind == SQL_KIND_MIGRATE) return 0;
    while ((src[first + len] >= 'a' && src[first + len] <= 'z') ||
           (src[first + len] >= 'A' && src[first + len] <= 'Z'))
        len++;
    for (; *ok; ok++)
        if (strlen(*ok) == len && strncasecmp(src + first, *ok, len) == 0) return 0;
    snprintf(errstr, errstr_size, "%s, not \"%.*s\"",
             kind == SQL_KIND_WRITE ? "a statement is an INSERT, UPDATE, DELETE or REPLACE (a "
                                      "query goes in response)"
                                    : "the response is a query (SELECT or WITH)",
             (int)(len ? (len > 20 ? 20 : len) : 1), src + first);
    return -1;
}

/* One token of the statement at src[*ip] into t->sql at *op: a quoted
 * literal or identifier, a comment, a placeholder (written '?'), or a
 * byte. *stop is set at a ';' that ends the statement. 0 or -1. */
static int sql_token(sql_text *t, const char *src, size_t n, size_t *ip, size_t *op, sql_kind kind,
                     int *stop, char *errstr, size_t errstr_size)
{
    size_t i = *ip;
    long e;

    if (src[i] == '\'' || src[i] == '"' || src[i] == '`') {
        if ((e = sql_quoted_end(src, n, i, src[i], errstr, errstr_size)) < 0) return -1;
        e++;
    } else if (sql_comment_at(src, n, i)) {
        if ((e = sql_comment_end(src, n, i, errstr, errstr_size)) < 0) return -1;
    } else if (src[i] == '$' && i + 1 < n && src[i + 1] == '{') {
        size_t end;
        if (kind == SQL_KIND_MIGRATE) {
            snprintf(errstr, errstr_size,
                     "a migrate statement has no message: no placeholder (column %zu)", i + 1);
            return -1;
        }
        if (sql_ph_parse(src, i, 0, &t->ph[t->ph_cnt], &end, errstr, errstr_size)) return -1;
        t->ph_cnt++;
        t->sql[(*op)++] = '?';
        *ip = end;
        return 0;
    } else if (src[i] == '?') {
        snprintf(errstr, errstr_size,
                 "a '?' at column %zu: write each parameter as ${path} (a field of the message)",
                 i + 1);
        return -1;
    } else if (src[i] == ';') {
        *stop = 1;
        return sql_after_semicolon(src, n, i, errstr, errstr_size);
    } else {
        e = (long)i + 1;
    }
    memcpy(t->sql + *op, src + i, (size_t)e - i);
    *op += (size_t)e - i;
    *ip = (size_t)e;
    return 0;
}

int sql_text_parse(sql_text *t, const char *src, sql_kind kind, char *errstr, size_t errstr_size)
{
    size_t n = strlen(src), i = 0, o = 0, first = n;
    int stop = 0;

    memset(t, 0, sizeof(*t));
    t->src = strdup(src);
    t->sql = malloc(n + 1);
    t->ph = calloc(n / 3 + 1, sizeof(*t->ph));
    if (!t->src || !t->sql || !t->ph) {
        snprintf(errstr, errstr_size, "out of memory");
        goto fail;
    }
    while (i < n && !stop) {
        if (first == n && (unsigned char)src[i] > 0x20 && !sql_comment_at(src, n, i)) first = i;
        if (sql_token(t, src, n, &i, &o, kind, &stop, errstr, errstr_size)) goto fail;
    }
    t->sql[o] = '\0';
    if (first == n || src[first] == ';') {
        snprintf(errstr, errstr_size, "no statement (only spaces and comments)");
        goto fail;
    }
    if (sql_kind_check(src, first, kind, errstr, errstr_size)) goto fail;
    return 0;
fail:
    sql_text_release(t, NULL);
    return -1;
}

void sql_text_release(sql_text *t, const dedupd_host *host)
{
    for (size_t k = 0; host && t->ph && k < t->ph_cnt; k++)
        host->path_free(host, t->ph[k].path);
    free(t->src);
    free(t->sql);
    free(t->ph);
    memset(t, 0, sizeof(*t));
}

/* ---- templates ---- */

/* Adds a literal piece lits[from, to) or a placeholder piece. */
static void sql_tmpl_piece(sql_tmpl *t, size_t from, size_t to, long ph)
{
    sql_piece *p = &t->pieces[t->piece_cnt];

    if (ph < 0 && to == from) return;
    p->lit = ph < 0 ? t->lits + from : NULL;
    p->len = to - from;
    p->ph = ph < 0 ? 0 : (size_t)ph;
    t->piece_cnt++;
}

/* A placeholder of a template at src[i]: where a JSON value may go. */
static int sql_tmpl_ph(sql_tmpl *t, const char *src, size_t *ip, int in_string, char *errstr,
                       size_t errstr_size)
{
    size_t end;

    if (in_string) {
        snprintf(errstr, errstr_size,
                 "the placeholder at column %zu is inside a JSON string: write it where a value "
                 "goes (it is written as a JSON value, a string with its quotes)",
                 *ip + 1);
        return -1;
    }
    if (sql_ph_parse(src, *ip, 1, &t->ph[t->ph_cnt], &end, errstr, errstr_size)) return -1;
    sql_tmpl_piece(t, 0, 0, (long)t->ph_cnt++);
    *ip = end;
    return 0;
}

int sql_tmpl_parse(sql_tmpl *t, const char *src, int json, char *errstr, size_t errstr_size)
{
    size_t n = strlen(src), i = 0, o = 0, lit = 0;
    int in_string = 0, escaped = 0;

    memset(t, 0, sizeof(*t));
    t->json = json;
    t->src = strdup(src);
    t->lits = malloc(n + 1);
    t->pieces = calloc(n + 1, sizeof(*t->pieces));
    t->ph = calloc(n / 3 + 1, sizeof(*t->ph));
    if (!t->src || !t->lits || !t->pieces || !t->ph) {
        snprintf(errstr, errstr_size, "out of memory");
        goto fail;
    }
    while (i < n) {
        if (src[i] == '$' && i + 1 < n && src[i + 1] == '{') {
            sql_tmpl_piece(t, lit, o, -1);
            if (sql_tmpl_ph(t, src, &i, in_string, errstr, errstr_size)) goto fail;
            lit = o;
            continue;
        }
        if (src[i] == '$' && (i + 1 >= n || src[i + 1] != '$')) {
            snprintf(errstr, errstr_size, "a '$' at column %zu: write $$ for a dollar sign", i + 1);
            goto fail;
        }
        if (json && in_string && !escaped && src[i] == '"')
            in_string = 0;
        else if (json && !in_string && src[i] == '"')
            in_string = 1;
        escaped = json && in_string && !escaped && src[i] == '\\';
        t->lits[o++] = src[i];
        i += src[i] == '$' ? 2 : 1;
    }
    sql_tmpl_piece(t, lit, o, -1);
    return 0;
fail:
    sql_tmpl_release(t, NULL);
    return -1;
}

void sql_tmpl_release(sql_tmpl *t, const dedupd_host *host)
{
    for (size_t k = 0; host && t->ph && k < t->ph_cnt; k++)
        host->path_free(host, t->ph[k].path);
    free(t->src);
    free(t->lits);
    free(t->pieces);
    free(t->ph);
    memset(t, 0, sizeof(*t));
}
