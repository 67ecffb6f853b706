/*
 * Unit tests for dd_canon: canonical numbers (exact decimal values, equal
 * values one text, different values different texts) and canonical JSON
 * (name order, escapes, every code point kept), and that canonical text is
 * its own canonical form. No services needed.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dd_canon.h"
#include "dd_common.h"
#include "dd_json.h"
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

/* The canonical text of a JSON text (malloc'd); checks it is a fixpoint. */
static char *canon_len(const char *text, size_t len, size_t *out_len)
{
    char err[256] = "", *out = NULL, *again = NULL;
    size_t n = 0, n2 = 0;

    ck_assert_msg(dd_json_parse(doc, text, len, err, sizeof(err)) == 0, "%s: %s", text, err);
    ck_assert_int_eq(dd_canon_text(doc, dd_json_root(doc), &out, &n), 0);
    ck_assert_msg(dd_json_parse(doc, out, n, err, sizeof(err)) == 0, "canonical %s: %s", out, err);
    ck_assert_int_eq(dd_canon_text(doc, dd_json_root(doc), &again, &n2), 0);
    ck_assert_msg(n == n2 && memcmp(out, again, n) == 0, "not a fixpoint: %s -> %s", out, again);
    free(again);
    if (out_len) *out_len = n;
    return out;
}

/* For short texts: the canonical form in a static buffer. */
static const char *canon(const char *text)
{
    static char buf[4096];
    char *out = canon_len(text, strlen(text), NULL);

    snprintf(buf, sizeof(buf), "%s", out);
    free(out);
    return buf;
}

START_TEST(test_numbers)
{
    static const char *const v[][2] = {
        /* zero, any spelling */
        {"0", "0"},
        {"-0", "0"},
        {"0.0", "0"},
        {"0e5", "0"},
        {"-0.000E-7", "0"},
        /* integers: every digit, trailing zeros up to 32 */
        {"7", "7"},
        {"7.0", "7"},
        {"7e0", "7"},
        {"0.7e1", "7"},
        {"70e-1", "7"},
        {"700E-2", "7"},
        {"-7", "-7"},
        {"2.50e1", "25"},
        {"123.456e5", "12345600"},
        {"9007199254740992", "9007199254740992"},
        {"9007199254740993", "9007199254740993"},
        {"18446744073709551616", "18446744073709551616"},
        {"-9223372036854775809", "-9223372036854775809"},
        {"12345678901234567890123456789012345678901234567890",
         "12345678901234567890123456789012345678901234567890"},
        {"1e32", "100000000000000000000000000000000"},
        {"100000000000000000000000000000000", "100000000000000000000000000000000"},
        {"1e33", "1e33"},
        {"10e32", "1e33"},
        {"1000000000000000000000000000000000", "1e33"},
        {"1200000000000000000000000000000000000", "12e35"},
        /* decimals down to 10^-32 */
        {"1.5", "1.5"},
        {"1.50", "1.5"},
        {"-123.45", "-123.45"},
        {"0.001", "0.001"},
        {"1e-3", "0.001"},
        {"1.5e-7", "0.00000015"},
        {"0.30000000000000004", "0.30000000000000004"},
        {"1e-32", "0.00000000000000000000000000000001"},
        {"0.1e-31", "0.00000000000000000000000000000001"},
        {"123e-32", "0.00000000000000000000000000000123"},
        {"1.2345678901234567890123456789012", "1.2345678901234567890123456789012"},
        {"1.23456789012345678901234567890123", "1.23456789012345678901234567890123"},
        {"1.234567890123456789012345678901234", "1234567890123456789012345678901234e-33"},
        /* the rest with an exponent */
        {"1e-33", "1e-33"},
        {"123e-34", "123e-34"},
        {"12.5e-40", "125e-41"},
        {"15e-301", "15e-301"},
        {"1.5e-300", "15e-301"},
        {"1e400", "1e400"},
        {"1E+400", "1e400"},
        {"10e399", "1e400"},
        {"-1e400", "-1e400"},
        {"1e999999999", "1e999999999"},
        {"-1e-999999999", "-1e-999999999"},
        {"0.0000000000000000000000000000000000000000001", "1e-43"},
    };

    for (size_t i = 0; i < DD_ARRAY_LEN(v); i++)
        ck_assert_msg(!strcmp(canon(v[i][0]), v[i][1]), "%s -> %s, expected %s", v[i][0],
                      canon(v[i][0]), v[i][1]);
}
END_TEST

/* Different values never share a text (the attack pairs among them). */
START_TEST(test_numbers_distinct)
{
    static const char *const v[] = {"9007199254740992",
                                    "9007199254740993",
                                    "9007199254740994",
                                    "18446744073709551615",
                                    "18446744073709551616",
                                    "1e400",
                                    "-1e400",
                                    "1e401",
                                    "1e-400",
                                    "0.1",
                                    "0.10000000000000001",
                                    "1e33",
                                    "1e32",
                                    "10",
                                    "1",
                                    "-1",
                                    "0",
                                    "0.01",
                                    "1e-2"};
    char texts[DD_ARRAY_LEN(v)][128];

    for (size_t i = 0; i < DD_ARRAY_LEN(v); i++)
        snprintf(texts[i], sizeof(texts[i]), "%.127s", canon(v[i]));
    for (size_t i = 0; i < DD_ARRAY_LEN(v); i++)
        for (size_t j = i + 1; j < DD_ARRAY_LEN(v); j++) {
            int same_value = (!strcmp(v[i], "0.01") && !strcmp(v[j], "1e-2"));

            ck_assert_msg((strcmp(texts[i], texts[j]) == 0) == same_value, "%s and %s: %s / %s",
                          v[i], v[j], texts[i], texts[j]);
        }
}
END_TEST

START_TEST(test_json_basic)
{
    ck_assert_str_eq(canon("{}"), "{}");
    ck_assert_str_eq(canon(" [ ] "), "[]");
    ck_assert_str_eq(canon("{ \"b\" : 1,\n \"a\" : [1, 2.0, {\"d\":null, \"c\":true}] }"),
                     "{\"a\":[1,2,{\"c\":true,\"d\":null}],\"b\":1}");
    ck_assert_str_eq(canon("{\"z\":{\"y\":{\"x\":[false,{\"b\":1,\"a\":2}]}},\"a\":\"\"}"),
                     "{\"a\":\"\",\"z\":{\"y\":{\"x\":[false,{\"a\":2,\"b\":1}]}}}");
    /* bytewise name order: "" < "B" < "a" < "aa" < "b" < "é" */
    ck_assert_str_eq(canon("{\"b\":1,\"B\":2,\"\xc3\xa9\":3,\"a\":4,\"aa\":5,\"\":6}"),
                     "{\"\":6,\"B\":2,\"a\":4,\"aa\":5,\"b\":1,\"\xc3\xa9\":3}");
    /* a name with a control byte sorts after its prefix */
    ck_assert_str_eq(canon("{\"a\\u0001\":1,\"a\":2,\"a\\u0002\":3}"),
                     "{\"a\":2,\"a\\u0001\":1,\"a\\u0002\":3}");
    ck_assert_str_eq(canon("\"top\""), "\"top\"");
    ck_assert_str_eq(canon("null"), "null");
    ck_assert_str_eq(canon("[true,false,null,-0,1E2]"), "[true,false,null,0,100]");
}
END_TEST

START_TEST(test_json_strings)
{
    ck_assert_str_eq(canon("[\"\\u00e9\",\"\xc3\xa9\"]"), "[\"\xc3\xa9\",\"\xc3\xa9\"]");
    ck_assert_str_eq(canon("[\"\\ud834\\udd1e\"]"), "[\"\xf0\x9d\x84\x9e\"]");
    ck_assert_str_eq(canon("[\"\\/\\\"\\\\\"]"), "[\"/\\\"\\\\\"]");
    ck_assert_str_eq(canon("[\"\\b\\f\\n\\r\\t\\u0001\\u001F\\u007f\"]"),
                     "[\"\\b\\f\\n\\r\\t\\u0001\\u001f\x7f\"]");
    ck_assert_str_eq(canon("{\"\\u0041\\n\":1}"), "{\"A\\n\":1}");
    /* a control byte is a code point like any other (NUL is refused) */
    ck_assert_str_eq(canon("[\"x\\u0001one\",\"x\\u0001two\"]"),
                     "[\"x\\u0001one\",\"x\\u0001two\"]");
}
END_TEST

/* Every code point below 0x80 but NUL (refused) and a few above, in a
 * string and as a name: controls, '"' and '\\' escaped, everything else raw. */
START_TEST(test_json_all_code_points)
{
    static const char hex[] = "0123456789abcdef";
    char in[2048], want[2048], *out;
    size_t i = 0, w = 0;
    const char *high = "\xc2\x80\xdf\xbf\xe0\xa0\x80\xef\xbf\xbf\xf0\x90\x80\x80\xf4\x8f\xbf\xbf";

    for (int pass = 0; pass < 2; pass++) {
        in[i++] = pass ? ':' : '{';
        want[w++] = pass ? ':' : '{';
        in[i++] = want[w++] = '"';
        for (int c = 1; c < 0x80; c++) {
            const char *short_esc = c ? strchr("\"\\\b\f\n\r\t", c) : NULL;

            if (c < 0x20 || c == '"' || c == '\\')
                i += (size_t)sprintf(in + i, "\\u%04x", c);
            else
                in[i++] = (char)c;
            if (short_esc) {
                want[w++] = '\\';
                want[w++] = "\"\\bfnrt"[short_esc - "\"\\\b\f\n\r\t"];
            } else if (c < 0x20) {
                w += (size_t)sprintf(want + w, "\\u00%c%c", hex[c >> 4], hex[c & 15]);
            } else {
                want[w++] = (char)c;
            }
        }
        i += (size_t)sprintf(in + i, "%s\"", high);
        w += (size_t)sprintf(want + w, "%s\"", high);
    }
    in[i++] = want[w++] = '}';
    in[i] = want[w] = '\0';
    out = canon_len(in, i, NULL);
    ck_assert_str_eq(out, want);
    free(out);
}
END_TEST

/* An object far bigger than the insertion-sort size, names reversed. */
START_TEST(test_json_big_object)
{
    char *in = malloc(64 * 1024), *want = malloc(64 * 1024), *out;
    size_t in_len = 0, want_len = 0;
    int i;

    in_len += (size_t)sprintf(in, "{");
    for (i = 599; i >= 0; i--)
        in_len += (size_t)sprintf(in + in_len, "%s\"k%03d\" : %d.0", i == 599 ? "" : ", ", i, i);
    strcpy(in + in_len, "}");
    want_len += (size_t)sprintf(want, "{");
    for (i = 0; i < 600; i++)
        want_len += (size_t)sprintf(want + want_len, "%s\"k%03d\":%d", i ? "," : "", i, i);
    strcpy(want + want_len, "}");
    out = canon_len(in, strlen(in), NULL);
    ck_assert_str_eq(out, want);
    free(out);
    free(in);
    free(want);
}
END_TEST

/* The deepest accepted document canonicalises (bounded recursion). */
START_TEST(test_json_depth)
{
    size_t n = DD_JSON_MAX_DEPTH;
    char *text = malloc(2 * n + 1), *out;

    ck_assert_ptr_nonnull(text);
    memset(text, '[', n);
    memset(text + n, ']', n);
    text[2 * n] = '\0';
    out = canon_len(text, 2 * n, NULL);
    ck_assert_str_eq(out, text);
    free(out);
    free(text);
}
END_TEST

/* A writer that drains into a tiny buffer gives the same text as the heap
 * writer, pieces crossing every boundary. */
static char drained[8192];
static size_t drained_len;

static int drain(dd_canon_w_t *w, const void *p, size_t n)
{
    ck_assert_uint_le(drained_len + n, sizeof(drained));
    memcpy(drained + drained_len, p, n);
    drained_len += n;
    return 0;
}

START_TEST(test_writer_drain)
{
    const char *text = "{\"b\":[\"0123456789abcdefghij\\n\",1.5e-7,123456789012345678901234567890],"
                       "\"a\":{\"x\\u0001\":\"\\\"\\\\\",\"y\":[true,false,null]}}";
    char small[3], *heap;
    dd_canon_w_t w = {small, 0, sizeof(small), drain, NULL, 0};
    size_t n;

    heap = canon_len(text, strlen(text), &n);
    ck_assert_int_eq(dd_json_parse(doc, text, strlen(text), NULL, 0), 0);
    drained_len = 0;
    dd_canon_value(&w, doc, dd_json_root(doc));
    drain(&w, w.buf, w.len);
    ck_assert_int_eq(w.err, 0);
    ck_assert_uint_eq(drained_len, n);
    ck_assert_int_eq(memcmp(drained, heap, n), 0);
    free(heap);
}
END_TEST

static Suite *canon_suite(void)
{
    Suite *s = suite_create("canon");
    TCase *tc = tcase_create("canon");

    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_numbers);
    tcase_add_test(tc, test_numbers_distinct);
    tcase_add_test(tc, test_json_basic);
    tcase_add_test(tc, test_json_strings);
    tcase_add_test(tc, test_json_all_code_points);
    tcase_add_test(tc, test_json_big_object);
    tcase_add_test(tc, test_json_depth);
    tcase_add_test(tc, test_writer_drain);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return dd_check_run(canon_suite());
}
