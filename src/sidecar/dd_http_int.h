/*
 * The HTTP endpoint's private parts (see dd_http.h), shared by its three
 * files: dd_http.c serves the connections and requests, dd_http_probe.c
 * owns the database prober and decides what liveness, readiness and the
 * metrics page say, and dd_http_conn.c keeps the list of open connections
 * under their deadline and limits, for both of them. dd_http.c calls the
 * other two, dd_http_probe.c calls dd_http_conn.c, never the other way.
 */
#ifndef DD_HTTP_INT_H
#define DD_HTTP_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "dd_db.h"
#include "dd_http.h"
#include "dd_stats.h"

/* Liveness thresholds come from http.stuck_after (default 60 s): messages
 * in flight and none finished for that long is a stall; the default is
 * longer than retry.backoff_max (30 s), so one handler RETRY cycle is not
 * mistaken for one, while a handler retrying forever is reported. Waiting
 * for a dependency that is down (dd_http_observe) is not a stall: liveness
 * must not restart dedupd for an outage a restart cannot cure. The main
 * loop turns at least every 100 ms, so half of it without a turn means the
 * loop itself is wedged. */
/* Readiness: how often the prober pings, and when its answer is too old.
 * The prober's connections read with DD_HTTP_PING_STALE_MS as their read
 * timeout: a shard that accepts connections and never answers (a stopped
 * server) is marked down, its error counted, within that time. */
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
    char name[64];       /* the address as text, for the log */
    int64_t since_ms;    /* opened, or its previous answer sent: the request is due by + timeout */
    int busy;            /* a request is being answered */
    const char *raw_uri; /* the request target as it came, in libmicrohttpd's buffer */
    size_t raw_len;      /* its length up to the first NUL */
    int raw_bad;         /* it holds a byte a request target may not hold */
    int closing;         /* shut down by us; libmicrohttpd has yet to close it */
} dd_http_conn_t;

struct dd_http_s {
    const dd_conf_t *conf;
    dd_pipeline_t *pl;
    dd_handler_t *const *hs; /* the routes' handlers (their own metrics), or NULL */
    struct MHD_Daemon *mhd;
    int64_t started_ms;

    /* prober thread and its cached answer, under mu */
    pthread_t prober;
    int prober_started;
    atomic_int stop; /* set by dd_http_stop, read by the prober */
    pthread_mutex_t mu;
    dd_db_t *db[DD_CONF_SHARD_MAX];    /* prober thread only: a connection per shard */
    int db_ok;                         /* the last pings answered, every shard's */
    int64_t db_check_ms;               /* dd_now_ms() when the last pings completed, 0: never */
    char db_err[400];                  /* the first shard's that did not: what it said */
    int ping_shard;                    /* the shard being pinged now, -1: none */
    int64_t ping_since_ms;             /* and since when */
    int shard_down[DD_CONF_SHARD_MAX]; /* its last ping failed */
    uint64_t ping_errors[DD_CONF_SHARD_MAX]; /* failed pings, counted as database errors */
    int64_t idle_seen_ms;                    /* dd_now_ms() when nothing was last seen in flight */
    int64_t dep_seen_ms;                     /* and when a dependency was last seen down */
    int64_t warned_ms;                       /* the last rate-limited warning, under mu */
    uint64_t unwarned;                       /* messages since then logged at debug level only */

    /* open connections, oldest first, under conn_mu */
    pthread_mutex_t conn_mu;
    dd_http_conn_t *conn_head, *conn_tail;
};

/* dd_http_conn.c: a rate-limited warning about clients; a new connection's
 * client address (sa may be NULL); under conn_mu, closing the connections
 * past their deadline, and admitting a new one c (the deadlines of the
 * others, then the limits), saying why into why. */
void dd_http_warn(dd_http_t *http, const char *text);
void dd_http_conn_addr(dd_http_conn_t *c, const struct sockaddr *sa);
void dd_http_conn_sweep(dd_http_t *http, int64_t now, char *why, size_t why_size);
void dd_http_conn_admit(dd_http_t *http, dd_http_conn_t *c, char *why, size_t why_size);

/* dd_http_probe.c: the prober thread (arg: the dd_http_t); liveness and
 * readiness (the reason in text, the HTTP status returned); the metrics
 * page (malloc'd into *outp). */
void *dd_http_prober_main(void *arg);
unsigned int dd_http_health(dd_http_t *http, char *text, size_t size);
unsigned int dd_http_ready(dd_http_t *http, char *text, size_t size);
int dd_http_metrics(dd_http_t *http, char **outp, size_t *lenp);

#endif /* DD_HTTP_INT_H */
