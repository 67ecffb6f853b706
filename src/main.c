/*
 * dedupd's command line: the command table and the dispatcher.
 *
 * The only place that exits. Every command is one entry of dd_main_cmds[]
 * (its dd_cmd_t is declared where it is implemented, see dd_cmd.h); the
 * dispatcher gives each the same treatment: `dedupd NAME --help`, -c FILE
 * taken out and loaded once, the command's own options parsed before the
 * configuration is loaded, logging set up from it. Exit status: 0 success,
 * 1 failure, 2 usage error, 3 findings (--fail-on-findings), 4 messages run
 * and not applied (redrive).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <librdkafka/rdkafka.h>

#include "dd_cmd.h"
#include "dd_common.h"
#include "dd_conf.h"
#include "dd_enums_doc.h"
#include "dd_handler.h"
#include "dd_log.h"

#ifndef DEDUPD_VERSION
#define DEDUPD_VERSION "0.1.0"
#endif

/* The commands, in the order `dedupd help` lists them. */
static const dd_cmd_t *const dd_main_cmds[] = {
    &dd_cmd_run,   &dd_cmd_migrate,   &dd_cmd_check,    &dd_cmd_replay, &dd_cmd_redrive,
    &dd_cmd_purge, &dd_cmd_reconcile, &dd_cmd_stats,    &dd_cmd_mock,   &dd_cmd_handler_test,
    &dd_cmd_relay, &dd_cmd_outbox,    &dd_cmd_describe,
};

static void dd_main_usage(FILE *out)
{
    char head[64];

    fputs("usage: dedupd COMMAND [options]\n"
          "       dedupd help [COMMAND]\n"
          "\n"
          "Commands:\n",
          out);
    for (size_t i = 0; i < DD_ARRAY_LEN(dd_main_cmds); i++) {
        const dd_cmd_t *cmd = dd_main_cmds[i];

        snprintf(head, sizeof(head), "%s %s", cmd->name, cmd->args);
        if (strlen(head) <= 28)
            fprintf(out, "  %-28s  %s\n", head, cmd->summary);
        else
            fprintf(out, "  %s\n  %-28s  %s\n", head, "", cmd->summary);
    }
    fprintf(out, "  %-28s  %s\n", "help [COMMAND]", "this text, or a command's options");
    fputs("\n"
          "Options:\n"
          "  -c, --config FILE   configuration file (libconfig)\n"
          "  -h, --help          this text; after a command, that command's options\n"
          "  --help-config       every setting (--help-config=markdown or =man: the\n"
          "                      reference for docs/CONFIG.md or dedupd.conf(5))\n"
          "  --help-metrics      every metric (=markdown: the table of docs/SIDECAR.md)\n"
          "  --help-reasons      every dead-letter reason (=markdown: docs/OPERATIONS.md)\n"
          "  -V, --version       print the version\n"
          "\n"
          "Exit status:\n"
          "  0  success\n"
          "  1  failure (configuration, database, Kafka, handler)\n"
          "  2  usage error\n"
          "  3  replay or redrive --fail-on-findings: the report has findings\n"
          "  4  redrive: letters were run and not applied\n"
          "Each command's help lists its own (dedupd help COMMAND).\n",
          out);
}

static const dd_cmd_t *dd_main_find(const char *name)
{
    for (size_t i = 0; i < DD_ARRAY_LEN(dd_main_cmds); i++)
        if (strcmp(dd_main_cmds[i]->name, name) == 0) return dd_main_cmds[i];
    return NULL;
}

/* 1 when the arguments ask for help (before any "--"). */
static int dd_main_wants_help(int argc, char **argv)
{
    for (int i = 1; i < argc && strcmp(argv[i], "--") != 0; i++)
        if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) return 1;
    return 0;
}

/* Takes -c FILE, -cFILE, --config FILE or --config=FILE out of argv (the
 * last one counts). Returns 0, or DD_EXIT_USAGE when FILE is missing. */
static int dd_main_take_config(const dd_cmd_t *cmd, int *argc, char **argv, const char **path)
{
    int out = 1;

    for (int i = 1; i < *argc; i++) {
        const char *a = argv[i];

        if (strcmp(a, "--") == 0) {
            while (i < *argc)
                argv[out++] = argv[i++];
            break;
        }
        if (strcmp(a, "-c") == 0 || strcmp(a, "--config") == 0) {
            if (i + 1 >= *argc) {
                fprintf(stderr, "dedupd %s: %s needs a FILE\n", cmd->name, a);
                return DD_EXIT_USAGE;
            }
            *path = argv[++i];
        } else if (strncmp(a, "--config=", 9) == 0) {
            *path = a + 9;
        } else if (strncmp(a, "-c", 2) == 0) {
            *path = a + 2;
        } else {
            argv[out++] = argv[i];
        }
    }
    *argc = out;
    argv[out] = NULL;
    return DD_EXIT_OK;
}

static int dd_main_load(const dd_cmd_t *cmd, const char *path, dd_conf_t **confp)
{
    char err[1024];

    if (!path) {
        fprintf(stderr, "dedupd %s: missing -c FILE (see dedupd %s --help)\n", cmd->name,
                cmd->name);
        return DD_EXIT_USAGE;
    }
    if (dd_conf_load(confp, path, err, sizeof(err)) != DD_OK) {
        fprintf(stderr, "dedupd %s: %s\n", cmd->name, err);
        return DD_EXIT_FAIL;
    }
    dd_log_setup((dd_log_level_t)(*confp)->log.level, (dd_log_format_t)(*confp)->log.format);
    return DD_EXIT_OK;
}

/* argv[0] is the command's name. */
static int dd_main_dispatch(const dd_cmd_t *cmd, int argc, char **argv)
{
    dd_handler_t *hs[DD_CONF_ROUTE_MAX] = {0};
    dd_cmd_ctx_t ctx = {.only = -1};
    const char *path = NULL;
    dd_conf_t *conf = NULL;
    void *opts;
    int rc = DD_EXIT_OK;

    if (dd_main_wants_help(argc, argv)) {
        dd_cmd_opts_help(cmd, stdout);
        return DD_EXIT_OK;
    }
    if (cmd->flags & DD_CMD_CONFIG) rc = dd_main_take_config(cmd, &argc, argv, &path);
    if (rc) return rc;
    if (!(opts = calloc(1, cmd->opts_size ? cmd->opts_size : 1))) {
        fprintf(stderr, "dedupd %s: out of memory\n", cmd->name);
        return DD_EXIT_FAIL;
    }
    rc = dd_cmd_opts_parse(cmd, opts, &ctx, argc, argv);
    if (!rc && (cmd->flags & DD_CMD_CONFIG)) rc = dd_main_load(cmd, path, &conf);
    ctx.conf = conf;
    if (!rc && conf) rc = dd_cmd_prepare(cmd, opts, &ctx, hs);
    if (!rc) rc = cmd->run(&ctx, opts);
    if (conf) dd_cmd_finish(&ctx);
    if (cmd->release) cmd->release(opts);
    free(opts);
    dd_conf_destroy(conf);
    return rc;
}

/* dedupd help [COMMAND] */
static int dd_main_help(int argc, char **argv)
{
    const dd_cmd_t *cmd;

    if (argc < 1) {
        dd_main_usage(stdout);
        return DD_EXIT_OK;
    }
    if (argc > 1 || !(cmd = dd_main_find(argv[0]))) {
        fprintf(stderr, "dedupd help: %s '%s'\n\n", argc > 1 ? "unexpected argument" : "no command",
                argv[argc > 1 ? 1 : 0]);
        dd_main_usage(stderr);
        return DD_EXIT_USAGE;
    }
    dd_cmd_opts_help(cmd, stdout);
    return DD_EXIT_OK;
}

int main(int argc, char **argv)
{
    const char *arg = argc > 1 ? argv[1] : NULL;
    const dd_cmd_t *cmd;

    if (!arg) {
        dd_main_usage(stderr);
        return DD_EXIT_USAGE;
    }
    if (!strcmp(arg, "-h") || !strcmp(arg, "--help")) {
        dd_main_usage(stdout);
        return DD_EXIT_OK;
    }
    if (!strcmp(arg, "--help-config")) {
        dd_conf_print_reference(stdout);
        return DD_EXIT_OK;
    }
    if (!strcmp(arg, "--help-config=markdown")) {
        dd_conf_print_reference_md(stdout); /* the table in docs/CONFIG.md */
        return DD_EXIT_OK;
    }
    if (!strcmp(arg, "--help-config=man")) {
        dd_conf_print_reference_man(stdout); /* the SETTINGS of dedupd.conf(5) */
        return DD_EXIT_OK;
    }
    if (dd_enums_doc_option(arg, stdout)) return DD_EXIT_OK;
    if (!strcmp(arg, "-V") || !strcmp(arg, "--version")) {
        printf("dedupd %s (librdkafka %s, handler ABI %d)\n", DEDUPD_VERSION,
               rd_kafka_version_str(), DEDUPD_HANDLER_ABI_VERSION);
        return DD_EXIT_OK;
    }
    if (!strcmp(arg, "help")) return dd_main_help(argc - 2, argv + 2);
    if (!(cmd = dd_main_find(arg))) {
        fprintf(stderr, "dedupd: unknown command '%s'\n\n", arg);
        dd_main_usage(stderr);
        return DD_EXIT_USAGE;
    }
    return dd_main_dispatch(cmd, argc - 1, argv + 1);
}
