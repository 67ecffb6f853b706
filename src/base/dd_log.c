/*
 * Log line formatting. Lines are written with a single fputs under stdio's
 * own lock, so lines from several threads never interleave.
 *
 * When stderr is the journal (systemd sets $JOURNAL_STREAM to the device
 * and inode of the stream it connected, which stderr still is unless
 * redirected), each line starts with its syslog priority, "<3>" to "<7>",
 * which journald takes off and records as the line's PRIORITY, so
 * `journalctl -p warning` shows warnings and errors only.
 */
#define _POSIX_C_SOURCE 200809L
#include "dd_log.h"

#include "dd_text.h"
#include "dd_utf8.h"

#include <librdkafka/rdkafka.h>

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <time.h>

atomic_int dd_log_level_cur = DD_LOG_INFO;
static atomic_int dd_log_format = DD_LOG_FMT_LOGFMT; /* a dd_log_format_t */

static const char *const dd_log_level_names[] = {"error", "warn", "info", "debug"};
/* syslog's priorities of the levels: err, warning, info, debug */
static const char *const dd_log_priorities[] = {"<3>", "<4>", "<6>", "<7>"};
static atomic_int dd_log_journal = -1; /* stderr is the journal: 1, not: 0, not known yet: -1 */

int dd_log_journal_stream(const char *env, int fd)
{
    unsigned long long dev, ino;
    struct stat st;
    char end;

    if (!env || sscanf(env, "%llu:%llu%c", &dev, &ino, &end) != 2 || fstat(fd, &st) != 0) return 0;
    return (unsigned long long)st.st_dev == dev && (unsigned long long)st.st_ino == ino;
}

static int dd_log_to_journal(void)
{
    int j = atomic_load_explicit(&dd_log_journal, memory_order_relaxed);

    if (j < 0) {
        j = dd_log_journal_stream(getenv("JOURNAL_STREAM"), 2);
        atomic_store(&dd_log_journal, j);
    }
    return j;
}

void dd_log_setup(dd_log_level_t level, dd_log_format_t format)
{
    atomic_store(&dd_log_level_cur, (int)level);
    atomic_store(&dd_log_format, (int)format);
}

int dd_log_level_parse(const char *name)
{
    for (int i = 0; i < 4; i++)
        if (strcmp(name, dd_log_level_names[i]) == 0) return i;
    return -1;
}

int dd_log_format_parse(const char *name)
{
    if (strcmp(name, "logfmt") == 0) return DD_LOG_FMT_LOGFMT;
    if (strcmp(name, "json") == 0) return DD_LOG_FMT_JSON;
    return -1;
}

/* Appends s quoted for the current format: both are JSON strings. A value
 * that is not valid UTF-8 (a binary business key) has its high bytes
 * escaped so a JSON line stays valid JSON. */
static size_t dd_log_quote(char *out, size_t pos, size_t size, const char *s)
{
    int flags = dd_utf8_valid(s, strlen(s)) ? 0 : DD_TEXT_JSON_ASCII;

    return dd_text_json_quote(out, pos, size, s, flags);
}

static size_t dd_log_field(char *out, size_t pos, size_t size, const char *name, const char *val,
                           int quote)
{
    int json = atomic_load_explicit(&dd_log_format, memory_order_relaxed) == DD_LOG_FMT_JSON;

    if (pos + 4 >= size) return pos;
    if (json) {
        pos += (size_t)snprintf(out + pos, size - pos, "%s\"%s\":", pos > 1 ? "," : "", name);
        if (pos >= size) return size - 1;
        if (quote) return dd_log_quote(out, pos, size, val);
        pos += (size_t)snprintf(out + pos, size - pos, "%s", val);
    } else {
        pos += (size_t)snprintf(out + pos, size - pos, "%s%s=", pos > 0 ? " " : "", name);
        if (pos >= size) return size - 1;
        if (quote) return dd_log_quote(out, pos, size, val);
        pos += (size_t)snprintf(out + pos, size - pos, "%s", val);
    }
    return pos < size ? pos : size - 1;
}

static void dd_log_emit(dd_log_level_t level, const char *topic, int32_t partition, int64_t offset,
                        const char *biz_key, const dd_log_field_t *fields, size_t nfields,
                        const char *text)
{
    int json = atomic_load_explicit(&dd_log_format, memory_order_relaxed) == DD_LOG_FMT_JSON;
    char line[4096], ts[40], num[32];
    struct timeval tv;
    struct tm tm;
    size_t pos = 0;

    gettimeofday(&tv, NULL);
    gmtime_r(&tv.tv_sec, &tm);
    strftime(ts, sizeof(ts), "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(ts + strlen(ts), sizeof(ts) - strlen(ts), ".%03dZ", (int)(tv.tv_usec / 1000));

    if (json) line[pos++] = '{';
    line[pos] = '\0';
    pos = dd_log_field(line, pos, sizeof(line), "ts", ts, 1);
    pos = dd_log_field(line, pos, sizeof(line), "level", dd_log_level_names[level], json);
    if (topic) {
        pos = dd_log_field(line, pos, sizeof(line), "topic", topic, 1);
        snprintf(num, sizeof(num), "%d", (int)partition);
        pos = dd_log_field(line, pos, sizeof(line), "partition", num, 0);
        snprintf(num, sizeof(num), "%lld", (long long)offset);
        pos = dd_log_field(line, pos, sizeof(line), "offset", num, 0);
    }
    if (biz_key) pos = dd_log_field(line, pos, sizeof(line), "key", biz_key, 1);
    for (size_t i = 0; i < nfields; i++)
        if (fields[i].value)
            pos = dd_log_field(line, pos, sizeof(line), fields[i].name, fields[i].value, 1);
    pos = dd_log_field(line, pos, sizeof(line), "msg", text, 1);
    if (json && pos + 2 < sizeof(line)) line[pos++] = '}';
    if (pos + 1 < sizeof(line)) line[pos++] = '\n';
    line[pos] = '\0';
    if (dd_log_to_journal()) { /* "<N>" first, in the same write */
        if (pos + 4 > sizeof(line)) pos = sizeof(line) - 4, line[pos - 1] = '\n', line[pos] = '\0';
        memmove(line + 3, line, pos + 1);
        memcpy(line, dd_log_priorities[level], 3);
    }
    fputs(line, stderr);
}

void dd_log_write(dd_log_level_t level, const char *fmt, ...)
{
    char text[2048];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(text, sizeof(text), fmt, ap);
    va_end(ap);
    dd_log_emit(level, NULL, 0, 0, NULL, NULL, 0, text);
}

void dd_log_msg_write(dd_log_level_t level, const char *topic, int32_t partition, int64_t offset,
                      const char *biz_key, const char *fmt, ...)
{
    char text[2048];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(text, sizeof(text), fmt, ap);
    va_end(ap);
    dd_log_emit(level, topic, partition, offset, biz_key, NULL, 0, text);
}

void dd_log_msg_fields(dd_log_level_t level, const char *topic, int32_t partition, int64_t offset,
                       const char *biz_key, const dd_log_field_t *fields, size_t n, const char *fmt,
                       ...)
{
    char text[2048];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(text, sizeof(text), fmt, ap);
    va_end(ap);
    dd_log_emit(level, topic, partition, offset, biz_key, fields, n, text);
}

int dd_log_limit_take(dd_log_limit_t *limit, int64_t now_ms, uint64_t *report)
{
    *report = dd_log_limit_flush(limit, now_ms);
    if (limit->taken < limit->max) {
        limit->taken++;
        return 1;
    }
    limit->suppressed++;
    return 0;
}

uint64_t dd_log_limit_flush(dd_log_limit_t *limit, int64_t now_ms)
{
    uint64_t n = 0;

    if (limit->window_start_ms && now_ms - limit->window_start_ms < limit->window_ms) return 0;
    if (limit->window_start_ms) {
        n = limit->suppressed;
        limit->suppressed = 0;
    }
    limit->window_start_ms = now_ms;
    limit->taken = 0;
    return n;
}

/* syslog levels: 0-3 emerg..err, 4 warning, 5 notice, 6 info, 7 debug. */
void dd_log_rdkafka(const rd_kafka_t *rk, int level, const char *fac, const char *buf)
{
    dd_log(level <= 3   ? DD_LOG_ERROR
           : level <= 4 ? DD_LOG_WARN
           : level <= 6 ? DD_LOG_INFO
                        : DD_LOG_DEBUG,
           "librdkafka %s %s: %s", rd_kafka_type(rk) == RD_KAFKA_CONSUMER ? "consumer" : "producer",
           fac, buf);
}
