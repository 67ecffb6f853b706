/*
 * libFuzzer target for the SQL handler's statement parser
 * (handlers/sql/sql_parse.c) and its decimals (sql_bind.c): the input is
 * a statement's text as a configuration gives it, then a template's, then
 * a number's.
 *
 * A statement the parser accepts must be the input with each placeholder
 * replaced by one '?' and nothing else changed, cut at a final ';': the
 * server reads what the configuration shows, and a value never becomes
 * text of the SQL. Every placeholder lies inside the input and names
 * something. Refusals say why. A template the parser accepts spells the
 * input again from its pieces. A JSON number's plain decimal, when it
 * fits, has the same value (dd_json's exact parts) and no exponent.
 *
 * Built by scripts/fuzz; by hand:
 * clang -g -O1 -fsanitize=fuzzer,address,undefined -D_GNU_SOURCE -Iinclude -Ihandlers/sql \
 *   -Isrc/base -Isrc/key tests/fuzz/fuzz_sql.c handlers/sql/sql_parse.c \
 *   handlers/sql/sql_bind.c src/key/dd_json.c src/base/dd_utf8.c src/base/dd_text.c \
 *   src/base/dd_common.c $(pkg-config --cflags --libs libmariadb libcjson libconfig) \
 *   -lpthread -lm -o /tmp/fuzz_sql
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dd_json.h"
#include "sql.h"

#define FUZZ_CHECK(cond)                                                                           \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond);               \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

/* t->sql is src with each placeholder one '?', cut at a final ';'. */
static void fuzz_statement_is_the_input(const char *src, const sql_text *t)
{
    size_t n = strlen(src), i = 0, o = 0, seg, rest;

    for (size_t k = 0; k < t->ph_cnt; k++) {
        const sql_ph *ph = &t->ph[k];
        const char *close;
        FUZZ_CHECK(ph->col >= 1 && ph->col - 1 >= i && ph->col + 1 < n);
        FUZZ_CHECK(src[ph->col - 1] == '$' && src[ph->col] == '{');
        FUZZ_CHECK(ph->at + ph->len <= n && ph->len > 0);
        seg = ph->col - 1 - i;
        FUZZ_CHECK(memcmp(t->sql + o, src + i, seg) == 0);
        FUZZ_CHECK(t->sql[o + seg] == '?');
        close = strchr(src + ph->col + 1, '}');
        FUZZ_CHECK(close != NULL);
        i = (size_t)(close - src) + 1;
        o += seg + 1;
    }
    rest = strlen(t->sql + o);
    FUZZ_CHECK(i + rest <= n && memcmp(t->sql + o, src + i, rest) == 0);
    FUZZ_CHECK(i + rest == n || src[i + rest] == ';');
}

static void fuzz_statement(const char *src)
{
    char err[256] = "";
    sql_text t;

    for (int kind = SQL_KIND_WRITE; kind <= SQL_KIND_MIGRATE; kind++) {
        if (sql_text_parse(&t, src, (sql_kind)kind, err, sizeof(err)) != 0) {
            FUZZ_CHECK(err[0] != '\0' && t.sql == NULL);
            continue;
        }
        fuzz_statement_is_the_input(src, &t);
        if (kind == SQL_KIND_MIGRATE) FUZZ_CHECK(t.ph_cnt == 0);
        sql_text_release(&t, NULL);
    }
}

/* The pieces of an accepted template spell src again. */
static void fuzz_template(const char *src, int json)
{
    char err[256] = "", *again;
    size_t o = 0;
    sql_tmpl t;

    if (sql_tmpl_parse(&t, src, json, err, sizeof(err)) != 0) {
        FUZZ_CHECK(err[0] != '\0');
        return;
    }
    again = malloc(2 * strlen(src) + 1);
    FUZZ_CHECK(again != NULL);
    for (size_t i = 0; i < t.piece_cnt; i++) {
        const sql_piece *p = &t.pieces[i];
        if (p->lit) {
            for (size_t k = 0; k < p->len; k++) {
                again[o++] = p->lit[k];
                if (p->lit[k] == '$') again[o++] = '$';
            }
        } else {
            const sql_ph *ph = &t.ph[p->ph];
            const char *close = strchr(src + ph->col + 1, '}');
            size_t len = (size_t)(close - src) + 1 - (ph->col - 1);
            memcpy(again + o, src + ph->col - 1, len);
            o += len;
        }
    }
    FUZZ_CHECK(o == strlen(src) && memcmp(again, src, o) == 0);
    free(again);
    sql_tmpl_release(&t, NULL);
}

/* A JSON number's plain decimal has its value. */
static void fuzz_decimal(const char *src)
{
    static dd_json_doc_t *doc, *doc2;
    const dd_json_node_t *n;
    char out[SQL_DEC_TEXT];
    dd_json_num_t a, b;
    size_t len;

    if (!doc) doc = dd_json_doc_new(), doc2 = dd_json_doc_new();
    FUZZ_CHECK(doc && doc2);
    if (dd_json_parse(doc, src, strlen(src), NULL, 0) != 0 || !(n = dd_json_root(doc)) ||
        n->type != DD_JSON_NUMBER)
        return;
    if (!(len = sql_decimal(n->str, n->len, out))) return;
    FUZZ_CHECK(len < SQL_DEC_TEXT && !memchr(out, 'e', len) && !memchr(out, 'E', len));
    FUZZ_CHECK(dd_json_parse(doc2, out, len, NULL, 0) == 0);
    dd_json_num_parts(n->str, n->len, &a);
    dd_json_num_parts(out, len, &b);
    FUZZ_CHECK(a.neg == b.neg && a.exp == b.exp && a.n1 + a.n2 == b.n1 + b.n2);
    for (size_t k = 0; k < a.n1 + a.n2; k++)
        FUZZ_CHECK((k < a.n1 ? a.d1[k] : a.d2[k - a.n1]) == (k < b.n1 ? b.d1[k] : b.d2[k - b.n1]));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *src = malloc(size + 1);

    if (!src) return 0;
    memcpy(src, data, size);
    src[size] = '\0'; /* a configuration's string ends at its first NUL */
    fuzz_statement(src);
    fuzz_template(src, 0);
    fuzz_template(src, 1);
    fuzz_decimal(src);
    free(src);
    return 0;
}
