/*
 * Unit tests for dd_json, the strict parser, and dd_utf8: what RFC 8259
 * accepts is accepted with every digit and code point kept (NUL too); what
 * it does not, and what our limits exclude, is refused with a reason naming
 * what and the byte offset. No services needed.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dd_common.h"
#include "dd_json.h"
#include "dd_utf8.h"
#include "check_run.h"

static dd_json_doc_t *doc;

static void setup(void)
{
    doc = dd_json_doc_new();
    ck_assert_ptr_nonnull(doc);
}

static void teardown(void)
{
    dd_json_doc_destroy(doc);
}

static const dd_json_node_t *parse_len(const char *text, size_t len)
{
    char err[256] = "";

    ck_assert_msg(dd_json_parse(doc, text, len, err, sizeof(err)) == 0, "%s: %s", text, err);
    ck_assert_ptr_nonnull(dd_json_root(doc));
    return dd_json_root(doc);
}

static const dd_json_node_t *parse(const char *text)
{
    return parse_len(text, strlen(text));
}

/* Parses text that must be refused; returns the reason. */
static const char *refuse_len(const char *text, size_t len)
{
    static char err[256];
    int rc;

    err[0] = '\0';
    rc = dd_json_parse(doc, text, len, err, sizeof(err));
    ck_assert_msg(rc == DD_ERR_PERMANENT, "accepted: %s (rc %d)", text, rc);
    ck_assert_ptr_null(dd_json_root(doc));
    return err;
}

static const char *refuse(const char *text)
{
    return refuse_len(text, strlen(text));
}

START_TEST(test_accepts_rfc8259)
{
    static const char *const ok[] = {"0",
                                     "-0",
                                     "7",
                                     "-7",
                                     "0.5",
                                     "7.25e3",
                                     "7E+3",
                                     "7e-03",
                                     "1e400",
                                     "-1e-400",
                                     "\"\"",
                                     "\"a\\\"\\\\\\/\\b\\f\\n\\r\\t\\u00e9\\uD834\\uDD1E\"",
                                     "true",
                                     "false",
                                     "null",
                                     "[]",
                                     "{}",
                                     " \t\r\n[ 1 , [ ] , { } ] \n",
                                     "{\"a\":{\"b\":[{\"c\":null}]}}",
                                     "\"\xe2\x9c\x93\"",
                                     "123456789012345678901234567890",
                                     "1e999999999",
                                     "1e-999999999",
                                     "0e0001234567",
                                     "0.000000000000000000001e0000000000001"};

    for (size_t i = 0; i < DD_ARRAY_LEN(ok); i++)
        parse(ok[i]);
}
END_TEST

START_TEST(test_tree)
{
    const dd_json_node_t *r = parse("{\"b\":[1,\"x\",{\"y\":true}],\"a\":-2.50,\"c\":null}");
    const dd_json_node_t *b, *a, *e;

    ck_assert_int_eq(r->type, DD_JSON_OBJECT);
    ck_assert_uint_eq(r->len, 3);
    ck_assert_uint_eq(r->skip, 8);
    /* document order: b, then its subtree, then a, then c */
    b = r + 1;
    ck_assert_int_eq(b->type, DD_JSON_ARRAY);
    ck_assert_uint_eq(b->name_len, 1);
    ck_assert_int_eq(b->name[0], 'b');
    ck_assert_uint_eq(b->len, 3);
    a = dd_json_next(b);
    ck_assert_int_eq(a->type, DD_JSON_NUMBER);
    ck_assert_uint_eq(a->len, 5);
    ck_assert_int_eq(memcmp(a->str, "-2.50", 5), 0);
    ck_assert_uint_eq(a->at, 24); /* a member: where its name starts */
    ck_assert_int_eq(dd_json_next(a)->type, DD_JSON_NULL);
    /* lookups */
    ck_assert_ptr_eq(dd_json_member(doc, r, "a", 1), a);
    ck_assert_ptr_eq(dd_json_member(doc, r, "b", 1), b);
    ck_assert_ptr_null(dd_json_member(doc, r, "d", 1));
    ck_assert_ptr_null(dd_json_member(doc, r, "", 0));
    e = dd_json_index(b, 1);
    ck_assert_int_eq(e->type, DD_JSON_STRING);
    ck_assert_int_eq(e->str[0], 'x');
    ck_assert_int_eq(dd_json_index(b, 2)->type, DD_JSON_OBJECT);
    ck_assert_ptr_null(dd_json_index(b, 3));
    ck_assert_ptr_null(dd_json_index(r, 0));
    /* members in name order */
    ck_assert_int_eq(dd_json_member_sorted(doc, r, 0)->name[0], 'a');
    ck_assert_int_eq(dd_json_member_sorted(doc, r, 1)->name[0], 'b');
    ck_assert_int_eq(dd_json_member_sorted(doc, r, 2)->name[0], 'c');
}
END_TEST

/* Strings keep every code point with their length (NUL is refused). */
START_TEST(test_strings_exact)
{
    const dd_json_node_t *r =
        parse("[\"x\\u0001one\",\"x\\u0001two\",\"\\ud83d\\ude00\",\"\\u00E9\","
              "\"\xc3\xa9\",\"a\\nb\"]");
    const dd_json_node_t *s = r + 1;

    ck_assert_uint_eq(s->len, 5);
    ck_assert_int_eq(memcmp(s->str, "x\1one", 5), 0);
    s = dd_json_next(s);
    ck_assert_uint_eq(s->len, 5);
    ck_assert_int_eq(memcmp(s->str, "x\1two", 5), 0);
    s = dd_json_next(s);
    ck_assert_uint_eq(s->len, 4);
    ck_assert_int_eq(memcmp(s->str, "\xf0\x9f\x98\x80", 4), 0);
    s = dd_json_next(s);
    ck_assert_uint_eq(s->len, 2);
    ck_assert_int_eq(memcmp(s->str, "\xc3\xa9", 2), 0);
    s = dd_json_next(s);
    ck_assert_uint_eq(s->len, 2);
    ck_assert_int_eq(memcmp(s->str, "\xc3\xa9", 2), 0);
    s = dd_json_next(s);
    ck_assert_uint_eq(s->len, 3);
    ck_assert_int_eq(memcmp(s->str, "a\nb", 3), 0);
    /* names too */
    r = parse("{\"k\\u0001\":1,\"k\":2}");
    ck_assert_int_eq(dd_json_member_sorted(doc, r, 0)->name_len, 1);
    ck_assert_int_eq(dd_json_member_sorted(doc, r, 1)->name_len, 2);
    ck_assert_ptr_nonnull(dd_json_member(doc, r, "k\1", 2));
}
END_TEST

/* The payload's non-JSON attack cases and their kin, each with its reason. */
START_TEST(test_refuses_with_reason)
{
    static const char *const cases[][2] = {
        {"{\"id\":\"a\tb\"}", "raw control character 0x09 in a string at byte 8"},
        {"{\"id\":\"a\nb\"}", "raw control character 0x0a in a string at byte 8"},
        {"{\"id\":\"a\\u0001\x01\"}", "raw control character 0x01 in a string at byte 14"},
        {"{\"id\":007}", "leading zero in a number at byte 6"},
        {"-01", "leading zero in a number at byte 0"},
        {"{\"id\":7.}", "no digit after '.' in a number at byte 6"},
        {"{\"id\":.5}", "a number cannot start with '.' at byte 6"},
        {"{\"id\":+1}", "a number cannot start with '+' at byte 6"},
        {"-", "no digit after '-' in a number at byte 0"},
        {"1e", "no digit in the exponent of a number at byte 0"},
        {"1e+", "no digit in the exponent of a number at byte 0"},
        {"\xef\xbb\xbf{\"id\":1}", "byte-order mark (not allowed before JSON text) at byte 0"},
        {"{\"id\":1}}", "trailing data after the JSON value at byte 8"},
        {"{\"id\":1} x", "trailing data after the JSON value at byte 9"},
        {"1 2", "trailing data after the JSON value at byte 2"},
        {"\"\\x\"", "invalid escape \\x in a string at byte 1"},
        {"\"\\'\"", "invalid escape \\' in a string at byte 1"},
        {"\"\\u12\"", "invalid \\u escape (expected 4 hex digits) at byte 1"},
        {"\"\\ud800\"", "lone high surrogate \\ud800 in a \\u escape at byte 1"},
        {"\"\\ud800\\u0041\"", "lone high surrogate \\ud800 in a \\u escape at byte 1"},
        {"\"\\udbff\\ud800\"", "lone high surrogate \\udbff in a \\u escape at byte 1"},
        {"\"\\udc00\\ud800\"", "lone low surrogate \\udc00 in a \\u escape at byte 1"},
        {"\"ab\\ude00\"", "lone low surrogate \\ude00 in a \\u escape at byte 3"},
        {"{\"id\":1,\"id\":2}", "duplicate member name \"id\" (first at byte 1) at byte 8"},
        {"{\"a\":{\"b\":1,\"c\":2,\"b\":3}}",
         "duplicate member name \"b\" (first at byte 6) at byte 18"},
        {"{\"\\u0061\":1,\"a\":2}", "duplicate member name \"a\" (first at byte 1) at byte 12"},
        {"{\"\\u0001\":1,\"\\u0001\":2}", "duplicate member name (first at byte 1) at byte 12"},
        /* NUL: cJSON, which builds the handlers' tree, would end the string there */
        {"{\"order_no\":\"o1\\u0000dup\"}", "NUL (\\u0000) in a string at byte 15"},
        {"{\"order_no\\u0000\":\"o1\"}", "NUL (\\u0000) in a member name at byte 10"},
        {"\"\\u0000\"", "NUL (\\u0000) in a string at byte 1"},
        {"{\"merchant_id\":\"m1\",\"order_no\":\"x\\u0000one\"}",
         "NUL (\\u0000) in a string at byte 33"}, /* docs/KEYS.md's vector */
        {"{\"a\":[{\"b\":\"\\n\",\"c\\u00e9\\u0000\":1}]}",
         "NUL (\\u0000) in a member name at byte 24"},
        {"{\"a\":{\"\\u0000\":1}}", "NUL (\\u0000) in a member name at byte 7"},
        {"[\"\\ud83d\\ude00\\u0000\"]", "NUL (\\u0000) in a string at byte 14"},
        {"1e1000000000", "exponent out of range in a number (at most 9 digits) at byte 0"},
        {"1e-0001000000000", "exponent out of range in a number (at most 9 digits) at byte 0"},
        {"0e1234567890", "exponent out of range in a number (at most 9 digits) at byte 0"},
        {"10e999999999", "number out of range (its exponent, for an integer significand, is "
                         "beyond +-999999999) at byte 0"},
        {"0.01e-999999998", "number out of range (its exponent, for an integer significand, is "
                            "beyond +-999999999) at byte 0"},
        {"", "no JSON value (empty text) at byte 0"},
        {"   ", "unexpected end of text (expected a value) at byte 3"},
        {"{\"a\":1,}", "unexpected character '}' (expected a member name in double quotes) at "
                       "byte 7"},
        {"[1,]", "unexpected character ']' (expected a value) at byte 3"},
        {"[1 2]", "unexpected character '2' (expected ',' or ']') at byte 3"},
        {"[1 .5]", "unexpected character '.' (expected ',' or ']') at byte 3"},
        {"{\"a\" 1}", "unexpected character '1' (expected ':' after a member name) at byte 5"},
        {"{\"a\":1", "unexpected end of text (expected ',' or '}') at byte 6"},
        {"{a:1}", "unexpected character 'a' (expected a member name in double quotes) at byte 1"},
        {"\"abc", "unterminated string at byte 0"},
        {"\"ab\\", "unterminated string at byte 0"},
        {"tru", "unexpected character 't' (expected a value) at byte 0"},
        {"nul", "unexpected character 'n' (expected a value) at byte 0"},
        {"NaN", "unexpected character 'N' (expected a value) at byte 0"},
        {"'a'", "unexpected character ''' (expected a value) at byte 0"},
        {"\xc3\xa9", "unexpected byte 0xc3 (expected a value) at byte 0"},
        {"\"\xff\"", "invalid UTF-8 at byte 1"},
        {"\"\xed\xa0\x80\"", "invalid UTF-8 at byte 1"},
        {"[\"ok\",\"\xc0\x80\"]", "invalid UTF-8 at byte 7"},
    };

    for (size_t i = 0; i < DD_ARRAY_LEN(cases); i++)
        ck_assert_str_eq(refuse(cases[i][0]), cases[i][1]);
    /* a raw NUL byte is a control character too, in a string or outside */
    ck_assert_str_eq(refuse_len("\"a\0\"", 4), "raw control character 0x00 in a string at byte 2");
    ck_assert_str_eq(refuse_len("1\0", 2), "trailing data after the JSON value at byte 1");
    /* a refused parse leaves no document behind, and the next one works */
    parse("[1]");
    refuse("[1");
    ck_assert_ptr_null(dd_json_root(doc));
}
END_TEST

/* DD_JSON_MAX_DEPTH containers deep is fine; one more is refused. */
START_TEST(test_depth_limit)
{
    size_t n = DD_JSON_MAX_DEPTH;
    char *text = malloc(5 * (n + 1) + 1);
    char want[128];

    ck_assert_ptr_nonnull(text);
    memset(text, '[', n);
    memset(text + n, ']', n);
    text[2 * n] = '\0';
    ck_assert_uint_eq(parse(text)->skip, n);
    memset(text, '[', n + 1);
    memset(text + n + 1, ']', n + 1);
    text[2 * n + 2] = '\0';
    snprintf(want, sizeof(want), "nesting deeper than %d arrays and objects at byte %zu",
             DD_JSON_MAX_DEPTH, n);
    ck_assert_str_eq(refuse(text), want);
    /* objects count too */
    for (size_t i = 0; i <= n; i++)
        memcpy(text + 5 * i, "{\"a\":", 5);
    text[5 * (n + 1)] = '\0';
    snprintf(want, sizeof(want), "nesting deeper than %d arrays and objects at byte %zu",
             DD_JSON_MAX_DEPTH, 5 * n);
    ck_assert_str_eq(refuse(text), want);
    free(text);
}
END_TEST

/* Objects bigger than the insertion-sort size: merge sort order, lookups
 * and a duplicate far apart. */
START_TEST(test_big_object)
{
    char *text = malloc(64 * 1024);
    size_t len = 0;
    const dd_json_node_t *r;
    char name[16];

    len += (size_t)sprintf(text, "{");
    for (int i = 999; i >= 0; i--)
        len += (size_t)sprintf(text + len, "%s\"k%03d\":%d", i == 999 ? "" : ",", i, i);
    strcpy(text + len, "}");
    r = parse(text);
    ck_assert_uint_eq(r->len, 1000);
    for (uint32_t i = 0; i < 1000; i++) {
        const dd_json_node_t *m = dd_json_member_sorted(doc, r, i);

        snprintf(name, sizeof(name), "k%03u", i);
        ck_assert_int_eq(memcmp(m->name, name, 4), 0);
        ck_assert_ptr_eq(dd_json_member(doc, r, name, 4), m);
    }
    /* the same with k500 twice */
    strcpy(text + len, ",\"k500\":1}");
    ck_assert_ptr_nonnull(strstr(refuse(text), "duplicate member name \"k500\""));
    free(text);
}
END_TEST

START_TEST(test_number_parts)
{
    static const struct {
        const char *text, *digits;
        int neg;
        long long exp;
    } v[] = {
        {"0", "", 0, 0},
        {"-0", "", 0, 0},
        {"0.000", "", 0, 0},
        {"0e5", "", 0, 0},
        {"7", "7", 0, 0},
        {"7.0", "7", 0, 0},
        {"7e0", "7", 0, 0},
        {"0.7e1", "7", 0, 0},
        {"700", "7", 0, 2},
        {"-123.45", "12345", 1, -2},
        {"0.001", "1", 0, -3},
        {"1.5e-7", "15", 0, -8},
        {"10.50e2", "105", 0, 1},
        {"9007199254740993", "9007199254740993", 0, 0},
        {"18446744073709551616", "18446744073709551616", 0, 0},
        {"1e400", "1", 0, 400},
        {"-1E400", "1", 1, 400},
        {"00.1", NULL, 0, 0}, /* (not accepted JSON: only the split is tested) */
        {"0.0100", "1", 0, -2},
        {"100.001", "100001", 0, -3},
        {"1000.000e-3", "1", 0, 0},
    };

    for (size_t i = 0; i < DD_ARRAY_LEN(v); i++) {
        dd_json_num_t num;
        char digits[64];

        if (!v[i].digits) continue;
        dd_json_num_parts(v[i].text, strlen(v[i].text), &num);
        snprintf(digits, sizeof(digits), "%.*s%.*s", (int)num.n1, num.d1, (int)num.n2, num.d2);
        ck_assert_msg(!strcmp(digits, v[i].digits) && num.neg == v[i].neg && num.exp == v[i].exp,
                      "%s: digits %s neg %d exp %lld", v[i].text, digits, num.neg,
                      (long long)num.exp);
    }
}
END_TEST

/* One document is reused: a big text, then small ones, then big again. */
START_TEST(test_reuse)
{
    size_t n = 300000;
    char *text = malloc(2 * n + 3);

    text[0] = '[';
    for (size_t i = 0; i < n; i++)
        memcpy(text + 1 + 2 * i, "1,", 2);
    text[2 * n] = ']';
    text[2 * n + 1] = '\0';
    ck_assert_uint_eq(parse(text)->len, n);
    ck_assert_uint_eq(parse("[\"a\\n\"]")->len, 1);
    ck_assert_uint_eq(parse(text)->len, n);
    ck_assert_int_eq(parse("\"\\u00e9\"")->len, 2);
    free(text);
}
END_TEST

/*
 * UTF-8
 */

static int utf8(const char *s)
{
    return dd_utf8_valid(s, strlen(s));
}

START_TEST(test_utf8)
{
    static const char *good[] = {
        "",
        "abc",
        "\xc3\xa9",
        "\xe2\x82\xac",
        "\xf0\x9d\x84\x9e",
        "\xf4\x8f\xbf\xbf",
        "\xed\x9f\xbf",
        "\xee\x80\x80",
        "\xc2\x80",
        "\xdf\xbf",
        "\xe0\xa0\x80",
        "\xf0\x90\x80\x80",
        ("0123456789abcdef\xc3\xa9"
         "0123456789abcdef\xf0\x9f\x98\x80xyz"), /* one string: ASCII runs between */
    };
    static const char *bad[] = {
        "\xc0\x80",
        "\xc1\xbf",
        "\xe0\x80\x80",
        "\xe0\x9f\xbf",
        "\xf0\x80\x80\x80",
        "\xf0\x8f\xbf\xbf",
        "\xed\xa0\x80",
        "\xed\xbf\xbf",
        "\xf4\x90\x80\x80",
        "\xf5\x80\x80\x80",
        "\xff",
        "\xfe",
        "\x80",
        "\xbf",
        "\xe2\x82",
        "\xf0\x9f\x98",
        "\xc3",
        "\xc3\x41",
        "\xe2\x41\x82",
        "\xf0\x9f\x41\x80",
        "0123456789abcdef\x80",
        "01234567\xed\xa0\x80xyz",
        "abcdefgh12345678\xc3",
    };
    size_t i;

    for (i = 0; i < DD_ARRAY_LEN(good); i++)
        ck_assert_msg(utf8(good[i]) == 1, "good[%zu] rejected", i);
    for (i = 0; i < DD_ARRAY_LEN(bad); i++)
        ck_assert_msg(utf8(bad[i]) == 0, "bad[%zu] accepted", i);
    ck_assert_int_eq(dd_utf8_valid("a\0b", 3), 1);
    ck_assert_int_eq(dd_utf8_valid("\xc3\xa9", 1), 0);
    ck_assert_uint_eq(dd_utf8_check("0123456789abcdef\x80", 17), 16);
    ck_assert_uint_eq(dd_utf8_check("abc", 3), 3);
}
END_TEST

/* An empty object as the first thing a fresh document holds (no member
 * array yet): no pointer arithmetic on NULL (UBSan's build checks). */
START_TEST(test_empty_object_first)
{
    dd_json_doc_t *fresh = dd_json_doc_new();

    ck_assert_int_eq(dd_json_parse(fresh, "{}", 2, NULL, 0), 0);
    ck_assert_int_eq(dd_json_root(fresh)->type, DD_JSON_OBJECT);
    ck_assert_uint_eq(dd_json_root(fresh)->len, 0);
    dd_json_doc_destroy(fresh);
}
END_TEST

static Suite *json_suite(void)
{
    Suite *s = suite_create("json");
    TCase *tc = tcase_create("json");

    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_accepts_rfc8259);
    tcase_add_test(tc, test_tree);
    tcase_add_test(tc, test_strings_exact);
    tcase_add_test(tc, test_refuses_with_reason);
    tcase_add_test(tc, test_depth_limit);
    tcase_add_test(tc, test_big_object);
    tcase_add_test(tc, test_number_parts);
    tcase_add_test(tc, test_reuse);
    tcase_add_test(tc, test_empty_object_first);
    tcase_add_test(tc, test_utf8);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return dd_check_run(json_suite());
}
