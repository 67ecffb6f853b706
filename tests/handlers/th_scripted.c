/*
 * Test handler whose behaviour is chosen by the message itself.
 *
 * Integration tests need to make a handler succeed, reject, ask for a retry,
 * crash mid-transaction, break the transaction or hit a database error, for a
 * chosen message in a stream. The optional string field "th" of the payload
 * selects that:
 *
 *   absent, "ok"  apply the effect: th_effect.n counts applications per key,
 *                 so any double application shows up as n = 2
 *   "reject"      write the effect, then REJECT "scripted reject"
 *   "retry:N"     write the effect, then RETRY: the first N calls for this
 *                 biz_key in this process
 * (a rejected or retried message's writes must be rolled back to its
 * savepoint: a test that finds them in th_effect has caught dedupd keeping
 * them)
 *   "abort_once"  first time (marker file absent in $TH_MARKER_DIR): create
 *                 the marker, apply the effect, then abort() the process
 *   "commit"      apply the effect and COMMIT (a handler bug dedupd must catch)
 *   "commit_begin"   apply the effect, then COMMIT and BEGIN: the transaction
 *                    looks open afterwards, but it is not dedupd's (a bug too)
 *   "rollback_begin" ROLLBACK and START TRANSACTION, then apply the effect
 *   "sleep:MS"    sleep MS milliseconds, then "ok"
 *   "dberror"     run invalid SQL and RETRY with the server's error
 *   "big:N"       apply the effect and return a response of N bytes (JSON)
 *   "emit:N"      apply the effect and emit an event of N bytes to topic
 *                 th.events (host->emit, key: the business key); RETRY
 *                 with emit's error when it fails
 *   "emit_to:T"   apply the effect and emit {"key": ...} to topic T
 *   "emit_as:K:MS"   emit {"key": ...} to th.events with Kafka key K, then
 *                    hold the transaction open MS milliseconds, then "ok"
 *
 * Built a second time as th_scripted_batch (TH_SCRIPTED_BATCH defined),
 * with a handle_batch() that runs the same actions for each message of the
 * batch and declines the batch when one of them does not return OK.
 */
#define _POSIX_C_SOURCE 200809L
#include "dedupd/handler.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* Calls seen so far for one key, for "retry:N". */
typedef struct th_counter {
    struct th_counter *next;
    int calls;
    char key[];
} th_counter;

typedef struct th_state {
    pthread_mutex_t lock; /* handle() runs on several worker threads */
    th_counter *counters;
} th_state;

static int th_init(void **statep, const config_setting_t *conf, char *err, size_t errlen)
{
    th_state *st = calloc(1, sizeof(*st));

    if (!st) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    pthread_mutex_init(&st->lock, NULL);
    *statep = st;
    return 0;
}

/* The host API (init_host), for emit. */
static const dedupd_host *th_host;

static int th_init_host(void **statep, const dedupd_host *host, char *err, size_t errlen)
{
    th_host = host;
    return th_init(statep, host->config, err, errlen);
}

static void th_fini(void *state)
{
    th_state *st = state;
    th_counter *c, *next;

    if (!st) return;
    for (c = st->counters; c; c = next) {
        next = c->next;
        free(c);
    }
    pthread_mutex_destroy(&st->lock);
    free(st);
}

static int th_migrate(void *state, MYSQL *db, char *err, size_t errlen)
{
    static const char sql[] = "CREATE TABLE IF NOT EXISTS th_effect ("
                              " biz_key VARBINARY(255) PRIMARY KEY,"
                              " n INT NOT NULL,"
                              " payload_hash CHAR(64) NULL,"
                              " last_offset BIGINT) ENGINE=InnoDB";

    if (mysql_query(db, sql) != 0) {
        snprintf(err, errlen, "creating th_effect: %s", mysql_error(db));
        return -1;
    }
    return 0;
}

/* Lower-case hex of s into out (2 * strlen(s) + 1 bytes). */
static void th_hex(const char *s, char *out)
{
    static const char digits[] = "0123456789abcdef";
    const unsigned char *p = (const unsigned char *)s;

    for (; *p; p++) {
        *out++ = digits[*p >> 4];
        *out++ = digits[*p & 15];
    }
    *out = '\0';
}

static dedupd_status th_db_fail(MYSQL *db, dedupd_result *res, const char *what)
{
    snprintf(res->error, sizeof(res->error), "%s: %s (%u)", what, mysql_error(db), mysql_errno(db));
    return DEDUPD_RETRY;
}

/* The effect: one row per key counting applications. The key goes in as a
 * hex literal so any bytes are stored exactly, without escaping rules. */
static dedupd_status th_effect(MYSQL *db, const dedupd_msg *msg, dedupd_result *res)
{
    char hex[2 * 255 + 1], sql[700], resp[96];

    if (strlen(msg->biz_key) > 255) {
        snprintf(res->error, sizeof(res->error), "biz_key longer than 255 bytes");
        return DEDUPD_REJECT;
    }
    th_hex(msg->biz_key, hex);
    snprintf(sql, sizeof(sql),
             "INSERT INTO th_effect (biz_key, n, last_offset) VALUES (X'%s', 1, %lld)"
             " ON DUPLICATE KEY UPDATE n = n + 1",
             hex, (long long)msg->offset);
    if (mysql_query(db, sql) != 0) return th_db_fail(db, res, "th_effect insert");
    snprintf(resp, sizeof(resp), "{\"th\":\"ok\",\"offset\":%lld}", (long long)msg->offset);
    res->response = strdup(resp);
    return DEDUPD_OK;
}

/* Writes the effect, then gives up with status st and the error why: what
 * "reject" and "retry:N" do, so the write is there for dedupd to undo. */
static dedupd_status th_effect_then(MYSQL *db, const dedupd_msg *msg, dedupd_result *res,
                                    dedupd_status st, const char *why)
{
    dedupd_status rc = th_effect(db, msg, res);

    free(res->response);
    res->response = NULL;
    if (rc != DEDUPD_OK) return rc; /* the insert failed: its error stands */
    snprintf(res->error, sizeof(res->error), "%s", why);
    return st;
}

/* Counts this call for key; returns the number of calls before it. */
static int th_count_call(th_state *st, const char *key)
{
    th_counter *c;
    int before = 0;

    pthread_mutex_lock(&st->lock);
    for (c = st->counters; c && strcmp(c->key, key) != 0; c = c->next)
        ;
    if (!c && (c = calloc(1, sizeof(*c) + strlen(key) + 1))) {
        strcpy(c->key, key);
        c->next = st->counters;
        st->counters = c;
    }
    if (c) before = c->calls++;
    pthread_mutex_unlock(&st->lock);
    return before;
}

static dedupd_status th_abort_once(MYSQL *db, const dedupd_msg *msg, dedupd_result *res)
{
    const char *dir = getenv("TH_MARKER_DIR");
    char hex[2 * 255 + 1], path[4096];
    int fd;

    if (!dir || !*dir) {
        snprintf(res->error, sizeof(res->error), "abort_once needs TH_MARKER_DIR");
        return DEDUPD_REJECT;
    }
    if (strlen(msg->biz_key) > 120) { /* hex must fit in a file name */
        snprintf(res->error, sizeof(res->error), "abort_once: biz_key too long for a marker");
        return DEDUPD_REJECT;
    }
    th_hex(msg->biz_key, hex);
    snprintf(path, sizeof(path), "%s/%s", dir, hex);
    fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0644);
    if (fd < 0 && errno == EEXIST) return th_effect(db, msg, res); /* second delivery: behave */
    if (fd < 0) {
        snprintf(res->error, sizeof(res->error), "abort_once: %.160s: %.60s", path,
                 strerror(errno));
        return DEDUPD_REJECT;
    }
    close(fd);
    /* Put something into the transaction so the crash has work to lose. */
    th_effect(db, msg, res);
    abort();
}

/* The effect, with a response of exactly n bytes: {"pad":"xx...x"}. */
static dedupd_status th_big_response(MYSQL *db, const dedupd_msg *msg, dedupd_result *res, long n)
{
    static const char head[] = "{\"pad\":\"", tail[] = "\"}";
    size_t fixed = sizeof(head) - 1 + sizeof(tail) - 1, len = (size_t)n;
    dedupd_status st = th_effect(db, msg, res);
    char *big;

    if (st != DEDUPD_OK) return st;
    if (len < fixed) len = fixed;
    if (!(big = malloc(len + 1))) {
        snprintf(res->error, sizeof(res->error), "big: out of memory");
        free(res->response);
        res->response = NULL;
        return DEDUPD_RETRY;
    }
    memcpy(big, head, sizeof(head) - 1);
    memset(big + sizeof(head) - 1, 'x', len - fixed);
    memcpy(big + len - (sizeof(tail) - 1), tail, sizeof(tail));
    free(res->response);
    res->response = big;
    return DEDUPD_OK;
}

static dedupd_status th_sleep_then_effect(MYSQL *db, const dedupd_msg *msg, dedupd_result *res,
                                          long ms)
{
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L};

    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
    return th_effect(db, msg, res);
}

/* Ends the transaction dedupd opened and begins another, writing the
 * effect before a COMMIT or after a ROLLBACK: either way the effect and
 * the in-transaction flag look as if nothing had happened. */
static dedupd_status th_end_and_begin(MYSQL *db, const dedupd_msg *msg, dedupd_result *res,
                                      int commit)
{
    dedupd_status st = commit ? th_effect(db, msg, res) : DEDUPD_OK;

    if (st != DEDUPD_OK) return st;
    if (mysql_query(db, commit ? "COMMIT" : "ROLLBACK") != 0 ||
        mysql_query(db, commit ? "BEGIN" : "START TRANSACTION") != 0) {
        free(res->response);
        res->response = NULL;
        return th_db_fail(db, res, commit ? "scripted commit_begin" : "scripted rollback_begin");
    }
    return commit ? DEDUPD_OK : th_effect(db, msg, res);
}

/* Parses the number after "prefix:" in action; -1 when malformed. */
static long th_arg(const char *action, size_t prefix_len)
{
    char *end;
    long v;

    if (action[prefix_len] < '0' || action[prefix_len] > '9') return -1;
    v = strtol(action + prefix_len, &end, 10);
    return *end == '\0' ? v : -1;
}

/* "emit:N" (topic NULL: th.events, value of n bytes) and "emit_to:T". */
static dedupd_status th_emit(MYSQL *db, const dedupd_msg *msg, dedupd_result *res,
                             const char *topic, long n)
{
    dedupd_status st = th_effect(db, msg, res);
    char small[600], *value = topic ? small : malloc((size_t)n + 1);
    size_t len;

    if (st != DEDUPD_OK) return st;
    if (!value) {
        snprintf(res->error, sizeof(res->error), "out of memory");
        return DEDUPD_RETRY;
    }
    if (topic) {
        len = (size_t)snprintf(small, sizeof(small), "{\"key\":\"%.500s\"}", msg->biz_key);
    } else {
        memset(value, 'e', (size_t)n);
        len = (size_t)n;
    }
    if (th_host->version < 2 || th_host->emit(th_host, db, msg, topic ? topic : "th.events",
                                              msg->biz_key, strlen(msg->biz_key), value, len, NULL,
                                              0, res->error, sizeof(res->error)) != 0)
        st = DEDUPD_RETRY;
    if (!topic) free(value);
    if (st != DEDUPD_OK) {
        free(res->response);
        res->response = NULL;
    }
    return st;
}

/* "emit_as:K:MS": the event's id is taken when it is emitted, and its
 * transaction commits MS ms later, after those of other lanes. */
static dedupd_status th_emit_as(MYSQL *db, const dedupd_msg *msg, dedupd_result *res,
                                const char *arg)
{
    const char *colon = strchr(arg, ':');
    char value[600];
    size_t len;
    long ms;

    if (!colon || colon == arg || (ms = th_arg(colon, 1)) < 0) {
        snprintf(res->error, sizeof(res->error), "usage: emit_as:KEY:MS");
        return DEDUPD_REJECT;
    }
    len = (size_t)snprintf(value, sizeof(value), "{\"key\":\"%.500s\"}", msg->biz_key);
    if (th_host->version < 2 ||
        th_host->emit(th_host, db, msg, "th.events", arg, (size_t)(colon - arg), value, len, NULL,
                      0, res->error, sizeof(res->error)) != 0)
        return DEDUPD_RETRY;
    return th_sleep_then_effect(db, msg, res, ms);
}

static dedupd_status th_handle(void *state, MYSQL *db, const dedupd_msg *msg, dedupd_result *res)
{
    const cJSON *th = cJSON_GetObjectItemCaseSensitive(msg->json, "th");
    const char *action = "ok";
    long arg;

    if (th && !cJSON_IsString(th)) {
        snprintf(res->error, sizeof(res->error), "field th must be a string");
        return DEDUPD_REJECT;
    }
    if (th) action = th->valuestring;

    if (strcmp(action, "ok") == 0) return th_effect(db, msg, res);
    if (strcmp(action, "reject") == 0)
        return th_effect_then(db, msg, res, DEDUPD_REJECT, "scripted reject");
    if (strncmp(action, "retry:", 6) == 0 && (arg = th_arg(action, 6)) >= 0) {
        if (th_count_call(state, msg->biz_key) < arg)
            return th_effect_then(db, msg, res, DEDUPD_RETRY, "scripted retry");
        return th_effect(db, msg, res);
    }
    if (strcmp(action, "abort_once") == 0) return th_abort_once(db, msg, res);
    if (strcmp(action, "commit") == 0) {
        dedupd_status st = th_effect(db, msg, res);
        if (st == DEDUPD_OK && mysql_query(db, "COMMIT") != 0) {
            free(res->response);
            res->response = NULL;
            return th_db_fail(db, res, "scripted commit");
        }
        return st;
    }
    if (strcmp(action, "commit_begin") == 0 || strcmp(action, "rollback_begin") == 0)
        return th_end_and_begin(db, msg, res, action[0] == 'c');
    if (strncmp(action, "sleep:", 6) == 0 && (arg = th_arg(action, 6)) >= 0)
        return th_sleep_then_effect(db, msg, res, arg);
    if (strncmp(action, "big:", 4) == 0 && (arg = th_arg(action, 4)) >= 0)
        return th_big_response(db, msg, res, arg);
    if (strncmp(action, "emit:", 5) == 0 && (arg = th_arg(action, 5)) >= 0)
        return th_emit(db, msg, res, NULL, arg);
    if (strncmp(action, "emit_to:", 8) == 0) return th_emit(db, msg, res, action + 8, 0);
    if (strncmp(action, "emit_as:", 8) == 0) return th_emit_as(db, msg, res, action + 8);
    if (strcmp(action, "dberror") == 0) {
        if (mysql_query(db, "SELEC this is not sql") != 0)
            return th_db_fail(db, res, "scripted dberror");
        snprintf(res->error, sizeof(res->error), "scripted dberror: statement did not fail");
        return DEDUPD_RETRY;
    }
    snprintf(res->error, sizeof(res->error), "unknown th action \"%.64s\"", action);
    return DEDUPD_REJECT;
}

#ifdef TH_SCRIPTED_BATCH
/* Every message's action in turn; the batch is declined (dedupd rolls it
 * back and goes message by message) at the first one that is not OK. */
static dedupd_status th_handle_batch(void *state, MYSQL *db, const dedupd_msg *const *msgs,
                                     size_t n, dedupd_result *res)
{
    for (size_t i = 0; i < n; i++) {
        if (th_handle(state, db, msgs[i], &res[i]) == DEDUPD_OK) continue;
        snprintf(res[0].error, sizeof(res[0].error), "message %zu: %.200s", i, res[i].error);
        return DEDUPD_REJECT;
    }
    return DEDUPD_OK;
}
#endif

static const dedupd_handler th_scripted = {
    .abi_version = DEDUPD_HANDLER_ABI_VERSION,
#ifdef TH_SCRIPTED_BATCH
    .name = "th_scripted_batch",
    .handle_batch = th_handle_batch,
#else
    .name = "th_scripted",
#endif
    .init_host = th_init_host,
    .migrate = th_migrate,
    .handle = th_handle,
    .fini = th_fini,
};

const dedupd_handler *dedupd_handler_v1(void)
{
    return &th_scripted;
}
