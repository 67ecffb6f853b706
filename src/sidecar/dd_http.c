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
 * That prober and what the probes answer are dd_http_probe.c's; this file
 * serves the connections and the requests, and the list of open
 * connections described below is dd_http_conn.c's, which both call.
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
#include "dd_http_int.h"

#include <ctype.h>
#include <errno.h>
#include <netdb.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <microhttpd.h>

#include "dd_common.h"
#include "dd_db.h"
#include "dd_log.h"

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

/* ---- the request target ---- */

/* A request target of visible ASCII only, and no escape of a control byte
 * (%00 would cut the path, as a raw NUL would). */
static int dd_http_target_bad(const char *t, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)t[i];
        char hex[3];
        long v;

        if (c <= 0x20 || c >= 0x7f) return 1;
        if (c != '%' || i + 2 >= n) continue;
        hex[0] = t[i + 1];
        hex[1] = t[i + 2];
        hex[2] = '\0';
        v = strtol(hex, NULL, 16);
        if (isxdigit((unsigned char)hex[0]) && isxdigit((unsigned char)hex[1]) &&
            (v < 0x20 || v == 0x7f))
            return 1;
    }
    return 0;
}

/* libmicrohttpd's URI log callback: the target before it is split and
 * unescaped, ending at the NUL libmicrohttpd writes before the version, or
 * at a NUL of the client's, which the handler would not see otherwise. */
static void *dd_http_on_uri(void *cls, const char *uri, struct MHD_Connection *conn)
{
    const union MHD_ConnectionInfo *info =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    dd_http_conn_t *c = info ? info->socket_context : NULL;

    (void)cls;
    if (c && uri) {
        c->raw_uri = uri;
        c->raw_len = strlen(uri);
        c->raw_bad = dd_http_target_bad(uri, c->raw_len);
    }
    return NULL;
}

/* 1 when the target held a NUL (it ends before the version does) or a
 * byte it may not hold. */
static int dd_http_target_refused(struct MHD_Connection *conn, const char *version)
{
    const union MHD_ConnectionInfo *info =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    dd_http_conn_t *c = info ? info->socket_context : NULL;

    if (!c || !c->raw_uri) return 1;
    if (c->raw_bad) return 1;
    return version && version[0] && version != c->raw_uri + c->raw_len + 1;
}

/* ---- requests ---- */

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
    if (dd_http_target_refused(conn, version)) {
        snprintf(text, sizeof(text),
                 "bad request: the request target holds a NUL or a control "
                 "byte\n");
        return dd_http_reply(conn, MHD_HTTP_BAD_REQUEST, ctype_text, text, strlen(text),
                             MHD_RESPMEM_MUST_COPY);
    }
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

int dd_http_new(dd_http_t **httpp, const dd_conf_t *conf, dd_pipeline_t *pl,
                dd_handler_t *const *hs, char *errstr, size_t errstr_size)
{
    dd_http_t *http = calloc(1, sizeof(*http));

    *httpp = NULL;
    if (!http) {
        dd_errstr_set(errstr, errstr_size, "out of memory");
        return DD_ERR_NOMEM;
    }
    http->conf = conf;
    http->pl = pl;
    http->hs = hs;
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
    http->ping_shard = -1;
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
        MHD_OPTION_URI_LOG_CALLBACK, dd_http_on_uri, http, MHD_OPTION_END);
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
