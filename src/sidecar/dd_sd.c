/*
 * systemd notifications (see dd_sd.h), by hand: the protocol is one
 * datagram of "NAME=value" lines on the AF_UNIX socket $NOTIFY_SOCKET
 * names, a few lines of code, where libsystemd would be one more library
 * in the image and in every build for the one function. The socket is
 * opened for each message, as sd_notify(3) does, so a systemd restarted
 * meanwhile gets it.
 *
 * The thread judges liveness exactly as /healthz does (dd_stats_health),
 * sampling when it last saw nothing in flight as the HTTP prober does: a
 * consumer /healthz would report stuck gets no WATCHDOG=1, and systemd
 * restarts it after WatchdogSec.
 */
#include "dd_sd.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "dd_common.h"
#include "dd_log.h"
#include "dd_stats.h"

#define DD_SD_TICK_MS 200

struct dd_sd_s {
    const dd_conf_t *conf;
    dd_pipeline_t *pl;
    char path[sizeof(((struct sockaddr_un *)0)->sun_path)];
    int64_t watchdog_ms; /* WATCHDOG_USEC in ms, 0: no watchdog */
    pthread_t thr;
    int started;
    atomic_int stop;
    int ready, unhealthy, stopping;
    int64_t started_ms, idle_seen_ms, next_watchdog_ms;
};

int dd_sd_send(const char *path, const char *text)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    size_t len = strlen(path);
    socklen_t salen;
    int fd, rc = 0;

    if (len == 0 || len >= sizeof(sa.sun_path)) return -EINVAL;
    memcpy(sa.sun_path, path, len);
    if (path[0] == '@') sa.sun_path[0] = '\0'; /* an abstract socket */
    salen = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + len + (path[0] != '@'));
    if ((fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0)) < 0) return -errno;
    if (sendto(fd, text, strlen(text), MSG_NOSIGNAL, (const struct sockaddr *)&sa, salen) < 0)
        rc = -errno;
    close(fd);
    return rc;
}

static void dd_sd_say(dd_sd_t *sd, const char *text)
{
    int rc = dd_sd_send(sd->path, text);

    if (rc) dd_log(DD_LOG_WARN, "systemd notification to %s failed: %s", sd->path, strerror(-rc));
}

/* $WATCHDOG_USEC, when it is this process's (WATCHDOG_PID unset or ours). */
static int64_t dd_sd_watchdog_ms(void)
{
    const char *usec = getenv("WATCHDOG_USEC"), *pid = getenv("WATCHDOG_PID");
    long long v = usec ? atoll(usec) : 0;

    if (pid && atoll(pid) != (long long)getpid()) return 0;
    return v > 0 ? (v + 999) / 1000 : 0;
}

int dd_sd_new(dd_sd_t **sdp, const dd_conf_t *conf, dd_pipeline_t *pl, char *errstr,
              size_t errstr_size)
{
    const char *path = getenv("NOTIFY_SOCKET");
    dd_sd_t *sd;

    *sdp = NULL;
    if (!path || !*path) return DD_OK;
    if (strlen(path) >= sizeof(sd->path)) {
        dd_errstr_set(errstr, errstr_size, "NOTIFY_SOCKET is longer than a socket address");
        return DD_ERR_CONFIG;
    }
    if (!(sd = calloc(1, sizeof(*sd)))) {
        dd_errstr_set(errstr, errstr_size, "out of memory");
        return DD_ERR_NOMEM;
    }
    sd->conf = conf;
    sd->pl = pl;
    snprintf(sd->path, sizeof(sd->path), "%s", path);
    sd->watchdog_ms = dd_sd_watchdog_ms();
    sd->started_ms = sd->idle_seen_ms = dd_now_ms();
    *sdp = sd;
    return DD_OK;
}

/* READY=1 the first time partitions are assigned. */
static void dd_sd_ready(dd_sd_t *sd, const dd_stats_t *s)
{
    char text[128];

    if (sd->ready || s->assigned <= 0) return;
    sd->ready = 1;
    snprintf(text, sizeof(text), "READY=1\nSTATUS=consuming %d partition(s)", s->assigned);
    dd_sd_say(sd, text);
}

/* WATCHDOG=1 at half the period while /healthz would answer ok; a stall
 * withholds it (and says why, once per stall). */
static void dd_sd_watchdog(dd_sd_t *sd, const dd_stats_t *s, int64_t now)
{
    char why[200], text[256];

    if (!sd->watchdog_ms || now < sd->next_watchdog_ms) return;
    sd->next_watchdog_ms = now + sd->watchdog_ms / 2;
    /* a shutdown under way is fed too: it ends within shutdown_timeout */
    if (dd_stats_health(s, now, sd->started_ms, sd->idle_seen_ms, sd->conf->http.stuck_after_ms,
                        why, sizeof(why)) != DD_HEALTH_STUCK) {
        if (sd->unhealthy) dd_sd_say(sd, "STATUS=live again");
        sd->unhealthy = 0;
        dd_sd_say(sd, "WATCHDOG=1");
        return;
    }
    if (sd->unhealthy++) return;
    dd_log(DD_LOG_WARN, "Not feeding the systemd watchdog: %s.", why);
    snprintf(text, sizeof(text), "STATUS=%s", why);
    dd_sd_say(sd, text);
}

static void *dd_sd_main(void *arg)
{
    dd_sd_t *sd = arg;
    dd_stats_t *s = malloc(sizeof(*s)); /* large: off the thread's stack */

    while (s && !atomic_load(&sd->stop)) {
        int64_t now = dd_now_ms();
        dd_pipeline_stats(sd->pl, s);
        if (s->inflight == 0 || dd_stats_waiting_dependency(s)) sd->idle_seen_ms = now;
        dd_sd_ready(sd, s);
        dd_sd_watchdog(sd, s, now);
        if (!sd->stopping && atomic_load(&dd_stop_requested)) {
            sd->stopping = 1;
            dd_sd_say(sd, "STOPPING=1\nSTATUS=stopping: finishing the messages held");
        }
        dd_sleep_ms(DD_SD_TICK_MS, &sd->stop);
    }
    free(s);
    return NULL;
}

int dd_sd_start(dd_sd_t *sd, char *errstr, size_t errstr_size)
{
    int err;

    if (!sd) return DD_OK;
    if (sd->watchdog_ms)
        dd_log(DD_LOG_INFO, "systemd watchdog: WATCHDOG=1 every %lld ms while live.",
               (long long)sd->watchdog_ms / 2);
    if ((err = pthread_create(&sd->thr, NULL, dd_sd_main, sd)) != 0) {
        dd_errstr_set(errstr, errstr_size, "cannot start the systemd notifier: %s", strerror(err));
        return DD_ERR_FATAL;
    }
    sd->started = 1;
    return DD_OK;
}

void dd_sd_stop(dd_sd_t *sd)
{
    if (!sd || !sd->started) return;
    atomic_store(&sd->stop, 1);
    pthread_join(sd->thr, NULL);
    sd->started = 0;
    if (!sd->stopping) dd_sd_say(sd, "STOPPING=1\nSTATUS=stopping");
    sd->stopping = 1;
}

void dd_sd_destroy(dd_sd_t *sd)
{
    dd_sd_stop(sd);
    free(sd);
}
