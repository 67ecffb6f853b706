/*
 * The HTTP handler that ships with dedupd: external mode (include/dedupd/
 * handler.h, "External mode") for a downstream that is an HTTP service,
 * configured by the group handler.http instead of written in C
 * (docs/HANDLERS.md, "External mode without C").
 *
 * act() sends the message's payload (the JSON text; an Avro route's record
 * decoded) to `url` with the business key as Idempotency-Key and the
 * claim's fencing token in Dedupd-Fence; a RETRY sends the same key and
 * token again. What the answer's status means is configured (done, reject,
 * retry), and a Retry-After is passed to dedupd (host->retry_after) so the
 * next attempt never comes sooner. reconcile() asks `reconcile_url` about a
 * key after a takeover and from the compensation scan: 200 done, 404 not
 * done, anything else unknown. check() shows `dedupd check` whether the
 * URL answers. Secrets of the configuration are never written anywhere:
 * what is shown is the URL as written, and no header's value.
 */
#include "http.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    const dedupd_host *host;
    http_conf conf;
    http_pool *pool;
    http_metrics *metrics;
    int curl_ready; /* curl_global_init succeeded */
} http_state;

/* A line in dedupd's log, when the host can write one. */
#define http_log(st, level, ...)                                                                   \
    do {                                                                                           \
        if ((st)->host && (st)->host->log) (st)->host->log((st)->host, (level), __VA_ARGS__);      \
    } while (0)

static void http_fini(void *state)
{
    http_state *st = state;

    if (!st) return;
    http_metrics_destroy(st->metrics);
    http_pool_destroy(st->pool);
    http_conf_release(&st->conf);
    if (st->curl_ready) curl_global_cleanup();
    free(st);
}

static int http_init(void **statep, const dedupd_host *host, char *errstr, size_t errstr_size)
{
    http_state *st = calloc(1, sizeof(*st));

    if (!st) {
        snprintf(errstr, errstr_size, "out of memory");
        return -1;
    }
    st->host = host;
    if (http_conf_load(&st->conf, host->config, errstr, errstr_size)) {
        http_fini(st);
        return -1;
    }
    st->curl_ready = curl_global_init(CURL_GLOBAL_DEFAULT) == CURLE_OK;
    st->pool = http_pool_new();
    st->metrics = http_metrics_new(host);
    if (!st->curl_ready || !st->pool || !st->metrics) {
        snprintf(errstr, errstr_size, "%s",
                 st->curl_ready ? "out of memory" : "libcurl could not be initialised");
        http_fini(st);
        return -1;
    }
    http_log(st, DEDUPD_LOG_INFO, "%s %s, time-out %ld ms, reconcile %s%s", st->conf.method,
             st->conf.url_shown, st->conf.timeout_ms,
             st->conf.reconcile_shown ? "GET " : "none (a takeover sends again with the same key)",
             st->conf.reconcile_shown ? st->conf.reconcile_shown : "");
    *statep = st;
    return 0;
}

/* ---- the request ---- */

/* The per-message headers (key and token) in front of the configured
 * ones, on the caller's stack: libcurl only reads the list. */
typedef struct {
    char key[1024];
    char fence[128];
    struct curl_slist key_node, fence_node;
} http_msg_hdrs;

static int http_msg_headers(const http_state *st, const char *biz_key, int64_t fence,
                            http_msg_hdrs *h, char *errstr, size_t errstr_size)
{
    char value[900];
    int n;

    if (http_tmpl_key_value(biz_key, st->conf.key_percent, value, sizeof(value), errstr,
                            errstr_size))
        return -1;
    n = snprintf(h->key, sizeof(h->key), "%s: %s", st->conf.key_header, value);
    snprintf(h->fence, sizeof(h->fence), "%s: %" PRId64, st->conf.fence_header, fence);
    if (n < 0 || (size_t)n >= sizeof(h->key)) {
        snprintf(errstr, errstr_size, "the business key is too long for a header");
        return -1;
    }
    h->fence_node = (struct curl_slist){.data = h->fence, .next = st->conf.hdrs};
    h->key_node = (struct curl_slist){.data = h->key, .next = &h->fence_node};
    return 0;
}

/* "HTTP 409 from POST URL: body start" (or the error of a call without an
 * answer) into out. */
static void http_describe(const http_state *st, const char *method, const char *shown,
                          const http_answer *ans, char *out, size_t out_size)
{
    char start[200];

    if (!ans->status) {
        snprintf(out, out_size, "%s %s: no answer: %s", method, shown,
                 http_tmpl_has_secret(shown) ? curl_easy_strerror(ans->rc) : ans->error);
        return;
    }
    http_body_start(ans->body, ans->len, start, sizeof(start));
    if (ans->location[0] && !st->conf.follow_redirects)
        snprintf(out, out_size,
                 "HTTP %ld from %s %s: a redirect to %s, not followed "
                 "(follow_redirects is off)",
                 ans->status, method, shown, ans->location);
    else
        snprintf(out, out_size, "HTTP %ld from %s %s%s%s", ans->status, method, shown,
                 start[0] ? ": " : "", start);
}

/* A RETRY (or UNKNOWN) with a Retry-After: dedupd waits at least that. */
static void http_retry_after(const http_state *st, const http_answer *ans)
{
    int64_t ms = ans->retry_after_ms;

    if (ms < 0 || !st->host || st->host->version < 3 || !st->host->retry_after) return;
    if (ms > st->conf.retry_after_max_ms) {
        http_log(st, DEDUPD_LOG_WARN,
                 "Retry-After of %" PRId64 " s is longer than retry_after_max (%" PRId64
                 " s): waiting that long instead",
                 ms / 1000, st->conf.retry_after_max_ms / 1000);
        ms = st->conf.retry_after_max_ms;
    }
    st->host->retry_after(st->host, ms);
}

static dedupd_status http_act_answer(http_state *st, const http_answer *ans, dedupd_result *res)
{
    http_verdict v = http_status_verdict(&st->conf.statuses, ans->status);

    if (v == HTTP_DONE) {
        if (!(res->response = http_snapshot(ans->status, ans->body, ans->len, ans->complete,
                                            st->conf.response_max)))
            snprintf(res->error, sizeof(res->error), "out of memory for the response snapshot");
        http_metrics_outcome(st->metrics, "done");
        return DEDUPD_OK;
    }
    http_describe(st, st->conf.method, st->conf.url_shown, ans, res->error, sizeof(res->error));
    if (v == HTTP_REJECT) {
        http_metrics_outcome(st->metrics, "rejected");
        return DEDUPD_REJECT;
    }
    http_metrics_outcome(st->metrics, "retry");
    http_retry_after(st, ans);
    return DEDUPD_RETRY;
}

static dedupd_status http_act(void *state, const dedupd_msg *msg, dedupd_result *res)
{
    http_state *st = state;
    http_msg_hdrs h;
    http_answer ans;
    dedupd_status rc;

    if (http_msg_headers(st, msg->biz_key, msg->fence, &h, res->error, sizeof(res->error))) {
        http_metrics_outcome(st->metrics, "rejected");
        return DEDUPD_REJECT;
    }
    if (http_call(st->pool, &st->conf, st->conf.method, st->conf.url, &h.key_node, msg->payload,
                  msg->payload_len, st->conf.response_max, &ans)) {
        snprintf(res->error, sizeof(res->error), "%s", ans.error);
        return DEDUPD_RETRY;
    }
    http_metrics_request(st->metrics, "act", ans.status, ans.seconds);
    if (!ans.status) {
        http_describe(st, st->conf.method, st->conf.url_shown, &ans, res->error,
                      sizeof(res->error));
        http_metrics_outcome(st->metrics, "error");
        rc = DEDUPD_RETRY;
    } else {
        rc = http_act_answer(st, &ans, res);
    }
    http_answer_release(&ans);
    return rc;
}

/* ---- reconcile ---- */

static dedupd_outcome http_reconcile_answer(http_state *st, const http_answer *ans,
                                            const char *shown, dedupd_result *res)
{
    if (ans->status == 200) {
        res->response =
            http_snapshot(ans->status, ans->body, ans->len, ans->complete, st->conf.response_max);
        http_metrics_outcome(st->metrics, "reconcile_done");
        return DEDUPD_DONE;
    }
    if (ans->status == 404) {
        http_metrics_outcome(st->metrics, "reconcile_not_done");
        return DEDUPD_NOT_DONE;
    }
    http_describe(st, "GET", shown, ans, res->error, sizeof(res->error));
    http_metrics_outcome(st->metrics, "reconcile_unknown");
    http_retry_after(st, ans);
    return DEDUPD_UNKNOWN;
}

static dedupd_outcome http_reconcile(void *state, const char *biz_key, int64_t fence,
                                     dedupd_result *res)
{
    http_state *st = state;
    char value[900];
    http_msg_hdrs h;
    http_answer ans;
    dedupd_outcome out;
    char *url;

    if (!st->conf.reconcile_url) {
        /* Nothing to ask: acting again sends the same key, which a service
         * honouring it answers without a second effect. */
        http_metrics_outcome(st->metrics, "reconcile_not_done");
        return DEDUPD_NOT_DONE;
    }
    if (http_msg_headers(st, biz_key, fence, &h, res->error, sizeof(res->error)) ||
        http_tmpl_key_value(biz_key, st->conf.key_percent, value, sizeof(value), res->error,
                            sizeof(res->error)))
        return DEDUPD_UNKNOWN;
    if (!(url = http_tmpl_url(st->conf.reconcile_url, value)) ||
        http_call(st->pool, &st->conf, "GET", url, &h.key_node, NULL, 0, st->conf.response_max,
                  &ans)) {
        snprintf(res->error, sizeof(res->error), "out of memory");
        free(url);
        return DEDUPD_UNKNOWN;
    }
    free(url);
    http_metrics_request(st->metrics, "reconcile", ans.status, ans.seconds);
    if (ans.status)
        out = http_reconcile_answer(st, &ans, st->conf.reconcile_shown, res);
    else {
        http_describe(st, "GET", st->conf.reconcile_shown, &ans, res->error, sizeof(res->error));
        http_metrics_outcome(st->metrics, "reconcile_unknown");
        out = DEDUPD_UNKNOWN;
    }
    http_answer_release(&ans);
    return out;
}

/* ---- dedupd check ---- */

static int http_check(void *state, char *report, size_t report_size)
{
    static const char *const methods[] = {"OPTIONS", "HEAD"};
    http_state *st = state;
    const char *method;
    http_answer ans;
    int level;

    if (st->conf.check == HTTP_CHECK_NONE) {
        snprintf(report, report_size, "%s %s: not probed (check = \"none\")", st->conf.method,
                 st->conf.url_shown);
        return DEDUPD_CHECK_OK;
    }
    method = methods[st->conf.check];
    if (http_call(st->pool, &st->conf, method, st->conf.url, st->conf.hdrs, NULL, 0, 256, &ans)) {
        snprintf(report, report_size, "%s", ans.error);
        return DEDUPD_CHECK_FAIL;
    }
    if (!ans.status) {
        http_describe(st, method, st->conf.url_shown, &ans, report, report_size);
        level = DEDUPD_CHECK_FAIL;
    } else {
        level = ans.status >= 500 || ans.status == 401 || ans.status == 403 ? DEDUPD_CHECK_WARN
                                                                            : DEDUPD_CHECK_OK;
        snprintf(report, report_size, "%s %s answered %ld in %.0f ms (%s)%s", method,
                 st->conf.url_shown, ans.status, ans.seconds * 1000, http_version_name(ans.version),
                 level == DEDUPD_CHECK_OK ? ""
                 : ans.status >= 500      ? ": the service is failing"
                                          : ": are the credentials in headers right?");
    }
    http_answer_release(&ans);
    return level;
}

static const dedupd_handler http_handler = {
    .abi_version = DEDUPD_HANDLER_ABI_VERSION,
    .name = "http",
    .fini = http_fini,
    .init_host = http_init,
    .mode = DEDUPD_MODE_EXTERNAL,
    .act = http_act,
    .reconcile = http_reconcile,
    .check = http_check,
};

const dedupd_handler *dedupd_handler_v1(void)
{
    return &http_handler;
}
