/*
 * Unit tests for dd_avro: the Confluent header, writer schemas, and Avro
 * records decoded into the JSON text keys and hashes are computed from
 * (the vectors of docs/KEYS.md, "Avro"). The binary vectors were written
 * by Apache Avro's Python library (python3-avro), the expected base64 of
 * bytes by python3's base64 module and the expected hashes from the
 * canonical JSON by hand with sha256; every bad input is refused with its
 * reason and byte. No services needed.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dd_avro.h"
#include "dd_common.h"
#include "dd_hash.h"
#include "dd_json.h"
#include "check_run.h"

static const char payment_schema[] =
    "{\"type\": \"record\", \"name\": \"Payment\", \"namespace\": \"com.example\", \"fields\": ["
    "{\"name\": \"merchant_id\", \"type\": \"string\"}, {\"name\": \"order_no\", \"type\": "
    "\"long\"}, {\"name\": \"amount\", \"type\": {\"type\": \"bytes\", \"logicalType\": "
    "\"decimal\", \"precision\": 12, \"scale\": 2}}, {\"name\": \"currency\", \"type\": "
    "{\"type\": \"enum\", \"name\": \"Currency\", \"symbols\": [\"EUR\", \"USD\"]}}, {\"name\": "
    "\"note\", \"type\": [\"null\", \"string\"], \"default\": null}, {\"name\": \"rate\", "
    "\"type\": \"double\"}, {\"name\": \"ratio\", \"type\": \"float\"}, {\"name\": \"flag\", "
    "\"type\": \"boolean\"}, {\"name\": \"tags\", \"type\": {\"type\": \"array\", \"items\": "
    "\"string\"}}, {\"name\": \"attrs\", \"type\": {\"type\": \"map\", \"values\": \"int\"}}, "
    "{\"name\": \"raw\", \"type\": \"bytes\"}, {\"name\": \"digest\", \"type\": {\"type\": "
    "\"fixed\", \"name\": \"D4\", \"size\": 4}}]}";

static size_t unhex(const char *hex, unsigned char *out)
{
    size_t n = 0;

    for (; hex[0] && hex[1]; hex += 2) {
        unsigned v;
        sscanf(hex, "%2x", &v);
        out[n++] = (unsigned char)v;
    }
    return n;
}

static dd_avro_schema_t *schema_of(const char *json)
{
    dd_avro_schema_t *s = NULL;
    char err[300] = "";

    ck_assert_msg(dd_avro_schema_new(&s, json, strlen(json), err, sizeof(err)) == 0, "%s: %s", json,
                  err);
    return s;
}

/* Decodes hex under schema; returns the text (malloc'd) or NULL with err. */
static char *decode_hex(const dd_avro_schema_t *s, const char *hex, char *err, size_t err_size)
{
    unsigned char buf[4096];
    size_t n = unhex(hex, buf), len;
    char *text = NULL;

    if (dd_avro_decode(s, buf, n, 0, 1 << 20, &text, &len, err, err_size) != 0) return NULL;
    ck_assert_uint_eq(strlen(text), len);
    return text;
}

static void hash_of(const char *text, char hex[DD_HASH_HEX_LEN + 1])
{
    dd_json_doc_t *doc = dd_json_doc_new();
    unsigned char h[DD_HASH_LEN];
    char err[200];

    ck_assert_msg(dd_json_parse(doc, text, strlen(text), err, sizeof(err)) == 0, "%s: %s", text,
                  err);
    ck_assert_int_eq(dd_hash_doc(NULL, doc, h), 0);
    dd_hash_hex(h, hex);
    dd_json_doc_destroy(doc);
}

/* Records under one schema each, with the text each decodes into. */
typedef struct {
    const char *schema, *hex, *text;
} text_vec_t;

static void expect_texts(const text_vec_t *v, size_t n)
{
    char err[300], *text;

    for (size_t i = 0; i < n; i++) {
        dd_avro_schema_t *s = schema_of(v[i].schema);
        text = decode_hex(s, v[i].hex, err, sizeof(err));
        ck_assert_msg(text, "%s %s: %s", v[i].schema, v[i].hex, err);
        ck_assert_str_eq(text, v[i].text);
        free(text);
        dd_avro_schema_destroy(s);
    }
}

/* Records under schema s, with their texts and the hashes of those; no
 * two hashes alike. */
typedef struct {
    const char *hex, *text, *sha;
} hash_vec_t;

static void expect_hashes(const dd_avro_schema_t *s, const hash_vec_t *v, size_t n)
{
    char err[300], hex[16][DD_HASH_HEX_LEN + 1];

    ck_assert_uint_le(n, 16);
    for (size_t i = 0; i < n; i++) {
        char *text = decode_hex(s, v[i].hex, err, sizeof(err));
        ck_assert_msg(text, "vector %zu: %s", i, err);
        ck_assert_str_eq(text, v[i].text);
        hash_of(text, hex[i]);
        ck_assert_str_eq(hex[i], v[i].sha);
        for (size_t k = 0; k < i; k++)
            ck_assert_str_ne(hex[k], hex[i]);
        free(text);
    }
}

START_TEST(test_vectors)
{
    static const hash_vec_t v[] = {
        {"046d31828080808080802004fb3200009a9999999999b93f0000c03f010406613a6204c3a90002027801"
         "000600ff2201020304",
         "{\"merchant_id\":\"m1\",\"order_no\":9007199254740993,\"amount\":-12.30,\"currency\":"
         "\"EUR\",\"note\":null,\"rate\":0.1,\"ratio\":1.5,\"flag\":true,\"tags\":[\"a:b\","
         "\"\xc3\xa9\"],\"attrs\":{\"x\":-1},\"raw\":\"AP8i\",\"digest\":\"AQIDBA==\"}",
         "7376f8a5f169a50670d078f70d468fffcc31f48fb340d87a26d79610fab424b7"},
        {"046d31828080808080802002050002067801799c7500883ce4377effff7f7f0100000600ff2201020304",
         "{\"merchant_id\":\"m1\",\"order_no\":9007199254740993,\"amount\":0.05,\"currency\":"
         "\"EUR\",\"note\":\"x\\u0001y\",\"rate\":1e+300,\"ratio\":3.4028235e+38,\"flag\":true,"
         "\"tags\":[],\"attrs\":{},\"raw\":\"AP8i\",\"digest\":\"AQIDBA==\"}",
         "d8f7180acab92a90d180e05a214620b3f6bfb6d18a9a063e71f2f5f617c17244"},
        /* zero bytes in bytes and in fixed */
        {"046d320e02640200000000000000e03f0000803e000000020000000000",
         "{\"merchant_id\":\"m2\",\"order_no\":7,\"amount\":1.00,\"currency\":\"USD\",\"note\":"
         "null,\"rate\":0.5,\"ratio\":0.25,\"flag\":false,\"tags\":[],\"attrs\":{},\"raw\":"
         "\"AA==\",\"digest\":\"AAAAAA==\"}",
         "6ee3310983ea0cedc9ea50dfe305c2e0bd1d471b4297df2a50078242bf31147c"},
    };
    dd_avro_schema_t *s = schema_of(payment_schema);
    char err[300];

    expect_hashes(s, v, DD_ARRAY_LEN(v));
    /* the second vector as written, with U+0000 in the note: refused at the NUL */
    ck_assert_ptr_null(decode_hex(
        s, "046d31828080808080802002050002067800799c7500883ce4377effff7f7f0100000600ff2201020304",
        err, sizeof(err)));
    ck_assert_str_eq(err, "NUL (U+0000) in a string at byte 17");
    dd_avro_schema_destroy(s);
}
END_TEST

/* Bytes and fixed as standard base64 with padding, whatever their bytes
 * and length (more than one 48-byte piece too). */
START_TEST(test_bytes)
{
    static const text_vec_t v[] = {
        {"\"bytes\"", "00", "\"\""},
        {"\"bytes\"", "0200", "\"AA==\""},
        {"\"bytes\"", "040000", "\"AAA=\""},
        {"\"bytes\"", "06000000", "\"AAAA\""},
        {"\"bytes\"",
         "c801000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f202122232425262728"
         "292a2b2c2d2e2f303132333435363738393a3b3c3d3e3f404142434445464748494a4b4c4d4e4f50515253"
         "5455565758595a5b5c5d5e5f60616263",
         "\"AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8gISIjJCUmJygpKissLS4vMDEyMzQ1Njc4OTo7PD0+"
         "P0BBQkNERUZHSElKS0xNTk9QUVJTVFVWV1hZWltcXV5fYGFiYw==\""},
        {"{\"type\":\"fixed\",\"name\":\"U\",\"size\":16}", "00000000000040008000000000000000",
         "\"AAAAAAAAQACAAAAAAAAAAA==\""},
        {"{\"type\":\"map\",\"values\":\"bytes\"}", "02026b04000000", "{\"k\":\"AAA=\"}"},
    };
    expect_texts(v, DD_ARRAY_LEN(v));
}
END_TEST

/* Decimals keep their scale in the text, whatever their size and sign. */
START_TEST(test_decimals)
{
    static const struct {
        const char *hex, *text;
    } v[] = {
        {"0200", "0.000"},
        {"0201", "0.001"},
        {"02ff", "-0.001"},
        {"0403e8", "1.000"},
        {"04fc18", "-1.000"},
        {"0280", "-0.128"},
        {"1200ffffffffffffffff", "18446744073709551.615"},
        {"12800000000000000000", "-2361183241434822606.848"},
    };
    dd_avro_schema_t *s = schema_of("{\"type\":\"bytes\",\"logicalType\":\"decimal\","
                                    "\"precision\":30,\"scale\":3}");
    dd_avro_schema_t *s0 = schema_of("{\"type\":\"fixed\",\"name\":\"F\",\"size\":2,"
                                     "\"logicalType\":\"decimal\",\"precision\":4}");
    dd_avro_schema_t *bad = schema_of("{\"type\":\"bytes\",\"logicalType\":\"decimal\","
                                      "\"precision\":2,\"scale\":3}"); /* ignored: bytes */
    unsigned char big[2 + 129];
    char err[300], *text;
    size_t len;

    for (size_t i = 0; i < DD_ARRAY_LEN(v); i++) {
        text = decode_hex(s, v[i].hex, err, sizeof(err));
        ck_assert_msg(text, "%s: %s", v[i].hex, err);
        ck_assert_str_eq(text, v[i].text);
        free(text);
    }
    text = decode_hex(s0, "ff85", err, sizeof(err));
    ck_assert_str_eq(text, "-123");
    free(text);
    text = decode_hex(bad, "0241", err, sizeof(err));
    ck_assert_str_eq(text, "\"QQ==\"");
    free(text);
    ck_assert_ptr_null(decode_hex(s, "00", err, sizeof(err)));
    ck_assert_str_eq(err, "a decimal of 0 bytes at byte 1");
    memset(big, 0x01, sizeof(big)); /* 129 bytes, each 1 */
    big[0] = 0x82;
    big[1] = 0x02;
    ck_assert_int_eq(dd_avro_decode(s, big, sizeof(big), 0, 1 << 20, &text, &len, err, sizeof(err)),
                     DD_ERR_PERMANENT);
    ck_assert_str_eq(err, "a decimal of 129 bytes, at most 128 at byte 2");
    dd_avro_schema_destroy(s);
    dd_avro_schema_destroy(s0);
    dd_avro_schema_destroy(bad);
}
END_TEST

/* Numbers: ints in range, floats as the shortest text reading back. */
START_TEST(test_numbers)
{
    static const text_vec_t v[] = {
        {"\"int\"", "feffffff0f", "2147483647"},
        {"\"int\"", "ffffffff0f", "-2147483648"},
        {"\"long\"", "feffffffffffffffff01", "9223372036854775807"},
        {"\"long\"", "ffffffffffffffffff01", "-9223372036854775808"},
        {"\"long\"", "8000", "0"}, /* a longer form than needed reads the same */
        {"\"double\"", "0000000000000080", "-0"},
        {"\"double\"", "0100000000000000", "5e-324"},
        {"\"float\"", "cdcccc3d", "0.1"},
        {"\"boolean\"", "00", "false"},
        {"\"null\"", "", "null"},
    };
    expect_texts(v, DD_ARRAY_LEN(v));
}
END_TEST

/* Named types are referred to by name, also from inside themselves. */
START_TEST(test_names)
{
    dd_avro_schema_t *s = schema_of(
        "{\"type\":\"record\",\"name\":\"a.Node\",\"fields\":[{\"name\":\"v\",\"type\":\"int\"},"
        "{\"name\":\"next\",\"type\":[\"null\",\"Node\"]},{\"name\":\"e\",\"type\":{\"type\":"
        "\"enum\",\"name\":\"E\",\"symbols\":[\"A\",\"B\"]}},{\"name\":\"e2\",\"type\":\"a.E\"}]}");
    char err[300], *text = decode_hex(s, "0202040002020000", err, sizeof(err));

    ck_assert_msg(text, "%s", err);
    ck_assert_str_eq(text, "{\"v\":1,\"next\":{\"v\":2,\"next\":null,\"e\":\"B\",\"e2\":\"B\"},"
                           "\"e\":\"A\",\"e2\":\"A\"}");
    free(text);
    dd_avro_schema_destroy(s);
}
END_TEST

/* What a hostile or broken record gets: its reason and byte. */
START_TEST(test_bad_records)
{
    static const struct {
        const char *schema, *hex, *err;
    } v[] = {
        {"\"string\"", "0a6162", "string of 5 bytes declared, only 2 bytes left at byte 0"},
        {"\"string\"", "", "truncated: a number runs past the end at byte 0"},
        {"\"string\"", "03", "negative length -2 of a string at byte 0"},
        {"\"string\"", "04c328", "invalid UTF-8 in a string at byte 1"},
        {"\"string\"", "06780079", "NUL (U+0000) in a string at byte 2"},
        {"\"string\"", "0600c328", "NUL (U+0000) in a string at byte 1"},
        {"\"string\"", "06c32800", "invalid UTF-8 in a string at byte 1"},
        {"{\"type\":\"map\",\"values\":\"int\"}", "02046b000200",
         "NUL (U+0000) in a string at byte 3"},
        {"\"bytes\"", "feffffffffffffffff01",
         "bytes value of 9223372036854775807 bytes declared, only 0 bytes left at byte 0"},
        {"{\"type\":\"array\",\"items\":\"int\"}", "feffffff0f00",
         "array block of 2147483647 items declared, only 1 bytes left at byte 0"},
        {"{\"type\":\"map\",\"values\":\"null\"}", "80897a00",
         "map block of 1000000 items declared, only 1 bytes left at byte 0"},
        {"{\"type\":\"array\",\"items\":\"null\"}", "feffffffffffffffff01",
         "the record's JSON text is longer than 1048576 bytes at byte 10"},
        {"{\"type\":\"array\",\"items\":\"int\"}", "010300", "negative block size -2 at byte 0"},
        {"{\"type\":\"array\",\"items\":\"int\"}", "0202",
         "truncated: a number runs past the "
         "end at byte 2"},
        {"\"int\"", "8080808010", "int 2147483648 out of the 32-bit range at byte 0"},
        {"\"long\"", "ffffffffffffffffff7f", "a number of more than 64 bits at byte 0"},
        {"\"long\"", "0200", "1 bytes left after the record at byte 1"},
        {"\"double\"", "000000000000f87f", "double NaN (JSON has no such number) at byte 0"},
        {"\"float\"", "0000807f", "float infinite (JSON has no such number) at byte 0"},
        {"\"float\"", "000080", "truncated: a float needs 4 bytes at byte 0"},
        {"\"boolean\"", "02", "boolean byte 0x02, not 0 or 1 at byte 0"},
        {"[\"null\",\"int\"]", "04", "union branch index 2, the union has 2 at byte 0"},
        {"{\"type\":\"enum\",\"name\":\"E\",\"symbols\":[\"A\"]}", "01",
         "enum symbol index -1, the enum has 1 at byte 0"},
        {"{\"type\":\"fixed\",\"name\":\"F\",\"size\":8}", "0102",
         "fixed of 8 bytes, only 2 "
         "bytes left at byte 0"},
    };
    char err[300];

    for (size_t i = 0; i < DD_ARRAY_LEN(v); i++) {
        dd_avro_schema_t *s = schema_of(v[i].schema);
        char *text = decode_hex(s, v[i].hex, err, sizeof(err));
        ck_assert_msg(!text, "%s %s decoded as %s", v[i].schema, v[i].hex, text);
        ck_assert_str_eq(err, v[i].err);
        dd_avro_schema_destroy(s);
    }
}
END_TEST

/* A record nested deeper than DD_AVRO_MAX_DEPTH is refused, not a crash. */
START_TEST(test_deep)
{
    dd_avro_schema_t *s = schema_of("{\"type\":\"record\",\"name\":\"N\",\"fields\":[{\"name\":"
                                    "\"n\",\"type\":[\"null\",\"N\"]}]}");
    unsigned char buf[2 * 1000 + 1];
    char err[300], *text = NULL;
    size_t len;

    memset(buf, 0x02, sizeof(buf)); /* branch N, again and again */
    buf[sizeof(buf) - 1] = 0;
    ck_assert_int_eq(dd_avro_decode(s, buf, sizeof(buf), 0, 1 << 20, &text, &len, err, sizeof(err)),
                     DD_ERR_PERMANENT);
    ck_assert_ptr_null(text);
    ck_assert_msg(strstr(err, "nesting deeper than 256"), "%s", err);
    /* 100 levels are fine */
    ck_assert_int_eq(
        dd_avro_decode(s, buf + sizeof(buf) - 101, 101, 0, 1 << 20, &text, &len, err, sizeof(err)),
        0);
    free(text);
    dd_avro_schema_destroy(s);
}
END_TEST

START_TEST(test_frame)
{
    const unsigned char *body;
    size_t body_len;
    uint32_t id;
    char err[200];

    ck_assert_int_eq(dd_avro_frame("\0\0\0\0\7xy", 7, &id, &body, &body_len, err, sizeof(err)), 0);
    ck_assert_uint_eq(id, 7);
    ck_assert_uint_eq(body_len, 2);
    ck_assert_int_eq(
        dd_avro_frame("\0\x7f\xff\xff\xff", 5, &id, &body, &body_len, err, sizeof(err)), 0);
    ck_assert_uint_eq(id, 0x7fffffff);
    ck_assert_int_eq(dd_avro_frame("\0\x80\0\0\0", 5, &id, &body, &body_len, err, sizeof(err)),
                     DD_ERR_PERMANENT);
    ck_assert_str_eq(err, "schema id 2147483648 at byte 1 is 2^31 or more");
    ck_assert_int_eq(dd_avro_frame("{\"a\":1}", 7, &id, &body, &body_len, err, sizeof(err)),
                     DD_ERR_PERMANENT);
    ck_assert_str_eq(err, "magic byte 0x7b at byte 0, not 0x00: not the Confluent wire format");
    ck_assert_int_eq(dd_avro_frame("\0\0\0", 3, &id, &body, &body_len, err, sizeof(err)),
                     DD_ERR_PERMANENT);
    ck_assert_str_eq(err, "3 bytes, shorter than the 5-byte header of the Confluent wire format");
}
END_TEST

START_TEST(test_bad_schemas)
{
    static const struct {
        const char *schema, *err;
    } v[] = {
        {"\"Nope\"", "unknown type \"Nope\""},
        {"[\"null\",[\"int\"]]", "a union inside a union"},
        {"[\"int\",\"int\"]", "a union with two branches of type int"},
        {"[\"null\",{\"type\":\"enum\",\"name\":\"a.E\",\"symbols\":[\"X\"]},\"a.E\"]",
         "a union with two branches of type a.E"},
        {"{\"type\":\"record\",\"name\":\"R\",\"fields\":[{\"name\":\"a\",\"type\":\"int\"},"
         "{\"name\":\"a\",\"type\":\"long\"}]}",
         "field \"a\" twice in one record"},
        {"{\"type\":\"record\",\"name\":\"R\",\"fields\":[{\"name\":\"a\",\"type\":{\"type\":"
         "\"record\",\"name\":\"R\",\"fields\":[]}}]}",
         "type \"R\" defined twice"},
        {"{\"type\":\"enum\",\"name\":\"E\",\"symbols\":[\"A\",\"A\"]}",
         "symbol \"A\" twice in one enum"},
        {"{\"type\":\"record\",\"name\":\"1R\",\"fields\":[]}",
         "a named type without a valid name"},
        {"{\"type\":\"fixed\",\"name\":\"F\"}", "fixed \"F\" without a valid size"},
        {"{\"type\":\"bytes\",\"logicalType\":\"decimal\",\"precision\":2000,\"scale\":1001}",
         NULL}, /* scale past the limit: the annotation is ignored */
        {"{", "the schema is not JSON: unexpected end of text (expected a member name in double "
              "quotes) at byte 1"},
        /* one library reads the first, another the last */
        {"{\"type\":\"bytes\",\"logicalType\":\"decimal\",\"precision\":4,\"scale\":2,"
         "\"scale\":0}",
         "the schema is not JSON: duplicate member name \"scale\" (first at byte 54) at byte 64"},
        {"{\"type\":\"enum\",\"name\":\"E\",\"symbols\":[\"B\",\"A\",\"C\",\"A\"]}",
         "symbol \"A\" twice in one enum"},
    };
    char err[300];

    for (size_t i = 0; i < DD_ARRAY_LEN(v); i++) {
        dd_avro_schema_t *s = NULL;
        int rc = dd_avro_schema_new(&s, v[i].schema, strlen(v[i].schema), err, sizeof(err));
        if (!v[i].err) {
            ck_assert_msg(rc == 0, "%s: %s", v[i].schema, err);
            dd_avro_schema_destroy(s);
            continue;
        }
        ck_assert_msg(rc == DD_ERR_PERMANENT, "%s accepted", v[i].schema);
        ck_assert_ptr_null(s);
        ck_assert_str_eq(err, v[i].err);
    }
}
END_TEST

/* Schema evolution: a record written under a second version that adds a
 * field with its default is another payload, unless dedup.hash leaves the
 * field out (docs/KEYS.md). */
START_TEST(test_evolution)
{
    dd_avro_schema_t *v1 = schema_of("{\"type\":\"record\",\"name\":\"P\",\"fields\":[{\"name\":"
                                     "\"id\",\"type\":\"string\"},{\"name\":\"amount\",\"type\":"
                                     "\"long\"}]}");
    dd_avro_schema_t *v2 = schema_of("{\"type\":\"record\",\"name\":\"P\",\"fields\":[{\"name\":"
                                     "\"amount\",\"type\":\"long\"},{\"name\":\"id\",\"type\":"
                                     "\"string\"}]}");
    dd_avro_schema_t *v3 = schema_of("{\"type\":\"record\",\"name\":\"P\",\"fields\":[{\"name\":"
                                     "\"id\",\"type\":\"string\"},{\"name\":\"amount\",\"type\":"
                                     "\"long\"},{\"name\":\"channel\",\"type\":\"string\","
                                     "\"default\":\"web\"}]}");
    char *paths[] = {"id", "amount"};
    char err[300], h1[DD_HASH_HEX_LEN + 1], h2[DD_HASH_HEX_LEN + 1], h3[DD_HASH_HEX_LEN + 1];
    char *t1 = decode_hex(v1, "046f31f403", err, sizeof(err));
    char *t2 = decode_hex(v2, "f403046f31", err, sizeof(err)); /* same values, other order */
    char *t3 = decode_hex(v3, "046f31f40306776562", err, sizeof(err));
    dd_hash_spec_t *spec;
    dd_json_doc_t *doc = dd_json_doc_new();
    unsigned char a[DD_HASH_LEN], b[DD_HASH_LEN];

    ck_assert_str_eq(t3, "{\"id\":\"o1\",\"amount\":250,\"channel\":\"web\"}");
    hash_of(t1, h1);
    hash_of(t2, h2);
    hash_of(t3, h3);
    ck_assert_str_eq(h1, h2);
    ck_assert_str_ne(h1, h3);
    ck_assert_int_eq(dd_hash_spec_new(&spec, paths, 2, err, sizeof(err)), 0);
    ck_assert_int_eq(dd_json_parse(doc, t1, strlen(t1), NULL, 0), 0);
    ck_assert_int_eq(dd_hash_doc(spec, doc, a), 0);
    ck_assert_int_eq(dd_json_parse(doc, t3, strlen(t3), NULL, 0), 0);
    ck_assert_int_eq(dd_hash_doc(spec, doc, b), 0);
    ck_assert_mem_eq(a, b, DD_HASH_LEN);
    dd_hash_spec_destroy(spec);
    dd_json_doc_destroy(doc);
    free(t1);
    free(t2);
    free(t3);
    dd_avro_schema_destroy(v1);
    dd_avro_schema_destroy(v2);
    dd_avro_schema_destroy(v3);
}
END_TEST

/* Unions: where two branches could write different values as one JSON
 * text (a string and bytes, a float and a double, an enum and a string,
 * records of one name in two namespaces), the value is written under its
 * branch's name; ["null", X] stays X's value or null. The records were
 * written by python3-avro, each union's branch chosen explicitly (as a
 * Java producer's datum class chooses it); every text differs from every
 * other, and so does every hash (python3's json and hashlib computed the
 * expected ones from the texts). */
static const char union_schema[] =
    "{\"type\": \"record\", \"name\": \"Payment\", \"namespace\": \"com.example\", \"fields\": ["
    "{\"name\": \"id\", \"type\": \"string\"}, {\"name\": \"note\", \"type\": [\"null\", "
    "\"string\"]}, {\"name\": \"ref\", \"type\": [\"null\", \"string\", \"bytes\"]}, {\"name\": "
    "\"fee\", \"type\": [\"float\", \"double\"]}, {\"name\": \"cur\", \"type\": [{\"type\": "
    "\"enum\", \"name\": \"Currency\", \"symbols\": [\"EUR\", \"USD\"]}, \"string\"]}, {\"name\": "
    "\"party\", \"type\": [{\"type\": \"record\", \"name\": \"Party\", \"namespace\": "
    "\"com.example.bank\", \"fields\": [{\"name\": \"id\", \"type\": \"string\"}]}, {\"type\": "
    "\"record\", \"name\": \"Party\", \"namespace\": \"com.example.shop\", \"fields\": [{\"name\": "
    "\"id\", \"type\": \"string\"}]}]}]}";

START_TEST(test_union_branches)
{
    static const hash_vec_t v[] = {
        {"047031000002000000000000e03f000000047531",
         "{\"id\":\"p1\",\"note\":null,\"ref\":null,\"fee\":{\"double\":0.5},\"cur\":{"
         "\"com.example.Currency\":\"EUR\"},\"party\":{\"com.example.bank.Party\":{\"id\":\"u1\"}}"
         "}",
         "fbd97cc7dd93f5c3b2b90d69ff877775cb890a5fe262dc4f8c50d96dcb87abc7"},
        {"0470310002084150386902000000000000e03f000000047531",
         "{\"id\":\"p1\",\"note\":null,\"ref\":{\"string\":\"AP8i\"},\"fee\":{\"double\":0.5},"
         "\"cur\":{\"com.example.Currency\":\"EUR\"},\"party\":{\"com.example.bank.Party\":{\"id\":"
         "\"u1\"}}}",
         "a543722f67bfb5a517e2a67657e9b9ec68845d1f173d436370b73ffbbfccafcf"},
        {"04703100040600ff2202000000000000e03f000000047531",
         "{\"id\":\"p1\",\"note\":null,\"ref\":{\"bytes\":\"AP8i\"},\"fee\":{\"double\":0.5},"
         "\"cur\":{\"com.example.Currency\":\"EUR\"},\"party\":{\"com.example.bank.Party\":{\"id\":"
         "\"u1\"}}}",
         "01b7bcde3095aed63d7be21ed1be3c7fdc966b1edfde50143100ccd9270380ee"},
        {"047031000000cdcccc3d000000047531",
         "{\"id\":\"p1\",\"note\":null,\"ref\":null,\"fee\":{\"float\":0.1},\"cur\":{"
         "\"com.example.Currency\":\"EUR\"},\"party\":{\"com.example.bank.Party\":{\"id\":\"u1\"}}"
         "}",
         "b07a3bdf889a012999d5ef7d781a91ec789f7d3094947fa9991d3531ebd9a5bb"},
        {"0470310000029a9999999999b93f000000047531",
         "{\"id\":\"p1\",\"note\":null,\"ref\":null,\"fee\":{\"double\":0.1},\"cur\":{"
         "\"com.example.Currency\":\"EUR\"},\"party\":{\"com.example.bank.Party\":{\"id\":\"u1\"}}"
         "}",
         "f522dbc82f476f0ebc7b3fe29fd2afdb1d914b27b7fa4987df0c4b712755e641"},
        {"047031000002000000000000e03f020645555200047531",
         "{\"id\":\"p1\",\"note\":null,\"ref\":null,\"fee\":{\"double\":0.5},\"cur\":{\"string\":"
         "\"EUR\"},\"party\":{\"com.example.bank.Party\":{\"id\":\"u1\"}}}",
         "7e404560b3206749839dd54cf36117eeb36b0ce939a847be1eb20e336ad7338f"},
        {"047031000002000000000000e03f000002047531",
         "{\"id\":\"p1\",\"note\":null,\"ref\":null,\"fee\":{\"double\":0.5},\"cur\":{"
         "\"com.example.Currency\":\"EUR\"},\"party\":{\"com.example.shop.Party\":{\"id\":\"u1\"}}"
         "}",
         "bca82ca8d49f8e47c50dc7f735248323c354d93cd133eb0cdddbc2af9b54ea3b"},
        {"0470310202780002000000000000e03f000000047531",
         "{\"id\":\"p1\",\"note\":\"x\",\"ref\":null,\"fee\":{\"double\":0.5},\"cur\":{"
         "\"com.example.Currency\":\"EUR\"},\"party\":{\"com.example.bank.Party\":{\"id\":\"u1\"}}"
         "}",
         "67b7b073f5537353aee4976029e4986eb5f4d29a8859bef4c6b849e72d53b0ac"},
    };
    dd_avro_schema_t *s = schema_of(union_schema);
    unsigned char bad[5];
    char err[300], *text;
    size_t len;

    expect_hashes(s, v, DD_ARRAY_LEN(v));
    /* a branch the union does not have, at byte 9 of the message (its
     * header counts), as the dead letter says */
    unhex("0470310006", bad);
    ck_assert_int_eq(
        dd_avro_decode(s, bad, 5, DD_AVRO_HEADER_LEN, 1 << 20, &text, &len, err, sizeof(err)),
        DD_ERR_PERMANENT);
    ck_assert_str_eq(err, "union branch index 3, the union has 3 at byte 9");
    dd_avro_schema_destroy(s);
}
END_TEST

/* Unions that cannot write two values as one text stay untagged, so the
 * records under them decode as before; one branch more of a kind already
 * there tags them. */
START_TEST(test_union_untagged)
{
    static const text_vec_t v[] = {
        {"[\"null\",\"string\"]", "020278", "\"x\""},
        {"[\"string\",\"null\"]", "0000", "\"\""},
        {"[\"null\",\"string\",\"long\",\"boolean\"]", "0414", "10"},
        {"[\"string\",\"long\",{\"type\":\"array\",\"items\":\"int\"},{\"type\":\"map\","
         "\"values\":\"int\"}]",
         "04020200", "[1]"},
        {"[\"null\",\"int\",\"long\"]", "0414", "{\"long\":10}"},
        {"[\"null\",\"boolean\",\"int\",\"long\"]", "0201", "{\"boolean\":true}"},
        {"[\"null\",{\"type\":\"bytes\",\"logicalType\":\"decimal\",\"precision\":4,\"scale\":2},"
         "\"string\"]",
         "020405dc", "15.00"},
        {"[\"null\",{\"type\":\"bytes\",\"logicalType\":\"decimal\",\"precision\":4,\"scale\":2},"
         "\"int\"]",
         "020405dc", "{\"bytes\":15.00}"},
        {"[{\"type\":\"map\",\"values\":\"int\"},{\"type\":\"record\",\"name\":\"R\",\"fields\":[]}"
         "]",
         "02", "{\"R\":{}}"},
    };
    expect_texts(v, DD_ARRAY_LEN(v));
}
END_TEST

static void fingerprint_hex(const char *json, char out[65])
{
    dd_avro_schema_t *s = schema_of(json);

    for (int i = 0; i < DD_AVRO_FINGERPRINT_LEN; i++)
        snprintf(out + 2 * i, 3, "%02x", dd_avro_schema_fingerprint(s)[i]);
    dd_avro_schema_destroy(s);
}

/* Fingerprints: python3-avro's SHA-256 of the Parsing Canonical Form for a
 * schema without decimals; what does not change the decoding (spacing,
 * the order of attributes, docs, aliases, defaults, a namespace written
 * out) does not change it; what does (a decimal's scale, a field's order,
 * a symbol) does. */
START_TEST(test_fingerprint)
{
    static const char *const same[] = {
        "{\"type\":\"record\",\"name\":\"R\",\"namespace\":\"a\",\"fields\":[{\"name\":\"x\","
        "\"type\":{\"type\":\"bytes\",\"logicalType\":\"decimal\",\"precision\":9,\"scale\":2}},"
        "{\"name\":\"e\",\"type\":{\"type\":\"enum\",\"name\":\"E\",\"symbols\":[\"A\"]}},"
        "{\"name\":\"e2\",\"type\":\"E\"}]}",
        "{ \"fields\": [ {\"doc\": \"d\", \"type\": {\"scale\": 2, \"precision\": 9, "
        "\"logicalType\": \"decimal\", \"type\": \"bytes\"}, \"name\": \"x\", \"default\": \"\"},"
        " {\"name\":\"e\",\"type\":{\"type\":\"enum\",\"name\":\"a.E\",\"symbols\":[\"A\"]}},"
        "{\"name\":\"e2\",\"type\":\"a.E\"}], \"name\": \"a.R\", \"aliases\": [\"Q\"], \"type\": "
        "\"record\" }",
    };
    static const char *const other[] = {
        /* scale 0 */
        "{\"type\":\"record\",\"name\":\"R\",\"namespace\":\"a\",\"fields\":[{\"name\":\"x\","
        "\"type\":{\"type\":\"bytes\",\"logicalType\":\"decimal\",\"precision\":9,\"scale\":0}},"
        "{\"name\":\"e\",\"type\":{\"type\":\"enum\",\"name\":\"E\",\"symbols\":[\"A\"]}},"
        "{\"name\":\"e2\",\"type\":\"E\"}]}",
        /* no decimal */
        "{\"type\":\"record\",\"name\":\"R\",\"namespace\":\"a\",\"fields\":[{\"name\":\"x\","
        "\"type\":\"bytes\"},{\"name\":\"e\",\"type\":{\"type\":\"enum\",\"name\":\"E\","
        "\"symbols\":[\"A\"]}},{\"name\":\"e2\",\"type\":\"E\"}]}",
        /* another symbol */
        "{\"type\":\"record\",\"name\":\"R\",\"namespace\":\"a\",\"fields\":[{\"name\":\"x\","
        "\"type\":{\"type\":\"bytes\",\"logicalType\":\"decimal\",\"precision\":9,\"scale\":2}},"
        "{\"name\":\"e\",\"type\":{\"type\":\"enum\",\"name\":\"E\",\"symbols\":[\"B\"]}},"
        "{\"name\":\"e2\",\"type\":\"E\"}]}",
        /* fields in another order */
        "{\"type\":\"record\",\"name\":\"R\",\"namespace\":\"a\",\"fields\":["
        "{\"name\":\"e\",\"type\":{\"type\":\"enum\",\"name\":\"E\",\"symbols\":[\"A\"]}},"
        "{\"name\":\"x\",\"type\":{\"type\":\"bytes\",\"logicalType\":\"decimal\",\"precision\":9,"
        "\"scale\":2}},{\"name\":\"e2\",\"type\":\"E\"}]}",
    };
    char a[65], b[65];

    fingerprint_hex(union_schema, a);
    ck_assert_str_eq(a, "058b5d981ff55324ca0e457fb2600146ae9146ea1e2558f84b4032d6273009e3");
    fingerprint_hex(same[0], a);
    fingerprint_hex(same[1], b);
    ck_assert_str_eq(a, b);
    for (size_t i = 0; i < DD_ARRAY_LEN(other); i++) {
        fingerprint_hex(other[i], b);
        ck_assert_msg(strcmp(a, b) != 0, "%s", other[i]);
    }
}
END_TEST

/* Schema references: named types of other schemas, parsed before the
 * writer schema, each failure naming the reference. */
START_TEST(test_refs)
{
    static const char currency[] = "{\"type\":\"enum\",\"name\":\"com.example.Currency\","
                                   "\"symbols\":[\"EUR\",\"USD\"]}";
    static const char money[] =
        "{\"type\":\"record\",\"name\":\"Money\",\"namespace\":\"com.example\",\"fields\":["
        "{\"name\":\"units\",\"type\":\"long\"},{\"name\":\"currency\",\"type\":\"Currency\"}]}";
    static const char payment[] = "{\"type\":\"record\",\"name\":\"Payment\",\"fields\":[{\"name\":"
                                  "\"id\",\"type\":\"string\"},{\"name\":\"amount\",\"type\":"
                                  "\"com.example.Money\"}]}";
    dd_avro_text_t refs[] = {{currency, strlen(currency), "subject currency version 1"},
                             {money, strlen(money), "subject money version 2"}};
    dd_avro_schema_t *s = NULL;
    char err[300], *text;

    ck_assert_int_eq(dd_avro_schema_new(&s, payment, strlen(payment), err, sizeof(err)),
                     DD_ERR_PERMANENT);
    ck_assert_str_eq(err, "unknown type \"com.example.Money\"");
    ck_assert_int_eq(
        dd_avro_schema_new_refs(&s, refs + 1, 1, payment, strlen(payment), err, sizeof(err)),
        DD_ERR_PERMANENT);
    ck_assert_str_eq(err, "subject money version 2: unknown type \"Currency\"");
    ck_assert_int_eq(
        dd_avro_schema_new_refs(&s, refs, 2, payment, strlen(payment), err, sizeof(err)), 0);
    text = decode_hex(s, "047031960102", err, sizeof(err));
    ck_assert_msg(text, "%s", err);
    ck_assert_str_eq(text, "{\"id\":\"p1\",\"amount\":{\"units\":75,\"currency\":\"USD\"}}");
    free(text);
    dd_avro_schema_destroy(s);
}
END_TEST

/* A schema of 120,000 named types parses in well under a second: names
 * are looked up in a tree, not compared with every earlier one (which
 * took minutes). */
START_TEST(test_large_schema)
{
    enum { N = 120000 };
    size_t cap = (size_t)N * 80 + 100, len = 0;
    char *json = malloc(cap), err[300];
    dd_avro_schema_t *s = NULL;
    int64_t t0;

    ck_assert_ptr_nonnull(json);
    len += (size_t)snprintf(json + len, cap - len,
                            "{\"type\":\"record\",\"name\":\"Big\","
                            "\"fields\":[");
    for (int i = 0; i < N; i++)
        len += (size_t)snprintf(json + len, cap - len,
                                "%s{\"name\":\"f%d\",\"type\":{\"type\":\"enum\",\"name\":\"E%d\","
                                "\"symbols\":[\"A\"]}}",
                                i ? "," : "", i, i);
    len += (size_t)snprintf(json + len, cap - len, "]}");
    t0 = dd_now_ms();
    ck_assert_msg(dd_avro_schema_new(&s, json, len, err, sizeof(err)) == 0, "%s", err);
    ck_assert_msg(dd_now_ms() - t0 < 20000, "%lld ms", (long long)(dd_now_ms() - t0));
    dd_avro_schema_destroy(s);
    free(json);
}
END_TEST

static Suite *avro_suite(void)
{
    Suite *s = suite_create("avro");
    TCase *tc = tcase_create("avro");

    tcase_add_test(tc, test_vectors);
    tcase_add_test(tc, test_bytes);
    tcase_add_test(tc, test_decimals);
    tcase_add_test(tc, test_numbers);
    tcase_add_test(tc, test_names);
    tcase_add_test(tc, test_bad_records);
    tcase_add_test(tc, test_deep);
    tcase_add_test(tc, test_frame);
    tcase_add_test(tc, test_bad_schemas);
    tcase_add_test(tc, test_evolution);
    tcase_add_test(tc, test_union_branches);
    tcase_add_test(tc, test_union_untagged);
    tcase_add_test(tc, test_fingerprint);
    tcase_add_test(tc, test_refs);
    tcase_add_test(tc, test_large_schema);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return dd_check_run(avro_suite());
}
