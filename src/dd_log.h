/*
 * One-line-per-event logging in logfmt or JSON.
 *
 * dd_log() checks the level before formatting anything, so debug lines cost a
 * comparison when they are off. Per-message lines go through dd_log_msg() so
 * they always carry topic/partition/offset/key. Secrets are never passed here.
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

/* librdkafka's log callback for every client dedupd creates: its lines go
 * through the same writer, at a level mapped from syslog's. */
struct rd_kafka_s;
void dd_log_rdkafka(const struct rd_kafka_s *rk, int level, const char *fac, const char *buf);

#define dd_log(level, ...)                                                                         \
    do {                                                                                           \
        if ((int)(level) <= atomic_load_explicit(&dd_log_level_cur, memory_order_relaxed))         \
            dd_log_write((level), __VA_ARGS__);                                                    \
    } while (0)

#define dd_log_msg(level, topic, partition, offset, biz_key, ...)                                  \
    do {                                                                                           \
        if ((int)(level) <= atomic_load_explicit(&dd_log_level_cur, memory_order_relaxed))         \
            dd_log_msg_write((level), (topic), (partition), (offset), (biz_key), __VA_ARGS__);     \
    } while (0)

#endif /* DD_LOG_H */
