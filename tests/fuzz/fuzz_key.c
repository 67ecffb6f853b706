/*
 * libFuzzer target for the strict parser, canonical form, keys and hashes:
 * the input is a message payload.
 *
 * Every payload goes through what the pipeline does (strict parse, key
 * render, hash) and, when accepted, these properties are checked; a failure
 * means two payloads could be judged wrongly, so we abort():
 *   - cJSON parses it too (the pipeline builds the handlers' tree from text
 *     the strict parser accepted);
 *   - its canonical text is valid UTF-8 without a raw NUL, is accepted, and
 *     canonicalises to itself;
 *   - the canonical text keys and hashes (whole payload and a path spec)
 *     exactly like the original;
 *   - a key is never longer than DD_KEY_MAX, has no NUL or control byte, and
 *     a failure says why.
 * Short inputs are also tried as key templates over a fixed document.
 *
 * Built by scripts/fuzz; by hand:
 * clang -g -O1 -fsanitize=fuzzer,address,undefined -D_GNU_SOURCE -Iinclude -Isrc/base -Isrc/key \
 *   tests/fuzz/fuzz_key.c src/base/dd_utf8.c src/base/dd_text.c src/key/dd_json.c \
 *   src/key/dd_canon.c src/key/dd_jpath.c src/key/dd_key.c src/key/dd_hash.c src/base/dd_common.c \
 *   $(pkg-config --cflags --libs libcjson libcrypto) -lpthread -lm -o /tmp/fuzz_key
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "dd_canon.h"
#include "dd_hash.h"
#include "dd_json.h"
#include "dd_key.h"
#include "dd_utf8.h"

#define FUZZ_CHECK(cond)                                                                           \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond);               \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

static dd_key_tmpl_t *fuzz_tmpl;
static dd_hash_spec_t *fuzz_spec;
static dd_json_doc_t *fuzz_doc, *fuzz_doc2, *fuzz_fixed;
static const char fuzz_fixed_text[] =
    "{\"a\":{\"b\":[\"s:x\",1.5]},\"x\":[0,{\"y\":true}],\"n\":null,\"z\":\"\\u0001%\"}";

static void fuzz_init(void)
{
    static char *paths[] = {"amount", "a.b[0]", "x[1].y", "currency", "id"};
    char errstr[256];

    if (fuzz_tmpl) return;
    if (dd_key_tmpl_new(&fuzz_tmpl, "k:${a}:${a.b[0]}:${x[1].y}$$${[0]}", errstr, sizeof(errstr)) ||
        dd_hash_spec_new(&fuzz_spec, paths, 5, errstr, sizeof(errstr))) {
        fprintf(stderr, "fuzz_key init: %s\n", errstr);
        abort();
    }
    fuzz_doc = dd_json_doc_new();
    fuzz_doc2 = dd_json_doc_new();
    fuzz_fixed = dd_json_doc_new();
    FUZZ_CHECK(fuzz_doc && fuzz_doc2 && fuzz_fixed);
    FUZZ_CHECK(dd_json_parse(fuzz_fixed, fuzz_fixed_text, sizeof(fuzz_fixed_text) - 1, NULL, 0) ==
               0);
}

/* Renders; returns the status and leaves the key in out. */
static dd_key_status_t fuzz_render(const dd_key_tmpl_t *tmpl, const dd_json_doc_t *doc,
                                   char out[DD_KEY_MAX + 1], size_t *out_len)
{
    char why[256] = "";
    dd_key_status_t st = dd_key_render(tmpl, doc, out, out_len, why, sizeof(why));

    FUZZ_CHECK(*out_len <= DD_KEY_MAX);
    FUZZ_CHECK(out[*out_len] == '\0');
    FUZZ_CHECK(st == DD_KEY_OK || st == DD_KEY_MISSING || st == DD_KEY_TOO_LONG);
    for (size_t i = 0; i < *out_len; i++)
        FUZZ_CHECK((unsigned char)out[i] >= 0x20 && out[i] != 0x7f);
    if (st == DD_KEY_MISSING) FUZZ_CHECK(*out_len == 0 && strstr(why, "field ") == why);
    if (st == DD_KEY_TOO_LONG) FUZZ_CHECK(*out_len == DD_KEY_MAX && why[0]);
    return st;
}

/* The properties of an accepted payload (see the top of this file). */
static void fuzz_accepted(const uint8_t *data, size_t size)
{
    unsigned char h1[DD_HASH_LEN], h2[DD_HASH_LEN], h3[DD_HASH_LEN], h4[DD_HASH_LEN];
    char k1[DD_KEY_MAX + 1], k2[DD_KEY_MAX + 1], *c1 = NULL, *c2 = NULL;
    size_t l1 = 0, l2 = 0, kl1, kl2;
    dd_key_status_t s1, s2;
    cJSON *json = cJSON_ParseWithLength((const char *)data, size);

    FUZZ_CHECK(json != NULL);
    cJSON_Delete(json);
    s1 = fuzz_render(fuzz_tmpl, fuzz_doc, k1, &kl1);
    FUZZ_CHECK(dd_hash_doc(NULL, fuzz_doc, h1) == 0);
    FUZZ_CHECK(dd_hash_doc(fuzz_spec, fuzz_doc, h3) == 0);
    FUZZ_CHECK(dd_canon_text(fuzz_doc, dd_json_root(fuzz_doc), &c1, &l1) == 0);
    FUZZ_CHECK(strlen(c1) == l1);
    FUZZ_CHECK(dd_utf8_valid(c1, l1));
    FUZZ_CHECK(dd_json_parse(fuzz_doc2, c1, l1, NULL, 0) == 0);
    FUZZ_CHECK(dd_canon_text(fuzz_doc2, dd_json_root(fuzz_doc2), &c2, &l2) == 0);
    FUZZ_CHECK(l1 == l2 && memcmp(c1, c2, l1) == 0);
    s2 = fuzz_render(fuzz_tmpl, fuzz_doc2, k2, &kl2);
    FUZZ_CHECK(s1 == s2 && kl1 == kl2 && memcmp(k1, k2, kl1) == 0);
    FUZZ_CHECK(dd_hash_doc(NULL, fuzz_doc2, h2) == 0);
    FUZZ_CHECK(memcmp(h1, h2, DD_HASH_LEN) == 0);
    FUZZ_CHECK(dd_hash_doc(fuzz_spec, fuzz_doc2, h4) == 0);
    FUZZ_CHECK(memcmp(h3, h4, DD_HASH_LEN) == 0);
    free(c1);
    free(c2);
}

/* Short inputs double as templates over a fixed document. */
static void fuzz_template(const uint8_t *data, size_t size)
{
    char text[512], errstr[256], out[DD_KEY_MAX + 1];
    dd_key_tmpl_t *tmpl = NULL;
    size_t out_len;

    if (size >= sizeof(text)) return;
    memcpy(text, data, size);
    text[size] = '\0';
    if (dd_key_tmpl_new(&tmpl, text, errstr, sizeof(errstr)) == 0) {
        FUZZ_CHECK(strchr(text, '%') == NULL); /* '%' is refused in templates */
        fuzz_render(tmpl, fuzz_fixed, out, &out_len);
        dd_key_tmpl_destroy(tmpl);
    } else {
        FUZZ_CHECK(tmpl == NULL && errstr[0] != '\0');
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char err[256] = "";

    fuzz_init();
    fuzz_template(data, size);
    if (dd_json_parse(fuzz_doc, data, size, err, sizeof(err)) == 0)
        fuzz_accepted(data, size);
    else
        FUZZ_CHECK(strstr(err, " at byte ") != NULL);
    return 0;
}
