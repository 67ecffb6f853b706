/*
 * The HTTP endpoint's open connections (see dd_http.c for why dedupd keeps
 * its own list): the deadline each request must meet and the limits in
 * total and per client address, and the rate-limited warning about
 * clients. Both the request side (dd_http.c) and the prober
 * (dd_http_probe.c) call down into this file, which calls neither.
 */
#include "dd_http_int.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include "dd_common.h"
#include "dd_log.h"

/* ---- warnings about clients, rate-limited ---- */

/* Logs text as a warning at most once per DD_HTTP_WARN_EVERY_MS and at the
 * debug level otherwise: bad or slow clients must not be able to flood the
 * log. The next warning says how many went to the debug level. */
void dd_http_warn(dd_http_t *http, const char *text)
{
    int64_t now = dd_now_ms();
    uint64_t quiet = 0;
    int warn = 0;

    pthread_mutex_lock(&http->mu);
    if (!http->warned_ms || now - http->warned_ms >= DD_HTTP_WARN_EVERY_MS) {
        warn = 1;
        quiet = http->unwarned;
        http->unwarned = 0;
        http->warned_ms = now;
    } else {
        http->unwarned++;
    }
    pthread_mutex_unlock(&http->mu);
    if (!warn)
        dd_log(DD_LOG_DEBUG, "HTTP server: %s", text);
    else if (quiet)
        dd_log(DD_LOG_WARN,
               "HTTP server: %s (and %llu more since the last warning, logged at "
               "debug level: at most one such warning a minute)",
               text, (unsigned long long)quiet);
    else
        dd_log(DD_LOG_WARN, "HTTP server: %s (more within a minute are logged at debug level)",
               text);
}

/* ---- connections: the deadline and the limits ---- */

void dd_http_conn_addr(dd_http_conn_t *c, const struct sockaddr *sa)
{
    const void *bytes = NULL;

    snprintf(c->name, sizeof(c->name), "an unknown address");
    if (sa && sa->sa_family == AF_INET) {
        bytes = &((const struct sockaddr_in *)(const void *)sa)->sin_addr;
        c->addr_len = 4;
    } else if (sa && sa->sa_family == AF_INET6) {
        bytes = &((const struct sockaddr_in6 *)(const void *)sa)->sin6_addr;
        c->addr_len = 16;
    }
    if (!bytes) return;
    memcpy(c->addr, bytes, c->addr_len);
    inet_ntop(sa->sa_family, bytes, c->name, sizeof(c->name));
}

static int dd_http_conn_same(const dd_http_conn_t *a, const dd_http_conn_t *b)
{
    return !b || (a->addr_len == b->addr_len && memcmp(a->addr, b->addr, a->addr_len) == 0);
}

/* Open connections not being closed: all, or those from like's address. */
static int dd_http_conn_count(const dd_http_t *http, const dd_http_conn_t *like)
{
    int n = 0;

    for (const dd_http_conn_t *c = http->conn_head; c; c = c->next)
        n += !c->closing && dd_http_conn_same(c, like);
    return n;
}

/* The connection that has waited longest for its request (all, or from
 * like's address), or NULL when each one is being answered. */
static dd_http_conn_t *dd_http_conn_oldest(dd_http_t *http, const dd_http_conn_t *like)
{
    dd_http_conn_t *old = NULL;

    for (dd_http_conn_t *c = http->conn_head; c; c = c->next)
        if (!c->closing && !c->busy && dd_http_conn_same(c, like) &&
            (!old || c->since_ms < old->since_ms))
            old = c;
    return old;
}

/* Ends c: libmicrohttpd sees the end of the stream on its thread and closes
 * the connection there (see the top of dd_http.c). */
static void dd_http_conn_shut(dd_http_conn_t *c, char *why, size_t why_size, const char *reason)
{
    shutdown(c->fd, SHUT_RDWR);
    c->closing = 1;
    snprintf(why, why_size, "closed a connection from %s: %s", c->name, reason);
}

/* Closes the connections whose request is overdue. Under conn_mu. */
void dd_http_conn_sweep(dd_http_t *http, int64_t now, char *why, size_t why_size)
{
    char reason[96];

    snprintf(reason, sizeof(reason), "no whole request within http.timeout (%d ms)",
             http->conf->http.timeout_ms);
    for (dd_http_conn_t *c = http->conn_head; c; c = c->next)
        if (!c->closing && now - c->since_ms > http->conf->http.timeout_ms)
            dd_http_conn_shut(c, why, why_size, reason);
}

/* A new connection c: the deadlines of the others, then the limits. */
void dd_http_conn_admit(dd_http_t *http, dd_http_conn_t *c, char *why, size_t why_size)
{
    const dd_conf_t *conf = http->conf;
    dd_http_conn_t *old;

    dd_http_conn_sweep(http, c->since_ms, why, why_size);
    if (dd_http_conn_count(http, c) > conf->http.max_connections_per_ip) {
        old = dd_http_conn_oldest(http, c);
        dd_http_conn_shut(old ? old : c, why, why_size,
                          "over http.max_connections_per_ip; it waited longest for its request");
    }
    if (dd_http_conn_count(http, NULL) > conf->http.max_connections) {
        old = dd_http_conn_oldest(http, NULL);
        dd_http_conn_shut(old ? old : c, why, why_size,
                          "over http.max_connections; it waited longest for its request");
    }
}
