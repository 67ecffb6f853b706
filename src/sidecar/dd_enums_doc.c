/*
 * `dedupd --help-reasons` and `dedupd --help-metrics` (see dd_enums_doc.h).
 * The markdown forms are the tables docs/OPERATIONS.md and docs/SIDECAR.md
 * carry between their GENERATED markers; a unit test compares them.
 */
#include "dd_enums_doc.h"

#include <string.h>

#include "dd_metrics_def.h"
#include "dd_stats.h"

/* When a reason can occur, from its flags ("" for any route). */
static const char *dd_enums_reason_when(unsigned flags)
{
    if (flags & DD_REASON_F_SHARDS) return "with several database shards";
    if (flags & DD_REASON_F_AVRO) return "routes in avro format";
    if (flags & DD_REASON_F_EXTERNAL) return "external mode";
    return "";
}

/* When a metric is present, from its flags ("" for always). */
static const char *dd_enums_metric_when(unsigned flags)
{
    if (flags & DD_METRIC_F_SHARDS) return "with several database shards";
    if (flags & DD_METRIC_F_SCAN) return "per route the compensation scan counted";
    if (flags & DD_METRIC_F_RELAY) return "with the outbox relay in this process";
    if (flags & DD_METRIC_F_PROCESS) return "where the system tells it";
    return "";
}

void dd_enums_print_reasons(FILE *out)
{
    fputs("Dead-letter reasons (the dedupd.reason header, the reason label of\n"
          "dedupd_dead_letters_total, the summary's dlq_<reason> fields):\n\n",
          out);
    for (int i = 0; i < DD_REASON_CNT; i++) {
        const char *when = dd_enums_reason_when(dd_reason_flags((dd_reason_t)i));

        fprintf(out, "%s%s%s%s\n    %s\n", dd_reason2str((dd_reason_t)i), *when ? " (" : "", when,
                *when ? ")" : "", dd_reason_help((dd_reason_t)i));
    }
}

void dd_enums_print_reasons_md(FILE *out)
{
    fputs("| reason | when | meaning |\n|---|---|---|\n", out);
    for (int i = 0; i < DD_REASON_CNT; i++) {
        const char *when = dd_enums_reason_when(dd_reason_flags((dd_reason_t)i));

        fprintf(out, "| `%s` | %s | %s |\n", dd_reason2str((dd_reason_t)i),
                *when ? when : "any route", dd_reason_help((dd_reason_t)i));
    }
}

/* name{labels}, or name without labels. */
static void dd_enums_metric_name(FILE *out, const dd_metric_def_t *d)
{
    fputs(d->name, out);
    if (*d->labels) fprintf(out, "{%s}", d->labels);
}

void dd_enums_print_metrics(FILE *out)
{
    fputs("Metrics of /metrics (Prometheus text format), NAME{LABELS} TYPE:\n\n", out);
    for (int i = 0; i < DD_METRIC_CNT; i++) {
        const dd_metric_def_t *d = &dd_metric_defs[i];
        const char *when = dd_enums_metric_when(d->flags);

        dd_enums_metric_name(out, d);
        fprintf(out, " %s%s%s%s\n    %s\n", dd_metric_type2str(d->type), *when ? " (" : "", when,
                *when ? ")" : "", d->help);
    }
}

void dd_enums_print_metrics_md(FILE *out)
{
    fputs("| metric | type | meaning |\n|---|---|---|\n", out);
    for (int i = 0; i < DD_METRIC_CNT; i++) {
        const dd_metric_def_t *d = &dd_metric_defs[i];

        fputs("| `", out);
        dd_enums_metric_name(out, d);
        fprintf(out, "` | %s | %s |\n", dd_metric_type2str(d->type), d->doc);
    }
}

int dd_enums_doc_option(const char *arg, FILE *out)
{
    static const struct {
        const char *arg;
        void (*print)(FILE *out);
    } opts[] = {
        {"--help-reasons", dd_enums_print_reasons},
        {"--help-reasons=markdown", dd_enums_print_reasons_md},
        {"--help-metrics", dd_enums_print_metrics},
        {"--help-metrics=markdown", dd_enums_print_metrics_md},
    };

    for (size_t i = 0; i < sizeof(opts) / sizeof(opts[0]); i++) {
        if (strcmp(arg, opts[i].arg) == 0) {
            opts[i].print(out);
            return 1;
        }
    }
    return 0;
}
