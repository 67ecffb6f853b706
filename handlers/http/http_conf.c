/*
 * The HTTP handler's configuration: the group handler.http, which dedupd
 * passes on unchecked, read and checked here when the handler starts, so
 * `dedupd check` and `dedupd run` refuse a mistake before any message.
 * Every error names the file, the line and the setting (as dedupd's own
 * do); an unknown name in the group is an error, so a misspelt setting
 * never silently keeps its default. Secrets (${env:...}, ${file:...}) are
 * expanded here, and the texts as written are kept for what is shown.
 */
#include "http.h"

#include <ctype.h>
#include <libgen.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static const char *const http_conf_names[] = {"url",
                                              "method",
                                              "timeout",
                                              "connect_timeout",
                                              "headers",
                                              "reconcile_url",
                                              "key_header",
                                              "fence_header",
                                              "key_encoding",
                                              "content_type",
                                              "follow_redirects",
                                              "max_redirects",
                                              "http_version",
                                              "max_response_bytes",
                                              "retry_after_max",
                                              "check",
                                              "statuses",
                                              "tls",
                                              "proxy",
                                              "resolve",
                                              NULL};

/* Reading one group: where it is, for errors, and the directory relative
 * file names are in. */
typedef struct {
    const config_setting_t *group;
    char path[160];
    char dir[1024];
    char *errstr;
    size_t errstr_size;
} http_conf_ctx;

/* "FILE:LINE: PATH.NAME: " before fmt, into errstr. Returns -1. */
static int http_conf_fail(http_conf_ctx *x, const config_setting_t *s, const char *name,
                          const char *fmt, ...)
{
    const char *file = s ? config_setting_source_file(s) : NULL;
    int line = s ? config_setting_source_line(s) : 0;
    size_t n;
    va_list ap;

    snprintf(x->errstr, x->errstr_size, "%s%s%.0d%s%s%s%s: ", file ? file : "", file ? ":" : "",
             line, file ? ": " : "", x->path, name ? "." : "", name ? name : "");
    n = strlen(x->errstr);
    va_start(ap, fmt);
    vsnprintf(x->errstr + n, x->errstr_size - n, fmt, ap);
    va_end(ap);
    return -1;
}

/* The setting's path in the configuration: handler.http, or
 * routes[N].handler.http. */
static void http_conf_path(const config_setting_t *s, char *out, size_t out_size)
{
    char tail[160] = "", part[64];
    const config_setting_t *p;

    for (; s && (p = config_setting_parent(s)); s = p) {
        const char *name = config_setting_name(s);
        if (name)
            snprintf(part, sizeof(part), "%s%s", name, tail[0] && tail[0] != '[' ? "." : "");
        else
            snprintf(part, sizeof(part), "[%d]%s", config_setting_index(s), tail[0] ? "." : "");
        snprintf(out, out_size, "%s%s", part, tail);
        snprintf(tail, sizeof(tail), "%s", out);
    }
    snprintf(out, out_size, "%s", tail[0] ? tail : "handler.http");
}

/* A string setting, or def when absent; -1 when it is there but no string. */
static int http_conf_str(http_conf_ctx *x, const config_setting_t *g, const char *name,
                         const char *def, const char **out)
{
    const config_setting_t *s = config_setting_get_member(g, name);

    *out = def;
    if (!s) return 0;
    if (config_setting_type(s) != CONFIG_TYPE_STRING)
        return http_conf_fail(x, s, name, "expected a string");
    *out = config_setting_get_string(s);
    return 0;
}

/* A string with its templates expanded, malloc'd into *out (NULL when
 * absent). */
static int http_conf_secret(http_conf_ctx *x, const config_setting_t *g, const char *name,
                            int keep_key, char **out)
{
    const char *text;
    char err[512];

    *out = NULL;
    if (http_conf_str(x, g, name, NULL, &text)) return -1;
    if (!text) return 0;
    if (!(*out = http_tmpl_expand(text, x->dir, keep_key, err, sizeof(err))))
        return http_conf_fail(x, config_setting_get_member(g, name), name, "%s", err);
    return 0;
}

static int http_conf_duration(http_conf_ctx *x, const config_setting_t *g, const char *name,
                              int64_t def, int64_t min, int64_t max, int64_t *out)
{
    const config_setting_t *s = config_setting_get_member(g, name);
    int64_t v = def;

    if (s && config_setting_type(s) == CONFIG_TYPE_STRING)
        v = http_conf_duration_ms(config_setting_get_string(s));
    else if (s && (config_setting_type(s) == CONFIG_TYPE_INT ||
                   config_setting_type(s) == CONFIG_TYPE_INT64))
        v = config_setting_get_int64(s) * 1000;
    else if (s)
        v = -1;
    if (v < min || v > max)
        return http_conf_fail(x, s, name,
                              "expected a duration like \"500ms\" or \"5s\", from %lld ms to "
                              "%lld s",
                              (long long)min, (long long)(max / 1000));
    *out = v;
    return 0;
}

static int http_conf_int(http_conf_ctx *x, const config_setting_t *g, const char *name, long def,
                         long min, long max, long *out)
{
    const config_setting_t *s = config_setting_get_member(g, name);
    long long v = def;

    if (s && config_setting_type(s) != CONFIG_TYPE_INT &&
        config_setting_type(s) != CONFIG_TYPE_INT64)
        return http_conf_fail(x, s, name, "expected an integer");
    if (s) v = config_setting_get_int64(s);
    if (v < min || v > max)
        return http_conf_fail(x, s, name, "expected %ld to %ld, got %lld", min, max, v);
    *out = (long)v;
    return 0;
}

static int http_conf_bool(http_conf_ctx *x, const config_setting_t *g, const char *name, int def,
                          int *out)
{
    const config_setting_t *s = config_setting_get_member(g, name);

    *out = def;
    if (!s) return 0;
    if (config_setting_type(s) != CONFIG_TYPE_BOOL)
        return http_conf_fail(x, s, name, "expected true or false");
    *out = config_setting_get_bool(s);
    return 0;
}

/* One of words (NULL-terminated), case-insensitive; its index in *out. */
static int http_conf_enum(http_conf_ctx *x, const config_setting_t *g, const char *name,
                          const char *const *words, const char *allowed, int *out)
{
    const char *v;

    if (http_conf_str(x, g, name, NULL, &v)) return -1;
    if (!v) return 0;
    for (int i = 0; words[i]; i++)
        if (strcasecmp(v, words[i]) == 0) {
            *out = i;
            return 0;
        }
    return http_conf_fail(x, config_setting_get_member(g, name), name, "\"%.60s\": expected %s", v,
                          allowed);
}

/* Every member of g is one of names. */
static int http_conf_known(http_conf_ctx *x, const config_setting_t *g, const char *const *names)
{
    for (int i = 0; i < config_setting_length(g); i++) {
        const config_setting_t *s = config_setting_get_elem(g, (unsigned)i);
        const char *name = config_setting_name(s);
        int k = 0;
        while (names[k] && strcmp(names[k], name) != 0)
            k++;
        if (!names[k]) return http_conf_fail(x, s, name, "unknown setting");
    }
    return 0;
}

/* A list of strings into a curl list, each expanded and checked by ok. */
static int http_conf_list(http_conf_ctx *x, const config_setting_t *g, const char *name,
                          int (*ok)(const char *, char *, size_t), struct curl_slist **out)
{
    const config_setting_t *s = config_setting_get_member(g, name);
    char err[512], *v;

    if (!s) return 0;
    if (!config_setting_is_array(s) && !config_setting_is_list(s))
        return http_conf_fail(x, s, name, "expected a list of strings, [ \"...\", ... ]");
    for (int i = 0; i < config_setting_length(s); i++) {
        const config_setting_t *e = config_setting_get_elem(s, (unsigned)i);
        struct curl_slist *l;
        if (config_setting_type(e) != CONFIG_TYPE_STRING)
            return http_conf_fail(x, e, name, "element %d: expected a string", i + 1);
        if (!(v = http_tmpl_expand(config_setting_get_string(e), x->dir, 0, err, sizeof(err))))
            return http_conf_fail(x, e, name, "element %d: %s", i + 1, err);
        if (ok && ok(v, err, sizeof(err))) {
            free(v);
            return http_conf_fail(x, e, name, "element %d: %s", i + 1, err);
        }
        l = curl_slist_append(*out, v);
        free(v);
        if (!l) return http_conf_fail(x, e, name, "out of memory");
        *out = l;
    }
    return 0;
}

/* The header name of line (up to its colon) is name. */
static int http_conf_header_is(const char *line, const char *name)
{
    size_t n = strlen(name);

    return strncasecmp(line, name, n) == 0 && line[n] == ':';
}

/* A configured header may not be one the handler sets on each request. */
static int http_conf_headers(http_conf_ctx *x, const config_setting_t *g, http_conf *c)
{
    const char *ctype;
    char line[300];
    struct curl_slist *l;

    if (http_conf_list(x, g, "headers", http_tmpl_header_ok, &c->hdrs)) return -1;
    for (l = c->hdrs; l; l = l->next)
        if (http_conf_header_is(l->data, c->key_header) ||
            http_conf_header_is(l->data, c->fence_header) ||
            http_conf_header_is(l->data, "Content-Type") ||
            http_conf_header_is(l->data, "Content-Length"))
            return http_conf_fail(x, config_setting_get_member(g, "headers"), "headers",
                                  "%.*s is set by the handler on every request",
                                  (int)strcspn(l->data, ":"), l->data);
    if (http_conf_str(x, g, "content_type", "application/json", &ctype)) return -1;
    snprintf(line, sizeof(line), "Content-Type: %s", ctype);
    if (http_tmpl_header_ok(line, x->errstr, x->errstr_size))
        return http_conf_fail(x, config_setting_get_member(g, "content_type"), "content_type",
                              "not a header value");
    /* "Expect:" turns libcurl's 100-continue off: a round trip saved. */
    if (!(l = curl_slist_append(c->hdrs, line)) || !(c->hdrs = l) ||
        !(l = curl_slist_append(c->hdrs, "Expect:")))
        return http_conf_fail(x, g, NULL, "out of memory");
    c->hdrs = l;
    return 0;
}

/* A header name of our own (key_header, fence_header). */
static int http_conf_header_name(http_conf_ctx *x, const config_setting_t *g, const char *name,
                                 const char *def, char **out)
{
    const char *v;
    char line[200], err[256];

    if (http_conf_str(x, g, name, def, &v)) return -1;
    snprintf(line, sizeof(line), "%s: x", v);
    if (strlen(v) > 100 || strchr(v, ':') || http_tmpl_header_ok(line, err, sizeof(err)))
        return http_conf_fail(x, config_setting_get_member(g, name), name,
                              "\"%.60s\" is not a header name", v);
    return (*out = strdup(v)) ? 0 : http_conf_fail(x, g, name, "out of memory");
}

/* A URL as shown in messages: as written, but credentials in it
 * (scheme://user:password@host) as "***". malloc'd. */
char *http_conf_shown(const char *url)
{
    const char *host = strstr(url, "://"), *at, *end;
    char *out;

    if (!host) return strdup(url);
    host += 3;
    end = host + strcspn(host, "/?#");
    if (!(at = memchr(host, '@', (size_t)(end - host)))) return strdup(url);
    while (memchr(at + 1, '@', (size_t)(end - at - 1)))
        at = memchr(at + 1, '@', (size_t)(end - at - 1));
    if (!(out = malloc(strlen(url) + 4))) return NULL;
    snprintf(out, strlen(url) + 4, "%.*s***%s", (int)(host - url), url, at);
    return out;
}

/* url and reconcile_url: http or https, templates expanded. */
static int http_conf_urls(http_conf_ctx *x, const config_setting_t *g, http_conf *c)
{
    const char *url, *rurl;

    if (http_conf_str(x, g, "url", NULL, &url) || http_conf_str(x, g, "reconcile_url", NULL, &rurl))
        return -1;
    if (!url) return http_conf_fail(x, g, "url", "required: the service's URL");
    if (strncasecmp(url, "http://", 7) != 0 && strncasecmp(url, "https://", 8) != 0)
        return http_conf_fail(x, config_setting_get_member(g, "url"), "url",
                              "\"%.80s\": an http:// or https:// URL expected",
                              http_tmpl_has_secret(url) ? "..." : url);
    if (rurl && strncasecmp(rurl, "http://", 7) != 0 && strncasecmp(rurl, "https://", 8) != 0)
        return http_conf_fail(x, config_setting_get_member(g, "reconcile_url"), "reconcile_url",
                              "an http:// or https:// URL expected");
    if (rurl && !strstr(rurl, "${key}"))
        return http_conf_fail(x, config_setting_get_member(g, "reconcile_url"), "reconcile_url",
                              "names no ${key}: the URL must say which key is asked about");
    if (!(c->url_shown = http_conf_shown(url)) ||
        (rurl && !(c->reconcile_shown = http_conf_shown(rurl))))
        return http_conf_fail(x, g, NULL, "out of memory");
    if (http_conf_secret(x, g, "url", 0, &c->url) ||
        http_conf_secret(x, g, "reconcile_url", 1, &c->reconcile_url))
        return -1;
    return 0;
}

/* The context of a group inside handler.http (statuses, tls). */
static http_conf_ctx http_conf_sub(const http_conf_ctx *x, const char *name)
{
    http_conf_ctx sub = *x;

    snprintf(sub.path, sizeof(sub.path), "%.100s.%s", x->path, name);
    return sub;
}

/* statuses = { done = [...]; reject = [...]; retry = [...]; other = "retry"; } */
static int http_conf_statuses(http_conf_ctx *x, const config_setting_t *g, http_statuses *st)
{
    static const char *const names[] = {"done", "reject", "retry", "other", NULL};
    static const char *const verdicts[] = {"done", "reject", "retry", NULL};
    const config_setting_t *s = config_setting_get_member(g, "statuses");
    char seen[600] = {0}, cls_seen[6] = {0}, err[256];
    int other = HTTP_RETRY;
    http_conf_ctx sub;

    http_statuses_default(st);
    if (!s) return 0;
    sub = http_conf_sub(x, "statuses");
    if (!config_setting_is_group(s)) return http_conf_fail(x, s, "statuses", "expected a group");
    if (http_conf_known(&sub, s, names) ||
        http_conf_enum(&sub, s, "other", verdicts + 1, "\"reject\" or \"retry\"", &other))
        return -1;
    st->other = config_setting_get_member(s, "other") ? (http_verdict)(other + 1) : HTTP_RETRY;
    for (int v = HTTP_DONE; v <= HTTP_RETRY; v++) {
        const config_setting_t *l = config_setting_get_member(s, verdicts[v]);
        if (l && !config_setting_is_array(l) && !config_setting_is_list(l))
            return http_conf_fail(x, l, "statuses", "%s: expected a list, [ 409, \"5xx\" ]",
                                  verdicts[v]);
        for (int i = 0; l && i < config_setting_length(l); i++) {
            const config_setting_t *e = config_setting_get_elem(l, (unsigned)i);
            int is_str = config_setting_type(e) == CONFIG_TYPE_STRING;
            const char *spec = is_str ? config_setting_get_string(e) : NULL;
            long code = is_str ? 0 : (long)config_setting_get_int64(e);
            char *mark = is_str
                             ? (spec[0] >= '1' && spec[0] <= '5' ? &cls_seen[spec[0] - '0'] : NULL)
                             : (code >= 100 && code <= 599 ? &seen[code] : NULL);
            if (http_statuses_set(st, spec, code, (http_verdict)v, err, sizeof(err)))
                return http_conf_fail(x, e, "statuses", "%s: %s", verdicts[v], err);
            if (mark && *mark)
                return http_conf_fail(x, e, "statuses", "%s: %s%.0ld is listed twice", verdicts[v],
                                      spec ? spec : "", code);
            if (mark) *mark = 1;
        }
    }
    return 0;
}

/* *path, relative to dir, made absolute (malloc'd; the old one freed). */
static int http_conf_relative(const char *dir, char **path)
{
    size_t n = strlen(dir) + strlen(*path) + 2;
    char *full = malloc(n);

    if (!full) return -1;
    snprintf(full, n, "%s/%s", dir, *path);
    free(*path);
    *path = full;
    return 0;
}

/* tls = { ca_file; ca_path; cert_file; key_file; key_password; pinned_public_key; } */
static int http_conf_tls(http_conf_ctx *x, const config_setting_t *g, http_conf *c)
{
    static const char *const names[] = {
        "ca_file", "ca_path", "cert_file", "key_file", "key_password", "pinned_public_key", NULL};
    const config_setting_t *s = config_setting_get_member(g, "tls");
    char *names_out[6] = {0};
    http_conf_ctx sub = http_conf_sub(x, "tls");

    if (!s) return 0;
    if (!config_setting_is_group(s)) return http_conf_fail(x, s, "tls", "expected a group");
    if (http_conf_known(&sub, s, names)) return -1;
    for (int i = 0; names[i]; i++)
        if (http_conf_secret(&sub, s, names[i], 0, &names_out[i])) {
            while (i-- > 0)
                free(names_out[i]);
            return -1;
        }
    /* Files relative to the configuration's directory, as dedupd's own. */
    for (int i = 0; i < 4; i++)
        if (names_out[i] && names_out[i][0] != '/' && x->dir[0] &&
            http_conf_relative(x->dir, &names_out[i])) {
            for (int k = 0; k < 6; k++)
                free(names_out[k]);
            return http_conf_fail(&sub, s, names[i], "out of memory");
        }
    c->ca_file = names_out[0];
    c->ca_path = names_out[1];
    c->cert_file = names_out[2];
    c->key_file = names_out[3];
    c->key_password = names_out[4];
    c->pinned_key = names_out[5];
    if (c->key_file && !c->cert_file)
        return http_conf_fail(&sub, config_setting_get_member(s, "key_file"), "key_file",
                              "needs tls.cert_file, the client certificate");
    return 0;
}

/* "host:port:address" for CURLOPT_RESOLVE. */
static int http_conf_resolve_ok(const char *v, char *errstr, size_t errstr_size)
{
    const char *a = strchr(v, ':'), *b = a ? strchr(a + 1, ':') : NULL;

    if (a && b && a > v && b > a + 1 && b[1]) return 0;
    snprintf(errstr, errstr_size, "\"%.80s\": expected \"host:port:address\"", v);
    return -1;
}

static int http_conf_misc(http_conf_ctx *x, const config_setting_t *g, http_conf *c)
{
    static const char *const methods[] = {"POST", "PUT", NULL};
    static const char *const encodings[] = {"raw", "percent", NULL};
    static const char *const versions[] = {"auto", "1.1", "2", "2-prior-knowledge", NULL};
    static const long curl_versions[] = {CURL_HTTP_VERSION_2TLS, CURL_HTTP_VERSION_1_1,
                                         CURL_HTTP_VERSION_2_0,
                                         CURL_HTTP_VERSION_2_PRIOR_KNOWLEDGE};
    static const char *const checks[] = {"OPTIONS", "HEAD", "none", NULL};
    int method = 0, version = 0, check = 0;
    int64_t timeout, connect, ra_max;
    long max_resp;

    if (http_conf_enum(x, g, "method", methods, "\"POST\" or \"PUT\"", &method) ||
        http_conf_enum(x, g, "key_encoding", encodings, "\"raw\" or \"percent\"",
                       &c->key_percent) ||
        http_conf_enum(x, g, "http_version", versions,
                       "\"auto\", \"1.1\", \"2\" or \"2-prior-knowledge\"", &version) ||
        http_conf_enum(x, g, "check", checks, "\"OPTIONS\", \"HEAD\" or \"none\"", &check) ||
        http_conf_duration(x, g, "timeout", 10000, 1, 600000, &timeout) ||
        http_conf_duration(x, g, "connect_timeout", 5000, 1, 600000, &connect) ||
        http_conf_duration(x, g, "retry_after_max", 3600000, 0, 86400000, &ra_max) ||
        http_conf_bool(x, g, "follow_redirects", 0, &c->follow_redirects) ||
        http_conf_int(x, g, "max_redirects", 3, 1, 20, &c->max_redirects) ||
        http_conf_int(x, g, "max_response_bytes", 16384, 64, 16777215, &max_resp))
        return -1;
    if (!(c->method = strdup(methods[method]))) return http_conf_fail(x, g, NULL, "out of memory");
    c->http_version = curl_versions[version];
    c->check = (http_check_method)check;
    c->timeout_ms = (long)timeout;
    c->connect_timeout_ms = (long)(connect < timeout ? connect : timeout);
    c->retry_after_max_ms = ra_max;
    c->response_max = (size_t)max_resp;
    return 0;
}

int http_conf_load(http_conf *c, const config_setting_t *conf, char *errstr, size_t errstr_size)
{
    http_conf_ctx x = {.group = conf, .errstr = errstr, .errstr_size = errstr_size};
    const char *file;

    memset(c, 0, sizeof(*c));
    if (!conf || !config_setting_is_group(conf)) {
        snprintf(errstr, errstr_size,
                 "handler.http: the HTTP handler is configured by its group, "
                 "handler = { http = { url = \"...\"; ... }; }");
        return -1;
    }
    http_conf_path(conf, x.path, sizeof(x.path));
    file = config_setting_source_file(conf);
    if (file) {
        char copy[1024];
        snprintf(copy, sizeof(copy), "%s", file);
        snprintf(x.dir, sizeof(x.dir), "%s", dirname(copy));
    }
    if (http_conf_known(&x, conf, http_conf_names) ||
        http_conf_header_name(&x, conf, "key_header", "Idempotency-Key", &c->key_header) ||
        http_conf_header_name(&x, conf, "fence_header", "Dedupd-Fence", &c->fence_header) ||
        http_conf_urls(&x, conf, c) || http_conf_headers(&x, conf, c) ||
        http_conf_misc(&x, conf, c) || http_conf_statuses(&x, conf, &c->statuses) ||
        http_conf_tls(&x, conf, c) || http_conf_secret(&x, conf, "proxy", 0, &c->proxy) ||
        http_conf_list(&x, conf, "resolve", http_conf_resolve_ok, &c->resolve)) {
        http_conf_release(c);
        return -1;
    }
    return 0;
}

void http_conf_release(http_conf *c)
{
    char *secrets[] = {c->url, c->reconcile_url, c->key_password, c->proxy};

    /* What held a secret is wiped before it goes back to the allocator. */
    for (size_t i = 0; i < sizeof(secrets) / sizeof(secrets[0]); i++)
        if (secrets[i]) memset(secrets[i], 0, strlen(secrets[i]));
    free(c->url);
    free(c->url_shown);
    free(c->reconcile_url);
    free(c->reconcile_shown);
    free(c->method);
    curl_slist_free_all(c->hdrs);
    free(c->key_header);
    free(c->fence_header);
    free(c->ca_file);
    free(c->ca_path);
    free(c->cert_file);
    free(c->key_file);
    free(c->key_password);
    free(c->pinned_key);
    free(c->proxy);
    curl_slist_free_all(c->resolve);
    memset(c, 0, sizeof(*c));
}

int64_t http_conf_duration_ms(const char *text)
{
    static const struct {
        const char *unit;
        int64_t ms;
    } units[] = {{"ms", 1}, {"s", 1000}, {"m", 60000}, {"h", 3600000}};
    int64_t total = 0;
    const char *p = text;

    if (!p || !*p) return -1;
    while (*p) {
        int64_t n = 0;
        size_t u = 0;
        if (!isdigit((unsigned char)*p)) return -1;
        for (; isdigit((unsigned char)*p); p++)
            if ((n = n * 10 + (*p - '0')) > 100000000) return -1;
        while (u < sizeof(units) / sizeof(units[0]) &&
               strncmp(p, units[u].unit, strlen(units[u].unit)) != 0)
            u++;
        if (u == sizeof(units) / sizeof(units[0])) return -1;
        total += n * units[u].ms;
        p += strlen(units[u].unit);
    }
    return total;
}
