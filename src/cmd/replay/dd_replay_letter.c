/*
 * A dead letter as `dedupd redrive` reads it, before anything runs it.
 *
 * Whoever can write a dead-letter topic can write any header, so nothing a
 * letter says is taken on trust: its dedupd.* headers must each be there
 * once and well formed (a number is digits and nothing else, a topic a
 * Kafka topic name), and the route that runs it is the one whose dead
 * letters from its source topic go to the topic it was read from: a letter
 * in one route's dead-letter topic naming another route's topic is never
 * run by that other route's handler. The filters are judged on what the
 * headers say once they have passed, and --key on the key rendered from
 * the payload, the key that is applied (the dedupd.biz_key header is not
 * read at all).
 */
#include "dd_replay.h"

#include <fnmatch.h>
#include <stdio.h>
#include <string.h>

#include "dd_common.h"
#include "dd_key.h"
#include "dd_stats.h"

int dd_redrive_number_parse(const char *s, size_t len, int64_t max, int64_t *out)
{
    int64_t v = 0;

    if (len == 0 || len > 19) return -1;
    for (size_t i = 0; i < len; i++) {
        if (s[i] < '0' || s[i] > '9') return -1;
        if (v > (max - (s[i] - '0')) / 10) return -1;
        v = v * 10 + (s[i] - '0');
    }
    *out = v;
    return 0;
}

/* The only value of header name: 1 (val, len set), 0 when absent, -1 when
 * it is there more than once. */
static int dd_letter_header(const rd_kafka_headers_t *hdrs, const char *name, const void **val,
                            size_t *len)
{
    const void *v;
    size_t n;
    int cnt = 0;

    for (size_t i = 0; hdrs && !rd_kafka_header_get((rd_kafka_headers_t *)hdrs, i, name, &v, &n);
         i++) {
        *val = v;
        *len = n;
        cnt++;
    }
    return cnt > 1 ? -1 : cnt;
}

/* A Kafka topic name: 1 to 249 of [A-Za-z0-9._-]. */
static int dd_letter_topic_ok(const char *s, size_t len)
{
    if (len == 0 || len > DD_REDRIVE_TOPIC_MAX) return 0;
    for (size_t i = 0; i < len; i++) /* strchr finds a NUL too: tested first */
        if (!s[i] ||
            !strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-", s[i]))
            return 0;
    return 1;
}

static int dd_letter_reason_of(const char *s, size_t len)
{
    for (int i = 0; i < DD_REASON_CNT; i++) {
        const char *name = dd_reason2str((dd_reason_t)i);
        if (strlen(name) == len && !memcmp(name, s, len)) return i;
    }
    return -1;
}

/* Header name, one of the four every dead letter has, into l (bit). 0, or
 * -1 with why. */
static int dd_letter_field(const rd_kafka_headers_t *hdrs, const char *name, unsigned bit,
                           dd_redrive_letter_t *l, char *why, size_t why_size)
{
    const void *val = NULL;
    size_t len = 0;
    int64_t n;
    int found = dd_letter_header(hdrs, name, &val, &len);
    const char *s = val;

    if (found < 0) {
        dd_errstr_set(why, why_size, "it has more than one %s header", name);
        return -1;
    }
    if (found == 0 || !val) {
        dd_errstr_set(why, why_size, found ? "its %s header has no value" : "it has no %s header",
                      name);
        return -1;
    }
    if (bit == DD_LETTER_TOPIC && dd_letter_topic_ok(s, len)) {
        memcpy(l->topic, s, len);
        l->topic[len] = '\0';
    } else if (bit == DD_LETTER_PARTITION && !dd_redrive_number_parse(s, len, INT32_MAX, &n)) {
        l->partition = (int32_t)n;
    } else if (bit == DD_LETTER_OFFSET && !dd_redrive_number_parse(s, len, INT64_MAX, &n)) {
        l->offset = n;
    } else if (bit == DD_LETTER_REASON && (l->reason = dd_letter_reason_of(s, len)) >= 0) {
        ;
    } else {
        dd_errstr_set(why, why_size, "its %s header (%zu bytes) is not %s", name, len,
                      bit == DD_LETTER_TOPIC       ? "a topic name"
                      : bit == DD_LETTER_PARTITION ? "a partition number"
                      : bit == DD_LETTER_OFFSET    ? "an offset"
                                                   : "a dead-letter reason");
        return -1;
    }
    l->have |= bit;
    return 0;
}

const char *dd_redrive_letter_read(const rd_kafka_headers_t *hdrs, dd_redrive_letter_t *l,
                                   char *why, size_t why_size)
{
    static const struct {
        const char *name;
        unsigned bit;
    } fields[] = {{"dedupd.topic", DD_LETTER_TOPIC},
                  {"dedupd.partition", DD_LETTER_PARTITION},
                  {"dedupd.offset", DD_LETTER_OFFSET},
                  {"dedupd.reason", DD_LETTER_REASON}};
    const void *val;
    size_t len;
    const char *code = NULL;
    char one[300];

    memset(l, 0, sizeof(*l));
    l->partition = -1;
    l->offset = l->reason = -1;
    l->truncated = dd_letter_header(hdrs, "dedupd.truncated", &val, &len) != 0;
    if (dd_letter_header(hdrs, "dedupd.topic", &val, &len) == 0) {
        dd_errstr_set(why, why_size,
                      "it has no dedupd.topic header: not a dead letter written by dedupd");
        return "not_a_dead_letter";
    }
    for (size_t i = 0; i < DD_ARRAY_LEN(fields); i++) {
        if (!dd_letter_field(hdrs, fields[i].name, fields[i].bit, l, one, sizeof(one)) || code)
            continue;
        dd_errstr_set(why, why_size, "%s", one); /* the first fault; the others are read on */
        code = "bad_header";
    }
    return code;
}

int dd_redrive_letter_route(const dd_conf_t *conf, const char *dlq, const dd_redrive_letter_t *l,
                            const char **code, char *why, size_t why_size)
{
    char want[512];
    int other = -1, route;

    if (dd_conf_dlq_route(conf, l->topic) >= 0) {
        *code = "source_is_dlq";
        dd_errstr_set(why, why_size,
                      "its source topic %s is a dead-letter topic, which dedupd never consumes",
                      l->topic);
        return -1;
    }
    route = dd_conf_route_find(conf, l->topic, &other);
    if (route < 0 || other >= 0) {
        *code = "unknown_source";
        if (route < 0)
            dd_errstr_set(why, why_size, "%s consumes no topic %s (its source topic)", conf->path,
                          l->topic);
        else
            dd_errstr_set(why, why_size, "the topics of two routes match its source topic %s",
                          l->topic);
        return -1;
    }
    if (!dd_conf_dlq_topic(&conf->routes[route], l->topic, want, sizeof(want)) ||
        strcmp(want, dlq) != 0) {
        *code = "wrong_dlq";
        dd_errstr_set(why, why_size,
                      "its source topic %s belongs to %s%s, whose dead letters go to %s, not "
                      "to %s: dedupd never wrote it here",
                      l->topic, conf->has_routes ? "route " : "the topics of ",
                      conf->has_routes ? conf->routes[route].name : "kafka.topics",
                      dd_conf_dlq_topic(&conf->routes[route], l->topic, want, sizeof(want))
                          ? want
                          : "a topic whose name is too long",
                      dlq);
        return -1;
    }
    return route;
}

const char *dd_redrive_filter_letter(const dd_redrive_filter_t *f, const dd_redrive_letter_t *l,
                                     int64_t ts, char *why, size_t why_size)
{
    if (f->reasons && (l->reason < 0 || !(f->reasons & (1u << l->reason)))) {
        dd_errstr_set(why, why_size, "its reason %s is not one of --reason",
                      l->reason < 0 ? "(none)" : dd_reason2str((dd_reason_t)l->reason));
        return "--reason";
    }
    if (f->src_topic && strcmp(l->topic, f->src_topic) != 0) {
        dd_errstr_set(why, why_size, "its source topic %s is not --source-topic's", l->topic);
        return "--source-topic";
    }
    if (f->src_part >= 0 && l->partition != f->src_part) {
        dd_errstr_set(why, why_size, "its source partition %d is not --source-partition's",
                      (int)l->partition);
        return "--source-partition";
    }
    if (f->src_lo >= 0 && (l->offset < f->src_lo || l->offset > f->src_hi)) {
        dd_errstr_set(why, why_size, "its source offset %lld is outside --source-offsets",
                      (long long)l->offset);
        return "--source-offsets";
    }
    if (f->since_ms >= 0 && ts < f->since_ms) {
        dd_errstr_set(why, why_size, "its timestamp is before --since");
        return "--since";
    }
    if (f->until_ms >= 0 && ts >= f->until_ms) {
        dd_errstr_set(why, why_size, "its timestamp is at or after --until");
        return "--until";
    }
    return NULL;
}

int dd_redrive_key_match(const char *glob, const char *key, size_t len)
{
    char buf[DD_KEY_MAX + 1];

    if (len >= sizeof(buf) || memchr(key, '\0', len)) return 0;
    memcpy(buf, key, len);
    buf[len] = '\0';
    return fnmatch(glob, buf, 0) == 0;
}
