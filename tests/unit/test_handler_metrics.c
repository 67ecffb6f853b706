/*
 * A handler's own metrics (dd_handler_metrics.c): what a declaration may
 * be, the names /metrics gets, the bound on series and the overflow
 * series, refused calls, counts from several threads at once, the text of
 * two routes' metrics on one page, and the th_metrics handler loaded and
 * called through the host functions.
 */
#include <check.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dd_common.h"
#include "dd_handler.h"
#include "dd_handler_int.h"
#include "dd_metrics_def.h"
#include "check_run.h"

static const char *const kind[] = {"kind"};

static dedupd_metric *declare(dd_handler_metrics_t *set, dedupd_metric_type type, const char *name,
                              const char *const *labels, size_t label_cnt, const double *bounds,
                              size_t bound_cnt, char *err, size_t size)
{
    err[0] = '\0';
    return dd_handler_metrics_declare(set, type, name, "help", labels, label_cnt, bounds, bound_cnt,
                                      err, size);
}

/* The page of sets[0..n) with routes[0..n). */
static char *page(dd_handler_metrics_t *const *sets, const char *const *routes, int n)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);

    ck_assert_ptr_nonnull(f);
    dd_handler_metrics_print_sets(f, sets, routes, n);
    ck_assert_int_eq(fclose(f), 0);
    return text;
}

/* The value of the line starting with series and a space, or NULL. */
static const char *sample(const char *text, const char *series, char *out, size_t size)
{
    size_t n = strlen(series);

    for (const char *p = text; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL)
        if (strncmp(p, series, n) == 0 && p[n] == ' ') {
            snprintf(out, size, "%.*s", (int)strcspn(p + n + 1, "\n"), p + n + 1);
            return out;
        }
    return NULL;
}

#define ck_sample(text, series, want)                                                              \
    do {                                                                                           \
        char v_[64];                                                                               \
        const char *got_ = sample((text), (series), v_, sizeof(v_));                               \
        ck_assert_msg(got_ != NULL, "no sample %s in\n%s", (series), (text));                      \
        ck_assert_str_eq(got_, (want));                                                            \
    } while (0)

/* Refused: NULL, and a reason naming what. */
#define ck_refused(m, err, what)                                                                   \
    do {                                                                                           \
        ck_assert_ptr_null(m);                                                                     \
        ck_assert_msg(strstr((err), (what)) != NULL, "reason \"%s\" lacks \"%s\"", (err), (what)); \
    } while (0)

START_TEST(test_declare_rules)
{
    static const char *const route[] = {"route"}, *const quantile[] = {"quantile"};
    static const char *const twice[] = {"a", "a"}, *const five[] = {"a", "b", "c", "d", "e"};
    static const char *const digit[] = {"1a"};
    static const double up[] = {0.1, 1}, flat[] = {1, 1}, inf[] = {1, INFINITY};
    dd_handler_metrics_t *set = dd_handler_metrics_new("my-handler.v2");
    char err[256], long_name[DEDUPD_METRIC_NAME_MAX + 2];
    dedupd_metric *m;

    ck_assert_ptr_nonnull(set);
    m = declare(set, DEDUPD_METRIC_COUNTER, "orders", kind, 1, NULL, 0, err, sizeof(err));
    ck_assert_ptr_nonnull(m);
    ck_assert_ptr_nonnull(
        declare(set, DEDUPD_METRIC_COUNTER, "declined_total", NULL, 0, NULL, 0, err, sizeof(err)));
    ck_assert_ptr_nonnull(
        declare(set, DEDUPD_METRIC_HISTOGRAM, "call_seconds", NULL, 0, up, 2, err, sizeof(err)));
    ck_refused(
        declare(set, DEDUPD_METRIC_COUNTER, "orders_total", NULL, 0, NULL, 0, err, sizeof(err)),
        err, "dedupd_handler_my_handler_v2_orders_total");
    ck_refused(declare(set, DEDUPD_METRIC_HISTOGRAM, "call_seconds_sum", NULL, 0, NULL, 0, err,
                       sizeof(err)),
               err, "has dedupd_handler_my_handler_v2_call_seconds already");
    ck_refused(declare(set, DEDUPD_METRIC_COUNTER, "a-b", NULL, 0, NULL, 0, err, sizeof(err)), err,
               "not a metric name");
    ck_refused(declare(set, DEDUPD_METRIC_COUNTER, "__a", NULL, 0, NULL, 0, err, sizeof(err)), err,
               "not a metric name");
    ck_refused(declare(set, DEDUPD_METRIC_COUNTER, "9a", NULL, 0, NULL, 0, err, sizeof(err)), err,
               "not a metric name");
    ck_refused(declare(set, DEDUPD_METRIC_COUNTER, NULL, NULL, 0, NULL, 0, err, sizeof(err)), err,
               "not a metric name");
    memset(long_name, 'a', sizeof(long_name) - 1);
    long_name[sizeof(long_name) - 1] = '\0';
    ck_refused(declare(set, DEDUPD_METRIC_COUNTER, long_name, NULL, 0, NULL, 0, err, sizeof(err)),
               err, "not a metric name");
    ck_refused(declare(set, DEDUPD_METRIC_COUNTER, "r", route, 1, NULL, 0, err, sizeof(err)), err,
               "\"route\" is dedupd's");
    ck_refused(declare(set, DEDUPD_METRIC_COUNTER, "q", quantile, 1, NULL, 0, err, sizeof(err)),
               err, "\"quantile\" is dedupd's");
    ck_refused(declare(set, DEDUPD_METRIC_COUNTER, "t", twice, 2, NULL, 0, err, sizeof(err)), err,
               "\"a\" is there twice");
    ck_refused(declare(set, DEDUPD_METRIC_COUNTER, "d", digit, 1, NULL, 0, err, sizeof(err)), err,
               "is not a label name");
    ck_refused(declare(set, DEDUPD_METRIC_COUNTER, "f", five, 5, NULL, 0, err, sizeof(err)), err,
               "5 labels, at most 4");
    ck_refused(declare(set, DEDUPD_METRIC_COUNTER, "b", NULL, 0, up, 2, err, sizeof(err)), err,
               "a counter has no bucket bounds");
    ck_refused(declare(set, DEDUPD_METRIC_HISTOGRAM, "h", NULL, 0, flat, 2, err, sizeof(err)), err,
               "bucket bound 1 (1)");
    ck_refused(declare(set, DEDUPD_METRIC_HISTOGRAM, "h", NULL, 0, inf, 2, err, sizeof(err)), err,
               "not finite");
    ck_refused(declare(set, (dedupd_metric_type)2, "u", NULL, 0, NULL, 0, err, sizeof(err)), err,
               "neither counter nor histogram");
    /* a refused declaration takes no place: the name is still free */
    ck_assert_ptr_nonnull(
        declare(set, DEDUPD_METRIC_HISTOGRAM, "h", NULL, 0, NULL, 0, err, sizeof(err)));
    for (int i = 4; i < DEDUPD_METRICS_MAX; i++) {
        char name[16];
        snprintf(name, sizeof(name), "m%d", i);
        ck_assert_ptr_nonnull(
            declare(set, DEDUPD_METRIC_COUNTER, name, NULL, 0, NULL, 0, err, sizeof(err)));
    }
    ck_refused(declare(set, DEDUPD_METRIC_COUNTER, "one_more", NULL, 0, NULL, 0, err, sizeof(err)),
               err, "the most there may be");
    dd_handler_metrics_close(set);
    dd_handler_metrics_destroy(set);

    set = dd_handler_metrics_new("late");
    dd_handler_metrics_close(set);
    ck_refused(declare(set, DEDUPD_METRIC_COUNTER, "x", NULL, 0, NULL, 0, err, sizeof(err)), err,
               "declared in init_host only");
    dd_handler_metrics_destroy(set);
}
END_TEST

/* Two routes' instances of one handler: one HELP and TYPE per name, each
 * route's series under its route label; counters exact, histograms
 * cumulative, the default buckets dedupd's, label values escaped. */
START_TEST(test_page)
{
    static const char *const routes[] = {"payments", "refunds"};
    static const double bounds[] = {0.1, 1.5};
    dd_handler_metrics_t *sets[2];
    dedupd_metric *c[2], *h[2], *d;
    char err[256], *text;
    const char *odd[] = {"a\"b\\c\nd"};

    for (int i = 0; i < 2; i++) {
        sets[i] = dd_handler_metrics_new("shop");
        c[i] =
            declare(sets[i], DEDUPD_METRIC_COUNTER, "orders", kind, 1, NULL, 0, err, sizeof(err));
        h[i] = declare(sets[i], DEDUPD_METRIC_HISTOGRAM, "seconds", NULL, 0, bounds, 2, err,
                       sizeof(err));
        ck_assert(c[i] && h[i]);
        dd_handler_metrics_close(sets[i]);
    }
    ck_assert_int_eq(dd_handler_metrics_check_sets(sets, routes, 2, err, sizeof(err)), 0);
    d = declare(sets[0], DEDUPD_METRIC_HISTOGRAM, "late", NULL, 0, NULL, 0, err, sizeof(err));
    ck_assert_ptr_null(d);
    ck_assert_int_eq(dd_handler_metrics_record(sets[0], c[0], DEDUPD_METRIC_COUNTER,
                                               (const char *[]){"ok"}, 9007199254740993.0),
                     0);
    ck_assert_int_eq(dd_handler_metrics_record(sets[1], c[1], DEDUPD_METRIC_COUNTER, odd, 0.5), 0);
    ck_assert_int_eq(dd_handler_metrics_record(sets[1], c[1], DEDUPD_METRIC_COUNTER, odd, 0.25), 0);
    for (double v = 0; v < 3; v += 0.5) /* 0 0.5 1 1.5 2 2.5 */
        ck_assert_int_eq(dd_handler_metrics_record(sets[0], h[0], DEDUPD_METRIC_HISTOGRAM, NULL, v),
                         0);
    ck_assert_int_eq(dd_handler_metrics_record(sets[0], h[0], DEDUPD_METRIC_HISTOGRAM, NULL, 0.1),
                     0);
    text = page(sets, routes, 2);
    ck_assert_ptr_nonnull(strstr(text, "# HELP dedupd_handler_shop_orders_total help\n"
                                       "# TYPE dedupd_handler_shop_orders_total counter\n"));
    ck_assert_ptr_null(strstr(strstr(text, "# TYPE dedupd_handler_shop_orders_total") + 1,
                              "# TYPE dedupd_handler_shop_orders_total"));
    ck_sample(text, "dedupd_handler_shop_orders_total{route=\"payments\",kind=\"ok\"}",
              "9007199254740992");
    ck_sample(text, "dedupd_handler_shop_orders_total{route=\"refunds\",kind=\"a\\\"b\\\\c\\nd\"}",
              "0.75");
    ck_assert_ptr_nonnull(strstr(text, "# TYPE dedupd_handler_shop_seconds histogram\n"));
    ck_sample(text, "dedupd_handler_shop_seconds_bucket{route=\"payments\",le=\"0.1\"}", "2");
    ck_sample(text, "dedupd_handler_shop_seconds_bucket{route=\"payments\",le=\"1.5\"}", "5");
    ck_sample(text, "dedupd_handler_shop_seconds_bucket{route=\"payments\",le=\"+Inf\"}", "7");
    ck_sample(text, "dedupd_handler_shop_seconds_sum{route=\"payments\"}", "7.6");
    ck_sample(text, "dedupd_handler_shop_seconds_count{route=\"payments\"}", "7");
    /* a histogram with no series yet prints none: no observation made one */
    ck_assert_ptr_null(strstr(text, "route=\"refunds\",le="));
    free(text);
    for (int i = 0; i < 2; i++)
        dd_handler_metrics_destroy(sets[i]);
}
END_TEST

/* Two routes' handlers declaring one name otherwise cannot share a page. */
START_TEST(test_check_sets)
{
    static const char *const routes[] = {"a", "b"};
    dd_handler_metrics_t *sets[2] = {dd_handler_metrics_new("x"), dd_handler_metrics_new("x")};
    char err[512];

    ck_assert_ptr_nonnull(
        declare(sets[0], DEDUPD_METRIC_COUNTER, "n", kind, 1, NULL, 0, err, sizeof(err)));
    ck_assert_ptr_nonnull(
        declare(sets[1], DEDUPD_METRIC_COUNTER, "n", NULL, 0, NULL, 0, err, sizeof(err)));
    ck_assert_int_eq(dd_handler_metrics_check_sets(sets, routes, 2, err, sizeof(err)),
                     DD_ERR_CONFIG);
    ck_assert_msg(strstr(err, "routes a and b both declare the metric dedupd_handler_x_n_total"),
                  "%s", err);
    dd_handler_metrics_destroy(sets[1]);
    sets[1] = dd_handler_metrics_new("x");
    ck_assert_ptr_nonnull(
        declare(sets[1], DEDUPD_METRIC_HISTOGRAM, "n_total", NULL, 0, NULL, 0, err, sizeof(err)));
    ck_assert_int_eq(dd_handler_metrics_check_sets(sets, routes, 2, err, sizeof(err)),
                     DD_ERR_CONFIG);
    dd_handler_metrics_destroy(sets[1]);
    sets[1] = NULL; /* a route without a handler */
    ck_assert_int_eq(dd_handler_metrics_check_sets(sets, routes, 2, err, sizeof(err)), 0);
    dd_handler_metrics_destroy(sets[0]);
}
END_TEST

/* Past DEDUPD_METRIC_SERIES_MAX combinations, counts go to the overflow
 * series; refused calls count nothing. */
START_TEST(test_bounds_and_refusals)
{
    static const char *const route[] = {"r"};
    dd_handler_metrics_t *set = dd_handler_metrics_new("b"), *other = dd_handler_metrics_new("o");
    dedupd_metric *m, *h, *o;
    char err[256], *text, v[16], series[128], long_value[DEDUPD_METRIC_VALUE_MAX + 2];
    int lines = 0;

    m = declare(set, DEDUPD_METRIC_COUNTER, "n", kind, 1, NULL, 0, err, sizeof(err));
    h = declare(set, DEDUPD_METRIC_HISTOGRAM, "h", NULL, 0, NULL, 0, err, sizeof(err));
    o = declare(other, DEDUPD_METRIC_COUNTER, "n", NULL, 0, NULL, 0, err, sizeof(err));
    for (int i = 0; i < DEDUPD_METRIC_SERIES_MAX + 50; i++) {
        const char *values[1] = {v};
        snprintf(v, sizeof(v), "k%d", i % (DEDUPD_METRIC_SERIES_MAX + 25));
        ck_assert_int_eq(dd_handler_metrics_record(set, m, DEDUPD_METRIC_COUNTER, values, 1), 0);
    }
    memset(long_value, 'x', sizeof(long_value) - 1);
    long_value[sizeof(long_value) - 1] = '\0';
    ck_assert_int_eq(
        dd_handler_metrics_record(set, m, DEDUPD_METRIC_COUNTER, (const char *[]){long_value}, 1),
        -1);
    ck_assert_int_eq(
        dd_handler_metrics_record(set, m, DEDUPD_METRIC_COUNTER, (const char *[]){"\xc3\x28"}, 1),
        -1);
    ck_assert_int_eq(
        dd_handler_metrics_record(set, m, DEDUPD_METRIC_COUNTER, (const char *[]){NULL}, 1), -1);
    ck_assert_int_eq(dd_handler_metrics_record(set, m, DEDUPD_METRIC_COUNTER, NULL, 1), -1);
    ck_assert_int_eq(
        dd_handler_metrics_record(set, m, DEDUPD_METRIC_COUNTER, (const char *[]){"k0"}, -1), -1);
    ck_assert_int_eq(
        dd_handler_metrics_record(set, m, DEDUPD_METRIC_COUNTER, (const char *[]){"k0"}, NAN), -1);
    ck_assert_int_eq(
        dd_handler_metrics_record(set, m, DEDUPD_METRIC_HISTOGRAM, (const char *[]){"k0"}, 1), -1);
    ck_assert_int_eq(dd_handler_metrics_record(set, h, DEDUPD_METRIC_HISTOGRAM, NULL, INFINITY),
                     -1);
    ck_assert_int_eq(dd_handler_metrics_record(set, h, DEDUPD_METRIC_HISTOGRAM, NULL, -2), 0);
    ck_assert_int_eq(dd_handler_metrics_record(set, o, DEDUPD_METRIC_COUNTER, NULL, 1), -1);
    ck_assert_int_eq(dd_handler_metrics_record(set, NULL, DEDUPD_METRIC_COUNTER, NULL, 1), -1);
    text = page(&set, route, 1);
    for (const char *p = text; (p = strstr(p, "\ndedupd_handler_b_n_total{")); p++)
        lines++;
    ck_assert_int_eq(lines, DEDUPD_METRIC_SERIES_MAX + 1);
    ck_sample(text, "dedupd_handler_b_n_total{route=\"r\",kind=\"k0\"}", "2");
    ck_sample(text, "dedupd_handler_b_n_total{route=\"r\",kind=\"k99\"}", "1");
    /* k100 .. k124 once each, k0 .. k24 were counted in their series again */
    snprintf(series, sizeof(series), "dedupd_handler_b_n_total{route=\"r\",kind=\"%s\"}",
             DEDUPD_METRIC_OVERFLOW);
    ck_sample(text, series, "25");
    /* the default buckets: dedupd's latency histograms' (-2 is in the first) */
    ck_sample(text, "dedupd_handler_b_h_bucket{route=\"r\",le=\"0.001\"}", "1");
    ck_sample(text, "dedupd_handler_b_h_bucket{route=\"r\",le=\"600\"}", "1");
    ck_sample(text, "dedupd_handler_b_h_sum{route=\"r\"}", "-2");
    free(text);
    dd_handler_metrics_destroy(set);
    dd_handler_metrics_destroy(other);
}
END_TEST

#define TH_THREADS 4
#define TH_ROUNDS 20000

typedef struct {
    dd_handler_metrics_t *set;
    dedupd_metric *c, *h;
} th_arg;

static void *th_count(void *p)
{
    th_arg *a = p;
    char v[8];
    const char *values[1] = {v};

    for (int i = 0; i < TH_ROUNDS; i++) {
        snprintf(v, sizeof(v), "v%d", i % 7);
        if (dd_handler_metrics_record(a->set, a->c, DEDUPD_METRIC_COUNTER, values, 1) ||
            dd_handler_metrics_record(a->set, a->h, DEDUPD_METRIC_HISTOGRAM, NULL, 0.5))
            return (void *)1;
    }
    return NULL;
}

/* Counts from several threads at once, read by a scrape meanwhile: none
 * lost. */
START_TEST(test_threads)
{
    static const char *const route[] = {"r"};
    th_arg a = {.set = dd_handler_metrics_new("t")};
    pthread_t t[TH_THREADS];
    char err[256], *text, want[32];
    void *rv;
    double total = 0;

    a.c = declare(a.set, DEDUPD_METRIC_COUNTER, "n", kind, 1, NULL, 0, err, sizeof(err));
    a.h = declare(a.set, DEDUPD_METRIC_HISTOGRAM, "h", NULL, 0, NULL, 0, err, sizeof(err));
    for (int i = 0; i < TH_THREADS; i++)
        ck_assert_int_eq(pthread_create(&t[i], NULL, th_count, &a), 0);
    free(page(&a.set, route, 1)); /* a scrape while they count */
    for (int i = 0; i < TH_THREADS; i++) {
        ck_assert_int_eq(pthread_join(t[i], &rv), 0);
        ck_assert_ptr_null(rv);
    }
    text = page(&a.set, route, 1);
    for (int k = 0; k < 7; k++) {
        char series[64], v[32];
        snprintf(series, sizeof(series), "dedupd_handler_t_n_total{route=\"r\",kind=\"v%d\"}", k);
        ck_assert_ptr_nonnull(sample(text, series, v, sizeof(v)));
        total += strtod(v, NULL);
    }
    ck_assert_double_eq(total, TH_THREADS * TH_ROUNDS);
    snprintf(want, sizeof(want), "%d", TH_THREADS * TH_ROUNDS);
    ck_sample(text, "dedupd_handler_t_h_count{route=\"r\"}", want);
    free(text);
    dd_handler_metrics_destroy(a.set);
}
END_TEST

/* dedupd's own metrics never take a handler's prefix. */
START_TEST(test_prefix_is_the_handlers)
{
    for (int i = 0; i < DD_METRIC_CNT; i++)
        ck_assert_msg(strncmp(dd_metric_defs[i].name, "dedupd_handler_", 15) != 0, "%s",
                      dd_metric_defs[i].name);
}
END_TEST

/* th_metrics through dd_handler_load: its init_host finds every refusal
 * it asks for (else the load fails), and handle() counts through the
 * host. */
START_TEST(test_th_metrics)
{
    static const char *const route[] = {"default"};
    const char *dir = getenv("DD_TEST_HANDLER_DIR");
    const char *payload = "{\"kind\":\"gift\",\"amount\":12.5}";
    char path[4096], err[512] = "", *text = NULL;
    dd_handler_t *h = NULL;
    dedupd_result res;
    dedupd_msg msg = {.topic = "t", .payload = payload, .biz_key = "k"};
    MYSQL *db = mysql_init(NULL);
    size_t len = 0;
    FILE *f;
    int broken;

    ck_assert_ptr_nonnull(dir);
    snprintf(path, sizeof(path), "%s/th_metrics.so", dir);
    ck_assert_msg(dd_handler_load(&h, path, NULL, 0, err, sizeof(err)) == 0, "%s", err);
    msg.payload_len = strlen(payload);
    msg.json = cJSON_Parse(payload);
    ck_assert_int_eq(dd_handler_handle(h, db, NULL, &msg, &res, &broken), DEDUPD_OK);
    ck_assert_int_eq(dd_handler_handle(h, db, NULL, &msg, &res, &broken), DEDUPD_OK);
    f = open_memstream(&text, &len);
    dd_handler_metrics_render(f, &h, route, 1);
    fclose(f);
    ck_sample(text, "dedupd_handler_th_metrics_calls_total{route=\"default\"}", "2");
    ck_sample(text, "dedupd_handler_th_metrics_messages_total{route=\"default\",kind=\"gift\"}",
              "2");
    ck_sample(text, "dedupd_handler_th_metrics_amount_bucket{route=\"default\",le=\"10\"}", "0");
    ck_sample(text, "dedupd_handler_th_metrics_amount_bucket{route=\"default\",le=\"100\"}", "2");
    ck_assert_ptr_nonnull(strstr(text, "# HELP dedupd_handler_th_metrics_messages_total Messages "
                                       "handled, by the payload's kind.\n"));
    free(text);
    cJSON_Delete((cJSON *)msg.json);
    mysql_close(db);
    dd_handler_destroy(h);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("handler_metrics");
    TCase *tc = tcase_create("metrics");

    tcase_add_test(tc, test_declare_rules);
    tcase_add_test(tc, test_page);
    tcase_add_test(tc, test_check_sets);
    tcase_add_test(tc, test_bounds_and_refusals);
    tcase_add_test(tc, test_threads);
    tcase_add_test(tc, test_prefix_is_the_handlers);
    tcase_add_test(tc, test_th_metrics);
    suite_add_tcase(s, tc);
    return dd_check_run(s);
}
