/*
 * The schema registry client and the decoding of payloads (see
 * dd_registry.h).
 *
 * Schemas are kept in a small hash table under one mutex. An id being
 * fetched has an entry in state FETCHING: whoever asks for it meanwhile
 * waits on the condition variable for that one request's outcome, so the
 * registry sees one request per id however many threads ask. A fetch that
 * failed for a retriable reason leaves no entry: the next ask tries again
 * (the caller's backoff paces it).
 */
#include "dd_registry.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>
#include <curl/curl.h>

#include "dd_buf.h"
#include "dd_common.h"

#define DD_REGISTRY_BUCKETS 256
#define DD_REGISTRY_MAX_BODY (16 * 1024 * 1024)
/* The longest JSON text of an Avro record of len bytes: a bound on hostile
 * records, far above what real ones need (docs/KEYS.md, Avro). */
#define DD_REGISTRY_MAX_TEXT(len) (8 * (len) + 1024 * 1024)

typedef enum { DD_REG_FETCHING, DD_REG_OK, DD_REG_UNKNOWN, DD_REG_BAD } dd_reg_state_t;

typedef struct dd_reg_entry_s {
    uint32_t id;
    dd_reg_state_t state;
    dd_avro_schema_t *schema; /* DD_REG_OK */
    char why[400];            /* DD_REG_UNKNOWN, DD_REG_BAD: the dead letters' error */
    struct dd_reg_entry_s *next;
} dd_reg_entry_t;

struct dd_registry_s {
    const dd_conf_registry_t *conf;
    char base[1024]; /* the URL without a trailing '/' */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    dd_reg_entry_t *bucket[DD_REGISTRY_BUCKETS];
    uint64_t fetches;
};

int dd_registry_new(dd_registry_t **regp, const dd_conf_registry_t *conf, char *errstr,
                    size_t errstr_size)
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
    snprintf(reg->base, sizeof(reg->base), "%s", conf->url);
    for (n = strlen(reg->base); n > 0 && reg->base[n - 1] == '/'; n--)
        reg->base[n - 1] = '\0';
    pthread_mutex_init(&reg->mu, NULL);
    pthread_cond_init(&reg->cv, NULL);
    *regp = reg;
    return DD_OK;
}

void dd_registry_destroy(dd_registry_t *reg)
{
    if (!reg) return;
    for (int b = 0; b < DD_REGISTRY_BUCKETS; b++) {
        dd_reg_entry_t *e, *next;
        for (e = reg->bucket[b]; e; e = next) {
            next = e->next;
            dd_avro_schema_destroy(e->schema);
            free(e);
        }
    }
    pthread_cond_destroy(&reg->cv);
    pthread_mutex_destroy(&reg->mu);
    free(reg);
    curl_global_cleanup();
}

uint64_t dd_registry_fetches(dd_registry_t *reg)
{
    uint64_t n;

    pthread_mutex_lock(&reg->mu);
    n = reg->fetches;
    pthread_mutex_unlock(&reg->mu);
    return n;
}

/*
 * One request
 */

static size_t dd_registry_write_cb(char *data, size_t size, size_t nmemb, void *arg)
{
    dd_buf_t *body = arg;
    size_t n = size * nmemb;

    if (body->len + n > DD_REGISTRY_MAX_BODY) return 0; /* libcurl fails the transfer */
    dd_buf_put(body, data, n);
    return body->oom ? 0 : n;
}

static void dd_registry_setopts(dd_registry_t *reg, CURL *c, const char *url, dd_buf_t *body,
                                struct curl_slist *hdrs, char *curl_err)
{
    const dd_conf_registry_t *conf = reg->conf;

    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, (long)conf->timeout_ms);
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, (long)conf->timeout_ms);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, hdrs);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, dd_registry_write_cb);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, body);
    curl_easy_setopt(c, CURLOPT_ERRORBUFFER, curl_err);
    if (conf->user) {
        curl_easy_setopt(c, CURLOPT_HTTPAUTH, (long)CURLAUTH_BASIC);
        curl_easy_setopt(c, CURLOPT_USERNAME, conf->user);
        curl_easy_setopt(c, CURLOPT_PASSWORD, conf->password ? conf->password : "");
    }
    if (conf->tls.ca) curl_easy_setopt(c, CURLOPT_CAINFO, conf->tls.ca);
    if (conf->tls.cert) curl_easy_setopt(c, CURLOPT_SSLCERT, conf->tls.cert);
    if (conf->tls.key) curl_easy_setopt(c, CURLOPT_SSLKEY, conf->tls.key);
}

/* GET url into body; *status: the HTTP status. DD_ERR_RETRIABLE when no
 * answer came (errstr says why). */
static int dd_registry_get(dd_registry_t *reg, const char *url, dd_buf_t *body, long *status,
                           char *errstr, size_t errstr_size)
{
    char curl_err[CURL_ERROR_SIZE] = "";
    struct curl_slist *hdrs = NULL;
    CURL *c = curl_easy_init();
    CURLcode cc;

    *status = 0;
    hdrs = curl_slist_append(NULL, "Accept: application/vnd.schemaregistry.v1+json, "
                                   "application/json");
    if (!c || !hdrs) {
        curl_easy_cleanup(c);
        curl_slist_free_all(hdrs);
        dd_errstr_set(errstr, errstr_size, "out of memory for a registry request");
        return DD_ERR_RETRIABLE;
    }
    dd_registry_setopts(reg, c, url, body, hdrs, curl_err);
    cc = curl_easy_perform(c);
    if (cc == CURLE_OK) curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, status);
    curl_easy_cleanup(c);
    curl_slist_free_all(hdrs);
    if (cc != CURLE_OK) {
        dd_errstr_set(errstr, errstr_size, "the schema registry did not answer GET %s: %s", url,
                      curl_err[0] ? curl_err : curl_easy_strerror(cc));
        return DD_ERR_RETRIABLE;
    }
    return DD_OK;
}

/* A 200 answer: {"schema": "<the schema's JSON text>", "schemaType": ...}. */
static void dd_registry_take(dd_reg_entry_t *e, const dd_buf_t *body)
{
    cJSON *j = cJSON_ParseWithLength(body->p ? body->p : "", body->len);
    const cJSON *schema = cJSON_GetObjectItemCaseSensitive(j, "schema");
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(j, "schemaType");
    char why[300];
    int rc;

    e->state = DD_REG_BAD;
    if (!cJSON_IsString(schema)) {
        snprintf(e->why, sizeof(e->why), "schema id %u: the registry's answer has no schema",
                 e->id);
    } else if (type && (!cJSON_IsString(type) || strcmp(type->valuestring, "AVRO") != 0)) {
        snprintf(e->why, sizeof(e->why), "schema id %u is a %.40s schema, not an Avro one", e->id,
                 cJSON_IsString(type) ? type->valuestring : "non-Avro");
    } else if ((rc = dd_avro_schema_new(&e->schema, schema->valuestring,
                                        strlen(schema->valuestring), why, sizeof(why))) != 0) {
        snprintf(e->why, sizeof(e->why), "schema id %u is no valid Avro schema: %s", e->id, why);
    } else {
        e->state = DD_REG_OK;
    }
    cJSON_Delete(j);
}

/* Not 200: 404 with error code 40403 says the id does not exist; anything
 * else (a wrong URL answering 404 included) is the registry not serving
 * it now. Returns DD_OK when e is settled, else DD_ERR_RETRIABLE. */
static int dd_registry_refused(dd_reg_entry_t *e, long status, const dd_buf_t *body,
                               const char *url, char *errstr, size_t errstr_size)
{
    cJSON *j = cJSON_ParseWithLength(body->p ? body->p : "", body->len);
    const cJSON *code = cJSON_GetObjectItemCaseSensitive(j, "error_code");
    const cJSON *msg = cJSON_GetObjectItemCaseSensitive(j, "message");
    int unknown = status == 404 && cJSON_IsNumber(code) && code->valuedouble == 40403;

    if (unknown) {
        e->state = DD_REG_UNKNOWN;
        snprintf(e->why, sizeof(e->why), "the schema registry has no schema of id %u (%.200s)",
                 e->id, cJSON_IsString(msg) ? msg->valuestring : "error code 40403");
    } else {
        dd_errstr_set(errstr, errstr_size,
                      "the schema registry answered HTTP %ld to GET %s%s%.200s", status, url,
                      cJSON_IsString(msg) ? ": " : "", cJSON_IsString(msg) ? msg->valuestring : "");
    }
    cJSON_Delete(j);
    return unknown ? DD_OK : DD_ERR_RETRIABLE;
}

/* Fetches e's schema, settling e, or DD_ERR_RETRIABLE. Runs unlocked. */
static int dd_registry_fetch(dd_registry_t *reg, dd_reg_entry_t *e, char *errstr,
                             size_t errstr_size)
{
    char url[1100];
    dd_buf_t body = {0};
    long status;
    int rc;

    snprintf(url, sizeof(url), "%s/schemas/ids/%u", reg->base, e->id);
    rc = dd_registry_get(reg, url, &body, &status, errstr, errstr_size);
    if (!rc && body.oom) {
        dd_errstr_set(errstr, errstr_size, "out of memory for the registry's answer");
        rc = DD_ERR_RETRIABLE;
    } else if (!rc && status == 200) {
        dd_registry_take(e, &body);
    } else if (!rc) {
        rc = dd_registry_refused(e, status, &body, url, errstr, errstr_size);
    }
    dd_buf_release(&body);
    return rc;
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
    if (e->state == DD_REG_OK) {
        *schemap = e->schema;
        return DD_OK;
    }
    *reason = e->state == DD_REG_UNKNOWN ? DD_REASON_SCHEMA_UNKNOWN : DD_REASON_BAD_AVRO;
    dd_errstr_set(errstr, errstr_size, "%s", e->why);
    return DD_ERR_PERMANENT;
}

int dd_registry_schema(dd_registry_t *reg, uint32_t id, const dd_avro_schema_t **schemap,
                       dd_reason_t *reason, char *errstr, size_t errstr_size)
{
    dd_reg_entry_t **at, *e;
    int rc;

    *schemap = NULL;
    pthread_mutex_lock(&reg->mu);
    while ((e = *(at = dd_registry_slot(reg, id))) && e->state == DD_REG_FETCHING)
        pthread_cond_wait(&reg->cv, &reg->mu);
    if (e) {
        rc = dd_registry_answer(e, schemap, reason, errstr, errstr_size);
        pthread_mutex_unlock(&reg->mu);
        return rc;
    }
    if (!(e = calloc(1, sizeof(*e)))) {
        pthread_mutex_unlock(&reg->mu);
        dd_errstr_set(errstr, errstr_size, "out of memory");
        return DD_ERR_RETRIABLE;
    }
    e->id = id;
    e->state = DD_REG_FETCHING;
    *at = e;
    reg->fetches++;
    pthread_mutex_unlock(&reg->mu);

    rc = dd_registry_fetch(reg, e, errstr, errstr_size);

    pthread_mutex_lock(&reg->mu);
    if (rc) { /* not settled: forget it, the next ask fetches again */
        *dd_registry_slot(reg, id) = e->next;
        free(e);
    } else {
        rc = dd_registry_answer(e, schemap, reason, errstr, errstr_size);
    }
    pthread_cond_broadcast(&reg->cv);
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
    if ((rc = dd_registry_schema(reg, id, &schema, reason, errstr, errstr_size))) return rc;
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
