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

/* Route r's document, to out or to its file in dir. */
static int dd_describe_route(const dd_cmd_ctx_t *ctx, const dd_describe_opts_t *o, int r)
{
    dd_describe_in_t in = {.conf = ctx->conf, .route = r, .h = ctx->hs ? ctx->hs[r] : NULL};
    char err[1024], path[4096];
    FILE *out = stdout;
    cJSON *doc;
    int rc = 0;

    if (!(doc = dd_describe_doc(&in, err, sizeof(err)))) {
        dd_log(DD_LOG_ERROR, "dedupd describe: route %s: %s", ctx->conf->routes[r].name,
               err[0] ? err : "out of memory");
        return DD_EXIT_FAIL;
    }
    if (o->output) {
        snprintf(path, sizeof(path), "%s/%s.asyncapi.%s", o->output, ctx->conf->routes[r].name,
                 o->yaml ? "yaml" : "json");
        if (!(out = fopen(path, "w"))) {
            dd_log(DD_LOG_ERROR, "dedupd describe: cannot write %s: %s", path, strerror(errno));
            cJSON_Delete(doc);
            return DD_EXIT_FAIL;
        }
    }
    if (dd_describe_write(out, doc, o->yaml) != 0 || (out != stdout && fclose(out) != 0)) {
        dd_log(DD_LOG_ERROR, "dedupd describe: cannot write %s", o->output ? path : "stdout");
        rc = DD_EXIT_FAIL;
    } else if (out == stdout) {
        fflush(stdout);
    }
    cJSON_Delete(doc);
    return rc;
}

static int dd_describe_run(const dd_cmd_ctx_t *ctx, void *opts)
{
    const dd_describe_opts_t *o = opts;
    int rc = DD_EXIT_OK;

    if (ctx->only < 0 && ctx->conf->route_cnt > 1 && !o->output) {
        dd_log(DD_LOG_ERROR,
               "dedupd describe: %s has %d routes, each with its own document: give --route "
               "NAME, or --output DIR for all of them",
               ctx->conf->path, ctx->conf->route_cnt);
        return DD_EXIT_USAGE;
    }
    for (int r = 0; r < ctx->conf->route_cnt && rc == DD_EXIT_OK; r++)
        if (ctx->only < 0 || ctx->only == r) rc = dd_describe_route(ctx, o, r);
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
