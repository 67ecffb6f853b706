/*
 * Error codes and small helpers shared by every dedupd module.
 *
 * Every failure is classified once, where it happens, as retriable (try the
 * same work again later), permanent (this input can never succeed: dead-letter
 * it) or fatal (shut down cleanly, exit non-zero). Callers branch on the
 * class, never on library-specific error numbers.
 */
#ifndef DD_COMMON_H
#define DD_COMMON_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

typedef enum {
    DD_OK = 0,
    DD_ERR_RETRIABLE = -1, /* deadlock, lost connection, broker hiccup */
    DD_ERR_PERMANENT = -2, /* bad input, handler reject: dead-letter it */
    DD_ERR_FATAL = -3,     /* shut down cleanly, exit non-zero */
    DD_ERR_CONFIG = -4,    /* bad configuration value or file */
    DD_ERR_NOMEM = -5,
    DD_ERR_ARG = -6, /* bad argument from the caller */
    DD_ERR_IO = -7,  /* file or socket error */
} dd_err_t;

const char *dd_err2str(dd_err_t err);

/* snprintf into errstr, safe with errstr == NULL or errstr_size == 0. */
void dd_errstr_set(char *errstr, size_t errstr_size, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Monotonic clock in milliseconds / microseconds. */
int64_t dd_now_ms(void);
int64_t dd_now_us(void);
/* Unix time in milliseconds (the wall clock), what Kafka timestamps are
 * in. */
int64_t dd_wall_ms(void);

/* A condition variable whose timed waits run on the monotonic clock, so
 * a change of the wall clock neither shortens nor stretches them; and the
 * deadline ms milliseconds from now on that clock, for
 * pthread_cond_timedwait on such a variable. */
void dd_cond_init(pthread_cond_t *cv);
void dd_cond_deadline(struct timespec *ts, int64_t ms);

/* Sleep for ms milliseconds, waking early (returning 1) once *stop is set;
 * stop may be NULL. */
int dd_sleep_ms(int64_t ms, const atomic_int *stop);

/* Test-only fault injection: the value of NAME in DEDUPD_TEST_FAULTS, a
 * comma or space separated list of NAME=N or bare NAME (which counts as 1).
 * 0 when absent, as in production. Callers log loudly when it is set. */
unsigned long dd_test_fault(const char *name);
/* Sets faults dd_test_fault() finds besides those of DEDUPD_TEST_FAULTS
 * (same syntax; NULL: none), for a command that injects them on purpose
 * (dedupd handler-test). Call while no other dedupd thread runs; the
 * string must outlive its use. */
void dd_test_fault_set(const char *faults);

/* This process's name in the dedup table's owner column and the handler's
 * host API: "hostname:pid". */
void dd_instance_name(char *out, size_t out_size);

/* Set to the signal's number by SIGTERM/SIGINT once dd_signals_install()
 * ran (non-zero: stop); read it with atomic_load (any thread). Lock-free,
 * so the signal handler may store it. */
extern atomic_int dd_stop_requested;
/* "SIGTERM", "SIGINT", or "a stop request" for another value. */
const char *dd_signal_name(int sig);
/* Installs the SIGTERM/SIGINT handlers (set dd_stop_requested, no
 * SA_RESTART so blocking calls return) and ignores SIGPIPE. */
void dd_signals_install(void);

#define DD_ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

#endif /* DD_COMMON_H */
