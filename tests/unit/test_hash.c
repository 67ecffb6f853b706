/*
 * Unit tests for dd_hash: request hashes over the canonical JSON of the
 * strict document, with and without dedup.hash paths, against SHA-256
 * vectors computed independently; the attack cases give different hashes,
 * re-serialised payloads the same. No services needed.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>

#include "dd_common.h"
#include "dd_hash.h"
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

static void parse(const char *text)
{
    char err[256] = "";

    ck_assert_msg(dd_json_parse(doc, text, strlen(text), err, sizeof(err)) == 0,
                  "bad test JSON: %s: %s", text, err);
}

static void hash_hex(const dd_hash_spec_t *spec, const char *json_text, char hex[65])
{
    unsigned char h[DD_HASH_LEN], h2[DD_HASH_LEN];

    parse(json_text);
    ck_assert_int_eq(dd_hash_doc(spec, doc, h), 0);
    ck_assert_int_eq(dd_hash_payload(spec, json_text, strlen(json_text), h2), 0);
    ck_assert_int_eq(memcmp(h, h2, DD_HASH_LEN), 0);
    dd_hash_hex(h, hex);
}

/* The hash input of json_text under spec (static buffer). */
static const char *input(const dd_hash_spec_t *spec, const char *json_text)
{
    static char buf[4096];
    char *out = NULL;
    size_t len = 0;

    parse(json_text);
    ck_assert_int_eq(dd_hash_input(spec, doc, &out, &len), 0);
    ck_assert_uint_eq(len, strlen(out));
    snprintf(buf, sizeof(buf), "%s", out);
    free(out);
    return buf;
}

static void sha256_hex(const void *buf, size_t len, char hex[65])
{
    unsigned char h[DD_HASH_LEN];
    unsigned int h_len = 0;

    ck_assert(EVP_Digest(buf, len, h, &h_len, EVP_sha256(), NULL));
    dd_hash_hex(h, hex);
}

static dd_hash_spec_t *spec_ok(char *const *paths, int cnt)
{
    char errstr[256] = "";
    dd_hash_spec_t *spec = NULL;

    ck_assert_msg(dd_hash_spec_new(&spec, paths, cnt, errstr, sizeof(errstr)) == 0, "%s", errstr);
    return spec;
}

/* payload -> hash input -> SHA-256, the vectors of docs/KEYS.md (hashes
 * computed with Python's hashlib from the input text). */
START_TEST(test_vectors)
{
    static const char *const v[][3] = {
        {" { } ", "{}", "44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a"},
        {"{\"id\":9007199254740993}", "{\"id\":9007199254740993}",
         "2185812179ffd2b19c8154d2d409599d231fb75ef4968df59b7f02b435c094fa"},
        {"{\"id\":9007199254740992}", "{\"id\":9007199254740992}",
         "24bb430971eb50f964e63784a7ad4f3411bc7cdb1659188e371150793e872da1"},
        {"{\"id\":\"x\\u0001one\"}", "{\"id\":\"x\\u0001one\"}",
         "065adb5cafe456a207a68408b751f6c0ddd93fefea2f8170c731c7fb053d6d1e"},
        {"{\"id\":\"x\\u0001two\"}", "{\"id\":\"x\\u0001two\"}",
         "20168b0561d15815c665065ef86b7cdceb155df5682b8e222f2af9e512ea6db4"},
        {"{\"amount\":1E+400}", "{\"amount\":1e400}",
         "952eecce53291ea8c824a4868f19d6f9259159b2fa5954310a4930313d1ca959"},
        {"{\"amount\":-10e399}", "{\"amount\":-1e400}",
         "c32fe2fdc1b68b5ff851c407b105d5809b0a52d4ca493663e0507dc0f0f9869a"},
        {"{\"amount\":null}", "{\"amount\":null}",
         "2ccd94e2ba19c54ed10b40a18c17a6122ae49060dad6bb43051c9a65894d578b"},
        {"{\"merchant_id\":\"m1\",\"order_no\":\"A:B\",\"amount\":12.30}",
         "{\"amount\":12.3,\"merchant_id\":\"m1\",\"order_no\":\"A:B\"}",
         "85d8f7d8cd285dd48a2c8c7cd8c0964b39676239e81b3f1b39f5e42c515f8647"},
        {"{\"order_no\":7.0,\"merchant_id\":\"m1\"}", "{\"merchant_id\":\"m1\",\"order_no\":7}",
         "8ae34da7421e09e7b5473c8ace60aeb2410c39001ea826edea0c991ccba1d25d"},
        {"{\"merchant_id\":\"m1\",\"order_no\":\"7\"}",
         "{\"merchant_id\":\"m1\",\"order_no\":\"7\"}",
         "94414f06298ee16488259b01e761355def8696c672f6d089f47926c821b20870"},
        {"{\"b\":[1,2,{\"d\":null,\"c\":\"\\u00e9\\ud83d\\ude00/"
         "\"}],\"a\":{\"\\u0001\":false},\"id\":0}",
         "{\"a\":{\"\\u0001\":false},\"b\":[1,2,{\"c\":\"\xc3\xa9\xf0\x9f\x98\x80/"
         "\",\"d\":null}],\"id\":0}",
         "eb57dd4e605bbc181ecda080d8fb80a5b5839fafd3729d12f862e900e40a8b30"},
        {"{\"id\":123e-40}", "{\"id\":123e-40}",
         "dafc36d645c1e8f56b06d5b8e5e6782b6bbfa8675dee29d589ca4707abcc0975"},
        {"{ \"n\" : 1.5e-7, \"b\" : \"\\u00e9\\n\", \"a\" : [1.0, 2, {\"d\":null, \"c\":true}] }",
         "{\"a\":[1,2,{\"c\":true,\"d\":null}],\"b\":\"\xc3\xa9\\n\",\"n\":0.00000015}",
         "d46f9e2fa0e48c585f3562711e7785fe0d2c658af33a8a9da52dc2bf7918ef09"},
    };
    char hex[65];

    for (size_t i = 0; i < DD_ARRAY_LEN(v); i++) {
        ck_assert_str_eq(input(NULL, v[i][0]), v[i][1]);
        hash_hex(NULL, v[i][0], hex);
        ck_assert_str_eq(hex, v[i][2]);
    }
}
END_TEST

START_TEST(test_reserialised)
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
    hash_hex(NULL, "{\"a\":1.0000000000000000000001,\"b\":[1,2],\"c\":\"\xc3\xa9\"}", h3);
    ck_assert_str_ne(h1, h3);
}
END_TEST

/* The attack cases, whole payload and through a path. */
START_TEST(test_attacks_differ)
{
    static const char *const groups[][3] = {
        {"{\"id\":9007199254740993}", "{\"id\":9007199254740992}", NULL},
        {"{\"id\":\"x\\u0001one\"}", "{\"id\":\"x\\u0001two\"}", "{\"id\":\"x\"}"},
        {"{\"amount\":1e400}", "{\"amount\":-1e400}", "{\"amount\":null}"},
    };
    char *paths[] = {"amount", "id"};
    dd_hash_spec_t *spec = spec_ok(paths, 2);

    for (size_t g = 0; g < DD_ARRAY_LEN(groups); g++)
        for (int s = 0; s < 2; s++) {
            char h[3][65];
            int n = groups[g][2] ? 3 : 2;

            for (int i = 0; i < n; i++)
                hash_hex(s ? spec : NULL, groups[g][i], h[i]);
            for (int i = 0; i < n; i++)
                for (int j = i + 1; j < n; j++)
                    ck_assert_msg(strcmp(h[i], h[j]) != 0, "%s and %s hash alike", groups[g][i],
                                  groups[g][j]);
        }
    dd_hash_spec_destroy(spec);
}
END_TEST

/* The streamed hash equals SHA-256 of the hash input, also when the text
 * crosses many chunk boundaries and holds strings longer than a chunk. */
START_TEST(test_streaming)
{
    char *text = malloc(64 * 1024), *in = NULL, h1[65], h2[65];
    unsigned char h[DD_HASH_LEN];
    size_t len = 0, in_len = 0;

    len += (size_t)sprintf(text, "{\"arr\":[");
    for (int i = 0; i < 500; i++)
        len += (size_t)sprintf(text + len, "%s%d.25", i ? "," : "", i);
    len += (size_t)sprintf(text + len, "],\"big\":\"");
    memset(text + len, 'q', 4999);
    len += 4999;
    len += (size_t)sprintf(text + len, "\",\"ctl\":\"a\\\"b\\\\c\\u0001\"}");
    parse(text);
    ck_assert_int_eq(dd_hash_input(NULL, doc, &in, &in_len), 0);
    ck_assert_uint_gt(in_len, 7000);
    sha256_hex(in, in_len, h1);
    ck_assert_int_eq(dd_hash_doc(NULL, doc, h), 0);
    dd_hash_hex(h, h2);
    ck_assert_str_eq(h1, h2);
    free(in);
    free(text);
}
END_TEST

START_TEST(test_spec)
{
    char *paths[] = {"currency", "amount"};
    char *paths2[] = {"amount", "currency", "amount"};
    dd_hash_spec_t *spec = spec_ok(paths, 2), *spec2 = spec_ok(paths2, 3);
    char h1[65], h2[65];
    const char *d = "{\"amount\":100,\"currency\":\"EUR\",\"note\":\"x\"}";

    ck_assert_str_eq(input(spec, d), "{\"amount\":100,\"currency\":\"EUR\"}");
    hash_hex(spec, d, h1);
    ck_assert_str_eq(h1, "f50d36c1739463e571da8e929fdeb3bc35c5bf86051c653d6a61deedcb10944e");
    /* a field outside the spec changes nothing */
    hash_hex(spec, "{\"note\":\"other\",\"currency\":\"EUR\",\"amount\":1e2}", h2);
    ck_assert_str_eq(h1, h2);
    /* order and repeats in the path list do not matter */
    hash_hex(spec2, d, h2);
    ck_assert_str_eq(h1, h2);
    /* a field inside it does */
    hash_hex(spec, "{\"amount\":101,\"currency\":\"EUR\",\"note\":\"x\"}", h2);
    ck_assert_str_ne(h1, h2);
    /* absent and null differ: an absent path is left out */
    ck_assert_str_eq(input(spec, "{\"amount\":100}"), "{\"amount\":100}");
    ck_assert_str_eq(input(spec, "{\"amount\":100,\"currency\":null}"),
                     "{\"amount\":100,\"currency\":null}");
    hash_hex(spec, "{\"amount\":100}", h1);
    ck_assert_str_eq(h1, "4d4bbe59c6aad22442cde199a6a8a5f034405fcd78fb5a81c24ef249de1c45f1");
    hash_hex(spec, "{\"amount\":100,\"currency\":null}", h2);
    ck_assert_str_eq(h2, "98bca32b9a827025e631a460698988e9feda10fc744a262bbc0e2a047e5f244a");
    ck_assert_str_eq(input(spec, "[1]"), "{}");
    /* the vectors of docs/KEYS.md */
    hash_hex(spec,
             "{\"merchant_id\":\"m1\",\"order_no\":\"o1\",\"amount\":12.30,\"currency\":\"EUR\","
             "\"ts\":\"x\"}",
             h1);
    ck_assert_str_eq(h1, "76b0f937e3331fd91c0b67d63692c097b250b7934077ba76e0d2c674f9cd8a81");
    hash_hex(spec,
             "{\"merchant_id\":\"m1\",\"order_no\":\"o1\",\"amount\":null,\"currency\":\"EUR\"}",
             h1);
    ck_assert_str_eq(h1, "83e6bdb3b18db57fae33bb05e1ffc3d925d19d7da6f0df226d1ad626be6d967a");
    hash_hex(spec, "{\"merchant_id\":\"m1\",\"order_no\":\"o1\",\"currency\":\"EUR\"}", h1);
    ck_assert_str_eq(h1, "f2fd0a823b2e34bd89358f390fa1c4661c8d60815084c2b3a63f210e7affde28");
    hash_hex(spec,
             "{\"merchant_id\":\"m1\",\"order_no\":\"o1\",\"amount\":1e400,\"currency\":\"EUR\"}",
             h1);
    ck_assert_str_eq(h1, "37c3aa5962d7d97f1b940a8f86e5fa8191de20cef96c747d7d68e34209edb0ff");
    hash_hex(spec,
             "{\"merchant_id\":\"m1\",\"order_no\":\"o1\",\"amount\":-1e400,\"currency\":\"EUR\"}",
             h1);
    ck_assert_str_eq(h1, "b05d18e82775403017eb8ebc30b226774ac855ba64cf6d8c7c14b56e6276d735");
    dd_hash_spec_destroy(spec);
    dd_hash_spec_destroy(spec2);
}
END_TEST

START_TEST(test_spec_nested)
{
    char *paths[] = {"o.items[0]", "o.id"};
    dd_hash_spec_t *spec = spec_ok(paths, 2), *empty = spec_ok(NULL, 0);
    char h1[65], h2[65];

    ck_assert_str_eq(input(spec, "{\"o\":{\"id\":7,\"items\":[{\"q\":[2],\"p\":1},{\"z\":0}]}}"),
                     "{\"o.id\":7,\"o.items[0]\":{\"p\":1,\"q\":[2]}}");
    hash_hex(spec, "{\"o\":{\"id\":7,\"items\":[{\"q\":[2],\"p\":1},{\"z\":0}]}}", h1);
    ck_assert_str_eq(h1, "86747941b9a91997d4fc599019a6f80510df1619441093ffcc9cc7f9fe9dc037");
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

START_TEST(test_spec_errors)
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

/* No document, no hash; a payload that is not strict JSON is refused. */
START_TEST(test_refusals)
{
    unsigned char h[DD_HASH_LEN];

    ck_assert_int_eq(dd_json_parse(doc, "{", 1, NULL, 0), DD_ERR_PERMANENT);
    ck_assert_int_eq(dd_hash_doc(NULL, doc, h), DD_ERR_ARG);
    ck_assert_int_eq(dd_hash_payload(NULL, "{\"a\":1,\"a\":1}", 13, h), DD_ERR_PERMANENT);
    ck_assert_int_eq(dd_hash_payload(NULL, "007", 3, h), DD_ERR_PERMANENT);
}
END_TEST

START_TEST(test_hex)
{
    unsigned char h[DD_HASH_LEN];
    char hex[DD_HASH_HEX_LEN + 1];
    int i;

    for (i = 0; i < DD_HASH_LEN; i++)
        h[i] = (unsigned char)(i * 8 + 7);
    dd_hash_hex(h, hex);
    ck_assert_str_eq(hex, "070f171f272f373f474f575f676f777f878f979fa7afb7bfc7cfd7dfe7eff7ff");
}
END_TEST

static Suite *hash_suite(void)
{
    Suite *s = suite_create("hash");
    TCase *tc = tcase_create("hash");

    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_vectors);
    tcase_add_test(tc, test_reserialised);
    tcase_add_test(tc, test_attacks_differ);
    tcase_add_test(tc, test_streaming);
    tcase_add_test(tc, test_spec);
    tcase_add_test(tc, test_spec_nested);
    tcase_add_test(tc, test_spec_errors);
    tcase_add_test(tc, test_refusals);
    tcase_add_test(tc, test_hex);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return dd_check_run(hash_suite());
}
