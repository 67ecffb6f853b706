/*
 * libFuzzer target for the Avro decoding: the input is a record's bytes
 * (after the Confluent header) under one of a few writer schemas, or, when
 * its first byte is 0xff, a writer schema's text, a NUL, then the record.
 *
 * Every input must be refused with a reason or decoded into JSON text that
 * the strict parser accepts (only a map's key twice may be refused there,
 * as the pipeline then dead-letters it bad_avro), within the text bound;
 * anything else, a crash, a leak or an unbounded allocation, is a failure.
 *
 * Two records, to hold the mapping to "two different values never one
 * text": when the first byte is 0xfe, a schema byte (one of the pair
 * schemas: unions of a string and bytes, a float and a double, an enum and
 * a string, records of one name in two namespaces, and more), a length n,
 * then record A of n bytes and record B; 0xfd instead of the schema byte
 * takes a writer schema's text up to a NUL. When A and B decode into one
 * text, their values must be equal: both are written again in a canonical
 * binary form (shortest numbers, one block per array and map, a decimal's
 * bytes without sign extension) by a walker of the schema's own, which
 * must give the same bytes.
 *
 * Built by scripts/fuzz; by hand:
 * clang -g -O1 -fsanitize=fuzzer,address,undefined -D_GNU_SOURCE -Iinclude -Isrc/base -Isrc/key \
 *   tests/fuzz/fuzz_avro.c src/key/dd_avro.c src/key/dd_avro_schema.c src/key/dd_avro_pcf.c \
 *   src/base/dd_utf8.c src/base/dd_text.c src/base/dd_buf.c \
 *   src/key/dd_json.c src/key/dd_canon.c src/base/dd_common.c \
 *   $(pkg-config --cflags --libs libcjson libcrypto) -lpthread -lm -o /tmp/fuzz_avro
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dd_avro_int.h"
#include "dd_json.h"
#include "dd_utf8.h"

#define FUZZ_CHECK(cond)                                                                           \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond);               \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

#define FUZZ_MAX_TEXT (1 << 16) /* small: records of nulls reach it fast */

static const char *const fuzz_schema_texts[] = {
    "{\"type\":\"record\",\"name\":\"P\",\"namespace\":\"x\",\"fields\":["
    "{\"name\":\"id\",\"type\":[\"null\",\"string\"]},{\"name\":\"n\",\"type\":\"long\"},"
    "{\"name\":\"i\",\"type\":\"int\"},{\"name\":\"amt\",\"type\":{\"type\":\"bytes\","
    "\"logicalType\":\"decimal\",\"precision\":30,\"scale\":4}},{\"name\":\"e\",\"type\":"
    "{\"type\":\"enum\",\"name\":\"E\",\"symbols\":[\"A\",\"B\",\"C\"]}},"
    "{\"name\":\"d\",\"type\":\"double\"},{\"name\":\"f\",\"type\":\"float\"},"
    "{\"name\":\"b\",\"type\":\"boolean\"},{\"name\":\"raw\",\"type\":\"bytes\"},"
    "{\"name\":\"fx\",\"type\":{\"type\":\"fixed\",\"name\":\"F\",\"size\":3}},"
    "{\"name\":\"fd\",\"type\":{\"type\":\"fixed\",\"name\":\"G\",\"size\":5,"
    "\"logicalType\":\"decimal\",\"precision\":9,\"scale\":2}}]}",
    "{\"type\":\"record\",\"name\":\"N\",\"fields\":[{\"name\":\"v\",\"type\":\"int\"},"
    "{\"name\":\"next\",\"type\":[\"null\",\"N\"]},{\"name\":\"kids\",\"type\":{\"type\":"
    "\"array\",\"items\":\"N\"}}]}",
    "{\"type\":\"record\",\"name\":\"B\",\"fields\":[{\"name\":\"a\",\"type\":{\"type\":"
    "\"array\",\"items\":\"null\"}},{\"name\":\"m\",\"type\":{\"type\":\"map\",\"values\":"
    "{\"type\":\"map\",\"values\":\"string\"}}},{\"name\":\"r\",\"type\":{\"type\":\"record\","
    "\"name\":\"Empty\",\"fields\":[]}},{\"name\":\"ra\",\"type\":{\"type\":\"array\","
    "\"items\":\"Empty\"}}]}",
};
/* The pair schemas: every union two of whose branches write the same
 * kind of JSON value. */
static const char *const fuzz_pair_texts[] = {
    "{\"type\":\"record\",\"name\":\"Payment\",\"namespace\":\"com.example\",\"fields\":["
    "{\"name\":\"id\",\"type\":\"string\"},{\"name\":\"note\",\"type\":[\"null\",\"string\"]},"
    "{\"name\":\"ref\",\"type\":[\"null\",\"string\",\"bytes\"]},{\"name\":\"fee\",\"type\":"
    "[\"float\",\"double\"]},{\"name\":\"cur\",\"type\":[{\"type\":\"enum\",\"name\":\"Currency\","
    "\"symbols\":[\"EUR\",\"USD\"]},\"string\"]},{\"name\":\"party\",\"type\":[{\"type\":"
    "\"record\",\"name\":\"Party\",\"namespace\":\"com.example.bank\",\"fields\":[{\"name\":"
    "\"id\",\"type\":\"string\"}]},{\"type\":\"record\",\"name\":\"Party\",\"namespace\":"
    "\"com.example.shop\",\"fields\":[{\"name\":\"id\",\"type\":\"string\"}]}]}]}",
    "{\"type\":\"array\",\"items\":[\"null\",\"boolean\",\"int\",\"long\",\"float\",\"double\","
    "{\"type\":\"bytes\",\"logicalType\":\"decimal\",\"precision\":9,\"scale\":2},\"string\","
    "{\"type\":\"fixed\",\"name\":\"F2\",\"size\":2},{\"type\":\"enum\",\"name\":\"E\","
    "\"symbols\":[\"A\",\"AA\"]},{\"type\":\"map\",\"values\":\"int\"},{\"type\":\"record\","
    "\"name\":\"R\",\"fields\":[{\"name\":\"A\",\"type\":\"int\"}]},{\"type\":\"array\","
    "\"items\":\"long\"}]}",
    "{\"type\":\"map\",\"values\":[{\"type\":\"fixed\",\"name\":\"a.D\",\"size\":1,"
    "\"logicalType\":\"decimal\",\"precision\":2,\"scale\":0},\"int\",{\"type\":\"record\","
    "\"name\":\"a.R\",\"fields\":[{\"name\":\"x\",\"type\":[\"null\",\"float\"]}]},{\"type\":"
    "\"record\",\"name\":\"b.R\",\"fields\":[{\"name\":\"x\",\"type\":[\"null\",\"double\"]}]}]}",
};
#define FUZZ_PAIRS (sizeof(fuzz_pair_texts) / sizeof(fuzz_pair_texts[0]))

static dd_avro_schema_t *fuzz_schemas[3], *fuzz_pairs[FUZZ_PAIRS];
static dd_json_doc_t *fuzz_doc;

static dd_avro_schema_t *fuzz_schema(const char *text)
{
    dd_avro_schema_t *s = NULL;
    char err[300];

    if (dd_avro_schema_new(&s, text, strlen(text), err, sizeof(err))) {
        fprintf(stderr, "fuzz_avro init: %s: %s\n", text, err);
        abort();
    }
    return s;
}

static void fuzz_init(void)
{
    if (fuzz_doc) return;
    for (size_t i = 0; i < 3; i++)
        fuzz_schemas[i] = fuzz_schema(fuzz_schema_texts[i]);
    for (size_t i = 0; i < FUZZ_PAIRS; i++)
        fuzz_pairs[i] = fuzz_schema(fuzz_pair_texts[i]);
    if (!(fuzz_doc = dd_json_doc_new())) abort();
}

/* Decodes data under schema; the text (malloc'd) or NULL. */
static char *fuzz_decode(const dd_avro_schema_t *schema, const uint8_t *data, size_t size)
{
    char err[300] = "", why[200] = "", *text = NULL;
    size_t len = 0;
    int rc = dd_avro_decode(schema, data, size, 0, FUZZ_MAX_TEXT, &text, &len, err, sizeof(err));

    if (rc) {
        FUZZ_CHECK(!text && err[0]);
        return NULL;
    }
    FUZZ_CHECK(text && strlen(text) == len && len <= FUZZ_MAX_TEXT);
    FUZZ_CHECK(dd_utf8_valid(text, len));
    if (dd_json_parse(fuzz_doc, text, len, why, sizeof(why)) != 0)
        FUZZ_CHECK(strstr(why, "duplicate member name"));
    return text;
}

/*
 * The canonical binary form of a record that decoded: its value, one way.
 */

typedef struct {
    const uint8_t *p, *end;
    uint8_t *out;
    size_t len, cap;
} fuzz_canon_t;

static void fuzz_put(fuzz_canon_t *c, const void *p, size_t n)
{
    if (c->len + n > c->cap) {
        c->cap = 2 * (c->len + n) + 64;
        if (!(c->out = realloc(c->out, c->cap))) abort();
    }
    memcpy(c->out + c->len, p, n);
    c->len += n;
}

static int64_t fuzz_long(fuzz_canon_t *c)
{
    uint64_t u = 0;

    for (int shift = 0; shift < 64; shift += 7) {
        uint8_t b = *c->p++; /* the record decoded: the bytes are there */
        u |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) break;
    }
    return (int64_t)(u >> 1) ^ -(int64_t)(u & 1);
}

static void fuzz_put_long(fuzz_canon_t *c, int64_t v)
{
    uint64_t u = ((uint64_t)v << 1) ^ (uint64_t)(v >> 63);
    uint8_t b;

    do {
        b = u & 0x7f;
        u >>= 7;
        b |= u ? 0x80 : 0;
        fuzz_put(c, &b, 1);
    } while (u);
}

/* A decimal's two's-complement bytes without the leading bytes that only
 * repeat the sign. */
static void fuzz_put_decimal(fuzz_canon_t *c, const uint8_t *s, size_t n)
{
    while (n > 1 && ((s[0] == 0 && !(s[1] & 0x80)) || (s[0] == 0xff && (s[1] & 0x80)))) {
        s++;
        n--;
    }
    fuzz_put_long(c, (int64_t)n);
    fuzz_put(c, s, n);
}

static void fuzz_canon(fuzz_canon_t *c, const dd_avro_node_t *node)
{
    int64_t n, k;

    switch (node->type) {
    case DD_AVRO_NULL:
        return;
    case DD_AVRO_BOOLEAN:
        fuzz_put(c, c->p++, 1);
        return;
    case DD_AVRO_INT:
    case DD_AVRO_LONG:
    case DD_AVRO_ENUM:
        fuzz_put_long(c, fuzz_long(c));
        return;
    case DD_AVRO_FLOAT:
    case DD_AVRO_DOUBLE:
        n = node->type == DD_AVRO_FLOAT ? 4 : 8;
        fuzz_put(c, c->p, (size_t)n);
        c->p += n;
        return;
    case DD_AVRO_BYTES:
    case DD_AVRO_STRING:
    case DD_AVRO_FIXED:
        n = node->type == DD_AVRO_FIXED ? (int64_t)node->size : fuzz_long(c);
        if (node->decimal)
            fuzz_put_decimal(c, c->p, (size_t)n);
        else if (node->type == DD_AVRO_FIXED)
            fuzz_put(c, c->p, (size_t)n);
        else {
            fuzz_put_long(c, n);
            fuzz_put(c, c->p, (size_t)n);
        }
        c->p += n;
        return;
    case DD_AVRO_RECORD:
        for (size_t i = 0; i < node->cnt; i++)
            fuzz_canon(c, node->fields[i].type);
        return;
    case DD_AVRO_UNION:
        n = fuzz_long(c);
        fuzz_put_long(c, n);
        fuzz_canon(c, node->branches[n]);
        return;
    default: /* array, map: each item with a count of 1 before it, then 0 */
        while ((n = fuzz_long(c)) != 0) {
            if (n < 0) {
                n = -n;
                fuzz_long(c); /* the block's size */
            }
            for (k = 0; k < n; k++) {
                fuzz_put_long(c, 1);
                if (node->type == DD_AVRO_MAP)
                    fuzz_canon(c, &(dd_avro_node_t){.type = DD_AVRO_STRING});
                fuzz_canon(c, node->items);
            }
        }
        fuzz_put_long(c, 0);
    }
}

/* A and B under schema: one text, one value. */
static void fuzz_pair(const dd_avro_schema_t *schema, const uint8_t *data, size_t size)
{
    size_t n;
    char *a, *b;

    if (size < 1 || (n = data[0]) > size - 1) return;
    a = fuzz_decode(schema, data + 1, n);
    b = fuzz_decode(schema, data + 1 + n, size - 1 - n);
    if (a && b && strcmp(a, b) == 0) {
        fuzz_canon_t ca = {data + 1, data + 1 + n, NULL, 0, 0};
        fuzz_canon_t cb = {data + 1 + n, data + size, NULL, 0, 0};
        fuzz_canon(&ca, schema->root);
        fuzz_canon(&cb, schema->root);
        if (ca.len != cb.len || memcmp(ca.out, cb.out, ca.len) != 0) {
            fprintf(stderr, "two values, one text: %s\n", a);
            abort();
        }
        free(ca.out);
        free(cb.out);
    }
    free(a);
    free(b);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const uint8_t *nul;
    dd_avro_schema_t *schema = NULL;
    char err[300];
    int pair;

    fuzz_init();
    if (size < 1) return 0;
    if (data[0] < 0xfe) {
        free(fuzz_decode(fuzz_schemas[data[0] % 3], data + 1, size - 1));
        return 0;
    }
    pair = data[0] == 0xfe;
    if (size < 2 + (size_t)pair) return 0;
    if (pair && data[1] != 0xfd) {
        fuzz_pair(fuzz_pairs[data[1] % FUZZ_PAIRS], data + 2, size - 2);
        return 0;
    }
    data += 1 + pair;
    size -= 1 + (size_t)pair;
    if (!(nul = memchr(data, 0, size))) return 0;
    if (dd_avro_schema_new(&schema, (const char *)data, (size_t)(nul - data), err, sizeof(err)) ==
        0) {
        if (pair)
            fuzz_pair(schema, nul + 1, size - (size_t)(nul + 1 - data));
        else
            free(fuzz_decode(schema, nul + 1, size - (size_t)(nul + 1 - data)));
        dd_avro_schema_destroy(schema);
    }
    return 0;
}
