/*
 * A handler's own metrics (include/dedupd/handler.h, "Metrics"): the host
 * functions metric_new, metric_add and metric_observe, and the text of
 * them /metrics serves.
 *
 * A handler counts from the lanes' threads, once or more per message, so
 * the hot path is a lock of the metric's own, a hash of the label values
 * and an addition; the scrape (libmicrohttpd's thread) takes the same lock
 * per metric while it prints it. The metrics of a handler are fixed once
 * init_host returns (metric_new fails afterwards), so their list is read
 * without a lock. Label values come from the handler, often from payloads:
 * each metric keeps a bounded number of series, and counts a combination
 * past the bound in one overflow series rather than growing the page.
 */
#include "dd_handler.h"
#include "dd_handler_int.h"

#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dd_common.h"
#include "dd_conf.h"
#include "dd_log.h"
#include "dd_stats.h"
#include "dd_utf8.h"

#define DD_HM_PREFIX "dedupd_handler_"
/* The prefix, the handler's name (cut there), the metric's and _total. */
#define DD_HM_HANDLER_MAX 64
#define DD_HM_FULL_MAX                                                                             \
    (sizeof(DD_HM_PREFIX) + DD_HM_HANDLER_MAX + 1 + DEDUPD_METRIC_NAME_MAX + sizeof("_total"))
/* A metric's hash table of series: a power of two, over twice the most. */
#define DD_HM_SLOTS 256
_Static_assert(DD_HM_SLOTS > 2 * DEDUPD_METRIC_SERIES_MAX, "the series' table is kept sparse");

/* The default buckets of a histogram: dedupd's own latency histograms'. */
_Static_assert(DD_MSG_BUCKETS - 1 <= DEDUPD_METRIC_BOUNDS_MAX, "the default bounds fit");

typedef struct {
    char *values[DEDUPD_METRIC_LABELS_MAX]; /* label_cnt copies */
    double total;                           /* a counter's */
    uint64_t *bucket;                       /* a histogram's, bound_cnt + 1, non-cumulative */
    double sum;
} dd_hm_series_t;

struct dedupd_metric {
    const dd_handler_metrics_t *set;
    dedupd_metric_type type;
    char name[DD_HM_FULL_MAX]; /* as /metrics prints it */
    char *help;
    size_t label_cnt;
    char labels[DEDUPD_METRIC_LABELS_MAX][DEDUPD_METRIC_NAME_MAX + 1];
    double bounds[DEDUPD_METRIC_BOUNDS_MAX];
    size_t bound_cnt;
    pthread_mutex_t mu; /* the series */
    dd_hm_series_t *series[DEDUPD_METRIC_SERIES_MAX];
    size_t series_cnt;
    dd_hm_series_t *overflow; /* the combinations past the bound, once one came */
    short slot[DD_HM_SLOTS];  /* index + 1 in series, 0: free */
    atomic_int said_overflow, said_refused;
};

struct dd_handler_metrics_s {
    char handler[DD_HM_HANDLER_MAX + 1]; /* the descriptor's name, for the log */
    char prefix[sizeof(DD_HM_PREFIX) + DD_HM_HANDLER_MAX + 1];
    int open; /* during init_host: metric_new is accepted */
    dedupd_metric *metric[DEDUPD_METRICS_MAX];
    size_t cnt;
};

dd_handler_metrics_t *dd_handler_metrics_new(const char *handler)
{
    dd_handler_metrics_t *set = calloc(1, sizeof(*set));
    size_t n;
    char *p;

    if (!set) return NULL;
    snprintf(set->handler, sizeof(set->handler), "%s", handler ? handler : "");
    n = (size_t)snprintf(set->prefix, sizeof(set->prefix), DD_HM_PREFIX "%s_", set->handler);
    for (p = set->prefix + sizeof(DD_HM_PREFIX) - 1; p < set->prefix + n - 1; p++)
        if (!(*p == '_' || (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
              (*p >= '0' && *p <= '9')))
            *p = '_';
    set->open = 1;
    return set;
}

void dd_handler_metrics_close(dd_handler_metrics_t *set)
{
    if (set) set->open = 0;
}

static void dd_hm_series_free(dd_hm_series_t *s)
{
    if (!s) return;
    for (size_t i = 0; i < DEDUPD_METRIC_LABELS_MAX; i++)
        free(s->values[i]);
    free(s->bucket);
    free(s);
}

static void dd_hm_metric_free(dedupd_metric *m)
{
    if (!m) return;
    for (size_t i = 0; i < m->series_cnt; i++)
        dd_hm_series_free(m->series[i]);
    dd_hm_series_free(m->overflow);
    pthread_mutex_destroy(&m->mu);
    free(m->help);
    free(m);
}

void dd_handler_metrics_destroy(dd_handler_metrics_t *set)
{
    if (!set) return;
    for (size_t i = 0; i < set->cnt; i++)
        dd_hm_metric_free(set->metric[i]);
    free(set);
}

/* ---- declaring ---- */

/* A name of a metric or a label: [a-zA-Z_][a-zA-Z0-9_]*, not "__...". */
static int dd_hm_name_ok(const char *s)
{
    size_t n = s ? strlen(s) : 0;

    if (n == 0 || n > DEDUPD_METRIC_NAME_MAX || (s[0] >= '0' && s[0] <= '9') ||
        strncmp(s, "__", 2) == 0)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (!(s[i] == '_' || (s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z') ||
              (s[i] >= '0' && s[i] <= '9')))
            return 0;
    return 1;
}

static int dd_hm_ends(const char *s, const char *suffix)
{
    size_t n = strlen(s), k = strlen(suffix);

    return n >= k && strcmp(s + n - k, suffix) == 0;
}

/* 1 when a sample of a (name, type) family may be named b: the same
 * name, or a histogram's name with _bucket, _sum or _count. */
static int dd_hm_shadows(const char *a, dedupd_metric_type at, const char *b)
{
    static const char *const parts[] = {"_bucket", "_sum", "_count"};
    size_t n = strlen(a);

    if (strcmp(a, b) == 0) return 1;
    if (at != DEDUPD_METRIC_HISTOGRAM || strncmp(a, b, n) != 0) return 0;
    for (size_t i = 0; i < 3; i++)
        if (strcmp(b + n, parts[i]) == 0) return 1;
    return 0;
}

static int dd_hm_clash(const dedupd_metric *a, const dedupd_metric *b)
{
    return dd_hm_shadows(a->name, a->type, b->name) || dd_hm_shadows(b->name, b->type, a->name);
}

static int dd_hm_check_labels(dedupd_metric *m, const char *const *labels, size_t label_cnt,
                              char *errstr, size_t errstr_size)
{
    static const char *const reserved[] = {"route", "le", "quantile"};

    if (label_cnt > DEDUPD_METRIC_LABELS_MAX || (label_cnt && !labels)) {
        dd_errstr_set(errstr, errstr_size, "metric %s: %zu labels, at most %d", m->name, label_cnt,
                      DEDUPD_METRIC_LABELS_MAX);
        return -1;
    }
    for (size_t i = 0; i < label_cnt; i++) {
        const char *why = dd_hm_name_ok(labels[i]) ? NULL : "is not a label name";
        for (size_t r = 0; !why && r < 3; r++)
            if (strcmp(labels[i], reserved[r]) == 0) why = "is dedupd's";
        for (size_t j = 0; !why && j < i; j++)
            if (strcmp(labels[i], labels[j]) == 0) why = "is there twice";
        if (why) {
            dd_errstr_set(errstr, errstr_size,
                          "metric %s: label \"%.80s\" %s (names are [a-zA-Z_][a-zA-Z0-9_]*, at "
                          "most %d bytes, not __...; route, le and quantile are dedupd's)",
                          m->name, labels[i] ? labels[i] : "(null)", why, DEDUPD_METRIC_NAME_MAX);
            return -1;
        }
        snprintf(m->labels[i], sizeof(m->labels[i]), "%s", labels[i]);
    }
    m->label_cnt = label_cnt;
    return 0;
}

static int dd_hm_check_bounds(dedupd_metric *m, const double *bounds, size_t bound_cnt,
                              char *errstr, size_t errstr_size)
{
    if (m->type == DEDUPD_METRIC_COUNTER) {
        if (!bound_cnt) return 0;
        dd_errstr_set(errstr, errstr_size, "metric %s: a counter has no bucket bounds", m->name);
        return -1;
    }
    if (!bounds || !bound_cnt) {
        memcpy(m->bounds, dd_stats_msg_bounds, sizeof(dd_stats_msg_bounds));
        m->bound_cnt = DD_MSG_BUCKETS - 1;
        return 0;
    }
    if (bound_cnt > DEDUPD_METRIC_BOUNDS_MAX) {
        dd_errstr_set(errstr, errstr_size, "metric %s: %zu bucket bounds, at most %d", m->name,
                      bound_cnt, DEDUPD_METRIC_BOUNDS_MAX);
        return -1;
    }
    for (size_t i = 0; i < bound_cnt; i++) {
        if (!isfinite(bounds[i]) || (i && !(bounds[i] > bounds[i - 1]))) {
            dd_errstr_set(errstr, errstr_size,
                          "metric %s: bucket bound %zu (%g) is not finite and above the one "
                          "before it",
                          m->name, i, bounds[i]);
            return -1;
        }
        m->bounds[i] = bounds[i];
    }
    m->bound_cnt = bound_cnt;
    return 0;
}

/* The name /metrics prints: the prefix, name, and _total for a counter. */
static int dd_hm_full_name(const dd_handler_metrics_t *set, dedupd_metric *m, const char *name,
                           char *errstr, size_t errstr_size)
{
    if (!dd_hm_name_ok(name)) {
        dd_errstr_set(errstr, errstr_size,
                      "\"%.80s\" is not a metric name ([a-zA-Z_][a-zA-Z0-9_]*, at most %d bytes, "
                      "not __...)",
                      name ? name : "(null)", DEDUPD_METRIC_NAME_MAX);
        return -1;
    }
    snprintf(m->name, sizeof(m->name), "%s%s%s", set->prefix, name,
             m->type == DEDUPD_METRIC_COUNTER && !dd_hm_ends(name, "_total") ? "_total" : "");
    return 0;
}

/* Fills m from the arguments of metric_new; -1 with errstr when refused. */
static int dd_hm_define(dd_handler_metrics_t *set, dedupd_metric *m, const char *name,
                        const char *help, const char *const *labels, size_t label_cnt,
                        const double *bounds, size_t bound_cnt, char *errstr, size_t errstr_size)
{
    if (m->type != DEDUPD_METRIC_COUNTER && m->type != DEDUPD_METRIC_HISTOGRAM) {
        dd_errstr_set(errstr, errstr_size, "metric %.80s: type %d is neither counter nor histogram",
                      name ? name : "(null)", (int)m->type);
        return -1;
    }
    if (dd_hm_full_name(set, m, name, errstr, errstr_size) ||
        dd_hm_check_labels(m, labels, label_cnt, errstr, errstr_size) ||
        dd_hm_check_bounds(m, bounds, bound_cnt, errstr, errstr_size))
        return -1;
    if (help && !dd_utf8_valid(help, strlen(help))) {
        dd_errstr_set(errstr, errstr_size, "metric %s: its help is not UTF-8", m->name);
        return -1;
    }
    for (size_t i = 0; i < set->cnt; i++) {
        if (dd_hm_clash(set->metric[i], m)) {
            dd_errstr_set(errstr, errstr_size, "metric %s: the handler has %s already", m->name,
                          set->metric[i]->name);
            return -1;
        }
    }
    return 0;
}

dedupd_metric *dd_handler_metrics_declare(dd_handler_metrics_t *set, dedupd_metric_type type,
                                          const char *name, const char *help,
                                          const char *const *labels, size_t label_cnt,
                                          const double *bounds, size_t bound_cnt, char *errstr,
                                          size_t errstr_size)
{
    dedupd_metric *m;

    if (!set->open || set->cnt >= DEDUPD_METRICS_MAX) {
        dd_errstr_set(errstr, errstr_size,
                      set->open ? "metric %.80s: the handler has %d metrics, the most there may be"
                                : "metric %.80s: metrics are declared in init_host only",
                      name ? name : "(null)", DEDUPD_METRICS_MAX);
        return NULL;
    }
    if (!(m = calloc(1, sizeof(*m)))) {
        dd_errstr_set(errstr, errstr_size, "out of memory");
        return NULL;
    }
    pthread_mutex_init(&m->mu, NULL);
    m->set = set;
    m->type = type;
    if (dd_hm_define(set, m, name, help, labels, label_cnt, bounds, bound_cnt, errstr,
                     errstr_size)) {
        dd_hm_metric_free(m);
        return NULL;
    }
    if (!(m->help = strdup(help ? help : ""))) {
        dd_errstr_set(errstr, errstr_size, "out of memory");
        dd_hm_metric_free(m);
        return NULL;
    }
    set->metric[set->cnt++] = m;
    return m;
}

/* ---- counting ---- */

static uint32_t dd_hm_hash(const char *const *values, size_t n)
{
    uint32_t h = 2166136261u; /* FNV-1a, a 0xff between the values */

    for (size_t i = 0; i < n; i++) {
        for (const unsigned char *p = (const unsigned char *)values[i]; *p; p++)
            h = (h ^ *p) * 16777619u;
        h = (h ^ 0xffu) * 16777619u;
    }
    return h;
}

static int dd_hm_same(const dd_hm_series_t *s, const char *const *values, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(s->values[i], values[i]) != 0) return 0;
    return 1;
}

/* A new series of values (NULL: out of memory). */
static dd_hm_series_t *dd_hm_series_new(const dedupd_metric *m, const char *const *values)
{
    dd_hm_series_t *s = calloc(1, sizeof(*s));
    int ok = s != NULL;

    for (size_t i = 0; ok && i < m->label_cnt; i++)
        ok = (s->values[i] = strdup(values[i])) != NULL;
    if (ok && m->type == DEDUPD_METRIC_HISTOGRAM)
        ok = (s->bucket = calloc(m->bound_cnt + 1, sizeof(*s->bucket))) != NULL;
    if (ok) return s;
    dd_hm_series_free(s);
    return NULL;
}

/* The overflow series, made on first use; with mu held. */
static dd_hm_series_t *dd_hm_overflow(dedupd_metric *m)
{
    const char *values[DEDUPD_METRIC_LABELS_MAX];

    if (m->overflow) return m->overflow;
    for (size_t i = 0; i < m->label_cnt; i++)
        values[i] = DEDUPD_METRIC_OVERFLOW;
    if ((m->overflow = dd_hm_series_new(m, values)) && !atomic_exchange(&m->said_overflow, 1))
        dd_log(DD_LOG_WARN,
               "Handler %s: metric %s has %d series, the most it may have; further label values "
               "are counted in the series whose values are \"%s\".",
               m->set->handler, m->name, DEDUPD_METRIC_SERIES_MAX, DEDUPD_METRIC_OVERFLOW);
    return m->overflow;
}

/* The series of values, found or made; with mu held. NULL: out of
 * memory. */
static dd_hm_series_t *dd_hm_series(dedupd_metric *m, const char *const *values)
{
    uint32_t h = dd_hm_hash(values, m->label_cnt);

    for (uint32_t i = 0; i < DD_HM_SLOTS; i++) {
        short *slot = &m->slot[(h + i) & (DD_HM_SLOTS - 1)];
        dd_hm_series_t *s;
        if (*slot) {
            if (dd_hm_same(m->series[*slot - 1], values, m->label_cnt)) return m->series[*slot - 1];
            continue;
        }
        if (m->series_cnt >= DEDUPD_METRIC_SERIES_MAX) break;
        if (!(s = dd_hm_series_new(m, values))) return NULL;
        m->series[m->series_cnt++] = s;
        *slot = (short)m->series_cnt;
        return s;
    }
    return dd_hm_overflow(m);
}

/* Says once per metric why the handler's call counted nothing. */
static int dd_hm_refuse(dedupd_metric *m, const char *why)
{
    if (!atomic_exchange(&m->said_refused, 1))
        dd_log(DD_LOG_WARN, "Handler %s: metric %s: a call counted nothing: %s (said once).",
               m->set->handler, m->name, why);
    return -1;
}

/* Why the values or v cannot be counted in m, or NULL. */
static const char *dd_hm_bad_call(const dedupd_metric *m, const char *const *values, double v)
{
    if (!isfinite(v)) return "the value is not finite";
    if (m->type == DEDUPD_METRIC_COUNTER && v < 0) return "a counter cannot go down";
    if (m->label_cnt && !values) return "no label values";
    for (size_t i = 0; i < m->label_cnt; i++) {
        size_t n = values[i] ? strnlen(values[i], DEDUPD_METRIC_VALUE_MAX + 1) : 0;
        if (!values[i]) return "a label value is NULL";
        if (n > DEDUPD_METRIC_VALUE_MAX)
            return "a label value is longer than DEDUPD_METRIC_VALUE_MAX";
        if (!dd_utf8_valid(values[i], n)) return "a label value is not UTF-8";
    }
    return NULL;
}

int dd_handler_metrics_record(const dd_handler_metrics_t *set, dedupd_metric *m,
                              dedupd_metric_type type, const char *const *values, double v)
{
    dd_hm_series_t *s;
    const char *why;
    size_t b = 0;

    if (!m || m->set != set || m->type != type)
        return m && m->set == set ? dd_hm_refuse(m, "the call is not for its type") : -1;
    if ((why = dd_hm_bad_call(m, values, v))) return dd_hm_refuse(m, why);
    while (type == DEDUPD_METRIC_HISTOGRAM && b < m->bound_cnt && v > m->bounds[b])
        b++;
    pthread_mutex_lock(&m->mu);
    if ((s = dd_hm_series(m, values))) {
        if (type == DEDUPD_METRIC_COUNTER) {
            s->total += v;
        } else {
            s->bucket[b]++;
            s->sum += v;
        }
    }
    pthread_mutex_unlock(&m->mu);
    return s ? 0 : dd_hm_refuse(m, "out of memory");
}

/* ---- /metrics ---- */

/* v as the shortest of %.15g, %.16g and %.17g that reads back as v. */
static void dd_hm_number(char *out, size_t size, double v)
{
    for (int prec = 15; prec <= 17; prec++) {
        snprintf(out, size, "%.*g", prec, v);
        if (strtod(out, NULL) == v) return;
    }
}

/* Text in a label value (quote) or a HELP line: backslash, newline and,
 * in a label value, the double quote escaped. */
static void dd_hm_escape(FILE *f, const char *s, int quote)
{
    for (; *s; s++) {
        if (*s == '\n') {
            fputs("\\n", f);
            continue;
        }
        if (*s == '\\' || (quote && *s == '"')) fputc('\\', f);
        fputc(*s, f);
    }
}

/* {route="...",label="value",...[,le="..."]} */
static void dd_hm_labels(FILE *f, const dedupd_metric *m, const dd_hm_series_t *s,
                         const char *route, const char *le)
{
    fputs("{route=\"", f);
    dd_hm_escape(f, route, 1);
    for (size_t i = 0; i < m->label_cnt; i++) {
        fprintf(f, "\",%s=\"", m->labels[i]);
        dd_hm_escape(f, s->values[i], 1);
    }
    if (le) fprintf(f, "\",le=\"%s", le);
    fputs("\"}", f);
}

static void dd_hm_series_print(FILE *f, const dedupd_metric *m, const dd_hm_series_t *s,
                               const char *route)
{
    char num[32];
    uint64_t cum = 0;

    if (m->type == DEDUPD_METRIC_COUNTER) {
        dd_hm_number(num, sizeof(num), s->total);
        fputs(m->name, f);
        dd_hm_labels(f, m, s, route, NULL);
        fprintf(f, " %s\n", num);
        return;
    }
    for (size_t b = 0; b <= m->bound_cnt; b++) {
        cum += s->bucket[b];
        if (b < m->bound_cnt) dd_hm_number(num, sizeof(num), m->bounds[b]);
        fprintf(f, "%s_bucket", m->name);
        dd_hm_labels(f, m, s, route, b < m->bound_cnt ? num : "+Inf");
        fprintf(f, " %llu\n", (unsigned long long)cum);
    }
    dd_hm_number(num, sizeof(num), s->sum);
    fprintf(f, "%s_sum", m->name);
    dd_hm_labels(f, m, s, route, NULL);
    fprintf(f, " %s\n%s_count", num, m->name);
    dd_hm_labels(f, m, s, route, NULL);
    fprintf(f, " %llu\n", (unsigned long long)cum);
}

static void dd_hm_metric_print(FILE *f, dedupd_metric *m, const char *route)
{
    pthread_mutex_lock(&m->mu);
    for (size_t i = 0; i < m->series_cnt; i++)
        dd_hm_series_print(f, m, m->series[i], route);
    if (m->overflow) dd_hm_series_print(f, m, m->overflow, route);
    pthread_mutex_unlock(&m->mu);
}

/* The metric of set named name, or NULL. */
static dedupd_metric *dd_hm_find(const dd_handler_metrics_t *set, const char *name)
{
    for (size_t i = 0; set && i < set->cnt; i++)
        if (strcmp(set->metric[i]->name, name) == 0) return set->metric[i];
    return NULL;
}

void dd_handler_metrics_print_sets(FILE *f, dd_handler_metrics_t *const *sets,
                                   const char *const *routes, int n)
{
    for (int i = 0; i < n; i++) {
        for (size_t j = 0; sets[i] && j < sets[i]->cnt; j++) {
            dedupd_metric *m = sets[i]->metric[j];
            int seen = 0;
            for (int k = 0; k < i && !seen; k++)
                seen = dd_hm_find(sets[k], m->name) != NULL;
            if (seen) continue; /* printed with route k's */
            fprintf(f, "# HELP %s ", m->name);
            dd_hm_escape(f, m->help, 0);
            fprintf(f, "\n# TYPE %s %s\n", m->name,
                    m->type == DEDUPD_METRIC_COUNTER ? "counter" : "histogram");
            for (int k = i; k < n; k++) {
                dedupd_metric *same = k == i ? m : dd_hm_find(sets[k], m->name);
                if (same) dd_hm_metric_print(f, same, routes[k]);
            }
        }
    }
}

static void dd_hm_disagree(const dedupd_metric *a, const char *ra, const dedupd_metric *b,
                           const char *rb, char *errstr, size_t errstr_size)
{
    if (strcmp(a->name, b->name) == 0)
        dd_errstr_set(errstr, errstr_size,
                      "the handlers of routes %s and %s both declare the metric %s, with other "
                      "types, labels or buckets",
                      ra, rb, a->name);
    else
        dd_errstr_set(errstr, errstr_size,
                      "the metric %s of route %s's handler and %s of route %s's print samples of "
                      "the same name",
                      a->name, ra, b->name, rb);
}

/* 1 when a and b, of one name, can be one family on /metrics. */
static int dd_hm_alike(const dedupd_metric *a, const dedupd_metric *b)
{
    if (a->type != b->type || a->label_cnt != b->label_cnt || a->bound_cnt != b->bound_cnt)
        return 0;
    for (size_t i = 0; i < a->label_cnt; i++)
        if (strcmp(a->labels[i], b->labels[i]) != 0) return 0;
    return memcmp(a->bounds, b->bounds, a->bound_cnt * sizeof(a->bounds[0])) == 0;
}

int dd_handler_metrics_check_sets(dd_handler_metrics_t *const *sets, const char *const *routes,
                                  int n, char *errstr, size_t errstr_size)
{
    for (int i = 0; i < n; i++)
        for (int k = i + 1; sets[i] && k < n; k++)
            for (size_t a = 0; sets[k] && a < sets[i]->cnt; a++)
                for (size_t b = 0; b < sets[k]->cnt; b++) {
                    const dedupd_metric *ma = sets[i]->metric[a], *mb = sets[k]->metric[b];
                    if (!dd_hm_clash(ma, mb) ||
                        (strcmp(ma->name, mb->name) == 0 && dd_hm_alike(ma, mb)))
                        continue;
                    dd_hm_disagree(ma, routes[i], mb, routes[k], errstr, errstr_size);
                    return DD_ERR_CONFIG;
                }
    return DD_OK;
}

/* ---- the host functions and the handlers' side (dd_handler.h) ---- */

dedupd_metric *dd_handler_host_metric_new(const dedupd_host *host, dedupd_metric_type type,
                                          const char *name, const char *help,
                                          const char *const *labels, size_t label_cnt,
                                          const double *bounds, size_t bound_cnt, char *errstr,
                                          size_t errstr_size)
{
    dd_handler_metrics_t *set = host ? dd_handler_host_metrics(host) : NULL;

    if (!set) {
        dd_errstr_set(errstr, errstr_size, "metric %.80s: no metrics here (out of memory)",
                      name ? name : "(null)");
        return NULL;
    }
    return dd_handler_metrics_declare(set, type, name, help, labels, label_cnt, bounds, bound_cnt,
                                      errstr, errstr_size);
}

int dd_handler_host_metric_add(const dedupd_host *host, dedupd_metric *metric,
                               const char *const *values, double v)
{
    return dd_handler_metrics_record(host ? dd_handler_host_metrics(host) : NULL, metric,
                                     DEDUPD_METRIC_COUNTER, values, v);
}

int dd_handler_host_metric_observe(const dedupd_host *host, dedupd_metric *metric,
                                   const char *const *values, double v)
{
    return dd_handler_metrics_record(host ? dd_handler_host_metrics(host) : NULL, metric,
                                     DEDUPD_METRIC_HISTOGRAM, values, v);
}

/* The metrics of hs[0..n) (NULL for a handler not loaded). */
static void dd_hm_sets(dd_handler_t *const *hs, int n, dd_handler_metrics_t **sets)
{
    for (int i = 0; i < n; i++)
        sets[i] = hs[i] ? dd_handler_metrics_of(hs[i]) : NULL;
}

void dd_handler_metrics_render(FILE *f, dd_handler_t *const *hs, const char *const *routes, int n)
{
    dd_handler_metrics_t *sets[DD_CONF_ROUTE_MAX];

    n = n < DD_CONF_ROUTE_MAX ? n : DD_CONF_ROUTE_MAX;
    dd_hm_sets(hs, n, sets);
    dd_handler_metrics_print_sets(f, sets, routes, n);
}

int dd_handler_metrics_check(dd_handler_t *const *hs, const char *const *routes, int n,
                             char *errstr, size_t errstr_size)
{
    dd_handler_metrics_t *sets[DD_CONF_ROUTE_MAX];

    n = n < DD_CONF_ROUTE_MAX ? n : DD_CONF_ROUTE_MAX;
    dd_hm_sets(hs, n, sets);
    return dd_handler_metrics_check_sets(sets, routes, n, errstr, errstr_size);
}
