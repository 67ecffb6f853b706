/*
 * The schema registry client's cache and fetch thread, and the decoding of
 * payloads (see dd_registry.h).
 *
 * Schemas are kept in a small hash table under one mutex. An id not known
 * yet gets an entry in state FETCHING and joins the queue of the fetch
 * thread, which fetches one id at a time (dd_registry_fetch.c) and
 * settles the entry: OK and the two dead-letter verdicts stay for the
 * life of the process; a fault (FAILED) is forgotten after a backoff, when
 * the next ask queues the id again. So the registry sees one request per
 * id however many threads ask, and a registry that fails is asked at the
 * backoff's pace, never in a loop.
 */
#include "dd_registry_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <curl/curl.h>

#include "dd_common.h"
#include "dd_log.h"

/* The longest JSON text of an Avro record of len bytes: a bound on hostile
 * records, far above what real ones need (docs/KEYS.md, Avro). */
#define DD_REGISTRY_MAX_TEXT(len) (8 * (len) + 1024 * 1024)

static const char *const dd_registry_fault_names[] = {
    [DD_REGISTRY_FAULT_UNREACHABLE] = "unreachable",
    [DD_REGISTRY_FAULT_BAD_ANSWER] = "bad_answer",
    [DD_REGISTRY_FAULT_CHANGED] = "changed_schema",
    [DD_REGISTRY_FAULT_UNVERIFIED] = "unverified",
};

_Static_assert(DD_REGISTRY_FAULT_CNT == DD_STATS_REGISTRY_FAULTS,
               "dd_stats_t counts every registry fault");

const char *dd_registry_fault_name(int fault)
{
    return fault >= 0 && fault < DD_REGISTRY_FAULT_CNT ? dd_registry_fault_names[fault] : "?";
}

int dd_registry_new(dd_registry_t **regp, const dd_conf_registry_t *conf,
                    const dd_registry_opts_t *opts, char *errstr, size_t errstr_size)
{
    dd_registry_t *reg;
    size_t n;

    *regp = NULL;
    if (!conf->url || strlen(conf->url) >= sizeof(reg->base)) {
        dd_errstr_set(errstr, errstr_size, "schema_registry.url is unset or too long");
        return DD_ERR_CONFIG;
    }
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
        dd_errstr_set(errstr, errstr_size, "cannot initialise libcurl");
        return DD_ERR_FATAL;
    }
    if (!(reg = calloc(1, sizeof(*reg)))) {
        curl_global_cleanup();
        dd_errstr_set(errstr, errstr_size, "out of memory");
        return DD_ERR_NOMEM;
    }
    reg->conf = conf;
    reg->opts =
        opts ? *opts : (dd_registry_opts_t){.backoff_initial_ms = 100, .backoff_max_ms = 30000};
    snprintf(reg->base, sizeof(reg->base), "%s", conf->url);
    for (n = strlen(reg->base); n > 0 && reg->base[n - 1] == '/'; n--)
        reg->base[n - 1] = '\0';
    pthread_mutex_init(&reg->mu, NULL);
    pthread_cond_init(&reg->settled_cv, NULL);
    pthread_cond_init(&reg->work_cv, NULL);
    *regp = reg;
    return DD_OK;
}

void dd_registry_destroy(dd_registry_t *reg)
{
    if (!reg) return;
    pthread_mutex_lock(&reg->mu);
    atomic_store(&reg->stop, 1);
    pthread_cond_broadcast(&reg->work_cv);
    pthread_mutex_unlock(&reg->mu);
    if (reg->thread_started) pthread_join(reg->thread, NULL);
    for (int b = 0; b < DD_REGISTRY_BUCKETS; b++) {
        dd_reg_entry_t *e, *next;
        for (e = reg->bucket[b]; e; e = next) {
            next = e->next;
            dd_avro_schema_destroy(e->schema);
            free(e);
        }
    }
    dd_registry_subjects_release(reg);
    pthread_cond_destroy(&reg->work_cv);
    pthread_cond_destroy(&reg->settled_cv);
    pthread_mutex_destroy(&reg->mu);
    free(reg);
    curl_global_cleanup();
}

/* A counter of reg, read under its lock. */
static uint64_t dd_registry_count(dd_registry_t *reg, const uint64_t *counter)
{
    uint64_t n;

    pthread_mutex_lock(&reg->mu);
    n = *counter;
    pthread_mutex_unlock(&reg->mu);
    return n;
}

uint64_t dd_registry_fetches(dd_registry_t *reg)
{
    return dd_registry_count(reg, &reg->fetches);
}

uint64_t dd_registry_settled(dd_registry_t *reg)
{
    return dd_registry_count(reg, &reg->settled);
}

void dd_registry_faults(dd_registry_t *reg, uint64_t out[DD_REGISTRY_FAULT_CNT])
{
    pthread_mutex_lock(&reg->mu);
    memcpy(out, reg->faults, sizeof(reg->faults));
    pthread_mutex_unlock(&reg->mu);
}

/*
 * The fetch thread
 */

/* Settles e with what its fetch came to; called locked. */
static void dd_registry_settle(dd_registry_t *reg, dd_reg_entry_t *e, dd_reg_result_t *res)
{
    int64_t backoff = reg->opts.backoff_initial_ms;

    e->state = res->state;
    e->schema = res->schema;
    snprintf(e->why, sizeof(e->why), "%s", res->why);
    if (res->state == DD_REG_FAILED) {
        reg->faults[res->fault]++;
        for (int i = 0; i < e->attempt && backoff < reg->opts.backoff_max_ms; i++)
            backoff *= 2;
        if (backoff > reg->opts.backoff_max_ms) backoff = reg->opts.backoff_max_ms;
        e->due_ms = dd_now_ms() + backoff;
        e->attempt++;
    } else {
        e->attempt = 0;
    }
    reg->settled++;
    pthread_cond_broadcast(&reg->settled_cv);
}

static void *dd_registry_main(void *arg)
{
    dd_registry_t *reg = arg;

    pthread_mutex_lock(&reg->mu);
    while (!atomic_load(&reg->stop)) {
        dd_reg_entry_t *e = reg->queue;
        dd_reg_result_t res = {0};
        if (!e) {
            pthread_cond_wait(&reg->work_cv, &reg->mu);
            continue;
        }
        if (!(reg->queue = e->qnext)) reg->queue_tail = NULL;
        e->qnext = NULL;
        pthread_mutex_unlock(&reg->mu);
        dd_registry_fetch(reg, e->id, &res);
        pthread_mutex_lock(&reg->mu);
        dd_registry_settle(reg, e, &res);
    }
    pthread_mutex_unlock(&reg->mu);
    return NULL;
}

/* Queues e for the fetch thread, starting it the first time; locked. */
static int dd_registry_queue(dd_registry_t *reg, dd_reg_entry_t *e, char *errstr,
                             size_t errstr_size)
{
    if (!reg->thread_started) {
        if (pthread_create(&reg->thread, NULL, dd_registry_main, reg) != 0) {
            dd_errstr_set(errstr, errstr_size, "cannot start the schema registry's thread");
            return DD_ERR_RETRIABLE;
        }
        reg->thread_started = 1;
    }
    e->state = DD_REG_FETCHING;
    e->qnext = NULL;
    if (reg->queue_tail)
        reg->queue_tail->qnext = e;
    else
        reg->queue = e;
    reg->queue_tail = e;
    pthread_cond_signal(&reg->work_cv);
    return DD_OK;
}

/*
 * The cache
 */

static dd_reg_entry_t **dd_registry_slot(dd_registry_t *reg, uint32_t id)
{
    dd_reg_entry_t **at = &reg->bucket[(id * 2654435761u) >> 24];

    while (*at && (*at)->id != id)
        at = &(*at)->next;
    return at;
}

static int dd_registry_answer(const dd_reg_entry_t *e, const dd_avro_schema_t **schemap,
                              dd_reason_t *reason, char *errstr, size_t errstr_size)
{
    switch (e->state) {
    case DD_REG_OK:
        *schemap = e->schema;
        return DD_OK;
    case DD_REG_FETCHING:
        dd_errstr_set(errstr, errstr_size, "schema id %u is being fetched", e->id);
        return DD_REGISTRY_PENDING;
    case DD_REG_FAILED:
        dd_errstr_set(errstr, errstr_size, "%s", e->why);
        return DD_ERR_RETRIABLE;
    default:
        *reason = e->state == DD_REG_UNKNOWN ? DD_REASON_SCHEMA_UNKNOWN : DD_REASON_BAD_AVRO;
        dd_errstr_set(errstr, errstr_size, "%s", e->why);
        return DD_ERR_PERMANENT;
    }
}

/* The entry of id, new (and queued) when there is none; locked. NULL when
 * out of memory. */
static dd_reg_entry_t *dd_registry_entry(dd_registry_t *reg, uint32_t id, char *errstr,
                                         size_t errstr_size)
{
    dd_reg_entry_t **at = dd_registry_slot(reg, id), *e = *at;

    if (e) return e;
    if (!(e = calloc(1, sizeof(*e)))) {
        dd_errstr_set(errstr, errstr_size, "out of memory");
        return NULL;
    }
    e->id = id;
    e->state = DD_REG_FAILED; /* due now: queued below */
    *at = e;
    return e;
}

int dd_registry_schema(dd_registry_t *reg, uint32_t id, const dd_avro_schema_t **schemap,
                       dd_reason_t *reason, char *errstr, size_t errstr_size)
{
    dd_reg_entry_t *e;
    int rc;

    *schemap = NULL;
    pthread_mutex_lock(&reg->mu);
    if (!(e = dd_registry_entry(reg, id, errstr, errstr_size))) {
        pthread_mutex_unlock(&reg->mu);
        return DD_ERR_RETRIABLE;
    }
    /* a fault is forgotten: after its backoff, or at once for a caller
     * that waits (it paces its own tries) */
    if (e->state == DD_REG_FAILED && (!reg->opts.nowait || dd_now_ms() >= e->due_ms) &&
        (rc = dd_registry_queue(reg, e, errstr, errstr_size))) {
        pthread_mutex_unlock(&reg->mu);
        return rc;
    }
    while (!reg->opts.nowait && e->state == DD_REG_FETCHING)
        pthread_cond_wait(&reg->settled_cv, &reg->mu);
    rc = dd_registry_answer(e, schemap, reason, errstr, errstr_size);
    pthread_mutex_unlock(&reg->mu);
    return rc;
}

/*
 * Decoding
 */

static int dd_registry_avro(dd_registry_t *reg, const void *payload, size_t len, size_t max_text,
                            dd_registry_text_t *out, dd_reason_t *reason, char *errstr,
                            size_t errstr_size)
{
    const dd_avro_schema_t *schema;
    const unsigned char *body;
    size_t body_len;
    uint32_t id;
    char why[300];
    int rc;

    *reason = DD_REASON_BAD_AVRO;
    if (dd_avro_frame(payload, len, &id, &body, &body_len, why, sizeof(why))) {
        dd_errstr_set(errstr, errstr_size, "not Avro in the Confluent wire format: %s", why);
        return DD_ERR_PERMANENT;
    }
    if (!reg) {
        dd_errstr_set(errstr, errstr_size, "no schema registry to read schema id %u from", id);
        return DD_ERR_PERMANENT;
    }
    if ((rc = dd_registry_schema(reg, id, &schema, reason, errstr, errstr_size)) != DD_OK)
        return rc;
    rc = dd_avro_decode(schema, body, body_len, DD_AVRO_HEADER_LEN, max_text, &out->owned,
                        &out->len, why, sizeof(why));
    if (rc == DD_ERR_NOMEM) {
        dd_errstr_set(errstr, errstr_size, "out of memory decoding an Avro record");
        return rc;
    }
    if (rc) {
        dd_errstr_set(errstr, errstr_size, "invalid Avro (schema id %u): %s", id, why);
        return rc;
    }
    out->text = out->owned;
    return DD_OK;
}

int dd_registry_decode(dd_registry_t *reg, int format, const void *payload, size_t len,
                       int64_t max_payload_bytes, dd_registry_text_t *out, dd_reason_t *reason,
                       char *errstr, size_t errstr_size)
{
    const unsigned char *body;
    size_t body_len;
    uint32_t id;
    char why[300];

    *out = (dd_registry_text_t){payload, len, NULL};
    if ((int64_t)len > max_payload_bytes) { /* as dd_parse_message says it */
        dd_errstr_set(errstr, errstr_size, "payload is %zu bytes, at most %lld allowed", len,
                      (long long)max_payload_bytes);
        *reason = DD_REASON_PAYLOAD_TOO_LARGE;
        return DD_ERR_PERMANENT;
    }
    if (format == DD_FORMAT_AVRO)
        return dd_registry_avro(reg, payload, len, DD_REGISTRY_MAX_TEXT(len), out, reason, errstr,
                                errstr_size);
    if (format != DD_FORMAT_JSON_SR) return DD_OK;
    if (dd_avro_frame(payload, len, &id, &body, &body_len, why, sizeof(why))) {
        *reason = DD_REASON_BAD_JSON;
        dd_errstr_set(errstr, errstr_size, "not JSON in the Confluent wire format: %s", why);
        return DD_ERR_PERMANENT;
    }
    out->text = (const char *)body;
    out->len = body_len;
    return DD_OK;
}

void dd_registry_parse_failed(int format, dd_reason_t *reason, char *error, size_t error_size)
{
    char why[512];

    if (format != DD_FORMAT_AVRO || *reason != DD_REASON_BAD_JSON) return;
    *reason = DD_REASON_BAD_AVRO;
    snprintf(why, sizeof(why), "%s", error);
    dd_errstr_set(error, error_size, "the decoded Avro record: %s", why);
}
