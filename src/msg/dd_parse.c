/*
 * Message parsing and key derivation (see dd_parse.h). The rules are the
 * ones of dd_pipeline_route(): same checks, same order, same reasons.
 */
#include "dd_parse.h"

#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>

#include "dd_common.h"

/*
 * The parse pool (see dd_parse.h)
 */

#define DD_PARSE_CHUNK (64 * 1024)
#define DD_PARSE_CHUNKS_MIN 32
#define DD_PARSE_CHUNKS_MAX 4096 /* 256 MiB; chunk numbers fit a uint16_t */
#define DD_PARSE_ALIGN 16        /* what malloc guarantees, so cJSON cannot tell */

struct dd_parse_pool_s {
    char *base;
    size_t chunk_cnt;
    uint32_t *refs;     /* trees alive in each chunk */
    uint16_t *free_idx; /* stack of chunks without trees, cur excluded */
    size_t free_cnt;
    long cur;     /* chunk being filled, or -1 */
    size_t used;  /* bytes of cur handed out */
    int overflow; /* the parse in progress ran out of room in cur */
};

/* The live pool's region, for the free hook (any thread), and the pool the
 * calling thread is parsing into right now, for the malloc hook. */
static char *dd_parse_region;
static size_t dd_parse_region_len;
static __thread dd_parse_pool_t *dd_parse_active;

static int dd_parse_in_region(const void *p)
{
    return (uintptr_t)p - (uintptr_t)dd_parse_region < dd_parse_region_len;
}

static void *dd_parse_hook_malloc(size_t size)
{
    dd_parse_pool_t *pool = dd_parse_active;
    size_t n = (size + DD_PARSE_ALIGN - 1) & ~(size_t)(DD_PARSE_ALIGN - 1);
    char *p;

    if (!pool) return malloc(size);
    if (n < size || n > DD_PARSE_CHUNK - pool->used) {
        pool->overflow = 1; /* cJSON fails the parse; dd_parse_tree tries again */
        return NULL;
    }
    p = pool->base + (size_t)pool->cur * DD_PARSE_CHUNK + pool->used;
    pool->used += n;
    return p;
}

/* Pooled memory goes back with its chunk (dd_parse_release), so cJSON
 * freeing part of a pooled tree (a failed parse) is simply nothing to do. */
static void dd_parse_hook_free(void *p)
{
    if (!dd_parse_in_region(p)) free(p);
}

int dd_parse_pool_new(dd_parse_pool_t **poolp, int64_t max_trees, char *errstr, size_t errstr_size)
{
    cJSON_Hooks hooks = {dd_parse_hook_malloc, dd_parse_hook_free};
    dd_parse_pool_t *pool;
    int64_t chunks = max_trees / (DD_PARSE_CHUNK / 4096);

    *poolp = NULL;
    if (dd_parse_region) {
        dd_errstr_set(errstr, errstr_size, "a parse pool exists already");
        return DD_ERR_ARG;
    }
    chunks = chunks < DD_PARSE_CHUNKS_MIN   ? DD_PARSE_CHUNKS_MIN
             : chunks > DD_PARSE_CHUNKS_MAX ? DD_PARSE_CHUNKS_MAX
                                            : chunks;
    pool = calloc(1, sizeof(*pool));
    if (pool) {
        pool->chunk_cnt = (size_t)chunks;
        pool->refs = calloc(pool->chunk_cnt, sizeof(*pool->refs));
        pool->free_idx = calloc(pool->chunk_cnt, sizeof(*pool->free_idx));
        /* Reserved, not committed: untouched chunks cost no memory. */
        pool->base = mmap(NULL, pool->chunk_cnt * DD_PARSE_CHUNK, PROT_READ | PROT_WRITE,
                          MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    }
    if (!pool || !pool->refs || !pool->free_idx || pool->base == MAP_FAILED) {
        if (pool && pool->base == MAP_FAILED) pool->base = NULL;
        dd_parse_pool_destroy(pool);
        dd_errstr_set(errstr, errstr_size, "out of memory for the parse pool");
        return DD_ERR_NOMEM;
    }
    /* Chunk 0 on top: the low chunks are reused first and stay warm. */
    for (size_t i = 0; i < pool->chunk_cnt; i++)
        pool->free_idx[i] = (uint16_t)(pool->chunk_cnt - 1 - i);
    pool->free_cnt = pool->chunk_cnt;
    pool->cur = -1;
    dd_parse_region = pool->base;
    dd_parse_region_len = pool->chunk_cnt * DD_PARSE_CHUNK;
    cJSON_InitHooks(&hooks);
    *poolp = pool;
    return DD_OK;
}

void dd_parse_pool_destroy(dd_parse_pool_t *pool)
{
    if (!pool) return;
    if (pool->base) {
        if (dd_parse_region == pool->base) {
            dd_parse_region = NULL;
            dd_parse_region_len = 0;
        }
        munmap(pool->base, pool->chunk_cnt * DD_PARSE_CHUNK);
    }
    free(pool->refs);
    free(pool->free_idx);
    free(pool);
}

/* Makes cur a chunk with need bytes left: cur itself when it has them or
 * holds no tree (it starts over), else an empty chunk. -1: none is free.
 * A chunk left with trees in it is freed by the release of its last one. */
static int dd_parse_pool_room(dd_parse_pool_t *pool, size_t need)
{
    if (pool->cur >= 0 && pool->refs[pool->cur] == 0) pool->used = 0;
    if (pool->cur >= 0 && need <= DD_PARSE_CHUNK - pool->used) return 0;
    if (!pool->free_cnt) {
        pool->cur = -1;
        return -1;
    }
    pool->cur = pool->free_idx[--pool->free_cnt];
    pool->used = 0;
    return 0;
}

static cJSON *dd_parse_pool_try(dd_parse_pool_t *pool, const char *text, size_t len,
                                const char **end)
{
    cJSON *json;

    pool->overflow = 0;
    dd_parse_active = pool;
    json = cJSON_ParseWithLengthOpts(text, len, end, 0);
    dd_parse_active = NULL;
    if (json) pool->refs[pool->cur]++;
    return json;
}

/* Parses into the pool when it has room, else on the heap. Trees take about
 * 6 bytes per payload byte (a 64-byte node per value plus its strings);
 * 8 leaves a margin, and a tree that still does not fit is parsed again in
 * an empty chunk, then on the heap. The result is the same either way. */
static cJSON *dd_parse_tree(dd_parse_pool_t *pool, const char *text, size_t len, const char **end)
{
    size_t need = len < DD_PARSE_CHUNK ? 8 * len + 256 : DD_PARSE_CHUNK + 1;
    cJSON *json;

    if (pool && need <= DD_PARSE_CHUNK && dd_parse_pool_room(pool, need) == 0) {
        size_t used_before = pool->used;
        json = dd_parse_pool_try(pool, text, len, end);
        if (json || !pool->overflow) return json;
        if (used_before > 0 && dd_parse_pool_room(pool, DD_PARSE_CHUNK) == 0) {
            json = dd_parse_pool_try(pool, text, len, end);
            if (json || !pool->overflow) return json;
        }
    }
    return cJSON_ParseWithLengthOpts(text, len, end, 0);
}

/* One tree or document copy fewer in chunk idx: a chunk left with none
 * (and not being filled) is free again. */
static void dd_parse_chunk_unref(dd_parse_pool_t *pool, size_t idx)
{
    if (--pool->refs[idx] == 0 && (long)idx != pool->cur)
        pool->free_idx[pool->free_cnt++] = (uint16_t)idx;
}

/* The chunk p lies in, or -1 when it is not pool memory. */
static long dd_parse_chunk_of(const dd_parse_pool_t *pool, const void *p)
{
    if (!pool || (uintptr_t)p - (uintptr_t)pool->base >= pool->chunk_cnt * DD_PARSE_CHUNK)
        return -1;
    return (long)(((const char *)p - pool->base) / DD_PARSE_CHUNK);
}

void dd_parse_release(dd_parse_pool_t *pool, cJSON *json)
{
    long idx = dd_parse_chunk_of(pool, json);

    if (!json) return;
    if (idx < 0)
        cJSON_Delete(json);
    else
        dd_parse_chunk_unref(pool, (size_t)idx);
}

/* size bytes for a copy of a document, in the chunk being filled when it
 * has room (counted like a tree, so the chunk lives as long as the copy),
 * else from the heap. */
static void *dd_parse_pool_alloc(dd_parse_pool_t *pool, size_t size)
{
    size_t n = (size + DD_PARSE_ALIGN - 1) & ~(size_t)(DD_PARSE_ALIGN - 1);
    char *p;

    if (!pool || n < size || n > DD_PARSE_CHUNK || dd_parse_pool_room(pool, n) != 0)
        return malloc(size);
    p = pool->base + (size_t)pool->cur * DD_PARSE_CHUNK + pool->used;
    pool->used += n;
    pool->refs[pool->cur]++;
    return p;
}

void dd_parse_release_doc(dd_parse_pool_t *pool, const dd_json_doc_t *doc)
{
    long idx = dd_parse_chunk_of(pool, doc);

    if (!doc) return;
    if (idx >= 0)
        dd_parse_chunk_unref(pool, (size_t)idx);
    else if (!dd_parse_in_region(doc)) /* without the pool, its memory is not ours */
        free((void *)(uintptr_t)doc);
}

/* The copy of doc a message keeps for its handler (dd_json_doc_copy), or
 * NULL out of memory. */
static const dd_json_doc_t *dd_parse_keep_doc(dd_parse_pool_t *pool, const dd_json_doc_t *doc)
{
    void *mem = dd_parse_pool_alloc(pool, dd_json_doc_copy_size(doc));

    return mem ? dd_json_doc_copy(doc, mem) : NULL;
}

/*
 * Parsing
 */

/* The handlers' tree, built only from text dd_json accepted: cJSON then
 * fails only for want of memory. */
static cJSON *dd_parse_json(dd_parse_pool_t *pool, const void *payload, size_t len, char *errstr,
                            size_t errstr_size)
{
    const char *end = NULL;
    cJSON *json = dd_parse_tree(pool, payload, len, &end);

    if (!json) dd_errstr_set(errstr, errstr_size, "cannot build the JSON tree (out of memory?)");
    return json;
}

int dd_parse_message(dd_json_doc_t *doc, int64_t max_payload_bytes, const dd_key_tmpl_t *tmpl,
                     const void *payload, size_t len, cJSON **jsonp, const dd_json_doc_t **copyp,
                     char key[DD_KEY_MAX + 1], size_t *key_len, dd_reason_t *reason, char *errstr,
                     size_t errstr_size)
{
    return dd_parse_message_into(NULL, doc, max_payload_bytes, tmpl, payload, len, jsonp, copyp,
                                 key, key_len, reason, errstr, errstr_size);
}

int dd_parse_message_into(dd_parse_pool_t *pool, dd_json_doc_t *doc, int64_t max_payload_bytes,
                          const dd_key_tmpl_t *tmpl, const void *payload, size_t len, cJSON **jsonp,
                          const dd_json_doc_t **copyp, char key[DD_KEY_MAX + 1], size_t *key_len,
                          dd_reason_t *reason, char *errstr, size_t errstr_size)
{
    dd_key_status_t ks;
    char why[200];
    int rc;

    *jsonp = NULL;
    if (copyp) *copyp = NULL;
    *key_len = 0;
    key[0] = '\0';
    if ((int64_t)len > max_payload_bytes) {
        dd_errstr_set(errstr, errstr_size, "payload is %zu bytes, at most %lld allowed", len,
                      (long long)max_payload_bytes);
        *reason = DD_REASON_PAYLOAD_TOO_LARGE;
        return DD_ERR_PERMANENT;
    }
    if (!payload || len == 0) {
        dd_errstr_set(errstr, errstr_size, "empty payload");
        *reason = DD_REASON_BAD_JSON;
        return DD_ERR_PERMANENT;
    }
    if ((rc = dd_json_parse(doc, payload, len, why, sizeof(why))) != DD_OK) {
        /* Out of memory is no fault of the message, but neither pipeline
         * nor replay can do better than refuse it with the reason. */
        dd_errstr_set(errstr, errstr_size, "invalid JSON: %s", why);
        *reason = DD_REASON_BAD_JSON;
        return DD_ERR_PERMANENT;
    }
    ks = dd_key_render(tmpl, doc, key, key_len, errstr, errstr_size);
    if (ks != DD_KEY_OK) {
        *key_len = 0; /* no usable business key */
        key[0] = '\0';
        *reason = ks == DD_KEY_MISSING ? DD_REASON_KEY_MISSING : DD_REASON_KEY_TOO_LONG;
        return DD_ERR_PERMANENT;
    }
    if (!(*jsonp = dd_parse_json(pool, payload, len, errstr, errstr_size)) ||
        (copyp && !(*copyp = dd_parse_keep_doc(pool, doc)))) {
        if (*jsonp) dd_errstr_set(errstr, errstr_size, "cannot keep the document (out of memory)");
        dd_parse_release(pool, *jsonp);
        *jsonp = NULL;
        *key_len = 0;
        key[0] = '\0';
        *reason = DD_REASON_BAD_JSON;
        return DD_ERR_PERMANENT;
    }
    return DD_OK;
}
