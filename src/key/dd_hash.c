/*
 * Hash specs and SHA-256 request hashes (see dd_hash.h).
 */
#include "dd_hash.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>

#include "dd_canon.h"
#include "dd_common.h"
#include "dd_jpath.h"
#include "dd_text.h"

/* Hashing buffers this much canonical text before each digest update. */
#define DD_HASH_CHUNK 1024

struct dd_hash_spec_s {
    dd_jpath_t *paths; /* sorted by text, no duplicates */
    int path_cnt;
};

/*
 * Specs
 */

static int dd_hash_path_cmp(const void *a, const void *b)
{
    return strcmp(((const dd_jpath_t *)a)->text, ((const dd_jpath_t *)b)->text);
}

void dd_hash_spec_destroy(dd_hash_spec_t *spec)
{
    int i;

    if (!spec) return;
    for (i = 0; i < spec->path_cnt; i++)
        dd_jpath_release(&spec->paths[i]);
    free(spec->paths);
    free(spec);
}

/* Sorts the paths and drops repeats: the hashed object needs unique names
 * in canonical order (path texts are ASCII, so strcmp order is bytewise). */
static void dd_hash_spec_sort(dd_hash_spec_t *spec)
{
    int i, kept = 0;

    if (spec->path_cnt == 0) return; /* paths is NULL: qsort must not see it */
    qsort(spec->paths, (size_t)spec->path_cnt, sizeof(*spec->paths), dd_hash_path_cmp);
    for (i = 0; i < spec->path_cnt; i++) {
        if (kept && !strcmp(spec->paths[kept - 1].text, spec->paths[i].text))
            dd_jpath_release(&spec->paths[i]);
        else
            spec->paths[kept++] = spec->paths[i];
    }
    spec->path_cnt = kept;
}

int dd_hash_spec_new(dd_hash_spec_t **specp, char *const *paths, int path_cnt, char *errstr,
                     size_t errstr_size)
{
    dd_hash_spec_t *spec = NULL;
    char why[128];
    int rc = DD_ERR_NOMEM, i;

    *specp = NULL;
    if (path_cnt < 0 || (path_cnt > 0 && !paths)) {
        dd_errstr_set(errstr, errstr_size, "invalid hash path list");
        return DD_ERR_ARG;
    }
    spec = calloc(1, sizeof(*spec));
    if (!spec || (path_cnt && !(spec->paths = calloc((size_t)path_cnt, sizeof(*spec->paths))))) {
        dd_errstr_set(errstr, errstr_size, "out of memory");
        goto out;
    }
    for (i = 0; i < path_cnt; i++) {
        const char *p = paths[i] ? paths[i] : "";

        if ((rc = dd_jpath_parse(&spec->paths[i], p, strlen(p), 1, why, sizeof(why)))) {
            dd_errstr_set(errstr, errstr_size, "hash path \"%s\": %s", p, why);
            goto out;
        }
        spec->path_cnt++;
    }
    dd_hash_spec_sort(spec);
    *specp = spec;
    spec = NULL;
    rc = 0;
out:
    dd_hash_spec_destroy(spec);
    return rc;
}

/*
 * The hash input
 */

/* {"<path>": value, ...} for the paths that find a value; the paths are
 * sorted already, so the object is canonical as written. */
static void dd_hash_write_spec(dd_canon_w_t *w, const dd_hash_spec_t *spec,
                               const dd_json_doc_t *doc)
{
    int i, n = 0;

    dd_canon_putc(w, '{');
    for (i = 0; i < spec->path_cnt; i++) {
        const dd_json_node_t *v = dd_jpath_lookup(&spec->paths[i], doc, NULL);

        if (!v) continue;
        if (n++) dd_canon_putc(w, ',');
        dd_canon_string(w, spec->paths[i].text, strlen(spec->paths[i].text));
        dd_canon_putc(w, ':');
        dd_canon_value(w, doc, v);
    }
    dd_canon_putc(w, '}');
}

static void dd_hash_write(dd_canon_w_t *w, const dd_hash_spec_t *spec, const dd_json_doc_t *doc)
{
    if (spec && spec->path_cnt > 0)
        dd_hash_write_spec(w, spec, doc);
    else
        dd_canon_value(w, doc, dd_json_root(doc));
}

int dd_hash_input(const dd_hash_spec_t *spec, const dd_json_doc_t *doc, char **outp,
                  size_t *out_len)
{
    dd_canon_w_t w = {0};

    *outp = NULL;
    if (out_len) *out_len = 0;
    if (!dd_json_root(doc)) return DD_ERR_ARG;
    dd_hash_write(&w, spec, doc);
    dd_canon_putc(&w, '\0');
    if (w.err) {
        free(w.buf);
        return w.err;
    }
    *outp = w.buf;
    if (out_len) *out_len = w.len - 1;
    return 0;
}

/*
 * Hashing
 */

/* SHA-256 fetched once: an implicit fetch on every EVP_DigestInit_ex would
 * take OpenSSL's method-store lock for every message in every worker. */
static EVP_MD *dd_sha256_fetched;
static pthread_once_t dd_sha256_once = PTHREAD_ONCE_INIT;

static void dd_sha256_init(void)
{
    dd_sha256_fetched = EVP_MD_fetch(NULL, "SHA256", NULL);
}

static const EVP_MD *dd_sha256(void)
{
    pthread_once(&dd_sha256_once, dd_sha256_init);
    return dd_sha256_fetched ? dd_sha256_fetched : EVP_sha256();
}

static int dd_hash_drain(dd_canon_w_t *w, const void *p, size_t n)
{
    return EVP_DigestUpdate(w->ctx, p, n) ? 0 : DD_ERR_FATAL;
}

int dd_hash_doc(const dd_hash_spec_t *spec, const dd_json_doc_t *doc,
                unsigned char out[DD_HASH_LEN])
{
    char chunk[DD_HASH_CHUNK];
    dd_canon_w_t w = {chunk, 0, sizeof(chunk), dd_hash_drain, NULL, 0};
    EVP_MD_CTX *md;
    unsigned int md_len = 0;
    int rc = DD_ERR_FATAL;

    if (!dd_json_root(doc)) return DD_ERR_ARG;
    if (!(md = EVP_MD_CTX_new())) return DD_ERR_NOMEM;
    w.ctx = md;
    if (!EVP_DigestInit_ex(md, dd_sha256(), NULL)) goto out;
    dd_hash_write(&w, spec, doc);
    if (!w.err && w.len && !EVP_DigestUpdate(md, w.buf, w.len)) goto out;
    if (w.err) {
        rc = w.err;
        goto out;
    }
    if (!EVP_DigestFinal_ex(md, out, &md_len) || md_len != DD_HASH_LEN) goto out;
    rc = 0;
out:
    EVP_MD_CTX_free(md);
    return rc;
}

int dd_hash_payload(const dd_hash_spec_t *spec, const void *payload, size_t len,
                    unsigned char out[DD_HASH_LEN])
{
    dd_json_doc_t *doc = dd_json_doc_new();
    int rc;

    if (!doc) return DD_ERR_NOMEM;
    rc = dd_json_parse(doc, payload, len, NULL, 0);
    if (!rc) rc = dd_hash_doc(spec, doc, out);
    dd_json_doc_destroy(doc);
    return rc;
}

int dd_hash_bytes(const void *const *parts, const size_t *lens, int cnt,
                  unsigned char out[DD_HASH_LEN])
{
    EVP_MD_CTX *md = EVP_MD_CTX_new();
    unsigned int md_len = 0;
    int ok;

    if (!md) return DD_ERR_NOMEM;
    ok = EVP_DigestInit_ex(md, dd_sha256(), NULL);
    for (int i = 0; ok && i < cnt; i++)
        ok = !lens[i] || EVP_DigestUpdate(md, parts[i], lens[i]);
    ok = ok && EVP_DigestFinal_ex(md, out, &md_len) && md_len == DD_HASH_LEN;
    EVP_MD_CTX_free(md);
    return ok ? 0 : DD_ERR_FATAL;
}

void dd_hash_hex(const unsigned char hash[DD_HASH_LEN], char out[DD_HASH_HEX_LEN + 1])
{
    dd_text_hex(out, hash, DD_HASH_LEN, 0);
    out[DD_HASH_HEX_LEN] = '\0';
}
