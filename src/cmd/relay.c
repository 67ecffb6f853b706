/*
 * `dedupd relay`: the outbox relay (dd_relay) apart from the consumer, for
 * a configuration with outbox.relay = false or to drain an outbox by hand
 * (--until-empty). Runs every shard's relay until SIGTERM/SIGINT and
 * prints one line with what it sent.
 */
#include <stdio.h>

#include "dd_cmd.h"
#include "dd_common.h"
#include "dd_log.h"
#include "dd_relay.h"

typedef struct {
    int until_empty;
} dd_relay_opts_t;

static const dd_cmd_opt_t dd_relay_cmd_opts[] = {
    DD_CMD_FLAG("until-empty", dd_relay_opts_t, until_empty,
                "exit once every shard's outbox has no event waiting\n"
                "(parked events aside)"),
    DD_CMD_OPT_END,
};

/* --until-empty: every shard's lock held and its outbox counted empty. */
static int dd_relay_empty(dd_relay_t *relay)
{
    dd_outbox_stats_t st;

    dd_relay_stats(relay, &st);
    return st.leading == st.shards && st.backlog == 0;
}

static int dd_relay_run(const dd_cmd_ctx_t *ctx, void *opts)
{
    const dd_conf_t *conf = ctx->conf;
    const dd_relay_opts_t *o = opts;
    dd_relay_t *relay = NULL;
    dd_outbox_stats_t st;
    char err[1024];
    int rc;

    if (!conf->outbox.enabled) {
        dd_log(DD_LOG_ERROR,
               "dedupd relay: outbox.enabled is off in %s: there is no outbox "
               "to relay.",
               conf->path);
        return DD_EXIT_FAIL;
    }
    dd_signals_install();
    rc = dd_relay_new(&relay, conf, NULL, NULL, err, sizeof(err));
    if (!rc) rc = dd_relay_start(relay, err, sizeof(err));
    while (!rc && !atomic_load(&dd_stop_requested) && !(o->until_empty && dd_relay_empty(relay)))
        dd_sleep_ms(100, &dd_stop_requested);
    if (rc) dd_log(DD_LOG_ERROR, "dedupd relay: %s", err);
    dd_relay_stop(relay);
    if (relay) {
        dd_relay_stats(relay, &st);
        printf("relay sent=%llu parked=%llu failed=%llu\n", (unsigned long long)st.sent,
               (unsigned long long)st.refused, (unsigned long long)st.failed);
        fflush(stdout);
    }
    dd_relay_destroy(relay);
    return rc ? DD_EXIT_FAIL : DD_EXIT_OK;
}

const dd_cmd_t dd_cmd_relay = {
    .name = "relay",
    .args = "-c FILE [--until-empty]",
    .summary = "publish the handlers' events from the outbox to Kafka",
    .usage = "usage: dedupd relay -c FILE [--until-empty]\n"
             "\n"
             "Publishes the events handlers emitted (outbox.enabled) from the table\n"
             "dedupd_outbox of every database shard to Kafka, with an idempotent\n"
             "producer, and deletes each once acknowledged; what `dedupd run` does beside\n"
             "the consumer unless outbox.relay = false. Several relays may run at once:\n"
             "per shard one publishes, the others wait. Runs until SIGTERM/SIGINT and\n"
             "prints a line with what it sent.\n",
    .exits = "  0  stopped (SIGTERM/SIGINT, or the outbox empty with --until-empty)\n"
             "  1  failure: configuration, outbox.enabled off, the producer\n"
             "  2  usage error\n",
    .flags = DD_CMD_CONFIG,
    .opts_size = sizeof(dd_relay_opts_t),
    .opts = dd_relay_cmd_opts,
    .run = dd_relay_run,
};
