/*
 * Test handler publishing metrics of its own (host->metric_*, host
 * version 3). It writes nothing to the database; per message it counts
 *   dedupd_handler_th_metrics_messages_total{kind}   the payload's "kind"
 *   dedupd_handler_th_metrics_calls_total            every handle() call
 * and observes the payload's "amount" in
 *   dedupd_handler_th_metrics_amount{le=1,10,100}.
 * init_host also asks for what the host must refuse (bad names, dedupd's
 * labels, a name twice, bad bounds) and fails when one is accepted; a
 * handle() that gets a metric declared or a negative count accepted
 * rejects its message with the reason.
 */
#include "dedupd/handler.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct th_metrics {
    const dedupd_host *host;
    dedupd_metric *messages, *calls, *amount;
} th_metrics;

/* A declaration the host must refuse: 0 when it did, with a reason. */
static int th_refused(const dedupd_host *host, const char *what, dedupd_metric_type type,
                      const char *name, const char *const *labels, size_t label_cnt,
                      const double *bounds, size_t bound_cnt, char *errstr, size_t errstr_size)
{
    char why[DEDUPD_ERROR_SIZE] = "";

    if (!host->metric_new(host, type, name, "x", labels, label_cnt, bounds, bound_cnt, why,
                          sizeof(why)) &&
        why[0])
        return 0;
    snprintf(errstr, errstr_size, "the host accepted %s", what);
    return -1;
}

static int th_metrics_refusals(const dedupd_host *h, char *errstr, size_t size)
{
    static const char *const route[] = {"route"}, *const le[] = {"le"};
    static const char *const twice[] = {"a", "a"}, *const five[] = {"a", "b", "c", "d", "e"};
    static const double down[] = {1, 0.5}, nan_bound[] = {1, NAN};
    static const double one[] = {1};
    const dedupd_metric_type C = DEDUPD_METRIC_COUNTER, H = DEDUPD_METRIC_HISTOGRAM;

    return th_refused(h, "a name with a dash", C, "bad-name", NULL, 0, NULL, 0, errstr, size) ||
           th_refused(h, "a name starting __", C, "__x", NULL, 0, NULL, 0, errstr, size) ||
           th_refused(h, "an empty name", C, "", NULL, 0, NULL, 0, errstr, size) ||
           th_refused(h, "the label route", C, "r", route, 1, NULL, 0, errstr, size) ||
           th_refused(h, "the label le", H, "l", le, 1, NULL, 0, errstr, size) ||
           th_refused(h, "a label twice", C, "t", twice, 2, NULL, 0, errstr, size) ||
           th_refused(h, "five labels", C, "f", five, 5, NULL, 0, errstr, size) ||
           th_refused(h, "messages twice", C, "messages", NULL, 0, NULL, 0, errstr, size) ||
           th_refused(h, "a histogram named as messages_total", H, "messages_total", NULL, 0, NULL,
                      0, errstr, size) ||
           th_refused(h, "a histogram named as amount's _sum", H, "amount_sum", NULL, 0, NULL, 0,
                      errstr, size) ||
           th_refused(h, "a counter with bounds", C, "b", NULL, 0, one, 1, errstr, size) ||
           th_refused(h, "bounds going down", H, "d", NULL, 0, down, 2, errstr, size) ||
           th_refused(h, "a NaN bound", H, "n", NULL, 0, nan_bound, 2, errstr, size) ||
           th_refused(h, "an unknown type", (dedupd_metric_type)7, "u", NULL, 0, NULL, 0, errstr,
                      size);
}

static int th_metrics_init(void **state, const dedupd_host *host, char *errstr, size_t size)
{
    static const char *const kind[] = {"kind"};
    static const double bounds[] = {1, 10, 100};
    th_metrics *st;

    if (host->version < 3) {
        snprintf(errstr, size, "host version %d has no metrics", host->version);
        return -1;
    }
    if (!(st = calloc(1, sizeof(*st)))) {
        snprintf(errstr, size, "out of memory");
        return -1;
    }
    *state = st;
    st->host = host;
    if (!(st->messages = host->metric_new(host, DEDUPD_METRIC_COUNTER, "messages",
                                          "Messages handled, by the payload's kind.", kind, 1, NULL,
                                          0, errstr, size)) ||
        !(st->calls = host->metric_new(host, DEDUPD_METRIC_COUNTER, "calls_total",
                                       "handle() calls.", NULL, 0, NULL, 0, errstr, size)) ||
        !(st->amount =
              host->metric_new(host, DEDUPD_METRIC_HISTOGRAM, "amount", "The payloads' amounts.",
                               NULL, 0, bounds, 3, errstr, size)))
        return -1;
    return th_metrics_refusals(host, errstr, size);
}

static dedupd_status th_metrics_handle(void *state, MYSQL *db, const dedupd_msg *msg,
                                       dedupd_result *res)
{
    th_metrics *st = state;
    const dedupd_host *h = st->host;
    const cJSON *kind = cJSON_GetObjectItemCaseSensitive(msg->json, "kind");
    const cJSON *amount = cJSON_GetObjectItemCaseSensitive(msg->json, "amount");
    const char *values[1] = {cJSON_IsString(kind) ? kind->valuestring : "none"};
    char why[DEDUPD_ERROR_SIZE] = "";

    (void)db;
    if (h->metric_add(h, st->calls, NULL, 1) || h->metric_add(h, st->messages, values, 1) ||
        (cJSON_IsNumber(amount) && h->metric_observe(h, st->amount, NULL, amount->valuedouble))) {
        snprintf(res->error, sizeof(res->error), "a count was refused");
        return DEDUPD_REJECT;
    }
    if (h->metric_new(h, DEDUPD_METRIC_COUNTER, "late", NULL, NULL, 0, NULL, 0, why, sizeof(why)) ||
        !h->metric_add(h, st->calls, NULL, -1) || !h->metric_observe(h, st->calls, NULL, 1) ||
        !h->metric_add(h, st->amount, NULL, 1)) {
        snprintf(res->error, sizeof(res->error), "the host accepted a call it must refuse");
        return DEDUPD_REJECT;
    }
    return DEDUPD_OK;
}

static void th_metrics_fini(void *state)
{
    free(state);
}

static const dedupd_handler th_metrics_desc = {
    .abi_version = DEDUPD_HANDLER_ABI_VERSION,
    .name = "th_metrics",
    .init_host = th_metrics_init,
    .handle = th_metrics_handle,
    .fini = th_metrics_fini,
};

const dedupd_handler *dedupd_handler_v1(void)
{
    return &th_metrics_desc;
}
