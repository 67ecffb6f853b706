/*
 * The HTTP handler's parts (handlers/http/), shared by its files: the
 * configuration (http_conf.c), the templates of secrets and keys
 * (http_tmpl.c), what a status and a Retry-After mean (http_status.c), the
 * calls through libcurl (http_call.c) and its metrics (http_metrics.c).
 * http.c is the handler itself. Built against include/dedupd/ alone, as a
 * handler of a user's would be: it reaches dedupd only through the ABI.
 */
#ifndef HTTP_H
#define HTTP_H

#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include <curl/curl.h>
#include <pthread.h>

#include "dedupd/handler.h"

/* What an answer to act()'s request means. */
typedef enum { HTTP_DONE = 0, HTTP_REJECT = 1, HTTP_RETRY = 2 } http_verdict;

/* Which statuses mean what: an exact code wins over its class (4xx), the
 * class over `other`. -1: not listed. */
typedef struct {
    signed char code[600];
    signed char cls[6];
    http_verdict other;
} http_statuses;

/* What `dedupd check` sends to the URL. */
typedef enum { HTTP_CHECK_OPTIONS = 0, HTTP_CHECK_HEAD, HTTP_CHECK_NONE } http_check_method;

typedef struct {
    char *url;               /* secrets expanded */
    char *url_shown;         /* as written: what messages show */
    char *reconcile_url;     /* secrets expanded, ${key} kept; NULL: no reconcile */
    char *reconcile_shown;   /* as written */
    char *method;            /* POST or PUT */
    struct curl_slist *hdrs; /* the configured headers, expanded, and Content-Type */
    char *key_header;        /* Idempotency-Key */
    char *fence_header;      /* Dedupd-Fence */
    int key_percent;         /* key_encoding = "percent" */
    long timeout_ms, connect_timeout_ms;
    int follow_redirects;
    long max_redirects;
    long http_version; /* CURL_HTTP_VERSION_* */
    size_t response_max;
    int64_t retry_after_max_ms;
    http_check_method check;
    http_statuses statuses;
    /* TLS and the way there */
    char *ca_file, *ca_path, *cert_file, *key_file, *key_password, *pinned_key, *proxy;
    struct curl_slist *resolve;
} http_conf;

/* ---- http_conf.c ---- */

/* Reads the group handler.http (conf) into c. On error: -1 with errstr
 * naming the file, line and setting, never a secret's value. */
int http_conf_load(http_conf *c, const config_setting_t *conf, char *errstr, size_t errstr_size);
void http_conf_release(http_conf *c);
/* url as messages show it: credentials in it (user:password@) as ***.
 * malloc'd, or NULL out of memory. */
char *http_conf_shown(const char *url);
/* A duration: "250ms", "5s", "1m30s", or a number of seconds. -1 if not. */
int64_t http_conf_duration_ms(const char *text);

/* ---- http_tmpl.c ---- */

/* text with ${env:NAME} and ${file:PATH} replaced by the variable's value
 * and the file's content (without its last line break); a relative PATH
 * is relative to dir. With keep_key, ${key} stays as it is. malloc'd; NULL
 * with errstr on an unknown template, a variable not set, a file not read
 * or out of memory. errstr names the template, never its value. */
char *http_tmpl_expand(const char *text, const char *dir, int keep_key, char *errstr,
                       size_t errstr_size);
/* 1 when text holds ${env:...} or ${file:...}. */
int http_tmpl_has_secret(const char *text);
/* "Name: value" a request header can carry: a token, a colon, a value
 * without control bytes (no line break can smuggle another header). 0, or
 * -1 with errstr. */
int http_tmpl_header_ok(const char *line, char *errstr, size_t errstr_size);
/* The business key as the idempotency key's header value: as it is, or
 * (percent) with '%', spaces, controls and bytes above 0x7e as %XX, so
 * the value is visible ASCII and two keys never give the same one. As it
 * is, a key starting or ending with a space or tab cannot be carried (a
 * server strips them): -1 with errstr. */
int http_tmpl_key_value(const char *key, int percent, char *out, size_t out_size, char *errstr,
                        size_t errstr_size);
/* tmpl with each ${key} replaced by value, percent-encoded but for the
 * unreserved bytes of RFC 3986. malloc'd, or NULL out of memory. */
char *http_tmpl_url(const char *tmpl, const char *value);

/* ---- http_status.c ---- */

void http_statuses_default(http_statuses *s);
/* Lists code (100..599) or cls ("2xx".."5xx") as meaning v. -1 with
 * errstr when it is not a status or a class. */
int http_statuses_set(http_statuses *s, const char *spec, long code, http_verdict v, char *errstr,
                      size_t errstr_size);
http_verdict http_status_verdict(const http_statuses *s, long code);
const char *http_verdict_name(http_verdict v);
/* Retry-After (delay-seconds or an HTTP-date, RFC 9110 10.2.3) as
 * milliseconds after now; a date in the past is 0. -1 when value is
 * neither. */
int64_t http_retry_after_ms(const char *value, time_t now);
/* The response snapshot of an answer: the body itself when it is JSON
 * (UTF-8) of at most max bytes, else {"status":N,"body":"its start",
 * "truncated":true|false} ({"status":N} for an empty body). malloc'd, or
 * NULL out of memory. complete: body holds the whole body. */
char *http_snapshot(long status, const char *body, size_t len, int complete, size_t max);
/* The start of a body as text for a log line or a dead letter: at most
 * max bytes of it, bytes that are not printable UTF-8 as '?'. */
void http_body_start(const char *body, size_t len, char *out, size_t out_size);

/* ---- http_call.c ---- */

/* What came back from one request. */
typedef struct {
    long status; /* 0: no answer */
    CURLcode rc; /* CURLE_OK when an answer came */
    char error[CURL_ERROR_SIZE];
    char *body; /* its first `cap` bytes, malloc'd (NULL: empty) */
    size_t len, cap;
    int complete;           /* body holds all of it */
    int64_t retry_after_ms; /* -1: none (or not understood) */
    char location[256];     /* of a redirect not followed */
    long version;           /* CURL_HTTP_VERSION_* spoken */
    double seconds;
} http_answer;

typedef struct http_pool http_pool;

/* Easy handles kept between calls, so each thread that calls reuses a
 * connection: a handle is taken for a call and put back after it. */
http_pool *http_pool_new(void);
void http_pool_destroy(http_pool *pool);

/* One request: method to url with hdrs (and body of len bytes, or none),
 * up to timeout_ms. The answer's body is kept up to cap bytes. 0, or -1
 * out of memory (then ans->error says so). */
int http_call(http_pool *pool, const http_conf *c, const char *method, const char *url,
              const struct curl_slist *hdrs, const void *body, size_t len, size_t cap,
              http_answer *ans);
void http_answer_release(http_answer *ans);
/* "HTTP/1.1", "HTTP/2", ... */
const char *http_version_name(long version);

/* ---- http_metrics.c ---- */

typedef struct http_metrics http_metrics;

/* What the handler counts: request durations by status class and calls by
 * outcome, exported with dedupd's metrics when the host can
 * (host->version), else kept for the log at fini. */
http_metrics *http_metrics_new(const dedupd_host *host);
void http_metrics_destroy(http_metrics *m);
/* A request of kind ("act", "reconcile") ended: its answer's status (0:
 * none) and duration. */
void http_metrics_request(http_metrics *m, const char *kind, long status, double seconds);
/* What became of a call: "done", "rejected", "retry", "error" (no
 * answer), "reconcile_done", "reconcile_not_done", "reconcile_unknown". */
void http_metrics_outcome(http_metrics *m, const char *outcome);

#endif /* HTTP_H */
