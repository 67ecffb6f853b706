/*
 * The sidecar's HTTP endpoint: liveness, readiness and Prometheus metrics.
 *
 * Requests are answered on libmicrohttpd's own thread and read only
 * snapshots (dd_pipeline_stats, dd_pipeline_lag), so a slow scraper can never
 * stall the consumer loop. Readiness needs to know whether the database
 * answers; pinging it from the request thread could block /healthz behind a
 * hung server for the whole read timeout, so a small prober thread owns a
 * dedicated connection, pings at most once per second and caches the result.
 * A cached result older than DD_HTTP_PING_STALE_MS counts as "not answering":
 * a ping stuck on a dead server turns readiness off instead of freezing it.
 *
 * The endpoint must keep answering probes when some clients are slow or too
 * many, so libmicrohttpd serves every connection from one polling thread
 * (epoll), and dedupd keeps its own list of open connections to bound them:
 *  - a deadline: each request must arrive whole within http.timeout of the
 *    connection opening or of its previous answer, checked at each new
 *    connection and by the prober every second (the limits below keep
 *    probes answered even while a hung ping holds the prober up).
 *    libmicrohttpd's own timeout only counts idleness, which a client
 *    sending a header line every few seconds never reaches;
 *  - limits, in total and per client address; a new connection beyond one
 *    closes the connection that has waited longest for its request (one
 *    being answered is left alone), so a probe always gets in and a flood of
 *    slow clients only pushes out its own kind.
 * A connection is closed with shutdown(): its descriptor stays valid, and
 * libmicrohttpd notices the end and closes it on its thread, telling us
 * first (dd_http_on_connection), so the list never holds a closed fd.
 * Bad requests and closed connections are logged at debug level, with one
 * warning a minute at most saying how many there were.
 */
#include "dd_http.h"

#include <errno.h>
#include <netdb.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <microhttpd.h>

#include "dd_common.h"
#include "dd_db.h"
#include "dd_log.h"
#include "dd_metrics.h"

/* Liveness thresholds come from http.stuck_after (default 60 s): messages
 * in flight and none finished for that long is a stall; the default is
 * longer than retry.backoff_max (30 s), so one handler RETRY cycle is not
 * mistaken for one, while a handler retrying forever is reported. The main
 * loop turns at least every 100 ms, so half of it without a turn means the
 * loop itself is wedged. */
/* Readiness: how often the prober pings, and when its answer is too old. */
#define DD_HTTP_PING_EVERY_MS 1000
#define DD_HTTP_PING_STALE_MS 5000
#define DD_HTTP_LAG_MAX 4096
/* At most one warning about HTTP clients (bad requests, closed connections)
 * per this long; the rest go to the debug level and are counted. */
#define DD_HTTP_WARN_EVERY_MS 60000

/* An open connection, from libmicrohttpd's start notification to its close
 * notification; the connection's socket context points to it. */
typedef struct dd_http_conn_s {
    struct dd_http_conn_s *prev, *next;
    int fd;
    unsigned char addr[16]; /* client address (IPv4 or IPv6 bytes) */
    size_t addr_len;
    char name[64];    /* the address as text, for the log */
    int64_t since_ms; /* opened, or its previous answer sent: the request is due by + timeout */
    int busy;         /* a request is being answered */
    int closing;      /* shut down by us; libmicrohttpd has yet to close it */
} dd_http_conn_t;

struct dd_http_s {
    const dd_conf_t *conf;
    dd_pipeline_t *pl;
    struct MHD_Daemon *mhd;
    int64_t started_ms;

    /* prober thread and its cached answer, under mu */
    pthread_t prober;
    int prober_started;
    atomic_int stop; /* set by dd_http_stop, read by the prober */
    pthread_mutex_t mu;
    dd_db_t *db[DD_CONF_SHARD_MAX]; /* prober thread only: a connection per shard */
    int db_ok;                      /* the last pings answered, every shard's */
    int64_t db_check_ms;            /* dd_now_ms() when the last pings completed, 0: never */
    char db_err[400];               /* the first shard's that did not: what it said */
    int64_t idle_seen_ms;           /* dd_now_ms() when nothing was last seen in flight */
    int64_t warned_ms;              /* the last rate-limited warning, under mu */
    uint64_t unwarned;              /* messages since then logged at debug level only */

    /* open connections, oldest first, under conn_mu */
    pthread_mutex_t conn_mu;
    dd_http_conn_t *conn_head, *conn_tail;
};

/* Remembers when the pipeline was last seen with nothing in flight. The
 * snapshot says when a message last finished, not when the current work
 * started: after an idle hour, a message polled a second ago would look
 * stuck for an hour. Sampled by the prober every second and by every
 * request, so the error is at most a sampling period. */
static void dd_http_observe(dd_http_t *http, const dd_stats_t *s)
{
    if (s->inflight > 0) return;
    pthread_mutex_lock(&http->mu);
    http->idle_seen_ms = dd_now_ms();
    pthread_mutex_unlock(&http->mu);
}

/* ---- warnings about clients, rate-limited ---- */

/* Logs text as a warning at most once per DD_HTTP_WARN_EVERY_MS and at the
 * debug level otherwise: bad or slow clients must not be able to flood the
 * log. The next warning says how many went to the debug level. */
static void dd_http_warn(dd_http_t *http, const char *text)
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

static void dd_http_conn_addr(dd_http_conn_t *c, const struct sockaddr *sa)
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
 * the connection there (see the top of the file). */
static void dd_http_conn_shut(dd_http_conn_t *c, char *why, size_t why_size, const char *reason)
{
    shutdown(c->fd, SHUT_RDWR);
    c->closing = 1;
    snprintf(why, why_size, "closed a connection from %s: %s", c->name, reason);
}

/* Closes the connections whose request is overdue. Under conn_mu. */
static void dd_http_conn_sweep(dd_http_t *http, int64_t now, char *why, size_t why_size)
{
    char reason[96];

    snprintf(reason, sizeof(reason), "no whole request within http.timeout (%d ms)",
             http->conf->http.timeout_ms);
    for (dd_http_conn_t *c = http->conn_head; c; c = c->next)
        if (!c->closing && now - c->since_ms > http->conf->http.timeout_ms)
            dd_http_conn_shut(c, why, why_size, reason);
}

/* A new connection c: the deadlines of the others, then the limits. */
static void dd_http_conn_admit(dd_http_t *http, dd_http_conn_t *c, char *why, size_t why_size)
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

/* libmicrohttpd's connection notifications, on its thread. */
static void dd_http_on_connection(void *cls, struct MHD_Connection *conn, void **ctx,
                                  enum MHD_ConnectionNotificationCode toe)
{
    const union MHD_ConnectionInfo *fd, *addr;
    dd_http_t *http = cls;
    dd_http_conn_t *c = *ctx;
    char why[200] = "";

    if (toe == MHD_CONNECTION_NOTIFY_CLOSED) {
        if (!c) return;
        pthread_mutex_lock(&http->conn_mu);
        *(c->prev ? &c->prev->next : &http->conn_head) = c->next;
        *(c->next ? &c->next->prev : &http->conn_tail) = c->prev;
        pthread_mutex_unlock(&http->conn_mu);
        free(c);
        *ctx = NULL;
        return;
    }
    fd = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
    addr = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    /* Without memory the connection goes untracked: libmicrohttpd's own
     * limit and idle timeout still apply to it. */
    if (!fd || !(c = calloc(1, sizeof(*c)))) return;
    c->fd = fd->connect_fd;
    dd_http_conn_addr(c, addr ? addr->client_addr : NULL);
    c->since_ms = dd_now_ms();
    *ctx = c;
    pthread_mutex_lock(&http->conn_mu);
    c->prev = http->conn_tail;
    *(c->prev ? &c->prev->next : &http->conn_head) = c;
    http->conn_tail = c;
    dd_http_conn_admit(http, c, why, sizeof(why));
    pthread_mutex_unlock(&http->conn_mu);
    if (why[0]) dd_http_warn(http, why);
}

/* A request of conn is being answered (busy), or was (its connection now
 * waits for the next one, due within http.timeout). */
static void dd_http_conn_busy(dd_http_t *http, struct MHD_Connection *conn, int busy)
{
    const union MHD_ConnectionInfo *info =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    dd_http_conn_t *c = info ? info->socket_context : NULL;

    if (!c) return;
    pthread_mutex_lock(&http->conn_mu);
    c->busy = busy;
    if (!busy) c->since_ms = dd_now_ms();
    pthread_mutex_unlock(&http->conn_mu);
}

static void dd_http_on_completed(void *cls, struct MHD_Connection *conn, void **req_cls,
                                 enum MHD_RequestTerminationCode toe)
{
    dd_http_conn_busy(cls, conn, 0);
}

/* ---- database prober ---- */

/* One ping, reconnecting when the connection is gone. Auto-reconnect is
 * off on every dedupd connection, so a restarted server needs an explicit
 * dd_db_reconnect. */
static int dd_http_ping_shard(dd_http_t *http, int s, char *errstr, size_t errstr_size)
{
    if (!http->db[s]) return dd_db_new_shard(&http->db[s], http->conf, s, errstr, errstr_size);
    if (dd_db_mysql(http->db[s]) && mysql_ping(dd_db_mysql(http->db[s])) == 0) return DD_OK;
    return dd_db_reconnect(http->db[s], errstr, errstr_size);
}

/* Every shard answers; else errstr names the first that did not ("shard 1
 * (127.0.0.1:3307) unreachable: ..." with several). */
static int dd_http_ping(dd_http_t *http, char *errstr, size_t errstr_size)
{
    char err[256], addr[300];
    int rc = DD_OK;

    for (int s = 0; s < http->conf->shard_cnt; s++) {
        if (dd_http_ping_shard(http, s, err, sizeof(err)) == DD_OK || rc) continue;
        rc = DD_ERR_RETRIABLE;
        if (http->conf->shard_cnt == 1)
            dd_errstr_set(errstr, errstr_size, "%s", err);
        else
            dd_errstr_set(errstr, errstr_size, "shard %d (%s) unreachable: %s", s,
                          dd_conf_mysql_addr(&http->conf->shards[s], addr, sizeof(addr)), err);
    }
    return rc;
}

static void *dd_http_prober_main(void *arg)
{
    dd_http_t *http = arg;
    char err[400], why[200];

    while (!atomic_load(&http->stop)) {
        dd_stats_t s;
        int ok;

        why[0] = '\0';
        pthread_mutex_lock(&http->conn_mu);
        dd_http_conn_sweep(http, dd_now_ms(), why, sizeof(why));
        pthread_mutex_unlock(&http->conn_mu);
        if (why[0]) dd_http_warn(http, why);
        dd_pipeline_stats(http->pl, &s);
        dd_http_observe(http, &s);
        err[0] = '\0';
        ok = dd_http_ping(http, err, sizeof(err)) == DD_OK;
        pthread_mutex_lock(&http->mu);
        if (http->db_ok != ok && http->db_check_ms)
            dd_log(ok ? DD_LOG_INFO : DD_LOG_WARN, "Readiness: the database %s%s%s.",
                   ok ? "answers again" : "does not answer", ok ? "" : ": ", ok ? "" : err);
        http->db_ok = ok;
        http->db_check_ms = dd_now_ms();
        snprintf(http->db_err, sizeof(http->db_err), "%s", err);
        pthread_mutex_unlock(&http->mu);
        dd_sleep_ms(DD_HTTP_PING_EVERY_MS, &http->stop);
    }
    return NULL;
}

/* ---- endpoints ---- */

/* Liveness. Writes the reason into text and returns the HTTP status. */
static unsigned int dd_http_health(dd_http_t *http, char *text, size_t size)
{
    dd_stats_t s;
    int64_t now = dd_now_ms(), loop_ref, busy_ref;

    dd_pipeline_stats(http->pl, &s);
    dd_http_observe(http, &s);
    if (!s.running && s.last_loop_ms) {
        snprintf(text, size, "stopping: the consumer loop has ended\n");
        return MHD_HTTP_SERVICE_UNAVAILABLE;
    }
    /* Before the first turn (startup), measure from when the server started. */
    loop_ref = s.last_loop_ms ? s.last_loop_ms : http->started_ms;
    if (now - loop_ref > http->conf->http.stuck_after_ms / 2) {
        snprintf(text, size, "stuck: the consumer loop has not turned for %lld ms\n",
                 (long long)(now - loop_ref));
        return MHD_HTTP_SERVICE_UNAVAILABLE;
    }
    pthread_mutex_lock(&http->mu);
    busy_ref = http->idle_seen_ms;
    pthread_mutex_unlock(&http->mu);
    if (s.last_finish_ms > busy_ref) busy_ref = s.last_finish_ms;
    if (s.inflight > 0 && now - busy_ref > http->conf->http.stuck_after_ms) {
        snprintf(text, size, "stuck: %lld message(s) in flight and none finished for %lld ms\n",
                 (long long)s.inflight, (long long)(now - busy_ref));
        return MHD_HTTP_SERVICE_UNAVAILABLE;
    }
    snprintf(text, size, "ok\n");
    return MHD_HTTP_OK;
}

/* Readiness: partitions assigned and a fresh, successful database ping. */
static unsigned int dd_http_ready(dd_http_t *http, char *text, size_t size)
{
    dd_stats_t s;
    int64_t now = dd_now_ms(), checked;
    int ok;
    char err[400];

    dd_pipeline_stats(http->pl, &s);
    pthread_mutex_lock(&http->mu);
    ok = http->db_ok;
    checked = http->db_check_ms;
    snprintf(err, sizeof(err), "%s", http->db_err);
    pthread_mutex_unlock(&http->mu);

    if (!s.running || s.assigned <= 0) {
        snprintf(text, size, "not ready: no partitions assigned\n");
        return MHD_HTTP_SERVICE_UNAVAILABLE;
    }
    if (!checked || now - checked > DD_HTTP_PING_STALE_MS) {
        snprintf(text, size, "not ready: the database did not answer a ping within %d ms\n",
                 DD_HTTP_PING_STALE_MS);
        return MHD_HTTP_SERVICE_UNAVAILABLE;
    }
    if (!ok && http->conf->shard_cnt > 1) {
        snprintf(text, size, "not ready: %s\n", err);
        return MHD_HTTP_SERVICE_UNAVAILABLE;
    }
    if (!ok) {
        snprintf(text, size, "not ready: the database does not answer: %s\n", err);
        return MHD_HTTP_SERVICE_UNAVAILABLE;
    }
    snprintf(text, size, "ok: %d partition(s) assigned, database answers\n", s.assigned);
    return MHD_HTTP_OK;
}

static int dd_http_metrics(dd_http_t *http, char **outp, size_t *lenp)
{
    static dd_lag_t lags[DD_HTTP_LAG_MAX]; /* only MHD's single thread renders */
    static dd_stats_t s;                   /* large: off the thread's stack */
    const char *routes[DD_CONF_ROUTE_MAX];
    dd_proc_t proc;
    size_t n;

    for (int r = 0; r < http->conf->route_cnt; r++)
        routes[r] = http->conf->routes[r].name;
    dd_pipeline_stats(http->pl, &s);
    n = dd_pipeline_lag(http->pl, lags, DD_HTTP_LAG_MAX);
    dd_metrics_proc_read(&proc);
    return dd_metrics_render(&s, routes, http->conf->route_cnt, lags,
                             n < DD_HTTP_LAG_MAX ? n : DD_HTTP_LAG_MAX, &proc, outp, lenp);
}

static enum MHD_Result dd_http_reply(struct MHD_Connection *conn, unsigned int status,
                                     const char *ctype, void *body, size_t len,
                                     enum MHD_ResponseMemoryMode mode)
{
    struct MHD_Response *resp = MHD_create_response_from_buffer(len, body, mode);
    enum MHD_Result ret;

    if (!resp) {
        if (mode == MHD_RESPMEM_MUST_FREE) free(body);
        return MHD_NO;
    }
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, ctype);
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
    ret = MHD_queue_response(conn, status, resp);
    MHD_destroy_response(resp);
    return ret;
}

static enum MHD_Result dd_http_on_request(void *cls, struct MHD_Connection *conn, const char *url,
                                          const char *method, const char *version,
                                          const char *upload_data, size_t *upload_data_size,
                                          void **req_cls)
{
    static const char ctype_text[] = "text/plain; charset=utf-8";
    dd_http_t *http = cls;
    char text[512];
    unsigned int status;
    char *body;
    size_t len;

    dd_http_conn_busy(http, conn, 1);
    if (strcmp(method, MHD_HTTP_METHOD_GET) != 0 && strcmp(method, MHD_HTTP_METHOD_HEAD) != 0) {
        snprintf(text, sizeof(text), "method not allowed\n");
        return dd_http_reply(conn, MHD_HTTP_METHOD_NOT_ALLOWED, ctype_text, text, strlen(text),
                             MHD_RESPMEM_MUST_COPY);
    }
    if (strcmp(url, "/metrics") == 0) {
        if (dd_http_metrics(http, &body, &len) != DD_OK) return MHD_NO;
        return dd_http_reply(conn, MHD_HTTP_OK, "text/plain; version=0.0.4; charset=utf-8", body,
                             len, MHD_RESPMEM_MUST_FREE);
    }
    if (strcmp(url, "/healthz") == 0)
        status = dd_http_health(http, text, sizeof(text));
    else if (strcmp(url, "/readyz") == 0)
        status = dd_http_ready(http, text, sizeof(text));
    else {
        status = MHD_HTTP_NOT_FOUND;
        snprintf(text, sizeof(text), "not found; try /healthz, /readyz or /metrics\n");
    }
    return dd_http_reply(conn, status, ctype_text, text, strlen(text), MHD_RESPMEM_MUST_COPY);
}

static void dd_http_on_mhd_log(void *cls, const char *fmt, va_list ap)
{
    char text[512];
    size_t n;

    vsnprintf(text, sizeof(text), fmt, ap);
    n = strlen(text);
    while (n && (text[n - 1] == '\n' || text[n - 1] == '\r'))
        text[--n] = '\0';
    /* Mostly about clients (a malformed request, a connection reset): one
     * a minute is enough to see that it happens. */
    dd_http_warn(cls, text);
}

/* ---- listening socket ---- */

/* Splits "host:port" or "[v6]:port"; an empty host or "*" means any address. */
static int dd_http_split(const char *listen, char *host, size_t host_size, char *port,
                         size_t port_size)
{
    const char *colon = strrchr(listen, ':');
    size_t hlen;

    if (!colon) return -1;
    hlen = (size_t)(colon - listen);
    if (hlen >= 2 && listen[0] == '[' && listen[hlen - 1] == ']') {
        listen++;
        hlen -= 2;
    }
    if (hlen >= host_size || strlen(colon + 1) >= port_size) return -1;
    snprintf(host, host_size, "%.*s", (int)hlen, listen);
    snprintf(port, port_size, "%s", colon + 1);
    if (!strcmp(host, "*")) host[0] = '\0';
    return 0;
}

static int dd_http_bind_one(const struct addrinfo *ai, char *errstr, size_t errstr_size)
{
    int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
    int on = 1;

    if (fd < 0) {
        dd_errstr_set(errstr, errstr_size, "socket: %s", strerror(errno));
        return -1;
    }
    /* A restarted sidecar must get its port back while old connections
     * linger in TIME_WAIT. */
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof(on));
    if (bind(fd, ai->ai_addr, ai->ai_addrlen) != 0 || listen(fd, 64) != 0) {
        dd_errstr_set(errstr, errstr_size, "%s", strerror(errno));
        close(fd);
        return -1;
    }
    return fd;
}

/* Binds the socket ourselves (rather than letting MHD do it) so that a
 * failure says why: "Address already in use", "Cannot assign requested
 * address". */
static int dd_http_listen(const char *listen, char *errstr, size_t errstr_size)
{
    struct addrinfo hints, *res = NULL, *ai;
    char host[256], port[16], why[256] = "no address";
    int fd = -1, gai;

    if (dd_http_split(listen, host, sizeof(host), port, sizeof(port)) != 0) {
        dd_errstr_set(errstr, errstr_size, "http.listen \"%s\": expected host:port", listen);
        return -1;
    }
    memset(&hints, 0, sizeof(hints));
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
    gai = getaddrinfo(host[0] ? host : NULL, port, &hints, &res);
    if (gai != 0) {
        dd_errstr_set(errstr, errstr_size, "cannot listen on http.listen \"%s\": %s", listen,
                      gai_strerror(gai));
        return -1;
    }
    for (ai = res; ai && fd < 0; ai = ai->ai_next)
        fd = dd_http_bind_one(ai, why, sizeof(why));
    freeaddrinfo(res);
    if (fd < 0)
        dd_errstr_set(errstr, errstr_size, "cannot listen on http.listen \"%s\": %s", listen, why);
    return fd;
}

/* ---- life cycle ---- */

int dd_http_new(dd_http_t **httpp, const dd_conf_t *conf, dd_pipeline_t *pl, char *errstr,
                size_t errstr_size)
{
    dd_http_t *http = calloc(1, sizeof(*http));

    *httpp = NULL;
    if (!http) {
        dd_errstr_set(errstr, errstr_size, "out of memory");
        return DD_ERR_NOMEM;
    }
    http->conf = conf;
    http->pl = pl;
    pthread_mutex_init(&http->mu, NULL);
    pthread_mutex_init(&http->conn_mu, NULL);
    *httpp = http;
    return DD_OK;
}

int dd_http_start(dd_http_t *http, char *errstr, size_t errstr_size)
{
    const dd_conf_t *conf = http->conf;
    int fd;

    http->started_ms = dd_now_ms();
    http->idle_seen_ms = http->started_ms;
    fd = dd_http_listen(conf->http.listen, errstr, errstr_size);
    if (fd < 0) return DD_ERR_IO;
    /* MHD owns fd from here on and closes it when it stops. Whether a failed
     * start closes it differs between versions: leaving it open on that path
     * (the process is about to exit) is safer than a double close. */
    /* One polling thread (epoll where there is one) for every connection.
     * Its idle timeout backs up the deadline; its connection limit leaves
     * room for connections dedupd shut down that it has yet to close. */
    http->mhd = MHD_start_daemon(
        MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_AUTO | MHD_USE_ERROR_LOG, 0, NULL, NULL,
        dd_http_on_request, http, MHD_OPTION_EXTERNAL_LOGGER, dd_http_on_mhd_log, http,
        MHD_OPTION_LISTEN_SOCKET, fd, MHD_OPTION_CONNECTION_TIMEOUT,
        (unsigned int)((conf->http.timeout_ms + 999) / 1000), MHD_OPTION_CONNECTION_LIMIT,
        (unsigned int)conf->http.max_connections * 2 + 16, MHD_OPTION_NOTIFY_CONNECTION,
        dd_http_on_connection, http, MHD_OPTION_NOTIFY_COMPLETED, dd_http_on_completed, http,
        MHD_OPTION_END);
    if (!http->mhd) {
        dd_errstr_set(errstr, errstr_size, "cannot start the HTTP server on %s", conf->http.listen);
        return DD_ERR_IO;
    }
    if (pthread_create(&http->prober, NULL, dd_http_prober_main, http) != 0) {
        dd_errstr_set(errstr, errstr_size, "cannot start the readiness prober thread");
        dd_http_stop(http);
        return DD_ERR_FATAL;
    }
    http->prober_started = 1;
    dd_log(DD_LOG_INFO, "HTTP endpoint listening on %s (/healthz, /readyz, /metrics).",
           conf->http.listen);
    return DD_OK;
}

void dd_http_stop(dd_http_t *http)
{
    if (!http) return;
    atomic_store(&http->stop, 1);
    if (http->mhd) MHD_stop_daemon(http->mhd);
    http->mhd = NULL;
    if (http->prober_started) pthread_join(http->prober, NULL);
    http->prober_started = 0;
    /* Stopping libmicrohttpd closed every connection it told us of. */
}

void dd_http_destroy(dd_http_t *http)
{
    if (!http) return;
    dd_http_stop(http);
    for (int s = 0; s < DD_CONF_SHARD_MAX; s++)
        dd_db_destroy(http->db[s]);
    pthread_mutex_destroy(&http->conn_mu);
    pthread_mutex_destroy(&http->mu);
    free(http);
}
