/*
 * libFuzzer target for dd_key: the input is a message payload.
 *
 * Every payload goes through what the pipeline does (UTF-8 check, parse,
 * key render, hash) plus the canonical form, and two properties are checked:
 * the canonical text canonicalises to itself, and hashing it gives the same
 * hash as hashing the original. Either failing would mean a re-serialised
 * duplicate could be reported as a conflict, so we abort(). Short inputs are
 * also tried as key templates.
 *
 * clang -g -O1 -fsanitize=fuzzer,address,undefined -D_GNU_SOURCE -Iinclude -Isrc \
 *   tests/fuzz/fuzz_key.c src/dd_key.c src/dd_common.c \
 *   $(pkg-config --cflags --libs libcjson libcrypto) -lm -o /tmp/fuzz_key
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dd_key.h"

#define FUZZ_CHECK(cond)                                                                           \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond);               \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

static dd_key_tmpl_t *fuzz_tmpl;
static dd_hash_spec_t *fuzz_spec;
static cJSON *fuzz_doc; /* fixed document for templates taken from the input */

static void fuzz_init(void)
{
    static char *paths[] = {"amount", "a.b[0]", "x[1].y", "currency"};
    char errstr[256];

    if (fuzz_tmpl) return;
    if (dd_key_tmpl_new(&fuzz_tmpl, "k:${a}:${a.b[0]}:${x[1].y}$$${[0]}", errstr, sizeof(errstr)) ||
        dd_hash_spec_new(&fuzz_spec, paths, 4, errstr, sizeof(errstr))) {
        fprintf(stderr, "fuzz_key init: %s\n", errstr);
        abort();
    }
    fuzz_doc = cJSON_Parse("{\"a\":{\"b\":[\"s\",1.5]},\"x\":[0,{\"y\":true}],\"n\":null}");
    FUZZ_CHECK(fuzz_doc != NULL);
}

static void fuzz_render(const dd_key_tmpl_t *tmpl, const cJSON *json)
{
    char out[DD_KEY_MAX + 1], why[256];
    size_t out_len = 0;
    dd_key_status_t st = dd_key_render(tmpl, json, out, &out_len, why, sizeof(why));

    FUZZ_CHECK(out_len <= DD_KEY_MAX);
    FUZZ_CHECK(out[out_len] == '\0');
    FUZZ_CHECK(st == DD_KEY_OK || st == DD_KEY_MISSING || st == DD_KEY_TOO_LONG);
    if (st == DD_KEY_MISSING) FUZZ_CHECK(out_len == 0 && strstr(why, "field ") == why);
    if (st == DD_KEY_TOO_LONG) FUZZ_CHECK(out_len == DD_KEY_MAX);
}

/* Canonical text of json must be valid UTF-8 JSON that canonicalises to
 * itself and hashes like the original. */
static void fuzz_canonical(const cJSON *json)
{
    unsigned char h1[DD_HASH_LEN], h2[DD_HASH_LEN], h3[DD_HASH_LEN], h4[DD_HASH_LEN];
    char *c1 = NULL, *c2 = NULL;
    size_t l1 = 0, l2 = 0;
    cJSON *again;

    FUZZ_CHECK(dd_key_hash(NULL, json, h1) == 0);
    FUZZ_CHECK(dd_key_hash(fuzz_spec, json, h3) == 0);
    FUZZ_CHECK(dd_json_canonical(json, &c1, &l1) == 0);
    FUZZ_CHECK(strlen(c1) == l1);
    FUZZ_CHECK(dd_utf8_valid(c1, l1));
    again = cJSON_ParseWithLength(c1, l1);
    FUZZ_CHECK(again != NULL);
    FUZZ_CHECK(dd_json_canonical(again, &c2, &l2) == 0);
    FUZZ_CHECK(l1 == l2 && memcmp(c1, c2, l1) == 0);
    FUZZ_CHECK(dd_key_hash(NULL, again, h2) == 0);
    FUZZ_CHECK(memcmp(h1, h2, DD_HASH_LEN) == 0);
    FUZZ_CHECK(dd_key_hash(fuzz_spec, again, h4) == 0);
    FUZZ_CHECK(memcmp(h3, h4, DD_HASH_LEN) == 0);
    cJSON_Delete(again);
    free(c1);
    free(c2);
}

/* Short inputs double as templates over a fixed document. */
static void fuzz_template(const uint8_t *data, size_t size)
{
    char text[512], errstr[256];
    dd_key_tmpl_t *tmpl = NULL;

    if (size >= sizeof(text)) return;
    memcpy(text, data, size);
    text[size] = '\0';
    if (dd_key_tmpl_new(&tmpl, text, errstr, sizeof(errstr)) == 0) {
        fuzz_render(tmpl, fuzz_doc);
        dd_key_tmpl_destroy(tmpl);
    } else {
        FUZZ_CHECK(tmpl == NULL && errstr[0] != '\0');
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    cJSON *json;

    fuzz_init();
    fuzz_template(data, size);
    if (!dd_utf8_valid(data, size)) return 0;
    json = cJSON_ParseWithLength((const char *)data, size);
    if (!json) return 0;
    fuzz_render(fuzz_tmpl, json);
    fuzz_canonical(json);
    cJSON_Delete(json);
    return 0;
}
