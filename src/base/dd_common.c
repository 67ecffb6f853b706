/*
 * Error strings and time helpers used across modules.
 */
#define _POSIX_C_SOURCE 200809L
#include "dd_common.h"

#include <signal.h>
#include <stdlib.h>
#include <stdarg.h>
#include <string.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

const char *dd_err2str(dd_err_t err)
{
    switch (err) {
    case DD_OK:
        return "success";
    case DD_ERR_RETRIABLE:
        return "retriable error";
    case DD_ERR_PERMANENT:
        return "permanent error";
    case DD_ERR_FATAL:
        return "fatal error";
    case DD_ERR_CONFIG:
        return "configuration error";
    case DD_ERR_NOMEM:
        return "out of memory";
    case DD_ERR_ARG:
        return "invalid argument";
    case DD_ERR_IO:
        return "I/O error";
    }
    return "unknown error";
}

void dd_errstr_set(char *errstr, size_t errstr_size, const char *fmt, ...)
{
    va_list ap;

    if (!errstr || errstr_size == 0) return;
    va_start(ap, fmt);
    vsnprintf(errstr, errstr_size, fmt, ap);
    va_end(ap);
}

int64_t dd_now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int64_t dd_now_us(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

int64_t dd_wall_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void dd_cond_init(pthread_cond_t *cv)
{
    pthread_condattr_t attr;

    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_init(cv, &attr);
    pthread_condattr_destroy(&attr);
}

void dd_cond_deadline(struct timespec *ts, int64_t ms)
{
    clock_gettime(CLOCK_MONOTONIC, ts);
    ts->tv_sec += (time_t)(ms / 1000);
    ts->tv_nsec += (long)(ms % 1000) * 1000000L;
    if (ts->tv_nsec >= 1000000000L) {
        ts->tv_sec++;
        ts->tv_nsec -= 1000000000L;
    }
}

int dd_sleep_ms(int64_t ms, const atomic_int *stop)
{
    int64_t end = dd_now_ms() + ms;

    for (;;) {
        int64_t left = end - dd_now_ms();
        struct timespec ts;

        if (stop && atomic_load(stop)) return 1;
        if (left <= 0) return 0;
        if (left > 50) left = 50; /* wake up regularly to notice *stop */
        ts.tv_sec = left / 1000;
        ts.tv_nsec = (left % 1000) * 1000000;
        nanosleep(&ts, NULL);
    }
}

_Static_assert(ATOMIC_INT_LOCK_FREE == 2, "the signal handler stores an atomic_int");
atomic_int dd_stop_requested;

static void dd_signals_on_stop(int sig)
{
    atomic_store(&dd_stop_requested, sig);
}

const char *dd_signal_name(int sig)
{
    return sig == SIGTERM ? "SIGTERM" : sig == SIGINT ? "SIGINT" : "a stop request";
}

void dd_instance_name(char *out, size_t out_size)
{
    char host[64] = "localhost";

    gethostname(host, sizeof(host) - 1);
    host[sizeof(host) - 1] = '\0';
    snprintf(out, out_size, "%s:%d", host, (int)getpid());
}

void dd_signals_install(void)
{
    struct sigaction sa;

    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = dd_signals_on_stop;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
}

static const char *dd_test_faults_extra; /* dd_test_fault_set(), or NULL */

void dd_test_fault_set(const char *faults)
{
    dd_test_faults_extra = faults;
}

/* The value of name in the fault list `list` (NULL: none), 0 if absent. */
static unsigned long dd_test_fault_in(const char *list, const char *name)
{
    size_t len = strlen(name);

    for (const char *p = list; p && (p = strstr(p, name)) != NULL; p += len) {
        if (p != list && p[-1] != ',' && p[-1] != ' ') continue; /* inside another name */
        if (p[len] == '=') return strtoul(p + len + 1, NULL, 10);
        if (p[len] == '\0' || p[len] == ',' || p[len] == ' ') return 1;
    }
    return 0;
}

unsigned long dd_test_fault(const char *name)
{
    unsigned long n = dd_test_fault_in(getenv("DEDUPD_TEST_FAULTS"), name);

    return n ? n : dd_test_fault_in(dd_test_faults_extra, name);
}
