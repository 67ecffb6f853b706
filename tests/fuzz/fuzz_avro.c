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
 * Built by scripts/fuzz; by hand:
 * clang -g -O1 -fsanitize=fuzzer,address,undefined -D_GNU_SOURCE -Iinclude -Isrc/base -Isrc/key \
 *   tests/fuzz/fuzz_avro.c src/key/dd_avro.c src/key/dd_avro_schema.c src/base/dd_utf8.c \
 *   src/base/dd_text.c \
 *   src/key/dd_json.c src/key/dd_canon.c src/base/dd_common.c \
 *   $(pkg-config --cflags --libs libcjson libcrypto) -lpthread -lm -o /tmp/fuzz_avro
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dd_avro.h"
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
static dd_avro_schema_t *fuzz_schemas[3];
static dd_json_doc_t *fuzz_doc;

static void fuzz_init(void)
{
    char err[300];

    if (fuzz_doc) return;
    for (size_t i = 0; i < 3; i++)
        if (dd_avro_schema_new(&fuzz_schemas[i], fuzz_schema_texts[i], strlen(fuzz_schema_texts[i]),
                               err, sizeof(err))) {
            fprintf(stderr, "fuzz_avro init: schema %zu: %s\n", i, err);
            abort();
        }
    if (!(fuzz_doc = dd_json_doc_new())) abort();
}

static void fuzz_decode(const dd_avro_schema_t *schema, const uint8_t *data, size_t size)
{
    char err[300] = "", why[200] = "", *text = NULL;
    size_t len = 0;
    int rc = dd_avro_decode(schema, data, size, 0, FUZZ_MAX_TEXT, &text, &len, err, sizeof(err));

    if (rc) {
        FUZZ_CHECK(!text && err[0]);
        return;
    }
    FUZZ_CHECK(text && strlen(text) == len && len <= FUZZ_MAX_TEXT);
    FUZZ_CHECK(dd_utf8_valid(text, len));
    if (dd_json_parse(fuzz_doc, text, len, why, sizeof(why)) != 0)
        FUZZ_CHECK(strstr(why, "duplicate member name"));
    free(text);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const uint8_t *nul;
    dd_avro_schema_t *schema = NULL;
    char err[300];

    fuzz_init();
    if (size < 1) return 0;
    if (data[0] != 0xff) {
        fuzz_decode(fuzz_schemas[data[0] % 3], data + 1, size - 1);
        return 0;
    }
    if (!(nul = memchr(data + 1, 0, size - 1))) return 0;
    if (dd_avro_schema_new(&schema, (const char *)data + 1, (size_t)(nul - data - 1), err,
                           sizeof(err)) == 0) {
        fuzz_decode(schema, nul + 1, size - (size_t)(nul + 1 - data));
        dd_avro_schema_destroy(schema);
    }
    return 0;
}
