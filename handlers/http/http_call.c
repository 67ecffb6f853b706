/*
 * The HTTP handler's requests, through libcurl's easy interface. act()
 * runs on dedupd's lane threads, several at once, so each call takes an
 * easy handle from a pool and puts it back: a handle keeps its
 * connections (and TLS sessions) open between calls, so a thread calling
 * again reuses one instead of a new TCP and TLS handshake per message.
 * libcurl speaks HTTP/2 over TLS where the server offers it (ALPN), takes
 * proxies from the usual environment variables (https_proxy, no_proxy)
 * unless `proxy` is set, and verifies TLS peers and names always.
 */
#include "http.h"

#include <stdlib.h>
#include <string.h>

#define HTTP_POOL_MAX 256 /* handles kept; more at once are made and freed */

struct http_pool {
    pthread_mutex_t mu;
    CURL *idle[HTTP_POOL_MAX];
    int n;
};

http_pool *http_pool_new(void)
{
    http_pool *pool = calloc(1, sizeof(*pool));

    if (pool) pthread_mutex_init(&pool->mu, NULL);
    return pool;
}

void http_pool_destroy(http_pool *pool)
{
    if (!pool) return;
    for (int i = 0; i < pool->n; i++)
        curl_easy_cleanup(pool->idle[i]);
    pthread_mutex_destroy(&pool->mu);
    free(pool);
}

static CURL *http_pool_take(http_pool *pool)
{
    CURL *c = NULL;

    pthread_mutex_lock(&pool->mu);
    if (pool->n > 0) c = pool->idle[--pool->n];
    pthread_mutex_unlock(&pool->mu);
    if (c) {
        curl_easy_reset(c); /* keeps its connections, drops the last call's options */
        return c;
    }
    return curl_easy_init();
}

/* Back to the pool; one whose call failed without an answer is closed
 * with its connections (a half-read answer must not be read by the next). */
static void http_pool_give(http_pool *pool, CURL *c, int ok)
{
    pthread_mutex_lock(&pool->mu);
    if (ok && pool->n < HTTP_POOL_MAX) {
        pool->idle[pool->n++] = c;
        c = NULL;
    }
    pthread_mutex_unlock(&pool->mu);
    if (c) curl_easy_cleanup(c);
}

/* The body is kept up to cap bytes; the rest is read and dropped (a
 * shorter return would make libcurl fail the transfer). */
static size_t http_call_body(char *data, size_t size, size_t nmemb, void *opaque)
{
    http_answer *ans = opaque;
    size_t n = size * nmemb, room = ans->cap - ans->len;

    if (ans->len < ans->cap && !ans->body && !(ans->body = malloc(ans->cap + 1))) return 0;
    if (room > 0) {
        size_t k = n < room ? n : room;
        memcpy(ans->body + ans->len, data, k);
        ans->len += k;
        ans->body[ans->len] = '\0';
    }
    if (n > room) ans->complete = 0;
    return n;
}

/* The options every request has. */
static void http_call_opts(CURL *c, const http_conf *conf, http_answer *ans)
{
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(c, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, conf->timeout_ms);
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, conf->connect_timeout_ms);
    curl_easy_setopt(c, CURLOPT_TCP_KEEPALIVE, 1L);
    curl_easy_setopt(c, CURLOPT_HTTP_VERSION, conf->http_version);
    curl_easy_setopt(c, CURLOPT_SSL_VERIFYPEER, 1L);
    curl_easy_setopt(c, CURLOPT_SSL_VERIFYHOST, 2L);
    if (conf->ca_file) curl_easy_setopt(c, CURLOPT_CAINFO, conf->ca_file);
    if (conf->ca_path) curl_easy_setopt(c, CURLOPT_CAPATH, conf->ca_path);
    if (conf->cert_file) curl_easy_setopt(c, CURLOPT_SSLCERT, conf->cert_file);
    if (conf->key_file) curl_easy_setopt(c, CURLOPT_SSLKEY, conf->key_file);
    if (conf->key_password) curl_easy_setopt(c, CURLOPT_KEYPASSWD, conf->key_password);
    if (conf->pinned_key) curl_easy_setopt(c, CURLOPT_PINNEDPUBLICKEY, conf->pinned_key);
    if (conf->proxy) curl_easy_setopt(c, CURLOPT_PROXY, conf->proxy);
    if (conf->resolve) curl_easy_setopt(c, CURLOPT_RESOLVE, conf->resolve);
    if (conf->follow_redirects) {
        curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 1L);
        curl_easy_setopt(c, CURLOPT_MAXREDIRS, conf->max_redirects);
        curl_easy_setopt(c, CURLOPT_POSTREDIR, (long)CURL_REDIR_POST_ALL);
    }
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, http_call_body);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, ans);
    curl_easy_setopt(c, CURLOPT_ERRORBUFFER, ans->error);
}

/* What the answer's headers say: Retry-After, and where a redirect that
 * was not followed points. */
static void http_call_headers(CURL *c, http_answer *ans)
{
    struct curl_header *h;

    if (curl_easy_header(c, "Retry-After", 0, CURLH_HEADER, -1, &h) == CURLHE_OK)
        ans->retry_after_ms = http_retry_after_ms(h->value, time(NULL));
    if (ans->status >= 300 && ans->status < 400 &&
        curl_easy_header(c, "Location", 0, CURLH_HEADER, -1, &h) == CURLHE_OK)
        http_body_start(h->value, strlen(h->value), ans->location, sizeof(ans->location));
}

int http_call(http_pool *pool, const http_conf *conf, const char *method, const char *url,
              const struct curl_slist *hdrs, const void *body, size_t len, size_t cap,
              http_answer *ans)
{
    CURL *c;
    long version = 0;

    memset(ans, 0, sizeof(*ans));
    ans->cap = cap;
    ans->complete = 1;
    ans->retry_after_ms = -1;
    if (!(c = http_pool_take(pool))) {
        ans->rc = CURLE_OUT_OF_MEMORY;
        snprintf(ans->error, sizeof(ans->error), "out of memory");
        return -1;
    }
    http_call_opts(c, conf, ans);
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, hdrs);
    if (strcmp(method, "HEAD") == 0)
        curl_easy_setopt(c, CURLOPT_NOBODY, 1L);
    else if (strcmp(method, "GET") != 0)
        curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
    if (body) {
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
        curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)len);
    }
    ans->rc = curl_easy_perform(c);
    curl_easy_getinfo(c, CURLINFO_TOTAL_TIME, &ans->seconds);
    if (ans->rc == CURLE_OK) {
        curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &ans->status);
        curl_easy_getinfo(c, CURLINFO_HTTP_VERSION, &version);
        ans->version = version;
        http_call_headers(c, ans);
    } else if (!ans->error[0]) {
        snprintf(ans->error, sizeof(ans->error), "%s", curl_easy_strerror(ans->rc));
    }
    http_pool_give(pool, c, ans->rc == CURLE_OK);
    return 0;
}

void http_answer_release(http_answer *ans)
{
    free(ans->body);
    ans->body = NULL;
}

const char *http_version_name(long version)
{
    switch (version) {
    case CURL_HTTP_VERSION_1_0:
        return "HTTP/1.0";
    case CURL_HTTP_VERSION_1_1:
        return "HTTP/1.1";
    case CURL_HTTP_VERSION_2_0:
        return "HTTP/2";
    case CURL_HTTP_VERSION_3:
        return "HTTP/3";
    default:
        return "HTTP";
    }
}
