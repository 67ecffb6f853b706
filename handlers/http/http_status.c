/*
 * What an HTTP answer means to dedupd: which statuses are done, rejected
 * for good or worth another try (configurable, with the defaults of
 * docs/HANDLERS.md), how long a Retry-After asks to wait, and what of
 * the body is kept: the response snapshot of a done call, the start of
 * the body in a dead letter or a log line.
 */
#include "http.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#define HTTP_RETRY_AFTER_MAX_S 31622400LL /* a year: anything longer is not a delay */

void http_statuses_default(http_statuses *s)
{
    static const long reject[] = {400, 404, 409, 410, 422};
    static const long retry[] = {408, 425, 429};

    memset(s->code, -1, sizeof(s->code));
    memset(s->cls, -1, sizeof(s->cls));
    s->cls[2] = HTTP_DONE;
    s->cls[5] = HTTP_RETRY;
    for (size_t i = 0; i < sizeof(reject) / sizeof(reject[0]); i++)
        s->code[reject[i]] = HTTP_REJECT;
    for (size_t i = 0; i < sizeof(retry) / sizeof(retry[0]); i++)
        s->code[retry[i]] = HTTP_RETRY;
    s->other = HTTP_RETRY;
}

int http_statuses_set(http_statuses *s, const char *spec, long code, http_verdict v, char *errstr,
                      size_t errstr_size)
{
    if (spec) {
        if (strlen(spec) == 3 && spec[0] >= '1' && spec[0] <= '5' && tolower(spec[1]) == 'x' &&
            tolower(spec[2]) == 'x') {
            s->cls[spec[0] - '0'] = (signed char)v;
            return 0;
        }
        snprintf(errstr, errstr_size, "\"%.40s\" is not a status class (\"4xx\") or a status",
                 spec);
        return -1;
    }
    if (code < 100 || code > 599) {
        snprintf(errstr, errstr_size, "%ld is not an HTTP status (100..599)", code);
        return -1;
    }
    s->code[code] = (signed char)v;
    return 0;
}

http_verdict http_status_verdict(const http_statuses *s, long code)
{
    if (code >= 100 && code <= 599) {
        if (s->code[code] >= 0) return (http_verdict)s->code[code];
        if (s->cls[code / 100] >= 0) return (http_verdict)s->cls[code / 100];
    }
    return s->other;
}

const char *http_verdict_name(http_verdict v)
{
    return v == HTTP_DONE ? "done" : v == HTTP_REJECT ? "reject" : "retry";
}

int64_t http_retry_after_ms(const char *value, time_t now)
{
    const char *p = value;
    long long secs = 0;
    time_t when;

    while (*p == ' ' || *p == '\t')
        p++;
    if (isdigit((unsigned char)*p)) {
        for (; isdigit((unsigned char)*p); p++)
            if ((secs = secs * 10 + (*p - '0')) > HTTP_RETRY_AFTER_MAX_S) return -1;
        while (*p == ' ' || *p == '\t')
            p++;
        return *p ? -1 : (int64_t)secs * 1000;
    }
    /* An HTTP-date in any of its three forms (IMF-fixdate, RFC 850,
     * asctime): curl_getdate reads them all. */
    if (!*p || (when = curl_getdate(p, NULL)) == -1) return -1;
    if (when <= now) return 0;
    if ((long long)(when - now) > HTTP_RETRY_AFTER_MAX_S) return -1;
    return (int64_t)(when - now) * 1000;
}

/* Length of the valid UTF-8 sequence at s (n bytes left), 0 if none. */
static size_t http_utf8_seq(const unsigned char *s, size_t n)
{
    size_t len = s[0] < 0x80                    ? 1
                 : s[0] >= 0xc2 && s[0] <= 0xdf ? 2
                 : s[0] >= 0xe0 && s[0] <= 0xef ? 3
                 : s[0] >= 0xf0 && s[0] <= 0xf4 ? 4
                                                : 0;
    unsigned char lo = s[0] == 0xe0 ? 0xa0 : s[0] == 0xf0 ? 0x90 : 0x80;
    unsigned char hi = s[0] == 0xed ? 0x9f : s[0] == 0xf4 ? 0x8f : 0xbf;

    if (len <= 1 || len > n) return len > n ? 0 : len;
    if (s[1] < lo || s[1] > hi) return 0;
    for (size_t i = 2; i < len; i++)
        if ((s[i] & 0xc0) != 0x80) return 0;
    return len;
}

static int http_utf8_valid(const char *s, size_t n)
{
    const unsigned char *p = (const unsigned char *)s;

    for (size_t i = 0, k; i < n; i += k)
        if (!(k = http_utf8_seq(p + i, n - i))) return 0;
    return 1;
}

void http_body_start(const char *body, size_t len, char *out, size_t out_size)
{
    const unsigned char *p = (const unsigned char *)body;
    size_t o = 0, k;

    if (!out_size) return;
    for (size_t i = 0; body && i < len && o + 1 < out_size; i += k) {
        k = http_utf8_seq(p + i, len - i);
        if (k == 1 && (p[i] < 0x20 || p[i] == 0x7f)) {
            out[o++] = p[i] == '\n' || p[i] == '\r' || p[i] == '\t' ? ' ' : '?';
        } else if (k == 0) {
            out[o++] = '?';
            k = 1;
        } else if (o + k < out_size) {
            memcpy(out + o, p + i, k);
            o += k;
        } else {
            break;
        }
    }
    out[o] = '\0';
}

/* The body is one JSON text, and valid UTF-8, so it can be kept as it is. */
static int http_is_json(const char *body, size_t len)
{
    const char *end = NULL;
    cJSON *doc;

    if (!http_utf8_valid(body, len) || memchr(body, '\0', len)) return 0;
    doc = cJSON_ParseWithLengthOpts(body, len, &end, 0);
    if (!doc) return 0;
    cJSON_Delete(doc);
    while (end < body + len && isspace((unsigned char)*end))
        end++;
    return end == body + len;
}

char *http_snapshot(long status, const char *body, size_t len, int complete, size_t max)
{
    char start[1024];
    cJSON *o;
    char *out;

    if (body && len && complete && len <= max && http_is_json(body, len)) {
        if ((out = malloc(len + 1))) {
            memcpy(out, body, len);
            out[len] = '\0';
        }
        return out;
    }
    if (!(o = cJSON_CreateObject())) return NULL;
    cJSON_AddNumberToObject(o, "status", (double)status);
    if (body && len) {
        size_t keep = max < sizeof(start) ? max + 1 : sizeof(start);
        http_body_start(body, len, start, keep);
        cJSON_AddStringToObject(o, "body", start);
        cJSON_AddBoolToObject(o, "truncated", !complete || strlen(start) < len);
    }
    out = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    return out;
}
