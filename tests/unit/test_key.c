/*
 * Unit tests for dd_key: template compile errors, key rendering from the
 * strict document (exact numbers, strings with NUL), value escaping and its
 * injectivity, missing values and the 255-byte limit. No services needed.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dd_common.h"
#include "dd_json.h"
#include "dd_key.h"
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

/* Compiles a template that must fail; returns the error text. */
static const char *tmpl_err(const char *text)
{
    static char errstr[256];
    dd_key_tmpl_t *tmpl = NULL;
    int rc;

    errstr[0] = '\0';
    rc = dd_key_tmpl_new(&tmpl, text, errstr, sizeof(errstr));
    ck_assert_msg(rc < 0, "template \"%s\" compiled", text);
    ck_assert_ptr_null(tmpl);
    return errstr;
}

static dd_key_tmpl_t *tmpl_ok(const char *text)
{
    char errstr[256] = "";
    dd_key_tmpl_t *tmpl = NULL;

    ck_assert_msg(dd_key_tmpl_new(&tmpl, text, errstr, sizeof(errstr)) == 0, "%s: %s", text,
                  errstr);
    ck_assert_ptr_nonnull(tmpl);
    return tmpl;
}

static void parse(const char *text)
{
    char err[256] = "";

    ck_assert_msg(dd_json_parse(doc, text, strlen(text), err, sizeof(err)) == 0,
                  "bad test JSON: %s: %s", text, err);
}

/* Renders with tmpl over json_text; the key or the why text goes to buf. */
static dd_key_status_t render_with(const dd_key_tmpl_t *tmpl, const char *json_text, char *buf,
                                   size_t buf_size)
{
    char out[DD_KEY_MAX + 1], why[256] = "";
    size_t out_len = 99;
    dd_key_status_t st;

    parse(json_text);
    st = dd_key_render(tmpl, doc, out, &out_len, why, sizeof(why));
    ck_assert_uint_eq(out_len, strlen(out)); /* no NUL inside a key */
    snprintf(buf, buf_size, "%s", st == DD_KEY_OK ? out : why);
    return st;
}

static dd_key_status_t render(const char *tmpl_text, const char *json_text, char *buf,
                              size_t buf_size)
{
    dd_key_tmpl_t *tmpl = tmpl_ok(tmpl_text);
    dd_key_status_t st = render_with(tmpl, json_text, buf, buf_size);

    dd_key_tmpl_destroy(tmpl);
    return st;
}

static void assert_render(const char *tmpl_text, const char *json_text, const char *want)
{
    char buf[512];

    ck_assert_int_eq(render(tmpl_text, json_text, buf, sizeof(buf)), DD_KEY_OK);
    ck_assert_str_eq(buf, want);
}

static void assert_missing(const char *tmpl_text, const char *json_text, const char *why)
{
    char buf[512];

    ck_assert_int_eq(render(tmpl_text, json_text, buf, sizeof(buf)), DD_KEY_MISSING);
    ck_assert_str_eq(buf, why);
}

/* Two payloads that must get different keys under one template. */
static void assert_keys_differ(const char *tmpl_text, const char *a, const char *b)
{
    char ka[512], kb[512];

    ck_assert_int_eq(render(tmpl_text, a, ka, sizeof(ka)), DD_KEY_OK);
    ck_assert_int_eq(render(tmpl_text, b, kb, sizeof(kb)), DD_KEY_OK);
    ck_assert_msg(strcmp(ka, kb) != 0, "%s and %s both keyed %s", a, b, ka);
}

/*
 * Templates
 */

START_TEST(test_tmpl_errors)
{
    char lit[300];

    ck_assert_str_eq(tmpl_err(""), "key template is empty");
    ck_assert_str_eq(tmpl_err("pay:${a"), "unclosed ${ at column 5");
    ck_assert_str_eq(tmpl_err("x${}"), "empty path at column 4");
    ck_assert_str_eq(tmpl_err("${a..b}"), "empty field name at column 5");
    ck_assert_str_eq(tmpl_err("${a.}"), "empty field name at column 5");
    ck_assert_str_eq(tmpl_err("${.a}"), "empty field name at column 3");
    ck_assert_str_eq(tmpl_err("${a.[0]}"), "empty field name at column 5");
    ck_assert_str_eq(tmpl_err("k:${a[x]}"), "bad array index at column 6 (expected [N])");
    ck_assert_str_eq(tmpl_err("${a[]}"), "bad array index at column 4 (expected [N])");
    ck_assert_str_eq(tmpl_err("${a[01]}"), "bad array index at column 4 (expected [N])");
    ck_assert_str_eq(tmpl_err("${a[-1]}"), "bad array index at column 4 (expected [N])");
    ck_assert_str_eq(tmpl_err("${a[1}"), "bad array index at column 4 (expected [N])");
    ck_assert_str_eq(tmpl_err("${a[99999999999]}"), "bad array index at column 4 (expected [N])");
    ck_assert_str_eq(tmpl_err("${a b}"), "unexpected character ' ' in path at column 4");
    ck_assert_str_eq(tmpl_err("${a[0]b}"), "unexpected character 'b' in path at column 7");
    ck_assert_str_eq(tmpl_err("${a\x01}"), "unexpected byte 0x01 in path at column 4");
    ck_assert_str_eq(tmpl_err("a$b${x}"),
                     "lone '$' at column 2 (write $$ for a literal '$', ${path} for a field)");
    ck_assert_str_eq(tmpl_err("${x}$"),
                     "lone '$' at column 5 (write $$ for a literal '$', ${path} for a field)");
    ck_assert_str_eq(tmpl_err("constant"), "key template has no ${path} placeholder: every "
                                           "message would get the same key");
    ck_assert_str_eq(tmpl_err("$${a}"), "key template has no ${path} placeholder: every "
                                        "message would get the same key");
    memset(lit, 'x', 256);
    strcpy(lit + 256, "${a}");
    ck_assert_str_eq(tmpl_err(lit), "literal text is 256 bytes, keys are at most 255");
    dd_key_tmpl_destroy(NULL);
}
END_TEST

/* The two new rules: adjacent placeholders, '%' in the literal text. */
START_TEST(test_tmpl_ambiguity_errors)
{
    const char *adjacent = "${ at column 5 follows another placeholder with nothing between "
                           "them: their values could not be told apart (put a separator such "
                           "as ':' between them)";

    ck_assert_str_eq(tmpl_err("${a}${b}"), adjacent);
    ck_assert_str_eq(tmpl_err("k:${a}${b}:x"), "${ at column 7 follows another placeholder with "
                                               "nothing between them: their values could not "
                                               "be told apart (put a separator such as ':' "
                                               "between them)");
    ck_assert_str_eq(tmpl_err("100%:${a}"), "'%' at column 4: dedupd escapes bytes of key "
                                            "values as %XX, so the template's literal text "
                                            "cannot contain '%'");
    ck_assert_str_eq(tmpl_err("${a}%${b}"), "'%' at column 5: dedupd escapes bytes of key "
                                            "values as %XX, so the template's literal text "
                                            "cannot contain '%'");
    ck_assert_str_eq(tmpl_err("k\t${a}"), "control byte 0x09 at column 2: keys hold no control "
                                          "bytes");
    ck_assert_str_eq(tmpl_err("${a}\x7f${b}"), "control byte 0x7f at column 5: keys hold no "
                                               "control bytes");
    /* $$ between placeholders is a separator */
    dd_key_tmpl_destroy(tmpl_ok("${a}$$${b}"));
}
END_TEST

/*
 * Rendering
 */

START_TEST(test_render_paths)
{
    const char *d = "{\"merchant_id\":\"m1\",\"order_no\":42,\"a\":{\"b\":[{\"c\":\"x\"},"
                    "{\"c\":true,\"d\":false}]},\"f\":1.5,\"u\":\"\\u00e9\xe2\x9c\x93\","
                    "\"n-1_x\":{\"Y\":\"y\"}}";

    assert_render("pay:${merchant_id}:${order_no}", d, "pay:m1:42");
    assert_render("${a.b[0].c}|${a.b[1].c}|${a.b[1].d}", d, "x|true|false");
    assert_render("${f}/${u}", d, "1.5/\xc3\xa9\xe2\x9c\x93");
    assert_render("${n-1_x.Y}", d, "y");
    assert_render("cost$$:${order_no}$$", d, "cost$:42$");
    assert_render("${[1].id}", "[{\"id\":1},{\"id\":\"two\"}]", "two");
    assert_render("${a[0][1]}", "{\"a\":[[1,2]]}", "2");
    assert_render("${s}", "{\"s\":\"\"}", "");
}
END_TEST

/* Numbers render in canonical form: every digit, one text per value. */
START_TEST(test_render_numbers)
{
    assert_render("${n}", "{\"n\":42}", "42");
    assert_render("${n}", "{\"n\":42.0}", "42");
    assert_render("${n}", "{\"n\":1e3}", "1000");
    assert_render("${n}", "{\"n\":-7}", "-7");
    assert_render("${n}", "{\"n\":-0.0}", "0");
    assert_render("${n}", "{\"n\":9007199254740993}", "9007199254740993");
    assert_render("${n}", "{\"n\":18446744073709551616}", "18446744073709551616");
    assert_render("${n}", "{\"n\":1e20}", "100000000000000000000");
    assert_render("${n}", "{\"n\":0.1}", "0.1");
    assert_render("${n}", "{\"n\":-2.5}", "-2.5");
    assert_render("${n}", "{\"n\":1.5e-7}", "0.00000015");
    assert_render("${n}", "{\"n\":1e400}", "1e400");
    assert_render("${n}", "{\"n\":-1E+400}", "-1e400");
    /* 7, 7.0 and 7e0 are one value */
    assert_render("ev:${id}", "{\"id\":7}", "ev:7");
    assert_render("ev:${id}", "{\"id\":7.0}", "ev:7");
    assert_render("ev:${id}", "{\"id\":7e0}", "ev:7");
    /* the string "7" and the number 7 are one business id, on purpose */
    assert_render("ev:${id}", "{\"id\":\"7\"}", "ev:7");
    assert_render("ev:${id}", "{\"id\":true}", "ev:true");
}
END_TEST

/* The attack cases: different payments, different keys. */
START_TEST(test_render_attacks)
{
    assert_render("ev:${id}", "{\"id\":9007199254740993}", "ev:9007199254740993");
    assert_keys_differ("ev:${id}", "{\"id\":9007199254740993}", "{\"id\":9007199254740992}");
    assert_keys_differ("ev:${id}", "{\"id\":18446744073709551617}",
                       "{\"id\":18446744073709551616}");
    assert_render("ev:${id}", "{\"id\":\"x\\u0001one\"}", "ev:x%01one");
    assert_keys_differ("ev:${id}", "{\"id\":\"x\\u0001one\"}", "{\"id\":\"x\\u0001two\"}");
    assert_render("pay:${merchant_id}:${order_no}", "{\"merchant_id\":\"m1\",\"order_no\":\"A:B\"}",
                  "pay:m1:A%3AB");
    assert_render("pay:${merchant_id}:${order_no}", "{\"merchant_id\":\"m1:A\",\"order_no\":\"B\"}",
                  "pay:m1%3AA:B");
    assert_keys_differ("ev:${id}", "{\"id\":1e400}", "{\"id\":-1e400}");
}
END_TEST

/* The key vectors of docs/KEYS.md. */
START_TEST(test_render_doc_vectors)
{
    const char *t = "pay:${merchant_id}:${order_no}";

    assert_render(t, "{\"merchant_id\":\"m001\",\"order_no\":9007199254740992}",
                  "pay:m001:9007199254740992");
    assert_render(t, "{\"merchant_id\":\"m1\",\"order_no\":\"x\\u0001one\"}", "pay:m1:x%01one");
    assert_render(t, "{\"merchant_id\":\"100%\",\"order_no\":\"a\\tb\"}", "pay:100%25:a%09b");
    assert_render(t, "{\"order_no\":7.0,\"merchant_id\":\"m1\"}", "pay:m1:7");
    assert_render(t, "{\"merchant_id\":\"m1\",\"order_no\":\"7\"}", "pay:m1:7");
    assert_render(t, "{\"merchant_id\":\"m1\",\"order_no\":1e400}", "pay:m1:1e400");
    assert_render(t, "{\"merchant_id\":\"\xc3\xa9\",\"order_no\":-0.5E-40}", "pay:\xc3\xa9:-5e-41");
    assert_missing(t, "{\"merchant_id\":\"m1\",\"order_no\":null}", "field order_no is null");
    assert_render("ev-${a}.${b}", "{\"a\":-1.5,\"b\":\"x.y-z\"}", "ev--1%2E5.x%2Ey-z");
    assert_render("ev-${a}.${b}", "{\"a\":true,\"b\":18446744073709551616}",
                  "ev-true.18446744073709551616");
}
END_TEST

/* Which bytes a value escapes: '%', controls, DEL, and the bytes of the
 * literal text after the first placeholder; never the prefix's. */
START_TEST(test_render_escapes)
{
    const char *t = "pay:${m}:${o}";

    assert_render(t, "{\"m\":\"pay\",\"o\":\"100%\"}", "pay:pay:100%25");
    assert_render(t, "{\"m\":\"a\\nb\\u0001\\u001f\\u007f\",\"o\":\"\\t\"}",
                  "pay:a%0Ab%01%1F%7F:%09");
    assert_render(t, "{\"m\":\"%3A\",\"o\":\":\"}", "pay:%253A:%3A");
    /* letters of a separator after a placeholder are escaped, in every type */
    assert_render("${a}x${b}", "{\"a\":\"box\",\"b\":\"xx\"}", "bo%78x%78%78");
    assert_render("${a}t${b}", "{\"a\":true,\"b\":\"t\"}", "%74ruet%74");
    assert_render("${a}-${b}", "{\"a\":-5,\"b\":\"a-b\"}", "%2D5-a%2Db");
    assert_render("${a}.${b}", "{\"a\":1.5,\"b\":2}", "1%2E5.2");
    assert_render("${a}e${b}", "{\"a\":1e400,\"b\":\"e\"}", "1%65400e%65");
    /* a trailing literal counts too; the prefix never does */
    assert_render("k:${a}!", "{\"a\":\"k:!\"}", "k:k:%21!");
    /* multi-byte separators escape every one of their bytes */
    assert_render("${a}\xc3\xa9${b}", "{\"a\":\"\xc3\xa9\",\"b\":\"\xc3\xa8\"}",
                  "%C3%A9\xc3\xa9%C3\xa8");
    /* '$' as a separator */
    assert_render("${a}$$${b}", "{\"a\":\"$\",\"b\":1}", "%24$1");
}
END_TEST

static int key_cmp(const void *a, const void *b)
{
    return strcmp(a, b);
}

/* Brute force: over an alphabet of separators, escape bytes and hex digits,
 * no two value triples give one key. */
START_TEST(test_render_injective)
{
    static const char alpha[] = {':', 'A', '%', '3', 'x', '\n', '\1'};
    enum { NA = sizeof(alpha), NS = 1 + NA + NA * NA };
    char strs[NS][3];
    size_t slen[NS], n = 0, cnt = 0;
    dd_key_tmpl_t *tmpl = tmpl_ok("k${a}:${b}A${c}");
    char(*keys)[64] = malloc((size_t)NS * NS * NS * 64);

    slen[n++] = 0;
    for (size_t i = 0; i < NA; i++) {
        strs[n][0] = alpha[i];
        slen[n++] = 1;
    }
    for (size_t i = 0; i < NA; i++)
        for (size_t j = 0; j < NA; j++) {
            strs[n][0] = alpha[i];
            strs[n][1] = alpha[j];
            slen[n++] = 2;
        }
    for (size_t a = 0; a < NS; a++)
        for (size_t b = 0; b < NS; b++)
            for (size_t c = 0; c < NS; c++) {
                char json[128], out[DD_KEY_MAX + 1], why[128];
                size_t len = 0, out_len;
                size_t pick[3] = {a, b, c};

                len += (size_t)sprintf(json, "{");
                for (int f = 0; f < 3; f++) {
                    len += (size_t)sprintf(json + len, "%s\"%c\":\"", f ? "," : "", 'a' + f);
                    for (size_t k = 0; k < slen[pick[f]]; k++)
                        len +=
                            (size_t)sprintf(json + len, "\\u%04x", (unsigned char)strs[pick[f]][k]);
                    json[len++] = '"';
                }
                json[len++] = '}';
                ck_assert_int_eq(dd_json_parse(doc, json, len, NULL, 0), 0);
                ck_assert_int_eq(dd_key_render(tmpl, doc, out, &out_len, why, sizeof(why)),
                                 DD_KEY_OK);
                snprintf(keys[cnt++], 64, "%.63s", out);
            }
    qsort(keys, cnt, 64, key_cmp);
    for (size_t i = 1; i < cnt; i++)
        ck_assert_msg(strcmp(keys[i - 1], keys[i]) != 0, "two triples keyed %s", keys[i]);
    ck_assert_uint_eq(cnt, (size_t)NS * NS * NS);
    free(keys);
    dd_key_tmpl_destroy(tmpl);
}
END_TEST

START_TEST(test_render_missing)
{
    assert_missing("${order_no}", "{}", "field order_no is missing");
    assert_missing("${order_no}", "{\"order_no\":null}", "field order_no is null");
    assert_missing("${items}", "{\"items\":[1]}", "field items is an array");
    assert_missing("${o}", "{\"o\":{}}", "field o is an object");
    assert_missing("${a.x.y}", "{\"a\":{\"x\":\"s\"}}", "field a.x.y is missing (a.x is a string)");
    assert_missing("${a.b[5].c}", "{\"a\":{\"b\":[1,2]}}",
                   "field a.b[5].c is missing (a.b has 2 elements)");
    assert_missing("${a[0]}", "{\"a\":{\"0\":1}}", "field a[0] is missing (a is an object)");
    assert_missing("${a}", "[1]", "field a is missing (the payload is an array)");
    assert_missing("ok:${a}:${b}", "{\"a\":1}", "field b is missing");
    /* a member name with a control byte is not the path's name */
    assert_missing("${id}", "{\"id\\u0001\":1}", "field id is missing");
}
END_TEST

/* At most 255 bytes after escaping: exactly 255 fits, 256 does not. */
START_TEST(test_render_length)
{
    char json[1200], buf[512], val[600];
    dd_key_tmpl_t *tmpl = tmpl_ok("k:${s}");
    char out[DD_KEY_MAX + 1], why[128];
    size_t out_len;

    /* 2 + 250 + "%25" = 255 bytes */
    memset(val, 'x', 250);
    strcpy(val + 250, "%");
    snprintf(json, sizeof(json), "{\"s\":\"%s\"}", val);
    ck_assert_int_eq(render_with(tmpl, json, buf, sizeof(buf)), DD_KEY_OK);
    ck_assert_uint_eq(strlen(buf), 255);
    ck_assert_str_eq(buf + 252, "%25");

    /* one byte more: 256, too long; out keeps the first 255 */
    memset(val, 'x', 251);
    strcpy(val + 251, "%");
    snprintf(json, sizeof(json), "{\"s\":\"%s\"}", val);
    parse(json);
    ck_assert_int_eq(dd_key_render(tmpl, doc, out, &out_len, why, sizeof(why)), DD_KEY_TOO_LONG);
    ck_assert_str_eq(why, "key is 256 bytes, at most 255");
    ck_assert_uint_eq(out_len, 255);
    ck_assert_uint_eq(strlen(out), 255);
    ck_assert_int_eq(memcmp(out, "k:xxx", 5), 0);

    /* 85 control bytes are 255 bytes of escapes, 86 are too many */
    {
        size_t len = strlen(strcpy(json, "{\"s\":\""));

        for (int i = 0; i < 86; i++, len += 6)
            memcpy(json + len, "\\u0001", 6);
        strcpy(json + len, "\"}");
        dd_key_tmpl_destroy(tmpl);
        tmpl = tmpl_ok("${s}");
        ck_assert_int_eq(render_with(tmpl, json, buf, sizeof(buf)), DD_KEY_TOO_LONG);
        ck_assert_str_eq(buf, "key is 258 bytes, at most 255");
        memcpy(json + len - 6, "\"}", 3);
        ck_assert_int_eq(render_with(tmpl, json, buf, sizeof(buf)), DD_KEY_OK);
        ck_assert_uint_eq(strlen(buf), 255);
    }
    dd_key_tmpl_destroy(tmpl);

    ck_assert_int_eq(render("${s}-${s}",
                            "{\"s\":\"" /* 150 x */
                            "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
                            "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
                            "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\"}",
                            buf, sizeof(buf)),
                     DD_KEY_TOO_LONG);
    ck_assert_str_eq(buf, "key is 301 bytes, at most 255");
    /* a number of 10,000 digits is counted, not stored */
    {
        char *big = malloc(10100);
        size_t len;

        ck_assert_ptr_nonnull(big);
        len = (size_t)sprintf(big, "{\"n\":");
        memset(big + len, '7', 10000);
        strcpy(big + len + 10000, "}");
        ck_assert_int_eq(render("n:${n}", big, buf, sizeof(buf)), DD_KEY_TOO_LONG);
        ck_assert_str_eq(buf, "key is 10002 bytes, at most 255");
        free(big);
    }
}
END_TEST

/* What a template is made of comes from its parsed form: "$${a}" is
 * literal text, not the field a; the text written back is the one
 * spelling the template was read from. */
START_TEST(test_tmpl_parts)
{
    dd_key_tmpl_t *key = tmpl_ok("pay$${merchant_id}:${order_no}:${a.b[2]}");
    dd_key_tmpl_t *m = tmpl_ok("${merchant_id}"), *o = tmpl_ok("${order_no}-${a.b[2]}");
    dd_key_tmpl_t *near = tmpl_ok("${a.b[20]}"), *prefix = tmpl_ok("${a.b}");
    char text[64];

    ck_assert_int_eq(dd_key_tmpl_path_cnt(key), 2);
    ck_assert_str_eq(dd_key_tmpl_path(key, 0)->text, "order_no");
    ck_assert_str_eq(dd_key_tmpl_path(key, 1)->text, "a.b[2]");
    ck_assert_ptr_null(dd_key_tmpl_path(key, 2));
    ck_assert_str_eq(dd_key_tmpl_outside(m, key)->text, "merchant_id");
    ck_assert_ptr_null(dd_key_tmpl_outside(o, key));
    ck_assert_str_eq(dd_key_tmpl_outside(near, key)->text, "a.b[20]");
    ck_assert_str_eq(dd_key_tmpl_outside(prefix, key)->text, "a.b");
    ck_assert_uint_eq(dd_key_tmpl_text(key, text, sizeof(text)), 40);
    ck_assert_str_eq(text, "pay$${merchant_id}:${order_no}:${a.b[2]}");
    ck_assert_uint_eq(dd_key_tmpl_text(key, text, 8), 40); /* cut, as snprintf */
    ck_assert_str_eq(text, "pay$${m");
    dd_key_tmpl_destroy(key);
    dd_key_tmpl_destroy(m);
    dd_key_tmpl_destroy(o);
    dd_key_tmpl_destroy(near);
    dd_key_tmpl_destroy(prefix);
}
END_TEST

static Suite *key_suite(void)
{
    Suite *s = suite_create("key");
    TCase *tc = tcase_create("key");

    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_tmpl_errors);
    tcase_add_test(tc, test_tmpl_ambiguity_errors);
    tcase_add_test(tc, test_render_paths);
    tcase_add_test(tc, test_render_numbers);
    tcase_add_test(tc, test_render_attacks);
    tcase_add_test(tc, test_render_doc_vectors);
    tcase_add_test(tc, test_render_escapes);
    tcase_add_test(tc, test_render_injective);
    tcase_add_test(tc, test_render_missing);
    tcase_add_test(tc, test_render_length);
    tcase_add_test(tc, test_tmpl_parts);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return dd_check_run(key_suite());
}
