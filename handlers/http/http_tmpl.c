/*
 * Templates of the HTTP handler: secrets put into the configuration's
 * texts from the environment (${env:NAME}) or a file (${file:PATH}) when
 * the handler starts, so the configuration file holds none; and the
 * business key put into a header and a URL, in forms that keep two
 * different keys apart. A secret's value never appears in an error: only
 * the template that names it.
 */
#include "http.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define HTTP_TMPL_FILE_MAX 65536 /* a secret file longer than this is a mistake */

/* A growing string. */
typedef struct {
    char *s;
    size_t len, cap;
    int nomem;
} http_str;

static void http_str_add(http_str *b, const char *p, size_t n)
{
    if (b->nomem) return;
    if (b->len + n + 1 > b->cap) {
        size_t cap = (b->len + n + 1) * 2;
        char *s = realloc(b->s, cap);
        if (!s) {
            b->nomem = 1;
            return;
        }
        b->s = s;
        b->cap = cap;
    }
    memcpy(b->s + b->len, p, n);
    b->len += n;
    b->s[b->len] = '\0';
}

/* The file's content without one last line break, appended to b. */
static int http_tmpl_file(http_str *b, const char *path, const char *dir, char *errstr,
                          size_t errstr_size)
{
    char full[4096], *data = NULL;
    int rel = path[0] != '/' && dir && dir[0];
    size_t n = 0;
    FILE *f;

    if ((rel ? strlen(dir) + 1 : 0) + strlen(path) >= sizeof(full)) {
        snprintf(errstr, errstr_size, "${file:%.200s}: the path is too long", path);
        return -1;
    }
    memcpy(full, rel ? dir : "", rel ? strlen(dir) : 0);
    strcpy(full + (rel ? strlen(dir) : 0), rel ? "/" : "");
    strcat(full, path);
    if (!(f = fopen(full, "rb"))) {
        snprintf(errstr, errstr_size, "${file:%s}: cannot read %s: %s", path, full,
                 strerror(errno));
        return -1;
    }
    data = malloc(HTTP_TMPL_FILE_MAX + 1);
    if (data) n = fread(data, 1, HTTP_TMPL_FILE_MAX + 1, f);
    fclose(f);
    if (!data || n > HTTP_TMPL_FILE_MAX) {
        snprintf(errstr, errstr_size, "${file:%s}: %s", path,
                 data ? "longer than 64 KiB" : "out of memory");
        free(data);
        return -1;
    }
    if (n > 0 && data[n - 1] == '\n') n--;
    if (n > 0 && data[n - 1] == '\r') n--;
    if (memchr(data, '\0', n)) {
        snprintf(errstr, errstr_size, "${file:%s}: the file holds a NUL byte", path);
        free(data);
        return -1;
    }
    http_str_add(b, data, n);
    free(data);
    return 0;
}

/* One ${...} of name (len bytes, without the braces) into b. */
static int http_tmpl_one(http_str *b, const char *name, size_t len, const char *dir, int keep_key,
                         char *errstr, size_t errstr_size)
{
    char arg[4096];

    if (keep_key && len == 3 && memcmp(name, "key", 3) == 0) {
        http_str_add(b, "${key}", 6);
        return 0;
    }
    if (len > 4 && memcmp(name, "env:", 4) == 0 && len - 4 < sizeof(arg)) {
        const char *v;
        memcpy(arg, name + 4, len - 4);
        arg[len - 4] = '\0';
        if (!(v = getenv(arg))) {
            snprintf(errstr, errstr_size, "${env:%s}: the environment variable is not set", arg);
            return -1;
        }
        http_str_add(b, v, strlen(v));
        return 0;
    }
    if (len > 5 && memcmp(name, "file:", 5) == 0 && len - 5 < sizeof(arg)) {
        memcpy(arg, name + 5, len - 5);
        arg[len - 5] = '\0';
        return http_tmpl_file(b, arg, dir, errstr, errstr_size);
    }
    snprintf(errstr, errstr_size, "unknown template ${%.*s}: %s", (int)(len > 80 ? 80 : len), name,
             keep_key ? "${key}, ${env:NAME} or ${file:PATH} expected"
                      : "${env:NAME} or ${file:PATH} expected");
    return -1;
}

char *http_tmpl_expand(const char *text, const char *dir, int keep_key, char *errstr,
                       size_t errstr_size)
{
    http_str b = {0};
    const char *p = text, *open, *close;

    http_str_add(&b, "", 0);
    while ((open = strstr(p, "${"))) {
        http_str_add(&b, p, (size_t)(open - p));
        if (!(close = strchr(open + 2, '}'))) {
            snprintf(errstr, errstr_size, "a \"${\" without its \"}\"");
            free(b.s);
            return NULL;
        }
        if (http_tmpl_one(&b, open + 2, (size_t)(close - open - 2), dir, keep_key, errstr,
                          errstr_size)) {
            free(b.s);
            return NULL;
        }
        p = close + 1;
    }
    http_str_add(&b, p, strlen(p));
    if (b.nomem) {
        snprintf(errstr, errstr_size, "out of memory");
        free(b.s);
        return NULL;
    }
    return b.s;
}

int http_tmpl_has_secret(const char *text)
{
    return text && (strstr(text, "${env:") || strstr(text, "${file:"));
}

/* A token character of RFC 9110 5.6.2 (a field name). */
static int http_tmpl_tchar(unsigned char c)
{
    return isalnum(c) || (c && strchr("!#$%&'*+-.^_`|~", c));
}

int http_tmpl_header_ok(const char *line, char *errstr, size_t errstr_size)
{
    const unsigned char *p = (const unsigned char *)line;
    size_t name = 0;

    while (http_tmpl_tchar(p[name]))
        name++;
    if (name == 0 || p[name] != ':') {
        snprintf(errstr, errstr_size,
                 "a header is \"Name: value\", with a name of letters, "
                 "digits and !#$%%&'*+-.^_`|~ before the colon");
        return -1;
    }
    for (p += name + 1; *p; p++)
        if ((*p < 0x20 && *p != '\t') || *p == 0x7f) {
            snprintf(errstr, errstr_size,
                     "the value of header %.*s holds a control byte (a line break?) once its "
                     "templates are expanded",
                     (int)(name > 64 ? 64 : name), line);
            return -1;
        }
    return 0;
}

int http_tmpl_key_value(const char *key, int percent, char *out, size_t out_size, char *errstr,
                        size_t errstr_size)
{
    static const char hex[] = "0123456789ABCDEF";
    size_t len = strlen(key), o = 0;

    if (!percent) {
        if (len == 0 || key[0] == ' ' || key[0] == '\t' || key[len - 1] == ' ' ||
            key[len - 1] == '\t' || len >= out_size) {
            snprintf(errstr, errstr_size,
                     "the business key %s cannot be an HTTP header's value as it is (a server "
                     "strips spaces at its ends); key_encoding = \"percent\" sends it encoded",
                     len ? "starts or ends with a space" : "is empty");
            return -1;
        }
        memcpy(out, key, len + 1);
        return 0;
    }
    for (const unsigned char *p = (const unsigned char *)key; *p; p++) {
        if (o + 4 > out_size) {
            snprintf(errstr, errstr_size, "the business key is too long to encode");
            return -1;
        }
        if (*p > 0x20 && *p < 0x7f && *p != '%') {
            out[o++] = (char)*p;
        } else {
            out[o++] = '%';
            out[o++] = hex[*p >> 4];
            out[o++] = hex[*p & 15];
        }
    }
    out[o] = '\0';
    return 0;
}

char *http_tmpl_url(const char *tmpl, const char *value)
{
    static const char hex[] = "0123456789ABCDEF";
    http_str enc = {0}, b = {0};
    const char *p = tmpl, *at;

    for (const unsigned char *v = (const unsigned char *)value; *v; v++) {
        char e[3] = {'%', hex[*v >> 4], hex[*v & 15]};
        if (isalnum(*v) || strchr("-._~", *v))
            http_str_add(&enc, (const char *)v, 1);
        else
            http_str_add(&enc, e, 3);
    }
    http_str_add(&enc, "", 0);
    http_str_add(&b, "", 0);
    while ((at = strstr(p, "${key}"))) {
        http_str_add(&b, p, (size_t)(at - p));
        if (enc.s) http_str_add(&b, enc.s, enc.len);
        p = at + 6;
    }
    http_str_add(&b, p, strlen(p));
    free(enc.s);
    if (b.nomem || enc.nomem) {
        free(b.s);
        return NULL;
    }
    return b.s;
}
