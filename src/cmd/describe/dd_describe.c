/*
 * `dedupd describe`: the idempotency contract of each route, written down
 * as an AsyncAPI 3.0 document with an x-idempotency extension, so that the
 * teams producing a topic learn the key's format, the window and what a
 * copy or a conflict becomes without reading dedupd's configuration
 * (docs/SIDECAR.md, "The contract"). It reads the configuration and loads
 * the handlers (their mode is part of the contract); it connects to
 * nothing but, for an Avro route, the schema registry.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dd_cmd.h"
#include "dd_common.h"
#include "dd_describe_int.h"
#include "dd_log.h"
#include "dd_registry.h"

typedef struct {
    int yaml;
    const char *output; /* --output DIR: a file per route */
} dd_describe_opts_t;

static int dd_describe_set(void *opts, int id, char *arg)
{
    (void)id; /* --format, the only one */
    if (strcmp(arg, "json") && strcmp(arg, "yaml")) {
        fprintf(stderr, "dedupd describe: --format must be json or yaml, not '%s'\n", arg);
        return DD_EXIT_USAGE;
    }
    ((dd_describe_opts_t *)opts)->yaml = arg[0] == 'y';
    return DD_EXIT_OK;
}

static const dd_cmd_opt_t dd_describe_cmd_opts[] = {
    DD_CMD_SET("format", "FORMAT", 'F', "json (the default) or yaml"),
    DD_CMD_STR("output", "DIR", dd_describe_opts_t, output,
               "write one file per route into DIR,\n"
               "ROUTE.asyncapi.json (or .yaml), instead of printing\n"
               "one route's document"),
    DD_CMD_OPT_END,
};

static int dd_describe_write(FILE *out, const cJSON *doc, int yaml)
{
    if (yaml)
        dd_describe_yaml(out, doc);
    else
        dd_describe_json(out, doc);
    return ferror(out) ? -1 : 0;
}

/* An Avro route's writer schemas into in: the latest version of each
 * named topic's subject (<topic>-value, Confluent's default naming). */
static int dd_describe_avro(const dd_conf_t *conf, dd_registry_t **regp, dd_describe_in_t *in,
                            int *versions, char *errstr, size_t errstr_size)
{
    const dd_conf_route_t *rt = &conf->routes[in->route];
    char subject[300], err[600];
    uint32_t id;
    int rc;

    if (rt->dedup.format != DD_FORMAT_AVRO) return 0;
    if (!*regp && (rc = dd_registry_new(regp, &conf->schema_registry, NULL, errstr, errstr_size)))
        return rc;
    if (!(in->avro = calloc((size_t)rt->topic_cnt, sizeof(*in->avro)))) return DD_ERR_NOMEM;
    in->avro_version = versions;
    for (int i = 0; i < rt->topic_cnt; i++) {
        if (dd_conf_topic_is_pattern(rt->topics[i])) continue;
        snprintf(subject, sizeof(subject), "%s-value", rt->topics[i]);
        rc = dd_registry_latest(*regp, subject, &in->avro[i], &id, &versions[i], err, sizeof(err));
        if (rc) {
            dd_errstr_set(errstr, errstr_size, "the writer schema of topic %s (subject %s): %s",
                          rt->topics[i], subject, err);
            return rc;
        }
    }
    return 0;
}

static void dd_describe_in_release(dd_describe_in_t *in, int topic_cnt)
{
    for (int i = 0; in->avro && i < topic_cnt; i++)
        free(in->avro[i]);
    free(in->avro);
}

/* Route r's document, to out or to its file in dir. */
static int dd_describe_route(const dd_cmd_ctx_t *ctx, const dd_describe_opts_t *o,
                             dd_registry_t **regp, int r)
{
    const dd_conf_route_t *rt = &ctx->conf->routes[r];
    dd_describe_in_t in = {.conf = ctx->conf, .route = r, .h = ctx->hs ? ctx->hs[r] : NULL};
    int *versions = calloc((size_t)rt->topic_cnt, sizeof(int)), rc = DD_EXIT_FAIL;
    char err[1024] = "", path[4096] = "stdout";
    FILE *out = stdout;
    cJSON *doc = NULL;

    if (!versions || dd_describe_avro(ctx->conf, regp, &in, versions, err, sizeof(err)) ||
        !(doc = dd_describe_doc(&in, err, sizeof(err)))) {
        dd_log(DD_LOG_ERROR, "dedupd describe: route %s: %s", rt->name,
               err[0] ? err : "out of memory");
        goto done;
    }
    if (o->output) {
        snprintf(path, sizeof(path), "%s/%s.asyncapi.%s", o->output, rt->name,
                 o->yaml ? "yaml" : "json");
        if (!(out = fopen(path, "w"))) {
            dd_log(DD_LOG_ERROR, "dedupd describe: cannot write %s: %s", path, strerror(errno));
            goto done;
        }
    }
    rc = dd_describe_write(out, doc, o->yaml) != 0 ? DD_EXIT_FAIL : DD_EXIT_OK;
    if (out != stdout && fclose(out) != 0) rc = DD_EXIT_FAIL;
    if (rc) dd_log(DD_LOG_ERROR, "dedupd describe: cannot write %s", path);
    fflush(stdout);
done:
    cJSON_Delete(doc);
    dd_describe_in_release(&in, rt->topic_cnt);
    free(versions);
    return rc;
}

static int dd_describe_run(const dd_cmd_ctx_t *ctx, void *opts)
{
    const dd_describe_opts_t *o = opts;
    dd_registry_t *reg = NULL;
    int rc = DD_EXIT_OK;

    if (ctx->only < 0 && ctx->conf->route_cnt > 1 && !o->output) {
        dd_log(DD_LOG_ERROR,
               "dedupd describe: %s has %d routes, each with its own document: give --route "
               "NAME, or --output DIR for all of them",
               ctx->conf->path, ctx->conf->route_cnt);
        return DD_EXIT_USAGE;
    }
    for (int r = 0; r < ctx->conf->route_cnt && rc == DD_EXIT_OK; r++)
        if (ctx->only < 0 || ctx->only == r) rc = dd_describe_route(ctx, o, &reg, r);
    dd_registry_destroy(reg);
    return rc;
}

const dd_cmd_t dd_cmd_describe = {
    .name = "describe",
    .args = "-c FILE [--format json|yaml] [--route NAME] [--output DIR]",
    .summary = "the idempotency contract of each route, as AsyncAPI",
    .usage = "usage: dedupd describe -c FILE [--format json|yaml] [--route NAME]\n"
             "       dedupd describe -c FILE [--format json|yaml] --output DIR\n"
             "\n"
             "Prints the AsyncAPI 3.0 document of a route: its topics and dead-letter\n"
             "topic with the headers dedupd writes, what it reads of the payload (or the\n"
             "Avro writer schema), and an x-idempotency extension: the business key's\n"
             "template, format and an example, the request hash, the window, the states\n"
             "of a key and what a producer sees of a copy, a conflict or a message that\n"
             "cannot be applied, and in external mode what the downstream must do. The\n"
             "document depends only on that contract, so it changes when the contract\n"
             "does: publish it next to the topic and diff it in review.\n",
    .exits = "  0  written\n"
             "  1  failure: the configuration, a handler, the registry, or the output\n"
             "  2  usage error, no route of that name, or several routes and neither\n"
             "     --route nor --output\n",
    .route_help = "only the route NAME (routes[].name; default for a\n"
                  "configuration without routes)",
    .flags = DD_CMD_CONFIG | DD_CMD_ROUTE | DD_CMD_HANDLERS,
    .opts_size = sizeof(dd_describe_opts_t),
    .opts = dd_describe_cmd_opts,
    .set = dd_describe_set,
    .run = dd_describe_run,
};
