/*
 * The parse pool: a message parsed into the pool must come out exactly as
 * one parsed on the heap (same tree, same key, same errors), whichever way
 * the pool had to go (its chunk, a fresh chunk after an overflow, the heap
 * when the tree is too big or the pool is full), and released chunks must be
 * reused.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dd_common.h"
#include "dd_conf.h"
#include "dd_parse.h"
#include "check_run.h"

static dd_conf_route_t conf;
static dd_key_tmpl_t *tmpl;
static dd_json_doc_t *doc;

static void setup(void)
{
    char err[256];

    memset(&conf, 0, sizeof(conf));
    conf.dedup.max_payload_bytes = 10 * 1024 * 1024;
    ck_assert_int_eq(dd_key_tmpl_new(&tmpl, "k:${id}", err, sizeof(err)), DD_OK);
    doc = dd_json_doc_new();
}

static void teardown(void)
{
    dd_key_tmpl_destroy(tmpl);
    dd_json_doc_destroy(doc);
}

/* A payload of about len bytes with n array elements under "list". */
static char *payload_make(int id, int n)
{
    size_t cap = 64 + (size_t)n * 16;
    char *p = malloc(cap);
    size_t len = (size_t)snprintf(p, cap, "{\"id\":\"o%d\",\"amount\":%d.25,\"list\":[", id, id);

    for (int i = 0; i < n; i++)
        len += (size_t)snprintf(p + len, cap - len, "%s\"v%d\"", i ? "," : "", i);
    snprintf(p + len, cap - len, "]}");
    return p;
}

/* Parses text with pool and on the heap; both must agree in everything. */
static cJSON *parse_both(dd_parse_pool_t *pool, const char *text, int *rc)
{
    char key1[DD_KEY_MAX + 1], key2[DD_KEY_MAX + 1], err1[256] = "", err2[256] = "";
    size_t len1 = 0, len2 = 0;
    dd_reason_t r1 = 0, r2 = 0;
    cJSON *j1 = NULL, *j2 = NULL;
    int rc2;

    const dd_json_doc_t *c1 = NULL, *c2 = NULL;

    *rc = dd_parse_message_into(pool, doc, conf.dedup.max_payload_bytes, tmpl, text, strlen(text),
                                &j1, &c1, key1, &len1, &r1, err1, sizeof(err1));
    rc2 = dd_parse_message(doc, conf.dedup.max_payload_bytes, tmpl, text, strlen(text), &j2, &c2,
                           key2, &len2, &r2, err2, sizeof(err2));
    ck_assert_int_eq(*rc, rc2);
    ck_assert_str_eq(err1, err2);
    if (*rc == DD_OK) {
        char *s1 = cJSON_PrintUnformatted(j1), *s2 = cJSON_PrintUnformatted(j2);
        ck_assert_str_eq(s1, s2);
        ck_assert_str_eq(key1, key2);
        ck_assert_uint_eq(dd_json_root(c1)->skip, dd_json_root(doc)->skip);
        ck_assert_uint_eq(dd_json_root(c2)->skip, dd_json_root(doc)->skip);
        cJSON_free(s1);
        cJSON_free(s2);
    } else {
        ck_assert_int_eq(r1, r2);
        ck_assert_ptr_null(j1);
        ck_assert_ptr_null(c1);
        ck_assert_ptr_null(c2);
    }
    cJSON_Delete(j2);
    dd_parse_release_doc(pool, c1);
    dd_parse_release_doc(NULL, c2);
    return j1;
}

START_TEST(test_same_as_heap)
{
    static const char *const texts[] = {"{\"id\":\"a\",\"x\":[1,2,{\"y\":\"\\u00e9\"}]}",
                                        "{\"id\":\"a\"",
                                        "{\"id\":\"a\"}}",
                                        "{\"x\":1}",
                                        "[1,2,3]",
                                        "{\"id\":[1]}",
                                        "{\"id\":\"a\"} \n",
                                        "",
                                        "nul"};
    dd_parse_pool_t *pool;
    char err[256];
    int rc;

    ck_assert_int_eq(dd_parse_pool_new(&pool, 20000, err, sizeof(err)), DD_OK);
    for (size_t i = 0; i < DD_ARRAY_LEN(texts); i++)
        dd_parse_release(pool, parse_both(pool, texts[i], &rc));
    /* Trees that overflow a chunk (parsed again), or do not fit one (heap). */
    for (int n = 100; n < 20000; n = n * 3 / 2) {
        char *text = payload_make(n, n);
        dd_parse_release(pool, parse_both(pool, text, &rc));
        ck_assert_int_eq(rc, DD_OK);
        free(text);
    }
    dd_parse_pool_destroy(pool);
}
END_TEST

START_TEST(test_chunks_reused_and_bounded)
{
    enum { LIVE = 3000 };
    cJSON **live = calloc(LIVE, sizeof(*live));
    dd_parse_pool_t *pool, *second;
    char err[256];
    int rc;

    /* max_trees 1: the smallest pool, which 3000 live trees overflow. */
    ck_assert_int_eq(dd_parse_pool_new(&pool, 1, err, sizeof(err)), DD_OK);
    ck_assert_int_ne(dd_parse_pool_new(&second, 1, err, sizeof(err)), DD_OK);
    ck_assert_ptr_null(second);
    for (int round = 0; round < 5; round++) {
        for (int i = 0; i < LIVE; i++) {
            char *text = payload_make(round * LIVE + i, 40 + i % 50);
            live[i] = parse_both(pool, text, &rc);
            ck_assert_int_eq(rc, DD_OK);
            free(text);
        }
        /* Out of order, as lanes finish them. */
        for (int i = 0; i < LIVE; i += 2)
            dd_parse_release(pool, live[i]);
        /* The survivors were not overwritten by reused chunks. */
        for (int i = 1; i < LIVE; i += 2) {
            snprintf(err, sizeof(err), "o%d", round * LIVE + i);
            ck_assert_str_eq(cJSON_GetObjectItem(live[i], "id")->valuestring, err);
            ck_assert_int_eq(cJSON_GetArraySize(cJSON_GetObjectItem(live[i], "list")), 40 + i % 50);
            dd_parse_release(pool, live[i]);
        }
    }
    /* cJSON_Delete is safe on a pooled tree too (its chunk stays taken). */
    live[0] = parse_both(pool, "{\"id\":\"a\",\"b\":[true]}", &rc);
    cJSON_Delete(live[0]);
    dd_parse_pool_destroy(pool);
    free(live);
}
END_TEST

/* The copy of the document a message keeps for its handler reads as the
 * document did after later parses overwrote it, whether it lives in the
 * pool or on the heap: member lookups, decoded strings (escaped ones
 * included), and the text of values as written. */
START_TEST(test_doc_copies_outlive_the_parse)
{
    enum { LIVE = 500 };
    char *texts[LIVE], key[DD_KEY_MAX + 1], err[256], want[64];
    const dd_json_doc_t *copies[LIVE];
    dd_parse_pool_t *pool;
    cJSON *trees[LIVE];
    dd_reason_t reason;
    size_t key_len;

    ck_assert_int_eq(dd_parse_pool_new(&pool, 1, err, sizeof(err)), DD_OK);
    for (int i = 0; i < LIVE; i++) {
        texts[i] = malloc(128);
        snprintf(texts[i], 128,
                 "{ \"id\" : \"o\\u00e9%d\", \"n\":[%d, {\"s\":\"a\\\"]\"}] , \"x\":-0.00}", i, i);
        ck_assert_int_eq(dd_parse_message_into(i % 3 ? pool : NULL, doc,
                                               conf.dedup.max_payload_bytes, tmpl, texts[i],
                                               strlen(texts[i]), &trees[i], &copies[i], key,
                                               &key_len, &reason, err, sizeof(err)),
                         DD_OK);
    }
    for (int i = LIVE; i-- > 0;) {
        const dd_json_node_t *root = dd_json_root(copies[i]), *id, *n, *x;
        const char *t;
        size_t len;

        id = dd_json_member(copies[i], root, "id", 2);
        snprintf(want, sizeof(want), "o\xc3\xa9%d", i);
        ck_assert_uint_eq(id->len, strlen(want));
        ck_assert_mem_eq(id->str, want, id->len);
        dd_json_value_text(copies[i], id, &t, &len);
        snprintf(want, sizeof(want), "\"o\\u00e9%d\"", i);
        ck_assert_uint_eq(len, strlen(want));
        ck_assert_mem_eq(t, want, len);
        n = dd_json_member(copies[i], root, "n", 1);
        dd_json_value_text(copies[i], n, &t, &len);
        snprintf(want, sizeof(want), "[%d, {\"s\":\"a\\\"]\"}]", i);
        ck_assert_uint_eq(len, strlen(want));
        ck_assert_mem_eq(t, want, len);
        x = dd_json_member(copies[i], root, "x", 1);
        dd_json_value_text(copies[i], x, &t, &len);
        ck_assert_uint_eq(len, 5);
        ck_assert_mem_eq(t, "-0.00", 5);
        dd_json_value_text(copies[i], root, &t, &len);
        ck_assert_uint_eq(len, strlen(texts[i]));
        dd_parse_release(i % 3 ? pool : NULL, trees[i]);
        dd_parse_release_doc(i % 3 ? pool : NULL, copies[i]);
        free(texts[i]);
    }
    dd_parse_pool_destroy(pool);
}
END_TEST

/* What dd_parse_message refuses, with which reason and message; the
 * non-JSON attack cases first. */
START_TEST(test_refusals)
{
    static const struct {
        const char *text;
        dd_reason_t reason;
        const char *err;
    } v[] = {
        {"{\"id\":\"a\tb\"}", DD_REASON_BAD_JSON,
         "invalid JSON: raw control character 0x09 in a string at byte 8"},
        {"{\"id\":007}", DD_REASON_BAD_JSON, "invalid JSON: leading zero in a number at byte 6"},
        {"{\"id\":7.}", DD_REASON_BAD_JSON,
         "invalid JSON: no digit after '.' in a number at byte 6"},
        {"\xef\xbb\xbf{\"id\":1}", DD_REASON_BAD_JSON,
         "invalid JSON: byte-order mark (not allowed before JSON text) at byte 0"},
        {"{\"id\":1,\"id\":2}", DD_REASON_BAD_JSON,
         "invalid JSON: duplicate member name \"id\" (first at byte 1) at byte 8"},
        {"{\"id\":\"a\"}}", DD_REASON_BAD_JSON,
         "invalid JSON: trailing data after the JSON value at byte 10"},
        {"\xff", DD_REASON_BAD_JSON, "invalid JSON: invalid UTF-8 at byte 0"},
        /* what the handlers' tree (cJSON) would cut: four payloads, four keys,
         * one value to a handler */
        {"{\"merchant_id\":\"m1\",\"id\":\"o1\\u0000dup\"}", DD_REASON_BAD_JSON,
         "invalid JSON: NUL (\\u0000) in a string at byte 28"},
        {"{\"id\\u0000\":\"o1\",\"id\":\"zz\"}", DD_REASON_BAD_JSON,
         "invalid JSON: NUL (\\u0000) in a member name at byte 4"},
        {"", DD_REASON_BAD_JSON, "empty payload"},
        {"{\"x\":1}", DD_REASON_KEY_MISSING, "field id is missing"},
        {"{\"id\":null}", DD_REASON_KEY_MISSING, "field id is null"},
    };
    dd_parse_pool_t *pool;
    char err[256];

    ck_assert_int_eq(dd_parse_pool_new(&pool, 100, err, sizeof(err)), DD_OK);
    for (size_t i = 0; i < DD_ARRAY_LEN(v); i++) {
        char key[DD_KEY_MAX + 1] = "x";
        size_t key_len = 9;
        dd_reason_t reason = DD_REASON_CNT;
        cJSON *json = (cJSON *)1;

        ck_assert_int_eq(dd_parse_message_into(pool, doc, conf.dedup.max_payload_bytes, tmpl,
                                               v[i].text, strlen(v[i].text), &json, NULL, key,
                                               &key_len, &reason, err, sizeof(err)),
                         DD_ERR_PERMANENT);
        ck_assert_str_eq(err, v[i].err);
        ck_assert_int_eq(reason, v[i].reason);
        ck_assert_ptr_null(json);
        ck_assert_uint_eq(key_len, 0);
        ck_assert_str_eq(key, "");
    }
    dd_parse_pool_destroy(pool);
}
END_TEST

/* On success the document stays for the hash and the lane key; the key
 * has no control byte even when the value has. */
START_TEST(test_key_and_doc)
{
    const char *text = "{\"id\":\"x\\u0001one\",\"n\":9007199254740993}";
    char key[DD_KEY_MAX + 1], err[256];
    size_t key_len;
    dd_reason_t reason;
    cJSON *json;

    ck_assert_int_eq(dd_parse_message(doc, conf.dedup.max_payload_bytes, tmpl, text, strlen(text),
                                      &json, NULL, key, &key_len, &reason, err, sizeof(err)),
                     DD_OK);
    ck_assert_str_eq(key, "k:x%01one");
    ck_assert_uint_eq(key_len, 9);
    ck_assert_ptr_nonnull(json);
    ck_assert_uint_eq(dd_json_root(doc)->len, 2);
    cJSON_Delete(json);
}
END_TEST

/*
 * What a handler reads is what the key was built from: for random payloads
 * (escapes, non-ASCII, NULs, names that differ in a byte or an escape),
 * every member a handler finds in the cJSON tree, by the name cJSON gives
 * it, holds exactly the bytes dd_json holds under that name, and the
 * field "f" a handler reads equals the value ${f} rendered into the key.
 * Or the payload is refused.
 */

/* Pieces of string text: plain, escaped, multi-byte, and NUL. */
static const char *const pieces[] = {
    "f",
    "F",
    "a",
    "%",
    "%00",
    "\xc3\xa9",
    "\xf0\x9f\x98\x80",
    "\\n",
    "\\\"",
    "\\\\",
    "\\/",
    "\\u0066",
    "\\u00e9",
    "\\u00E9",
    "\\u0001",
    "\\u001f",
    "\\u007f",
    "\\ud83d\\ude00",
    "\\u0000",
    "\\u0000",
    "x",
};

static size_t rand_string(char *out, unsigned *seed, int max_pieces)
{
    int n = (int)(rand_r(seed) % (unsigned)(max_pieces + 1));
    size_t len = 0;

    for (int i = 0; i < n; i++)
        len +=
            (size_t)sprintf(out + len, "%s", pieces[rand_r(seed) % (unsigned)DD_ARRAY_LEN(pieces)]);
    return len;
}

/* A member name: "f", "f" spelled otherwise or followed by more, or random. */
static size_t rand_name(char *out, unsigned *seed)
{
    static const char *const fs[] = {"f", "\\u0066", "f\\u0000", "f\\u0000x", "F"};
    unsigned r = rand_r(seed) % 4;

    if (r == 0) return (size_t)sprintf(out, "%s", fs[rand_r(seed) % DD_ARRAY_LEN(fs)]);
    return rand_string(out, seed, 3);
}

/* The bytes a key holds for one value (%XX decoded), into out. */
static size_t key_decode(const char *key, size_t key_len, char *out)
{
    size_t n = 0;

    for (size_t i = 0; i < key_len; i++) {
        unsigned v;
        if (key[i] == '%' && i + 2 < key_len + 1 && sscanf(key + i + 1, "%2x", &v) == 1) {
            out[n++] = (char)v;
            i += 2;
        } else {
            out[n++] = key[i];
        }
    }
    return n;
}

/* cJSON's tree against the document: each member, by its cJSON name. */
static void tree_matches_doc(const cJSON *json, const char *text)
{
    const dd_json_node_t *root = dd_json_root(doc);
    const cJSON *c;
    uint32_t cnt = 0;

    ck_assert_ptr_nonnull(root);
    cJSON_ArrayForEach(c, json)
    {
        const dd_json_node_t *m = dd_json_member(doc, root, c->string, strlen(c->string));
        cnt++;
        ck_assert_msg(m != NULL, "%s: the handler sees a member %s the key does not", text,
                      c->string);
        ck_assert(cJSON_IsString(c) && m->type == DD_JSON_STRING);
        ck_assert_msg(
            m->len == strlen(c->valuestring) && memcmp(m->str, c->valuestring, m->len) == 0,
            "%s: member %s: the handler reads another value than the key's", text, c->string);
    }
    ck_assert_uint_eq(cnt, root->len);
}

START_TEST(test_handler_reads_the_key_s_value)
{
    char text[1024], name[256], key[DD_KEY_MAX + 1], err[256], want[DD_KEY_MAX + 1];
    unsigned seed = 29;
    dd_key_tmpl_t *ft;
    dd_parse_pool_t *pool;
    int accepted = 0, nul_refused = 0;

    ck_assert_int_eq(dd_key_tmpl_new(&ft, "${f}", err, sizeof(err)), DD_OK);
    ck_assert_int_eq(dd_parse_pool_new(&pool, 100, err, sizeof(err)), DD_OK);
    for (int i = 0; i < 20000; i++) {
        int members = 1 + (int)(rand_r(&seed) % 4), f_at = (int)(rand_r(&seed) % (unsigned)members);
        size_t len = 0, key_len = 0;
        dd_reason_t reason = DD_REASON_CNT;
        cJSON *json = NULL;
        const cJSON *f;
        int rc;

        text[len++] = '{';
        for (int m = 0; m < members; m++) {
            if (m == f_at)
                len += (size_t)sprintf(text + len, "%s\"f\":\"", m ? "," : "");
            else {
                rand_name(name, &seed);
                len += (size_t)sprintf(text + len, "%s\"%s\":\"", m ? "," : "", name);
            }
            len += rand_string(text + len, &seed, 6);
            text[len++] = '"';
        }
        text[len++] = '}';
        text[len] = '\0';
        rc = dd_parse_message_into(i % 2 ? pool : NULL, doc, conf.dedup.max_payload_bytes, ft, text,
                                   len, &json, NULL, key, &key_len, &reason, err, sizeof(err));
        if (rc != DD_OK) {
            ck_assert_ptr_null(json);
            if (strstr(text, "\\u0000")) {
                ck_assert_msg(reason == DD_REASON_BAD_JSON, "%s: %s", text, err);
                nul_refused += strstr(err, "NUL (\\u0000)") != NULL;
            }
            continue;
        }
        accepted++;
        tree_matches_doc(json, text);
        f = cJSON_GetObjectItemCaseSensitive(json, "f");
        ck_assert(cJSON_IsString(f));
        ck_assert_msg(key_decode(key, key_len, want) == strlen(f->valuestring) &&
                          memcmp(want, f->valuestring, strlen(f->valuestring)) == 0,
                      "%s: key %s, the handler reads \"%s\"", text, key, f->valuestring);
        ck_assert_msg(!strstr(text, "\\u0000"), "%s: accepted with a NUL", text);
        dd_parse_release(i % 2 ? pool : NULL, json);
    }
    /* both sides were exercised */
    ck_assert_int_gt(accepted, 3000);
    ck_assert_int_gt(nul_refused, 3000);
    dd_parse_pool_destroy(pool);
    dd_key_tmpl_destroy(ft);
}
END_TEST

static Suite *dd_parse_suite(void)
{
    Suite *s = suite_create("parse");
    TCase *tc = tcase_create("pool");

    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_same_as_heap);
    tcase_add_test(tc, test_chunks_reused_and_bounded);
    tcase_add_test(tc, test_doc_copies_outlive_the_parse);
    tcase_add_test(tc, test_refusals);
    tcase_add_test(tc, test_key_and_doc);
    tcase_add_test(tc, test_handler_reads_the_key_s_value);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return dd_check_run(dd_parse_suite());
}
