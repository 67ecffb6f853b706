/*
 * Unit tests of the SQL handler (handlers/sql/, compiled into this test)
 * with dedupd's own host functions for payload values: how statements are
 * read (placeholders, quotes, comments, one statement per string), the
 * templates of events, the configuration's refusals with file and line,
 * and the binding rules, value by value (the test vectors of docs/SQL.md).
 * No database: what needs one is in the integration tests 160 to 165.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dd_handler_int.h"
#include "dd_json.h"
#include "sql.h"
#include "check_run.h"

static dedupd_host host = {
    .version = 3,
    .path_new = dd_handler_host_path_new,
    .path_free = dd_handler_host_path_free,
    .path_value = dd_handler_host_path_value,
};

/* ---- statements ---- */

static void parses(const char *src, const char *sql, size_t ph_cnt)
{
    char err[256] = "";
    sql_text t;

    ck_assert_msg(sql_text_parse(&t, src, SQL_KIND_WRITE, err, sizeof(err)) == 0, "%s: %s", src,
                  err);
    ck_assert_str_eq(t.sql, sql);
    ck_assert_uint_eq(t.ph_cnt, ph_cnt);
    sql_text_release(&t, NULL);
}

static void refused(const char *src, sql_kind kind, const char *why)
{
    char err[256] = "";
    sql_text t;

    ck_assert_msg(sql_text_parse(&t, src, kind, err, sizeof(err)) != 0, "%s: accepted", src);
    ck_assert_msg(strstr(err, why) != NULL, "%s: %s (expected: %s)", src, err, why);
    ck_assert_ptr_null(t.sql);
}

START_TEST(test_statements)
{
    parses("INSERT INTO t (a, b) VALUES (${a}, ${b.c[0]})", "INSERT INTO t (a, b) VALUES (?, ?)",
           2);
    parses("UPDATE t SET s = 'PAID', n = ${n} WHERE id = ${id} AND s = 'UNPAID';",
           "UPDATE t SET s = 'PAID', n = ? WHERE id = ? AND s = 'UNPAID'", 2);
    parses("  -- a comment\n DELETE FROM t WHERE id = ${id}; # trailing\n /* c */ ",
           "  -- a comment\n DELETE FROM t WHERE id = ?", 1);
    parses("update `a``b` set x = 'it''s \\' ; ?' where y = ${y}",
           "update `a``b` set x = 'it''s \\' ; ?' where y = ?", 1);
    parses("REPLACE INTO t VALUES (${json:o?}, ${@key})", "REPLACE INTO t VALUES (?, ?)", 2);
}
END_TEST

START_TEST(test_statement_literal_dollar)
{
    sql_text t;
    char err[256] = "";

    /* '\$' is the server's escaped '$': a literal, never a parameter */
    ck_assert_int_eq(sql_text_parse(&t, "INSERT INTO t VALUES ('\\${x}', ${x})", SQL_KIND_WRITE,
                                    err, sizeof(err)),
                     0);
    ck_assert_str_eq(t.sql, "INSERT INTO t VALUES ('\\${x}', ?)");
    ck_assert_uint_eq(t.ph_cnt, 1);
    ck_assert_uint_eq(t.ph[0].col, 32);
    ck_assert_uint_eq(t.ph[0].len, 1);
    sql_text_release(&t, NULL);
    /* modifiers */
    ck_assert_int_eq(sql_text_parse(&t, "INSERT INTO t VALUES (${json:a.b?}, ${@offset}, ${c?})",
                                    SQL_KIND_WRITE, err, sizeof(err)),
                     0);
    ck_assert(t.ph[0].json && t.ph[0].optional && !t.ph[0].meta);
    ck_assert_uint_eq(t.ph[0].len, 3);
    ck_assert_int_eq(t.ph[1].meta, SQL_META_OFFSET);
    ck_assert(!t.ph[2].json && t.ph[2].optional);
    sql_text_release(&t, NULL);
}
END_TEST

START_TEST(test_statement_refusals)
{
    refused("INSERT INTO t VALUES ('${order_no}')", SQL_KIND_WRITE,
            "placeholder at column 24 is inside a quoted literal");
    refused("INSERT INTO t VALUES (\"a${x}\")", SQL_KIND_WRITE, "inside a quoted literal");
    refused("INSERT INTO `${t}` VALUES (1)", SQL_KIND_WRITE, "inside a quoted identifier");
    refused("INSERT INTO t VALUES (1); DROP TABLE t", SQL_KIND_WRITE,
            "two statements in one string (the ';' at column 25");
    refused("INSERT INTO t VALUES (1);;", SQL_KIND_WRITE, "two statements");
    refused("INSERT INTO t VALUES (?)", SQL_KIND_WRITE, "a '?' at column 23");
    refused("INSERT INTO t VALUES (1) /*! , (2) */", SQL_KIND_WRITE, "executable comment");
    refused("INSERT INTO t VALUES (1) /*M!100000 , (2) */", SQL_KIND_WRITE, "executable comment");
    refused("INSERT INTO t VALUES (1) -- ${x}", SQL_KIND_WRITE, "inside a comment");
    refused("INSERT INTO t VALUES (1) /* ${x} */", SQL_KIND_WRITE, "inside a comment");
    refused("INSERT INTO t VALUES ('abc)", SQL_KIND_WRITE, "quote ' at column 23 is never closed");
    refused("INSERT INTO t VALUES (1) /* x", SQL_KIND_WRITE,
            "comment at column 26 is never closed");
    refused("INSERT INTO t VALUES (${x)", SQL_KIND_WRITE, "has no closing '}'");
    refused("INSERT INTO t VALUES (${})", SQL_KIND_WRITE, "names no field");
    refused("INSERT INTO t VALUES (${json:?})", SQL_KIND_WRITE, "names no field");
    refused("INSERT INTO t VALUES (${@nope})", SQL_KIND_WRITE, "unknown ${@nope}");
    refused("INSERT INTO t VALUES (${@event_id})", SQL_KIND_WRITE, "unknown ${@event_id}");
    refused("   ", SQL_KIND_WRITE, "no statement");
    refused("-- only\n/* comments */;", SQL_KIND_WRITE, "no statement");
    refused("SELECT 1", SQL_KIND_WRITE, "not \"SELECT\"");
    refused("COMMIT", SQL_KIND_WRITE, "not \"COMMIT\"");
    refused("UPDATE t SET a = 1", SQL_KIND_QUERY, "the response is a query");
    refused("CREATE TABLE t (a INT DEFAULT ${a})", SQL_KIND_MIGRATE, "no placeholder (column 31)");
}
END_TEST

START_TEST(test_statement_kinds)
{
    char err[256];
    sql_text t;

    ck_assert_int_eq(sql_text_parse(&t, "with x as (select 1) select * from x where a = ${a}",
                                    SQL_KIND_QUERY, err, sizeof(err)),
                     0);
    sql_text_release(&t, NULL);
    ck_assert_int_eq(sql_text_parse(&t, "CREATE TABLE IF NOT EXISTS t (a INT);", SQL_KIND_MIGRATE,
                                    err, sizeof(err)),
                     0);
    ck_assert_str_eq(t.sql, "CREATE TABLE IF NOT EXISTS t (a INT)");
    sql_text_release(&t, NULL);
}
END_TEST

/* ---- templates ---- */

START_TEST(test_templates)
{
    char err[256] = "";
    sql_tmpl t;

    ck_assert_int_eq(sql_tmpl_parse(&t, "pay$$:${a}-${@event_id}", 0, err, sizeof(err)), 0);
    ck_assert_uint_eq(t.piece_cnt, 4);
    ck_assert_uint_eq(t.pieces[0].len, 5);
    ck_assert_mem_eq(t.pieces[0].lit, "pay$:", 5);
    ck_assert_ptr_null(t.pieces[1].lit);
    ck_assert_mem_eq(t.pieces[2].lit, "-", 1);
    ck_assert_int_eq(t.ph[1].meta, SQL_META_EVENT_ID);
    sql_tmpl_release(&t, NULL);
    ck_assert_int_eq(sql_tmpl_parse(&t, "{\"a\": ${a}, \"b\\\"}\": [${b?}]}", 1, err, sizeof(err)),
                     0);
    ck_assert_int_eq(sql_event_check(&t, err, sizeof(err)), 0);
    sql_tmpl_release(&t, NULL);
    ck_assert_int_ne(sql_tmpl_parse(&t, "{\"a\": \"${a}\"}", 1, err, sizeof(err)), 0);
    ck_assert_msg(strstr(err, "inside a JSON string"), "%s", err);
    ck_assert_int_ne(sql_tmpl_parse(&t, "cost $5", 0, err, sizeof(err)), 0);
    ck_assert_msg(strstr(err, "write $$"), "%s", err);
    ck_assert_int_eq(sql_tmpl_parse(&t, "{\"a\": ${a} ${b}}", 1, err, sizeof(err)), 0);
    ck_assert_int_ne(sql_event_check(&t, err, sizeof(err)), 0);
    ck_assert_msg(strstr(err, "not a JSON text"), "%s", err);
    sql_tmpl_release(&t, NULL);
}
END_TEST

/* ---- numbers ---- */

START_TEST(test_decimals)
{
    static const struct {
        const char *in, *out;
    } v[] = {
        {"0", "0"},
        {"-0", "-0"},
        {"-0.00", "-0.00"},
        {"0e2", "0"},
        {"0.00e5", "0"},
        {"0.0e-1", "0.00"},
        {"12.50", "12.50"},
        {"9223372036854775807", "9223372036854775807"},
        {"18446744073709551616", "18446744073709551616"},
        {"1.5e3", "1500"},
        {"1.50E+1", "15.0"},
        {"12e-2", "0.12"},
        {"0.5e-2", "0.005"},
        {"-7e0", "-7"},
        {"1e64", "1"
                 "0000000000"
                 "0000000000"
                 "0000000000"
                 "0000000000"
                 "0000000000"
                 "0000000000"
                 "0000"},
        {"1e-38", "0.00000000000000000000000000000000000001"},
        {"1.000e-38", "0.00000000000000000000000000000000000001"},
        {"123456789012345678901234567890123456.78", "123456789012345678901234567890123456.78"},
        {"1e65", NULL},
        {"1e-39", NULL},
        {"1e999999999", NULL},
        {"1e-999999999", NULL},
        {"0.123456789012345678901234567890123456789", NULL},
    };
    char out[SQL_DEC_TEXT];

    for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
        size_t n = sql_decimal(v[i].in, strlen(v[i].in), out);
        if (!v[i].out) {
            ck_assert_msg(n == 0, "%s: %.*s", v[i].in, (int)n, out);
            continue;
        }
        ck_assert_msg(n == strlen(v[i].out) && memcmp(out, v[i].out, n) == 0, "%s: %.*s", v[i].in,
                      (int)n, out);
    }
}
END_TEST

/* ---- the binding rules ---- */

static const char payload[] =
    "{\"s\":\"a'b\\\"c\\\\d\",\"e\":\"\\ud83d\\ude00\\u0001\",\"lit\":\"${merchant_id}\","
    "\"n19\":9223372036854775807,\"u20\":18446744073709551615,"
    "\"d38\":123456789012345678901234567890123456.78,\"neg0\":-0.00,\"exp\":1.5e3,"
    "\"big\":1e66,\"t\":true,\"f\":false,\"z\":null,\"o\":{\"a\": [1, 2]},\"arr\":[1,\"x\"]}";

static void *doc_mem;

static dedupd_msg msg_of(const char *text)
{
    dd_json_doc_t *doc = dd_json_doc_new();
    char err[256];
    dedupd_msg msg = {.topic = "payments", .partition = 3, .offset = 42, .biz_key = "pay:m1:o1"};

    ck_assert_int_eq(dd_json_parse(doc, text, strlen(text), err, sizeof(err)), 0);
    free(doc_mem);
    doc_mem = malloc(dd_json_doc_copy_size(doc));
    msg.doc = (const dedupd_doc *)dd_json_doc_copy(doc, doc_mem);
    dd_json_doc_destroy(doc); /* the copy stands alone */
    return msg;
}

/* The parameter the single placeholder of "INSERT INTO t VALUES (ph)"
 * binds for the payload above: "NULL", "DECIMAL text", "STRING text", or
 * "refused: why". */
static void binds(const char *ph, const char *want)
{
    char src[128], err[256] = "", got[512];
    dedupd_msg msg = msg_of(payload);
    sql_state st = {.host = &host};
    sql_arena *arena = NULL;
    sql_text t;
    sql_param p;

    snprintf(src, sizeof(src), "INSERT INTO t VALUES (%s)", ph);
    ck_assert_int_eq(sql_text_parse(&t, src, SQL_KIND_WRITE, err, sizeof(err)), 0);
    if (!t.ph[0].meta) {
        t.ph[0].path = host.path_new(&host, src + t.ph[0].at, t.ph[0].len, err, sizeof(err));
        ck_assert_ptr_nonnull(t.ph[0].path);
    }
    if (sql_bind_all(&st, &t, &msg, &p, &arena, err, sizeof(err)) != 0)
        snprintf(got, sizeof(got), "refused: %s", err);
    else if (p.type == SQL_P_NULL)
        snprintf(got, sizeof(got), "NULL");
    else
        snprintf(got, sizeof(got), "%s %.*s", p.type == SQL_P_DECIMAL ? "DECIMAL" : "STRING",
                 (int)p.len, p.text);
    ck_assert_msg(strcmp(got, want) == 0, "%s: got \"%s\", want \"%s\"", ph, got, want);
    sql_arena_free(&arena);
    sql_text_release(&t, &host);
}

START_TEST(test_binding_rules)
{
    binds("${s}", "STRING a'b\"c\\d");
    binds("${e}", "STRING \xf0\x9f\x98\x80\x01");
    binds("${lit}", "STRING ${merchant_id}");
    binds("${n19}", "DECIMAL 9223372036854775807");
    binds("${u20}", "DECIMAL 18446744073709551615");
    binds("${d38}", "DECIMAL 123456789012345678901234567890123456.78");
    binds("${neg0}", "DECIMAL -0.00");
    binds("${exp}", "DECIMAL 1500");
    binds("${big}", "refused: field big: the number 1e66 does not fit a DECIMAL (65 digits, 38 "
                    "after the point)");
    binds("${t}", "DECIMAL 1");
    binds("${f}", "DECIMAL 0");
    binds("${z}", "NULL");
    binds("${z?}", "NULL");
    binds("${o}", "refused: field o is an object: ${json:o} binds its JSON text");
    binds("${arr}", "refused: field arr is an array: ${json:arr} binds its JSON text");
    binds("${arr[1]}", "STRING x");
    binds("${o.a[0]}", "DECIMAL 1");
    binds("${nope}", "refused: field nope is missing");
    binds("${nope?}", "NULL");
    binds("${s.x}", "refused: field s.x is missing (s is a string)");
    binds("${arr[5]}", "refused: field arr[5] is missing (arr has 2 elements)");
    binds("${json:s}", "STRING \"a'b\\\"c\\\\d\"");
    binds("${json:e}", "STRING \"\xf0\x9f\x98\x80\\u0001\"");
    binds("${json:o}", "STRING {\"a\": [1, 2]}");
    binds("${json:neg0}", "STRING -0.00");
    binds("${json:exp}", "STRING 1.5e3");
    binds("${json:z}", "STRING null");
    binds("${json:t}", "STRING true");
    binds("${json:nope}", "refused: field nope is missing");
    binds("${json:nope?}", "NULL");
    binds("${@key}", "STRING pay:m1:o1");
    binds("${@topic}", "STRING payments");
    binds("${@partition}", "DECIMAL 3");
    binds("${@offset}", "DECIMAL 42");
}
END_TEST

/* A message without a document (the compensation scan's) says so. */
START_TEST(test_no_document)
{
    dedupd_msg msg = {.biz_key = "k"};
    char err[256] = "";
    dedupd_path *p = host.path_new(&host, "a", 1, err, sizeof(err));
    dedupd_value v;

    ck_assert_int_eq(host.path_value(&host, &msg, p, &v, err, sizeof(err)), -1);
    ck_assert_msg(strstr(err, "no payload document"), "%s", err);
    ck_assert_int_eq(v.type, DEDUPD_VALUE_MISSING);
    host.path_free(&host, p);
    ck_assert_ptr_null(host.path_new(&host, "a..b", 4, err, sizeof(err)));
    ck_assert_str_eq(err, "bad path \"a..b\": empty field name at column 3");
}
END_TEST

/* ---- the configuration ---- */

/* Loads handler.sql from text (in a group "sql"); NULL when it loads, else
 * the error. */
static const char *conf_error(const char *text)
{
    static char err[DEDUPD_ERROR_SIZE];
    dedupd_host h = host;
    sql_state st = {0};
    config_t cfg;
    int rc;

    config_init(&cfg);
    ck_assert_msg(config_read_string(&cfg, text) == CONFIG_TRUE, "%s", config_error_text(&cfg));
    h.config = config_lookup(&cfg, "sql");
    err[0] = '\0';
    rc = sql_conf_load(&st, &h, err, sizeof(err));
    sql_conf_release(&st);
    config_destroy(&cfg);
    return rc ? err : NULL;
}

static void conf_refused(const char *text, const char *why)
{
    const char *err = conf_error(text);

    ck_assert_msg(err, "%s: accepted", text);
    ck_assert_msg(strstr(err, why), "%s: %s (expected: %s)", text, err, why);
}

START_TEST(test_conf)
{
    const char *err = conf_error(
        "sql = {\n migrate = (\"CREATE TABLE IF NOT EXISTS t (a INT)\");\n"
        " statements = ({ name = \"a\"; sql = \"INSERT INTO t VALUES (${a})\"; },\n"
        "  { name = \"b-2\"; sql = \"UPDATE t SET a = 2 WHERE a = ${a}\"; expect = \"0..1\";"
        " otherwise = \"retry\"; });\n"
        " response = \"SELECT a FROM t WHERE a = ${a}\";\n"
        " events = ({ topic = \"t.${a}\"; key = \"${a}\"; value = \"{\\\"a\\\": ${a}}\"; });\n};");

    ck_assert_msg(!err, "%s", err);
    conf_refused("sql = { statements = (); };", "config:1: handler.sql.statements is required");
    conf_refused("sql = { };", "handler.sql.statements is required");
    conf_refused("sql = { statements = ({ name = \"a\"; sql = \"INSERT INTO t VALUES (1); "
                 "INSERT INTO t VALUES (2)\"; }); };",
                 "config:1: statement a: two statements in one string");
    conf_refused("sql = {\n statements = (\n { name = \"paid\";\n"
                 "   sql = \"UPDATE o SET s = 'PAID' WHERE n = '${order_no}'\"; }); };",
                 "config:4: statement paid: the placeholder at column 36 is inside a quoted "
                 "literal");
    conf_refused("sql = { statements = ({ name = \"a\"; sql = \"INSERT INTO t VALUES "
                 "(${a..b})\"; }); };",
                 "statement a: the placeholder at column 23: bad path \"a..b\": empty field name "
                 "at column 3");
    conf_refused("sql = { statements = ({ sql = \"INSERT INTO t VALUES (1)\"; }); };",
                 "statement 1: name is required");
    conf_refused("sql = { statements = ({ name = \"a\"; sql = \"INSERT INTO t VALUES (1)\"; },"
                 " { name = \"a\"; sql = \"INSERT INTO t VALUES (1)\"; }); };",
                 "two statements are named a");
    conf_refused("sql = { statements = ({ name = \"a\"; sql = \"INSERT INTO t VALUES (1)\";"
                 " expect = \"1..0\"; }); };",
                 "statement a: expect is a count of affected rows");
    conf_refused("sql = { statements = ({ name = \"a\"; sql = \"INSERT INTO t VALUES (1)\";"
                 " otherwise = \"retry\"; }); };",
                 "statement a: otherwise needs an expect");
    conf_refused("sql = { statements = ({ name = \"a\"; sql = \"INSERT INTO t VALUES (1)\";"
                 " expect = 1; otherwise = \"skip\"; }); };",
                 "otherwise is \"reject\" (the default) or \"retry\"");
    conf_refused("sql = { statement = (); };", "unknown setting statement in handler.sql");
    conf_refused("sql = { statements = ({ name = \"a\"; sql = \"INSERT INTO t VALUES (1)\"; "
                 "exepct = 1; }); };",
                 "unknown setting exepct in a statement");
    conf_refused("sql = { statements = ({ name = \"a\"; sql = \"INSERT INTO t VALUES (1)\"; });"
                 " migrate = (\"CREATE TABLE t (a INT DEFAULT ${a})\"); };",
                 "migrate statement 1: a migrate statement has no message");
    conf_refused("sql = { statements = ({ name = \"a\"; sql = \"INSERT INTO t VALUES (1)\"; });"
                 " response = \"DELETE FROM t\"; };",
                 "response: the response is a query");
    conf_refused("sql = { statements = ({ name = \"a\"; sql = \"INSERT INTO t VALUES (1)\"; });"
                 " events = ({ key = \"k\"; }); };",
                 "event 1: topic is required");
    conf_refused("sql = { statements = ({ name = \"a\"; sql = \"INSERT INTO t VALUES (1)\"; });"
                 " events = ({ topic = \"t\"; value = \"{\\\"a\\\": \\\"${a}\\\"}\"; }); };",
                 "event 1: value: the placeholder at column 8 is inside a JSON string");
}
END_TEST

static Suite *sql_suite(void)
{
    Suite *s = suite_create("sql");
    TCase *tc = tcase_create("sql");

    tcase_add_test(tc, test_statements);
    tcase_add_test(tc, test_statement_literal_dollar);
    tcase_add_test(tc, test_statement_refusals);
    tcase_add_test(tc, test_statement_kinds);
    tcase_add_test(tc, test_templates);
    tcase_add_test(tc, test_decimals);
    tcase_add_test(tc, test_binding_rules);
    tcase_add_test(tc, test_no_document);
    tcase_add_test(tc, test_conf);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    int rc = dd_check_run(sql_suite());

    free(doc_mem);
    return rc;
}
