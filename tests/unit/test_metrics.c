/*
 * Prometheus rendering: exact counters, cumulative histogram buckets,
 * escaped labels, unknown lag left out, every line well-formed, the
 * process_* figures (given, and read from this very process), and the
 * build info.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <librdkafka/rdkafka.h>
#include <mysql.h>

#include "dd_metrics.h"
#include "check_run.h"

/* The value of the sample whose name and labels are exactly `series`, as
 * text, or NULL. */
static const char *sample(const char *text, const char *series, char *out, size_t out_size)
{
    size_t n = strlen(series);

    for (const char *p = text; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL) {
        if (strncmp(p, series, n) == 0 && p[n] == ' ') {
            size_t len = strcspn(p + n + 1, "\n");
            snprintf(out, out_size, "%.*s", (int)len, p + n + 1);
            return out;
        }
    }
    return NULL;
}

static const char *const default_route[] = {"default"};

static char *render_routes(const dd_stats_t *s, const char *const *routes, int route_cnt,
                           const dd_lag_t *lags, size_t lag_cnt, const dd_proc_t *proc)
{
    char *text = NULL;
    size_t len = 0;

    ck_assert_int_eq(dd_metrics_render(s, routes, route_cnt, lags, lag_cnt, proc, &text, &len), 0);
    ck_assert_ptr_nonnull(text);
    ck_assert_uint_eq(len, strlen(text));
    ck_assert(len > 0 && text[len - 1] == '\n');
    return text;
}

/* The one route of a configuration without routes. */
static char *render_proc(const dd_stats_t *s, const dd_lag_t *lags, size_t lag_cnt,
                         const dd_proc_t *proc)
{
    return render_routes(s, default_route, 1, lags, lag_cnt, proc);
}

static char *render(const dd_stats_t *s, const dd_lag_t *lags, size_t lag_cnt)
{
    return render_proc(s, lags, lag_cnt, NULL);
}

#define ck_sample_eq(text, series, want)                                                           \
    do {                                                                                           \
        char v_[64];                                                                               \
        const char *got_ = sample((text), (series), v_, sizeof(v_));                               \
        ck_assert_msg(got_ != NULL, "no sample %s", (series));                                     \
        ck_assert_str_eq(got_, (want));                                                            \
    } while (0)

START_TEST(test_counters_exact)
{
    dd_stats_t s;
    char *text;

    memset(&s, 0, sizeof(s));
    s.route[0].messages = 18446744073709551615ULL; /* no rounding through a double */
    s.route[0].applied = 9007199254740993ULL;      /* 2^53 + 1 */
    s.route[0].duplicates = 3;
    s.route[0].conflicts = 4;
    s.route[0].retries = 5;
    s.batches = 6;
    s.route[0].batched = 12;
    s.route[0].batch_declined = 13;
    s.claim_races = 14;
    s.fetch_wait_us = 2500400;
    s.db_errors_retriable = 7;
    s.db_errors_fatal = 1;
    s.route[0].dead_letters[DD_REASON_BAD_JSON] = 11;
    s.route[0].dead_letters[DD_REASON_CONFLICT] = 4;
    s.route[0].dead_letters[DD_REASON_RETRIES_EXHAUSTED] = 2;
    s.inflight = 42;
    s.assigned = 3;
    s.running = 1;
    text = render(&s, NULL, 0);
    ck_sample_eq(text, "dedupd_messages_total{route=\"default\"}", "18446744073709551615");
    ck_sample_eq(text, "dedupd_applied_total{route=\"default\"}", "9007199254740993");
    ck_sample_eq(text, "dedupd_duplicates_total{route=\"default\"}", "3");
    ck_sample_eq(text, "dedupd_conflicts_total{route=\"default\"}", "4");
    ck_sample_eq(text, "dedupd_retries_total{route=\"default\"}", "5");
    ck_sample_eq(text, "dedupd_batches_total", "6");
    ck_sample_eq(text, "dedupd_batched_total{route=\"default\"}", "12");
    ck_sample_eq(text, "dedupd_batch_declined_total{route=\"default\"}", "13");
    ck_sample_eq(text, "dedupd_claim_races_total", "14");
    ck_sample_eq(text, "dedupd_fetch_wait_seconds_total", "2.500");
    ck_sample_eq(text, "dedupd_db_errors_total{class=\"retriable\"}", "7");
    ck_sample_eq(text, "dedupd_db_errors_total{class=\"fatal\"}", "1");
    ck_sample_eq(text, "dedupd_dead_letters_total{route=\"default\",reason=\"bad_json\"}", "11");
    ck_sample_eq(text, "dedupd_dead_letters_total{route=\"default\",reason=\"conflict\"}", "4");
    ck_sample_eq(text, "dedupd_dead_letters_total{route=\"default\",reason=\"retries_exhausted\"}",
                 "2");
    ck_sample_eq(text, "dedupd_dead_letters_total{route=\"default\",reason=\"key_missing\"}", "0");
    ck_sample_eq(text, "dedupd_inflight_messages", "42");
    ck_sample_eq(text, "dedupd_assigned_partitions", "3");
    ck_sample_eq(text, "dedupd_running", "1");
    /* Every reason has a series, even at zero, so rate() works from the start
     * (the shard reasons with several shards only, which this is not). */
    ck_assert_ptr_null(strstr(text, "shard=\""));
    ck_assert_ptr_null(strstr(text, "dedupd_shard_"));
    for (int i = 0; i < DD_REASON_CNT; i++) {
        char series[128], v[64];
        if (!dd_stats_reason_listed((dd_reason_t)i, s.shard_cnt)) continue;
        snprintf(series, sizeof(series),
                 "dedupd_dead_letters_total{route=\"default\",reason=\"%s\"}",
                 dd_reason2str((dd_reason_t)i));
        ck_assert_ptr_nonnull(sample(text, series, v, sizeof(v)));
    }
    ck_assert_ptr_nonnull(strstr(text, "# TYPE dedupd_messages_total counter\n"));
    ck_assert_ptr_nonnull(strstr(text, "# TYPE dedupd_inflight_messages gauge\n"));
    free(text);
}
END_TEST

/* External mode: its counters per route always, the stuck-row gauges of a
 * route only once a compensation scan counted its table
 * (processing_stuck >= 0): a route in local mode has none. */
START_TEST(test_external_metrics)
{
    static const char *const routes[] = {"payments", "notify"};
    dd_stats_t s;
    char *text, v[64];

    memset(&s, 0, sizeof(s));
    s.route[1].ext_waits = 5;
    s.route[1].ext_takeovers = 2;
    s.route[1].ext_reconciled[0] = 1;
    s.route[1].ext_reconciled[2] = 3;
    s.route[1].ext_stale = 1;
    s.route[1].dead_letters[DD_REASON_UNRESOLVED] = 4;
    for (int r = 0; r < DD_STATS_ROUTE_MAX; r++)
        s.processing_stuck[r] = -1;
    text = render_routes(&s, routes, 2, NULL, 0, NULL);
    ck_sample_eq(text, "dedupd_external_waits_total{route=\"notify\"}", "5");
    ck_sample_eq(text, "dedupd_external_waits_total{route=\"payments\"}", "0");
    ck_sample_eq(text, "dedupd_external_takeovers_total{route=\"notify\"}", "2");
    ck_sample_eq(text, "dedupd_external_reconcile_total{route=\"notify\",answer=\"done\"}", "1");
    ck_sample_eq(text, "dedupd_external_reconcile_total{route=\"notify\",answer=\"not_done\"}",
                 "0");
    ck_sample_eq(text, "dedupd_external_reconcile_total{route=\"notify\",answer=\"unknown\"}", "3");
    ck_sample_eq(text, "dedupd_external_lost_claims_total{route=\"notify\"}", "1");
    ck_sample_eq(text, "dedupd_dead_letters_total{route=\"notify\",reason=\"unresolved\"}", "4");
    ck_assert_ptr_null(sample(text, "dedupd_external_waits_total", v, sizeof(v)));
    ck_assert_ptr_null(strstr(text, "dedupd_processing_stuck"));
    ck_assert_ptr_null(strstr(text, "dedupd_processing_oldest_seconds"));
    free(text);

    s.processing_stuck[1] = 7;
    s.processing_oldest_s[1] = 12.5;
    text = render_routes(&s, routes, 2, NULL, 0, NULL);
    ck_sample_eq(text, "dedupd_processing_stuck{route=\"notify\"}", "7");
    ck_sample_eq(text, "dedupd_processing_oldest_seconds{route=\"notify\"}", "12.500");
    ck_assert_ptr_null(sample(text, "dedupd_processing_stuck{route=\"payments\"}", v, sizeof(v)));
    ck_assert_ptr_nonnull(strstr(text, "# TYPE dedupd_processing_stuck gauge\n"));
    ck_assert_ptr_nonnull(strstr(text, "# TYPE dedupd_processing_oldest_seconds gauge\n"));
    free(text);
}
END_TEST

/* Each route its own series of the counters a message counts in, and no
 * series without the label: sum() over the routes is the total. Route
 * names are label values, escaped. */
START_TEST(test_route_labels)
{
    static const char *const routes[] = {"payments", "co\"up\\ons"};
    dd_stats_t s;
    char *text, v[64];

    memset(&s, 0, sizeof(s));
    s.route[0].messages = 7;
    s.route[1].messages = 5;
    s.route[0].applied = 6;
    s.route[1].applied = 1;
    s.route[1].dead_letters[DD_REASON_REJECTED] = 2;
    s.route[1].retries = 9;
    s.batches = 3;
    text = render_routes(&s, routes, 2, NULL, 0, NULL);
    ck_sample_eq(text, "dedupd_messages_total{route=\"payments\"}", "7");
    ck_sample_eq(text, "dedupd_messages_total{route=\"co\\\"up\\\\ons\"}", "5");
    ck_sample_eq(text, "dedupd_applied_total{route=\"payments\"}", "6");
    ck_sample_eq(text, "dedupd_applied_total{route=\"co\\\"up\\\\ons\"}", "1");
    ck_sample_eq(text, "dedupd_retries_total{route=\"co\\\"up\\\\ons\"}", "9");
    ck_sample_eq(text, "dedupd_dead_letters_total{route=\"co\\\"up\\\\ons\",reason=\"rejected\"}",
                 "2");
    ck_sample_eq(text, "dedupd_dead_letters_total{route=\"payments\",reason=\"rejected\"}", "0");
    ck_sample_eq(text, "dedupd_batches_total", "3"); /* a transaction is no route's */
    ck_assert_ptr_null(sample(text, "dedupd_messages_total", v, sizeof(v)));
    ck_assert_ptr_null(sample(text, "dedupd_applied_total", v, sizeof(v)));
    ck_assert_ptr_null(strstr(text, "dedupd_dead_letters_total{reason="));
    free(text);
}
END_TEST

/* With several shards: the shard gauges and counters, database errors by
 * shard, the shard reasons. */
START_TEST(test_shard_metrics)
{
    static dd_stats_t s;
    char *text;

    s.shard_cnt = 3;
    s.shard_up[0] = 1;
    s.shard_up[1] = 0;
    s.shard_up[2] = 1;
    s.shard[0].applied = 10;
    s.shard[2].applied = 7;
    s.shard[1].db_errors_retriable = 4;
    s.shard[2].db_errors_fatal = 1;
    s.route[0].dead_letters[DD_REASON_SHARD_UNMAPPED] = 2;
    s.route[0].dead_letters[DD_REASON_WRONG_SHARD] = 5;
    s.shard[2].check_skipped = 3;
    text = render(&s, NULL, 0);
    ck_sample_eq(text, "dedupd_shard_up{shard=\"0\"}", "1");
    ck_sample_eq(text, "dedupd_shard_up{shard=\"1\"}", "0");
    ck_sample_eq(text, "dedupd_shard_applied_total{shard=\"0\"}", "10");
    ck_sample_eq(text, "dedupd_shard_applied_total{shard=\"1\"}", "0");
    ck_sample_eq(text, "dedupd_shard_applied_total{shard=\"2\"}", "7");
    ck_sample_eq(text, "dedupd_db_errors_total{class=\"retriable\",shard=\"1\"}", "4");
    ck_sample_eq(text, "dedupd_db_errors_total{class=\"fatal\",shard=\"2\"}", "1");
    ck_sample_eq(text, "dedupd_db_errors_total{class=\"fatal\",shard=\"0\"}", "0");
    ck_sample_eq(text, "dedupd_dead_letters_total{route=\"default\",reason=\"shard_unmapped\"}",
                 "2");
    ck_sample_eq(text, "dedupd_dead_letters_total{route=\"default\",reason=\"shard_key_invalid\"}",
                 "0");
    ck_sample_eq(text, "dedupd_dead_letters_total{route=\"default\",reason=\"wrong_shard\"}", "5");
    ck_sample_eq(text, "dedupd_shard_check_skipped_total{shard=\"2\"}", "3");
    ck_sample_eq(text, "dedupd_shard_check_skipped_total{shard=\"0\"}", "0");
    ck_assert_ptr_null(strstr(text, "dedupd_shard_up{shard=\"3\"}"));
    free(text);
}
END_TEST

START_TEST(test_histogram_cumulative)
{
    dd_stats_t s;
    char *text, series[64];

    memset(&s, 0, sizeof(s));
    s.batch_buckets[0] = 2;                    /* <= 0.001 */
    s.batch_buckets[3] = 5;                    /* <= 0.01 */
    s.batch_buckets[DD_BATCH_BUCKETS - 1] = 1; /* > 2.5 */
    s.batch_seconds_sum = 4.25;
    text = render(&s, NULL, 0);
    ck_assert_ptr_nonnull(strstr(text, "# TYPE dedupd_batch_seconds histogram\n"));
    ck_sample_eq(text, "dedupd_batch_seconds_bucket{le=\"0.001\"}", "2");
    ck_sample_eq(text, "dedupd_batch_seconds_bucket{le=\"0.005\"}", "2");
    ck_sample_eq(text, "dedupd_batch_seconds_bucket{le=\"0.01\"}", "7");
    ck_sample_eq(text, "dedupd_batch_seconds_bucket{le=\"2.5\"}", "7");
    ck_sample_eq(text, "dedupd_batch_seconds_bucket{le=\"+Inf\"}", "8");
    ck_sample_eq(text, "dedupd_batch_seconds_count", "8");
    ck_sample_eq(text, "dedupd_batch_seconds_sum", "4.250000");
    /* one bucket line per bound, plus +Inf */
    for (int i = 0; i < DD_BATCH_BUCKETS - 1; i++) {
        char v[64];
        snprintf(series, sizeof(series), "dedupd_batch_seconds_bucket{le=\"%g\"}",
                 dd_stats_batch_bounds[i]);
        ck_assert_ptr_nonnull(sample(text, series, v, sizeof(v)));
    }
    free(text);
}
END_TEST

/* The latency histograms: observations land in the bucket whose bound is
 * the first at or above them (a negative one, a clock behind the
 * producer's, in the first), cumulative per route, each route's own. */
START_TEST(test_route_histograms)
{
    static const char *const routes[] = {"payments", "coupons"};
    static const double obs[] = {-3, 0.0005, 0.001, 0.0011, 0.7, 59.9, 90, 600, 601, 1e9};
    dd_stats_t s;
    char *text, series[128], v[64];

    memset(&s, 0, sizeof(s));
    for (size_t i = 0; i < sizeof(obs) / sizeof(obs[0]); i++)
        dd_stats_msg_observe(&s.route[0].end_to_end, obs[i]);
    dd_stats_msg_observe(&s.route[1].poll_to_commit, 0.02);
    text = render_routes(&s, routes, 2, NULL, 0, NULL);
    ck_assert_ptr_nonnull(strstr(text, "# TYPE dedupd_end_to_end_seconds histogram\n"));
    ck_assert_ptr_nonnull(strstr(text, "# TYPE dedupd_poll_to_commit_seconds histogram\n"));
    ck_sample_eq(text, "dedupd_end_to_end_seconds_bucket{route=\"payments\",le=\"0.001\"}", "3");
    ck_sample_eq(text, "dedupd_end_to_end_seconds_bucket{route=\"payments\",le=\"0.0025\"}", "4");
    ck_sample_eq(text, "dedupd_end_to_end_seconds_bucket{route=\"payments\",le=\"0.5\"}", "4");
    ck_sample_eq(text, "dedupd_end_to_end_seconds_bucket{route=\"payments\",le=\"1\"}", "5");
    ck_sample_eq(text, "dedupd_end_to_end_seconds_bucket{route=\"payments\",le=\"60\"}", "6");
    ck_sample_eq(text, "dedupd_end_to_end_seconds_bucket{route=\"payments\",le=\"120\"}", "7");
    ck_sample_eq(text, "dedupd_end_to_end_seconds_bucket{route=\"payments\",le=\"600\"}", "8");
    ck_sample_eq(text, "dedupd_end_to_end_seconds_bucket{route=\"payments\",le=\"+Inf\"}", "10");
    ck_sample_eq(text, "dedupd_end_to_end_seconds_count{route=\"payments\"}", "10");
    ck_sample_eq(text, "dedupd_end_to_end_seconds_bucket{route=\"coupons\",le=\"+Inf\"}", "0");
    ck_sample_eq(text, "dedupd_poll_to_commit_seconds_bucket{route=\"coupons\",le=\"0.01\"}", "0");
    ck_sample_eq(text, "dedupd_poll_to_commit_seconds_bucket{route=\"coupons\",le=\"0.025\"}", "1");
    ck_sample_eq(text, "dedupd_poll_to_commit_seconds_sum{route=\"coupons\"}", "0.020000");
    ck_sample_eq(text, "dedupd_poll_to_commit_seconds_count{route=\"payments\"}", "0");
    /* a bucket line per bound and route, milliseconds to minutes */
    ck_assert_double_eq(dd_stats_msg_bounds[0], 0.001);
    ck_assert(dd_stats_msg_bounds[DD_MSG_BUCKETS - 2] >= 600);
    for (int i = 0; i < DD_MSG_BUCKETS - 1; i++) {
        ck_assert(i == 0 || dd_stats_msg_bounds[i] > dd_stats_msg_bounds[i - 1]);
        snprintf(series, sizeof(series),
                 "dedupd_poll_to_commit_seconds_bucket{route=\"coupons\",le=\"%g\"}",
                 dd_stats_msg_bounds[i]);
        ck_assert_ptr_nonnull(sample(text, series, v, sizeof(v)));
    }
    free(text);
}
END_TEST

START_TEST(test_lag_labels)
{
    dd_stats_t s;
    dd_lag_t lags[3];
    char *text, v[64];

    memset(&s, 0, sizeof(s));
    memset(lags, 0, sizeof(lags));
    snprintf(lags[0].topic, sizeof(lags[0].topic), "payments");
    lags[0].partition = 0;
    lags[0].lag = 17;
    lags[0].group = "tg"; /* the group first, as kafka_exporter's consumergroup */
    snprintf(lags[1].topic, sizeof(lags[1].topic), "we\"ird\\t\nopic");
    lags[1].partition = 12;
    lags[1].lag = 0;
    snprintf(lags[2].topic, sizeof(lags[2].topic), "payments");
    lags[2].partition = 1;
    lags[2].lag = -1; /* unknown: left out */
    text = render(&s, lags, 3);
    ck_sample_eq(text, "dedupd_consumer_lag{group=\"tg\",topic=\"payments\",partition=\"0\"}",
                 "17");
    ck_sample_eq(text, "dedupd_consumer_lag{topic=\"we\\\"ird\\\\t\\nopic\",partition=\"12\"}",
                 "0");
    ck_assert_ptr_null(
        sample(text, "dedupd_consumer_lag{topic=\"payments\",partition=\"1\"}", v, sizeof(v)));
    free(text);
}
END_TEST

/* Every line is a comment (# HELP / # TYPE) or "name[{labels}] value". */
/* The liveness rule /healthz and the systemd watchdog share. */
START_TEST(test_health)
{
    dd_stats_t s;
    char why[200];

    memset(&s, 0, sizeof(s));
    s.running = 1;
    /* before the loop's first turn: measured from the start */
    ck_assert_int_eq(dd_stats_health(&s, 10000, 9000, 9000, 60000, why, sizeof(why)), DD_HEALTH_OK);
    ck_assert_int_eq(dd_stats_health(&s, 50000, 9000, 9000, 60000, why, sizeof(why)),
                     DD_HEALTH_STUCK);
    ck_assert_ptr_nonnull(strstr(why, "has not turned for 41000 ms"));
    s.last_loop_ms = 100000;
    s.inflight = 3;
    s.last_finish_ms = 50000;
    /* in flight, none finished for longer than stuck_after since idle */
    ck_assert_int_eq(dd_stats_health(&s, 100010, 0, 30000, 60000, why, sizeof(why)), DD_HEALTH_OK);
    ck_assert_int_eq(dd_stats_health(&s, 100010, 0, 30000, 40000, why, sizeof(why)),
                     DD_HEALTH_STUCK);
    ck_assert_str_eq(why, "stuck: 3 message(s) in flight and none finished for 50010 ms");
    /* seen idle recently: the work started then */
    ck_assert_int_eq(dd_stats_health(&s, 100010, 0, 99000, 40000, why, sizeof(why)), DD_HEALTH_OK);
    s.running = 0;
    ck_assert_int_eq(dd_stats_health(&s, 100010, 0, 99000, 40000, why, sizeof(why)),
                     DD_HEALTH_STOPPING);
}
END_TEST

START_TEST(test_lines_well_formed)
{
    dd_stats_t s;
    dd_lag_t lag = {.topic = "t", .partition = 0, .lag = 5};
    char *text, *line, *save = NULL;
    int samples = 0;

    memset(&s, 0, sizeof(s));
    text = render(&s, &lag, 1);
    for (line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        const char *sp;
        char *end;
        if (strncmp(line, "# HELP dedupd_", 14) == 0 || strncmp(line, "# TYPE dedupd_", 14) == 0)
            continue;
        ck_assert_msg(strncmp(line, "dedupd_", 7) == 0, "bad line: %s", line);
        sp = strrchr(line, ' ');
        ck_assert_msg(sp != NULL, "no value: %s", line);
        strtod(sp + 1, &end);
        ck_assert_msg(*end == '\0' && end != sp + 1, "bad value: %s", line);
        samples++;
    }
    ck_assert_int_ge(samples, 30);
    free(text);
}
END_TEST

/* The process_* metrics: the given figures, typed; unknown ones left out;
 * none at all without a dd_proc_t. */
START_TEST(test_process_metrics)
{
    dd_stats_t s;
    dd_proc_t proc = {.cpu_seconds = 12.5,
                      .start_time_seconds = 1795000000.25,
                      .resident_bytes = 150994944,
                      .virtual_bytes = 1073741824LL * 3,
                      .open_fds = 17,
                      .max_fds = -1};
    char v[64], *text;

    memset(&s, 0, sizeof(s));
    text = render_proc(&s, NULL, 0, &proc);
    ck_sample_eq(text, "process_cpu_seconds_total", "12.500");
    ck_sample_eq(text, "process_start_time_seconds", "1795000000.25");
    ck_sample_eq(text, "process_resident_memory_bytes", "150994944");
    ck_sample_eq(text, "process_virtual_memory_bytes", "3221225472");
    ck_sample_eq(text, "process_open_fds", "17");
    ck_assert_ptr_null(sample(text, "process_max_fds", v, sizeof(v)));
    ck_assert_ptr_nonnull(strstr(text, "# TYPE process_cpu_seconds_total counter\n"));
    ck_assert_ptr_nonnull(strstr(text, "# TYPE process_open_fds gauge\n"));
    free(text);

    text = render(&s, NULL, 0);
    ck_assert_ptr_null(strstr(text, "process_"));
    free(text);
}
END_TEST

/* This process's figures, read for real: each present and plausible. */
/* dedupd_build_info: 1, with the versions as labels. */
START_TEST(test_build_info)
{
    dd_stats_t s;
    char series[256], *text;

    memset(&s, 0, sizeof(s));
    text = render(&s, NULL, 0);
    snprintf(series, sizeof(series),
             "dedupd_build_info{version=\"%s\",librdkafka=\"%s\",mysql_client=\"%s\"}",
             DEDUPD_VERSION, rd_kafka_version_str(), mysql_get_client_info());
    ck_sample_eq(text, series, "1");
    ck_assert_ptr_nonnull(strstr(text, "# TYPE dedupd_build_info gauge\n"));
    free(text);
}
END_TEST

START_TEST(test_process_read)
{
    dd_proc_t proc;
    double now = (double)time(NULL);
    volatile double spin = 0;

    for (int i = 0; i < 2000000; i++) /* some CPU time to see */
        spin += i;
    ck_assert(spin > 0);
    dd_metrics_proc_read(&proc);
    ck_assert_msg(proc.cpu_seconds > 0 && proc.cpu_seconds < 3600, "cpu %f", proc.cpu_seconds);
    ck_assert_msg(proc.start_time_seconds > now - 600 && proc.start_time_seconds <= now + 1,
                  "start %f, now %f", proc.start_time_seconds, now);
    ck_assert_int_gt(proc.resident_bytes, 1 << 20);
    ck_assert_int_ge(proc.virtual_bytes, proc.resident_bytes);
    ck_assert_int_ge(proc.open_fds, 3); /* stdin, stdout, stderr */
    ck_assert(proc.max_fds < 0 || proc.max_fds >= proc.open_fds);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("metrics");
    TCase *tc = tcase_create("render");

    tcase_add_test(tc, test_counters_exact);
    tcase_add_test(tc, test_external_metrics);
    tcase_add_test(tc, test_route_labels);
    tcase_add_test(tc, test_shard_metrics);
    tcase_add_test(tc, test_histogram_cumulative);
    tcase_add_test(tc, test_route_histograms);
    tcase_add_test(tc, test_lag_labels);
    tcase_add_test(tc, test_lines_well_formed);
    tcase_add_test(tc, test_health);
    tcase_add_test(tc, test_process_metrics);
    tcase_add_test(tc, test_process_read);
    tcase_add_test(tc, test_build_info);
    suite_add_tcase(s, tc);
    return dd_check_run(s);
}
