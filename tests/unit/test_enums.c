/*
 * The tables of the dead-letter reasons and of the metrics: every entry
 * named and explained, names unique; /metrics renders exactly the table's
 * metrics, with its HELP, TYPE and label names, and a dead-letter series
 * per reason the table lists; and docs/OPERATIONS.md and docs/SIDECAR.md
 * carry the references generated from the tables (scripts/regen-docs).
 */
#include <check.h>
#include <ctype.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dd_enums_doc.h"
#include "dd_metrics.h"
#include "dd_metrics_def.h"
#include "check_run.h"

static const char *const routes[] = {"default"};

/* A name of lower-case letters, digits and underscores. */
static int plain_name(const char *s)
{
    if (!*s) return 0;
    for (; *s; s++)
        if (!islower((unsigned char)*s) && !isdigit((unsigned char)*s) && *s != '_') return 0;
    return 1;
}

START_TEST(test_reasons_table)
{
    for (int i = 0; i < DD_REASON_CNT; i++) {
        const char *name = dd_reason2str((dd_reason_t)i), *help = dd_reason_help((dd_reason_t)i);

        ck_assert_msg(plain_name(name), "reason %d: name '%s'", i, name);
        ck_assert_msg(help && strlen(help) > 10 && help[strlen(help) - 1] == '.',
                      "reason %s: no help sentence", name);
        for (int j = 0; j < i; j++)
            ck_assert_msg(strcmp(name, dd_reason2str((dd_reason_t)j)) != 0, "reason %s named twice",
                          name);
    }
    ck_assert_str_eq(dd_reason2str(DD_REASON_CNT), "unknown");
    ck_assert_ptr_null(dd_reason_help(DD_REASON_CNT));
}
END_TEST

/* The reasons listed with one shard are those without DD_REASON_F_SHARDS,
 * wherever in the table they are; with several, all of them. */
START_TEST(test_reasons_listed)
{
    int single = 0;

    for (int i = 0; i < DD_REASON_CNT; i++) {
        int sharded = (dd_reason_flags((dd_reason_t)i) & DD_REASON_F_SHARDS) != 0;

        single += !sharded;
        ck_assert_int_eq(dd_stats_reason_listed((dd_reason_t)i, 1), !sharded);
        ck_assert_int_eq(dd_stats_reason_listed((dd_reason_t)i, 2), 1);
    }
    ck_assert_int_eq(dd_stats_reason_cnt(1), single);
    ck_assert_int_eq(dd_stats_reason_cnt(2), DD_REASON_CNT);
    ck_assert_int_lt(single, DD_REASON_CNT);
}
END_TEST

START_TEST(test_metrics_table)
{
    for (int i = 0; i < DD_METRIC_CNT; i++) {
        const dd_metric_def_t *d = &dd_metric_defs[i];
        size_t n = strlen(d->help);

        ck_assert_msg(plain_name(d->name), "metric %d: name '%s'", i, d->name);
        ck_assert_msg(!strncmp(d->name, "dedupd_", 7) || !strncmp(d->name, "process_", 8),
                      "metric %s: neither dedupd_ nor process_", d->name);
        ck_assert_msg(!strncmp(d->name, "process_", 8) == !!(d->flags & DD_METRIC_F_PROCESS),
                      "metric %s: process_ names and DD_METRIC_F_PROCESS go together", d->name);
        ck_assert_msg(n > 10 && d->help[n - 1] == '.', "metric %s: no HELP sentence", d->name);
        ck_assert_msg(strlen(d->doc) > 10 && !strchr(d->doc, '\n') && !strchr(d->doc, '|'),
                      "metric %s: no reference sentence, or one that breaks the table", d->name);
        for (int j = 0; j < i; j++)
            ck_assert_msg(strcmp(d->name, dd_metric_defs[j].name) != 0, "metric %s twice", d->name);
    }
}
END_TEST

/* A snapshot with nothing but the always-present metrics (all = 0), or
 * with every one of them (all = 1): several shards, the relay, a scan
 * that counted, the process's figures. */
static char *render_snapshot(int all)
{
    static dd_stats_t s;
    dd_proc_t proc = {1.5, 1e9, 1 << 20, 1 << 22, 10, 1024};
    dd_lag_t lag = {"g", "payments", 0, 3};
    char *text = NULL;
    size_t len = 0;

    memset(&s, 0, sizeof(s));
    s.shard_cnt = all ? 2 : 1;
    s.processing_stuck[0] = all ? 0 : -1;
    s.outbox.on = all;
    ck_assert_int_eq(dd_metrics_render(&s, routes, 1, &lag, 1, all ? &proc : NULL, &text, &len), 0);
    return text;
}

/* The label names of a sample line, each followed by a comma. */
static void label_names(const char *line, char *out, size_t size)
{
    const char *p = strchr(line, '{'), *end = strchr(line, ' ');
    size_t n = 0;

    out[0] = '\0';
    while (p && p < end && *p != '}') {
        const char *eq = strchr(p + 1, '=');

        n += (size_t)snprintf(out + n, size - n, "%.*s,", (int)(eq - p - 1), p + 1);
        p = strchr(eq + 2, '"'); /* the closing quote (no quote in these values) */
        p = p ? p + 1 : NULL;
    }
}

/* Every sample of metric d carries only the table's labels (and le of a
 * histogram, shard of the database errors with several shards). */
static void check_labels(const char *text, const dd_metric_def_t *d)
{
    char want[256], got[256], lab[64];
    size_t n = strlen(d->name);

    snprintf(want, sizeof(want), ",%s,le,%s", d->labels,
             d == &dd_metric_defs[DD_METRIC_DB_ERRORS] ? "shard," : "");
    for (const char *p = text; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL) {
        if (*p == '#' || strncmp(p, d->name, n) != 0 || (p[n] != '{' && p[n] != ' ' && p[n] != '_'))
            continue;
        label_names(p, got, sizeof(got));
        for (char *l = strtok(got, ","); l; l = strtok(NULL, ",")) {
            snprintf(lab, sizeof(lab), ",%s,", l);
            ck_assert_msg(strstr(want, lab), "%s: label %s not in the table", d->name, l);
        }
    }
}

static void check_rendered(int all)
{
    char *text = render_snapshot(all), head[1024];
    const char *at = text;
    int types = 0, expected = 0;

    for (int i = 0; i < DD_METRIC_CNT; i++) {
        const dd_metric_def_t *d = &dd_metric_defs[i];
        int expect = all || !(d->flags & (DD_METRIC_F_SHARDS | DD_METRIC_F_SCAN |
                                          DD_METRIC_F_RELAY | DD_METRIC_F_PROCESS));
        const char *found;

        snprintf(head, sizeof(head), "# HELP %s %s\n# TYPE %s %s\n", d->name, d->help, d->name,
                 dd_metric_type2str(d->type));
        found = strstr(text, head);
        expected += expect;
        ck_assert_msg(!found == !expect, "%s: %s", d->name, expect ? "not rendered" : "rendered");
        if (!found) continue;
        ck_assert_msg(found >= at, "%s: not in the table's order", d->name);
        at = found;
        check_labels(text, d);
    }
    for (const char *p = strstr(text, "# TYPE "); p; p = strstr(p + 1, "# TYPE "))
        types++;
    ck_assert_int_eq(types, expected); /* nothing outside the table */
    free(text);
}

/* The metrics rendered are the table's rows, in its order, those with a
 * presence flag only when it holds; nothing outside the table. */
START_TEST(test_metrics_rendered)
{
    check_rendered(0);
    check_rendered(1);
}
END_TEST

/* dedupd_dead_letters_total: a series per reason the table lists. */
START_TEST(test_reason_label_values)
{
    for (int all = 0; all <= 1; all++) {
        char *text = render_snapshot(all), series[160];
        int n = 0;

        for (const char *p = text; (p = strstr(p, "\ndedupd_dead_letters_total{")); p++)
            n++;
        ck_assert_int_eq(n, dd_stats_reason_cnt(all ? 2 : 1));
        for (int i = 0; i < DD_REASON_CNT; i++) {
            snprintf(series, sizeof(series),
                     "\ndedupd_dead_letters_total{route=\"default\",reason=\"%s\"} ",
                     dd_reason2str((dd_reason_t)i));
            ck_assert_msg(!strstr(text, series) ==
                              !dd_stats_reason_listed((dd_reason_t)i, all ? 2 : 1),
                          "reason %s", dd_reason2str((dd_reason_t)i));
        }
        free(text);
    }
}
END_TEST

static char *read_doc(const char *name)
{
    char path[PATH_MAX], *text;
    const char *dir = getenv("DD_TEST_SRC_DIR");
    FILE *fp;
    long len;

    ck_assert_msg(dir != NULL, "DD_TEST_SRC_DIR is not set");
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    ck_assert_msg((fp = fopen(path, "r")) != NULL, "cannot open %s", path);
    fseek(fp, 0, SEEK_END);
    len = ftell(fp);
    fseek(fp, 0, SEEK_SET);
    text = calloc(1, (size_t)len + 1);
    ck_assert_int_eq(fread(text, 1, (size_t)len, fp), (size_t)len);
    fclose(fp);
    return text;
}

/* The document carries print()'s output between its GENERATED markers. */
static void check_doc(const char *name, const char *marker, void (*print)(FILE *))
{
    char *doc = read_doc(name), *ref = NULL, *begin, *end;
    size_t len = 0;
    FILE *mem = open_memstream(&ref, &len);

    ck_assert_ptr_nonnull(mem);
    print(mem);
    fclose(mem);
    begin = strstr(doc, marker);
    ck_assert_msg(begin, "%s has no marker '%s'", name, marker);
    begin = strchr(begin, '\n') + 1;
    end = strstr(begin, "<!-- END GENERATED -->");
    ck_assert_msg(end && (size_t)(end - begin) == len && !strncmp(begin, ref, len),
                  "%s is out of date: run scripts/regen-docs", name);
    free(ref);
    free(doc);
}

START_TEST(test_docs_generated)
{
    check_doc("docs/OPERATIONS.md", "<!-- BEGIN GENERATED: dedupd --help-reasons=markdown",
              dd_enums_print_reasons_md);
    check_doc("docs/SIDECAR.md", "<!-- BEGIN GENERATED: dedupd --help-metrics=markdown",
              dd_enums_print_metrics_md);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("enums");
    TCase *tc = tcase_create("tables");

    tcase_add_test(tc, test_reasons_table);
    tcase_add_test(tc, test_reasons_listed);
    tcase_add_test(tc, test_metrics_table);
    tcase_add_test(tc, test_metrics_rendered);
    tcase_add_test(tc, test_reason_label_values);
    tcase_add_test(tc, test_docs_generated);
    suite_add_tcase(s, tc);
    return dd_check_run(s);
}
