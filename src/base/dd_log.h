/*
 * One-line-per-event logging in logfmt or JSON.
 *
 * dd_log() checks the level before formatting anything, so debug lines cost a
 * comparison when they are off. Per-message lines go through dd_log_msg() so
 * they always carry topic/partition/offset/key; dd_log_msg_fields() adds
 * fields of its own (reason, hashes) that a log pipeline can filter on.
 * Every library dedupd uses logs through here: librdkafka by its log
 * callback (dd_log_rdkafka), MariaDB Connector/C, which has no callback,
 * by the callers that report its errors. Secrets are never passed here.
 */
#ifndef DD_LOG_H
#define DD_LOG_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

typedef enum {
    DD_LOG_ERROR = 0,
    DD_LOG_WARN = 1,
    DD_LOG_INFO = 2,
    DD_LOG_DEBUG = 3
} dd_log_level_t;
typedef enum { DD_LOG_FMT_LOGFMT = 0, DD_LOG_FMT_JSON = 1 } dd_log_format_t;

/* The least severe level written; set by dd_log_setup(), read by every
 * thread. */
extern atomic_int dd_log_level_cur;

void dd_log_setup(dd_log_level_t level, dd_log_format_t format);
/* Returns -1 for an unknown name. */
int dd_log_level_parse(const char *name);
int dd_log_format_parse(const char *name);

void dd_log_write(dd_log_level_t level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void dd_log_msg_write(dd_log_level_t level, const char *topic, int32_t partition, int64_t offset,
                      const char *biz_key, const char *fmt, ...)
    __attribute__((format(printf, 6, 7)));

/* A field of its own for one line: name (an identifier) and a text value;
 * a NULL value leaves the field out. */
typedef struct {
    const char *name;
    const char *value;
} dd_log_field_t;

/* dd_log_msg_write() with fields[0..n) after the key and before msg;
 * topic may be NULL (then partition and offset are left out too). Always
 * writes: check the level first (dd_log_enabled). */
void dd_log_msg_fields(dd_log_level_t level, const char *topic, int32_t partition, int64_t offset,
                       const char *biz_key, const dd_log_field_t *fields, size_t n, const char *fmt,
                       ...) __attribute__((format(printf, 8, 9)));

/* 1 when fd is the stream $JOURNAL_STREAM ("DEV:INODE", env) names: the
 * journal, whose lines then carry their syslog priority ("<4>..."). */
int dd_log_journal_stream(const char *env, int fd);

/* 1 when lines of this level are written. */
#define dd_log_enabled(level)                                                                      \
    ((int)(level) <= atomic_load_explicit(&dd_log_level_cur, memory_order_relaxed))

/* A rate limit for one kind of line: at most max lines per window_ms, the
 * rest counted. One thread owns a limiter (no lock). */
typedef struct {
    int max, window_ms;
    int64_t window_start_ms; /* when the current window began */
    int taken;               /* lines written in it */
    uint64_t suppressed;     /* lines not written since the last report */
} dd_log_limit_t;

/* 1 when one more line may be written now (now_ms: dd_now_ms()). After a
 * window ends, *report gets how many lines were suppressed in the windows
 * before (0: none), which the caller says in one line, and the count
 * starts again. */
int dd_log_limit_take(dd_log_limit_t *limit, int64_t now_ms, uint64_t *report);
/* The suppressed count once the current window is over (0 otherwise),
 * taken: for a periodic check, so a count is reported even when no
 * further line comes. */
uint64_t dd_log_limit_flush(dd_log_limit_t *limit, int64_t now_ms);

/* librdkafka's log callback for every client dedupd creates: its lines go
 * through the same writer, at a level mapped from syslog's (0-3 error,
 * 4 warn, 5-6 info, 7 debug). Set it with rd_kafka_conf_set_log_cb() on
 * every rd_kafka_conf_t before rd_kafka_new(): without it librdkafka
 * prints "%4|...|" lines of its own to stderr. */
struct rd_kafka_s;
void dd_log_rdkafka(const struct rd_kafka_s *rk, int level, const char *fac, const char *buf);

#define dd_log(level, ...)                                                                         \
    do {                                                                                           \
        if (dd_log_enabled(level)) dd_log_write((level), __VA_ARGS__);                             \
    } while (0)

#define dd_log_msg(level, topic, partition, offset, biz_key, ...)                                  \
    do {                                                                                           \
        if (dd_log_enabled(level))                                                                 \
            dd_log_msg_write((level), (topic), (partition), (offset), (biz_key), __VA_ARGS__);     \
    } while (0)

#endif /* DD_LOG_H */
