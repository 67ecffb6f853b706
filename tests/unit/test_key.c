/*
 * Unit tests for dd_key: template compile errors, key rendering, canonical
 * JSON, request hashes (whole payload and dedup.hash specs) and UTF-8
 * validation. No services needed.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>

#include "dd_common.h"
#include "dd_key.h"

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

static cJSON *parse(const char *text)
{
    cJSON *json = cJSON_Parse(text);

    ck_assert_msg(json != NULL, "bad test JSON: %s", text);
    return json;
}

/* Renders tmpl_text over json_text; the key or the why text goes to buf. */
static dd_key_status_t render(const char *tmpl_text, const char *json_text, char *buf,
                              size_t buf_size)
{
    dd_key_tmpl_t *tmpl = tmpl_ok(tmpl_text);
    cJSON *json = parse(json_text);
    char out[DD_KEY_MAX + 1], why[256] = "";
    size_t out_len = 99;
    dd_key_status_t st = dd_key_render(tmpl, json, out, &out_len, why, sizeof(why));

    ck_assert_uint_eq(out_len, strlen(out));
    snprintf(buf, buf_size, "%s", st == DD_KEY_OK ? out : why);
    cJSON_Delete(json);
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

static char *canon(const char *json_text)
{
    static char buf[4096];
    cJSON *json = parse(json_text);
    char *out = NULL;
    size_t len = 0;

    ck_assert_int_eq(dd_json_canonical(json, &out, &len), 0);
    ck_assert_uint_eq(len, strlen(out));
    snprintf(buf, sizeof(buf), "%s", out);
    free(out);
    cJSON_Delete(json);
    return buf;
}

static void hash_hex(const dd_hash_spec_t *spec, const char *json_text, char hex[65])
{
    unsigned char h[DD_HASH_LEN];
    cJSON *json = parse(json_text);

    ck_assert_int_eq(dd_key_hash(spec, json, h), 0);
    dd_key_hash_hex(h, hex);
    cJSON_Delete(json);
}

static void sha256_hex(const void *buf, size_t len, char hex[65])
{
    unsigned char h[DD_HASH_LEN];
    unsigned int h_len = 0;

    ck_assert(EVP_Digest(buf, len, h, &h_len, EVP_sha256(), NULL));
    dd_key_hash_hex(h, hex);
}

static dd_hash_spec_t *spec_ok(char *const *paths, int cnt)
{
    char errstr[256] = "";
    dd_hash_spec_t *spec = NULL;

    ck_assert_msg(dd_hash_spec_new(&spec, paths, cnt, errstr, sizeof(errstr)) == 0, "%s", errstr);
    return spec;
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

START_TEST(test_render_paths)
{
    const char *doc = "{\"merchant_id\":\"m1\",\"order_no\":42,\"a\":{\"b\":[{\"c\":\"x\"},"
                      "{\"c\":true,\"d\":false}]},\"f\":1.5,\"u\":\"\\u00e9\xe2\x9c\x93\","
                      "\"n-1_x\":{\"Y\":\"y\"}}";

    assert_render("pay:${merchant_id}:${order_no}", doc, "pay:m1:42");
    assert_render("${a.b[0].c}|${a.b[1].c}|${a.b[1].d}", doc, "x|true|false");
    assert_render("${f}:${u}", doc, "1.5:\xc3\xa9\xe2\x9c\x93");
    assert_render("${n-1_x.Y}", doc, "y");
    assert_render("cost$$:${order_no}$$", doc, "cost$:42$");
    assert_render("${[1].id}", "[{\"id\":1},{\"id\":\"two\"}]", "two");
    assert_render("${a[0][1]}", "{\"a\":[[1,2]]}", "2");
    /* first of duplicate members wins (cJSON lookup order) */
    assert_render("${a}", "{\"a\":1,\"a\":2}", "1");
    assert_render("${s}", "{\"s\":\"\"}", "");
}
END_TEST

START_TEST(test_render_numbers)
{
    assert_render("${n}", "{\"n\":42}", "42");
    assert_render("${n}", "{\"n\":42.0}", "42");
    assert_render("${n}", "{\"n\":1e3}", "1000");
    assert_render("${n}", "{\"n\":-7}", "-7");
    assert_render("${n}", "{\"n\":-0.0}", "0");
    assert_render("${n}", "{\"n\":9007199254740992}", "9007199254740992");
    assert_render("${n}", "{\"n\":-9007199254740992}", "-9007199254740992");
    assert_render("${n}", "{\"n\":1e20}", "1e+20");
    assert_render("${n}", "{\"n\":0.1}", "0.1");
    assert_render("${n}", "{\"n\":-2.5}", "-2.5");
    assert_render("${n}", "{\"n\":1.5e-7}", "1.5e-07");
}
END_TEST

START_TEST(test_render_missing)
{
    assert_missing("${order_no}", "{}", "field order_no is missing");
    assert_missing("${order_no}", "{\"order_no\":null}", "field order_no is null");
    assert_missing("${items}", "{\"items\":[1]}", "field items is an array");
    assert_missing("${o}", "{\"o\":{}}", "field o is an object");
    assert_missing("${n}", "{\"n\":1e999}", "field n is not a finite number");
    assert_missing("${a.x.y}", "{\"a\":{\"x\":\"s\"}}", "field a.x.y is missing (a.x is a string)");
    assert_missing("${a.b[5].c}", "{\"a\":{\"b\":[1,2]}}",
                   "field a.b[5].c is missing (a.b has 2 elements)");
    assert_missing("${a[0]}", "{\"a\":{\"0\":1}}", "field a[0] is missing (a is an object)");
    assert_missing("${a}", "[1]", "field a is missing (the payload is an array)");
    assert_missing("ok:${a}:${b}", "{\"a\":1}", "field b is missing");
}
END_TEST

START_TEST(test_render_length)
{
    char json[600], buf[512], want[300];
    dd_key_tmpl_t *tmpl = tmpl_ok("k:${s}");
    cJSON *doc;
    char out[DD_KEY_MAX + 1], why[128];
    size_t out_len;

    /* 2 + 253 = 255 bytes: fits exactly */
    memset(want, 'x', 253);
    want[253] = '\0';
    snprintf(json, sizeof(json), "{\"s\":\"%s\"}", want);
    ck_assert_int_eq(render("k:${s}", json, buf, sizeof(buf)), DD_KEY_OK);
    ck_assert_uint_eq(strlen(buf), 255);

    /* 256 bytes: too long, out keeps the first 255 */
    memset(want, 'x', 254);
    want[254] = '\0';
    snprintf(json, sizeof(json), "{\"s\":\"%s\"}", want);
    doc = parse(json);
    ck_assert_int_eq(dd_key_render(tmpl, doc, out, &out_len, why, sizeof(why)), DD_KEY_TOO_LONG);
    ck_assert_str_eq(why, "key is 256 bytes, at most 255");
    ck_assert_uint_eq(out_len, 255);
    ck_assert_uint_eq(strlen(out), 255);
    ck_assert_int_eq(memcmp(out, "k:xxx", 5), 0);
    cJSON_Delete(doc);
    dd_key_tmpl_destroy(tmpl);

    ck_assert_int_eq(render("${s}-${s}",
                            "{\"s\":\"" /* 150 x */
                            "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
                            "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
                            "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\"}",
                            buf, sizeof(buf)),
                     DD_KEY_TOO_LONG);
    ck_assert_str_eq(buf, "key is 301 bytes, at most 255");
}
END_TEST

/*
 * Canonical JSON
 */

START_TEST(test_canonical_basic)
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
    /* duplicate names kept in input order */
    ck_assert_str_eq(canon("{\"a\":2,\"b\":0,\"a\":1}"), "{\"a\":2,\"a\":1,\"b\":0}");
    ck_assert_str_eq(canon("\"top\""), "\"top\"");
    ck_assert_str_eq(canon("null"), "null");
}
END_TEST

START_TEST(test_canonical_numbers)
{
    ck_assert_str_eq(canon("[1.0,1,1e0,10E-1,100e-2]"), "[1,1,1,1,1]");
    ck_assert_str_eq(canon("[-0,-0.0,0e5]"), "[0,0,0]");
    ck_assert_str_eq(canon("[0.1,-2.5,3.14159,1.5e-7,0.30000000000000004]"),
                     "[0.1,-2.5,3.14159,1.5e-07,0.30000000000000004]");
    ck_assert_str_eq(canon("[1e300,1e20,123456789012345678901234567890]"),
                     "[1e+300,1e+20,1.2345678901234568e+29]");
    /* 2^53 is the last integer printed as such; 2^53+1 reads as 2^53 */
    ck_assert_str_eq(canon("[9007199254740992,9007199254740993,9007199254740994]"),
                     "[9007199254740992,9007199254740992,9007199254740994]");
    ck_assert_str_eq(canon("[1152921504606846976]"), "[1.152921504606847e+18]");
    ck_assert_str_eq(canon("[1e999,-1e999]"), "[null,null]");
    /* subnormals: shortest text found by full search */
    ck_assert_str_eq(canon("[5e-324,4.9406564584124654e-324,1.5e-310]"),
                     "[5e-324,5e-324,1.5e-310]");
}
END_TEST

START_TEST(test_canonical_strings)
{
    ck_assert_str_eq(canon("[\"\\u00e9\",\"\xc3\xa9\"]"), "[\"\xc3\xa9\",\"\xc3\xa9\"]");
    ck_assert_str_eq(canon("[\"\\ud834\\udd1e\"]"), "[\"\xf0\x9d\x84\x9e\"]");
    ck_assert_str_eq(canon("[\"\\/\\\"\\\\\"]"), "[\"/\\\"\\\\\"]");
    ck_assert_str_eq(canon("[\"\\b\\f\\n\\r\\t\\u0001\\u001F\\u007f\"]"),
                     "[\"\\b\\f\\n\\r\\t\\u0001\\u001f\x7f\"]");
    ck_assert_str_eq(canon("{\"\\u0041\\n\":1}"), "{\"A\\n\":1}");
}
END_TEST

/* Every byte value in a string and in a member name: controls, '"' and
 * '\\' escaped, everything else (DEL, bytes >= 0x80) copied. Names sort
 * bytewise as unsigned, a prefix first, whether or not the first byte
 * decides. */
START_TEST(test_canonical_all_bytes)
{
    static const char hex[] = "0123456789abcdef";
    char raw[256], want[2048], *out = NULL;
    size_t w = 0;
    cJSON *json = cJSON_CreateObject();
    const char *names[] = {"\xff", "b", "ab", "a", "", "\x80", "aa", "B"};

    for (int c = 1; c < 256; c++)
        raw[c - 1] = (char)c;
    raw[255] = '\0';
    cJSON_AddStringToObject(json, "s", raw);
    cJSON_AddNumberToObject(json, raw, 1);
    for (size_t i = 0; i < DD_ARRAY_LEN(names); i++)
        cJSON_AddNumberToObject(json, names[i], (double)i);
    w += (size_t)sprintf(want, "{\"\":4,");
    for (int pass = 0; pass < 2; pass++) {
        want[w++] = '"';
        for (int c = 1; c < 256; c++) {
            const char *short_esc = strchr("\"\\\b\f\n\r\t", c);
            if (c == '"' || c == '\\') {
                want[w++] = '\\';
                want[w++] = (char)c;
            } else if (c < 0x20 && short_esc) {
                want[w++] = '\\';
                want[w++] = "\"\\bfnrt"[short_esc - "\"\\\b\f\n\r\t"];
            } else if (c < 0x20) {
                w += (size_t)sprintf(want + w, "\\u00%c%c", hex[c >> 4], hex[c & 15]);
            } else {
                want[w++] = (char)c;
            }
        }
        want[w++] = '"';
        w += (size_t)sprintf(want + w, pass == 0 ? ":1," : "");
        if (pass == 0) /* the names after "\x01...", in byte order */
            w += (size_t)sprintf(want + w, "\"B\":7,\"a\":3,\"aa\":6,\"ab\":2,\"b\":1,\"s\":");
    }
    w += (size_t)sprintf(want + w, ",\"\x80\":5,\"\xff\":0}");
    ck_assert_int_eq(dd_json_canonical(json, &out, NULL), 0);
    ck_assert_str_eq(out, want);
    free(out);
    cJSON_Delete(json);
}
END_TEST

/* An object too big for the stack sort array, with reversed names and
 * duplicates: exercises the merge sort and its stability. */
START_TEST(test_canonical_big_object)
{
    char *in = malloc(64 * 1024), *want = malloc(64 * 1024), *out = NULL;
    size_t in_len = 0, want_len = 0, out_len = 0;
    cJSON *json;
    int i;

    in_len += (size_t)sprintf(in, "{");
    for (i = 299; i >= 0; i--)
        in_len += (size_t)sprintf(in + in_len, "%s\"k%03d\":%d,\"k%03d\":-%d", i == 299 ? "" : ",",
                                  i, i + 1, i, i + 1);
    strcpy(in + in_len, "}");
    want_len += (size_t)sprintf(want, "{");
    for (i = 0; i < 300; i++)
        want_len += (size_t)sprintf(want + want_len, "%s\"k%03d\":%d,\"k%03d\":-%d",
                                    i == 0 ? "" : ",", i, i + 1, i, i + 1);
    strcpy(want + want_len, "}");
    json = parse(in);
    ck_assert_int_eq(dd_json_canonical(json, &out, &out_len), 0);
    ck_assert_str_eq(out, want);
    cJSON_Delete(json);
    free(out);
    free(in);
    free(want);
}
END_TEST

/* Parsed payloads (cJSON stops at depth 1000) always canonicalise; a deeper
 * hand-built tree is refused instead of exhausting the stack. */
START_TEST(test_canonical_depth)
{
    char *text = malloc(2 * 900 + 1), *out = NULL;
    cJSON *json, *deep = cJSON_CreateArray(), *cur = deep;
    unsigned char h[DD_HASH_LEN];
    size_t len = 0;
    int i;

    memset(text, '[', 900);
    memset(text + 900, ']', 900);
    text[1800] = '\0';
    json = parse(text);
    ck_assert_int_eq(dd_json_canonical(json, &out, &len), 0);
    ck_assert_str_eq(out, text);
    ck_assert_int_eq(dd_key_hash(NULL, json, h), 0);
    for (i = 0; i < 1100; i++) {
        cJSON *next = cJSON_CreateArray();

        cJSON_AddItemToArray(cur, next);
        cur = next;
    }
    free(out);
    ck_assert_int_eq(dd_json_canonical(deep, &out, &len), DD_ERR_ARG);
    ck_assert_ptr_null(out);
    ck_assert_int_eq(dd_key_hash(NULL, deep, h), DD_ERR_ARG);
    cJSON_Delete(deep);
    cJSON_Delete(json);
    free(text);
}
END_TEST

/*
 * Hashes
 */

START_TEST(test_hash_known_vector)
{
    char hex[65];

    hash_hex(NULL, " { } ", hex);
    ck_assert_str_eq(hex, "44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a");
    sha256_hex("{}", 2, hex);
    ck_assert_str_eq(hex, "44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a");
}
END_TEST

START_TEST(test_hash_reserialised)
{
    char h1[65], h2[65], h3[65];

    hash_hex(NULL, "{\"a\":1,\"b\":[1,2],\"c\":\"\xc3\xa9\"}", h1);
    hash_hex(NULL, " {\"c\":\"\\u00e9\",\n \"b\":[1.0, 2e0],\n \"a\":10e-1}", h2);
    ck_assert_str_eq(h1, h2);
    hash_hex(NULL, "{\"a\":1,\"b\":[1,2],\"c\":\"e\"}", h3);
    ck_assert_str_ne(h1, h3);
    hash_hex(NULL, "{\"a\":1,\"b\":[2,1],\"c\":\"\xc3\xa9\"}", h3);
    ck_assert_str_ne(h1, h3);
    hash_hex(NULL, "{\"a\":\"1\",\"b\":[1,2],\"c\":\"\xc3\xa9\"}", h3);
    ck_assert_str_ne(h1, h3);
    hash_hex(NULL, "{\"a\":1.0000001,\"b\":[1,2],\"c\":\"\xc3\xa9\"}", h3);
    ck_assert_str_ne(h1, h3);
}
END_TEST

/* The streamed hash equals SHA-256 of dd_json_canonical's text, also when
 * the text crosses many chunk boundaries and holds strings longer than one
 * chunk. */
START_TEST(test_hash_streaming)
{
    cJSON *json = cJSON_CreateObject(), *arr = cJSON_AddArrayToObject(json, "arr");
    char *big = malloc(5000), *text = NULL, h1[65], h2[65];
    unsigned char h[DD_HASH_LEN];
    size_t len = 0;
    int i;

    memset(big, 'q', 4999);
    big[4999] = '\0';
    for (i = 0; i < 500; i++)
        cJSON_AddItemToArray(arr, cJSON_CreateNumber(i * 1.25));
    cJSON_AddStringToObject(json, "big", big);
    cJSON_AddStringToObject(json, "ctl", "a\"b\\c\x01");
    ck_assert_int_eq(dd_json_canonical(json, &text, &len), 0);
    ck_assert_uint_gt(len, 7000);
    sha256_hex(text, len, h1);
    ck_assert_int_eq(dd_key_hash(NULL, json, h), 0);
    dd_key_hash_hex(h, h2);
    ck_assert_str_eq(h1, h2);
    free(text);
    free(big);
    cJSON_Delete(json);
}
END_TEST

START_TEST(test_hash_spec)
{
    char *paths[] = {"currency", "amount"};
    char *paths2[] = {"amount", "currency", "amount"};
    dd_hash_spec_t *spec = spec_ok(paths, 2), *spec2 = spec_ok(paths2, 3);
    char h1[65], h2[65], want[65];
    const char *doc = "{\"amount\":100,\"currency\":\"EUR\",\"note\":\"x\"}";
    const char *canon_txt = "{\"amount\":100,\"currency\":\"EUR\"}";

    hash_hex(spec, doc, h1);
    sha256_hex(canon_txt, strlen(canon_txt), want);
    ck_assert_str_eq(h1, want);
    ck_assert_str_eq(want, "f50d36c1739463e571da8e929fdeb3bc35c5bf86051c653d6a61deedcb10944e");
    /* a field outside the spec changes nothing */
    hash_hex(spec, "{\"note\":\"other\",\"currency\":\"EUR\",\"amount\":1e2}", h2);
    ck_assert_str_eq(h1, h2);
    /* order and repeats in the path list do not matter */
    hash_hex(spec2, doc, h2);
    ck_assert_str_eq(h1, h2);
    /* a field inside it does */
    hash_hex(spec, "{\"amount\":101,\"currency\":\"EUR\",\"note\":\"x\"}", h2);
    ck_assert_str_ne(h1, h2);
    /* missing and null both hash as null */
    hash_hex(spec, "{\"amount\":100}", h1);
    hash_hex(spec, "{\"amount\":100,\"currency\":null}", h2);
    ck_assert_str_eq(h1, h2);
    canon_txt = "{\"amount\":100,\"currency\":null}";
    sha256_hex(canon_txt, strlen(canon_txt), want);
    ck_assert_str_eq(h1, want);
    dd_hash_spec_destroy(spec);
    dd_hash_spec_destroy(spec2);
}
END_TEST

START_TEST(test_hash_spec_nested)
{
    char *paths[] = {"o.items[0]", "o.id"};
    dd_hash_spec_t *spec = spec_ok(paths, 2), *empty = spec_ok(NULL, 0);
    char h1[65], h2[65], want[65];
    const char *canon_txt = "{\"o.id\":7,\"o.items[0]\":{\"p\":1,\"q\":[2]}}";

    hash_hex(spec, "{\"o\":{\"id\":7,\"items\":[{\"q\":[2],\"p\":1},{\"z\":0}]}}", h1);
    sha256_hex(canon_txt, strlen(canon_txt), want);
    ck_assert_str_eq(h1, want);
    hash_hex(spec, "{\"o\":{\"id\":7,\"items\":[{\"q\":[2],\"p\":1},{\"z\":1}]}}", h2);
    ck_assert_str_eq(h1, h2);
    /* an empty spec is the whole payload */
    hash_hex(empty, "{\"b\":1,\"a\":2}", h1);
    hash_hex(NULL, "{\"a\":2,\"b\":1}", h2);
    ck_assert_str_eq(h1, h2);
    dd_hash_spec_destroy(spec);
    dd_hash_spec_destroy(empty);
    dd_hash_spec_destroy(NULL);
}
END_TEST

START_TEST(test_hash_spec_errors)
{
    char errstr[256];
    dd_hash_spec_t *spec = (dd_hash_spec_t *)1;
    char *bad1[] = {"ok", "x["};
    char *bad2[] = {""};
    char *bad3[] = {"${a}"};

    ck_assert_int_lt(dd_hash_spec_new(&spec, bad1, 2, errstr, sizeof(errstr)), 0);
    ck_assert_ptr_null(spec);
    ck_assert_str_eq(errstr, "hash path \"x[\": bad array index at column 2 (expected [N])");
    ck_assert_int_lt(dd_hash_spec_new(&spec, bad2, 1, errstr, sizeof(errstr)), 0);
    ck_assert_str_eq(errstr, "hash path \"\": empty path at column 1");
    ck_assert_int_lt(dd_hash_spec_new(&spec, bad3, 1, errstr, sizeof(errstr)), 0);
    ck_assert_str_eq(errstr, "hash path \"${a}\": unexpected character '$' in path at column 1");
}
END_TEST

START_TEST(test_hash_hex)
{
    unsigned char h[DD_HASH_LEN];
    char hex[DD_HASH_HEX_LEN + 1];
    int i;

    for (i = 0; i < DD_HASH_LEN; i++)
        h[i] = (unsigned char)(i * 8 + 7);
    dd_key_hash_hex(h, hex);
    ck_assert_str_eq(hex, "070f171f272f373f474f575f676f777f878f979fa7afb7bfc7cfd7dfe7eff7ff");
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
        "0123456789abcdef\xc3\xa9"
        "0123456789abcdef\xf0\x9f\x98\x80xyz",
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
}
END_TEST

static Suite *key_suite(void)
{
    Suite *s = suite_create("key");
    TCase *tc = tcase_create("key");

    tcase_add_test(tc, test_tmpl_errors);
    tcase_add_test(tc, test_render_paths);
    tcase_add_test(tc, test_render_numbers);
    tcase_add_test(tc, test_render_missing);
    tcase_add_test(tc, test_render_length);
    tcase_add_test(tc, test_canonical_basic);
    tcase_add_test(tc, test_canonical_numbers);
    tcase_add_test(tc, test_canonical_strings);
    tcase_add_test(tc, test_canonical_all_bytes);
    tcase_add_test(tc, test_canonical_big_object);
    tcase_add_test(tc, test_canonical_depth);
    tcase_add_test(tc, test_hash_known_vector);
    tcase_add_test(tc, test_hash_reserialised);
    tcase_add_test(tc, test_hash_streaming);
    tcase_add_test(tc, test_hash_spec);
    tcase_add_test(tc, test_hash_spec_nested);
    tcase_add_test(tc, test_hash_spec_errors);
    tcase_add_test(tc, test_hash_hex);
    tcase_add_test(tc, test_utf8);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(key_suite());
    int failed;

    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
