/*
 * The command option engine: a command declares its options in a table
 * (dd_cmd_opt_t, dd_cmd.h), and its getopt_long parser and the Options
 * section of its --help are made from that table, so an option is written
 * once (and once more in man/dedupd.1, which a unit test compares). What
 * several commands need after the configuration is loaded (--route's
 * route, the routes' handlers) is done here once, for the commands that
 * declare it in their flags.
 */
#include <getopt.h>
#include <stdlib.h>
#include <string.h>

#include "dd_cmd.h"
#include "dd_common.h"
#include "dd_log.h"
#include "dd_routes.h"

#define DD_CMD_OPTS_MAX 48
#define DD_CMD_OPT_ROUTE_ID (-1) /* the --route entry the engine adds */

/* The command's table, with --route appended when it takes it. */
static int dd_cmd_opts_table(const dd_cmd_t *cmd, dd_cmd_opt_t *tab)
{
    int n = 0;

    for (const dd_cmd_opt_t *o = cmd->opts; o && o->name && n < DD_CMD_OPTS_MAX - 1; o++)
        tab[n++] = *o;
    if (cmd->flags & DD_CMD_ROUTE)
        tab[n++] = (dd_cmd_opt_t)DD_CMD_SET("route", "NAME", DD_CMD_OPT_ROUTE_ID, cmd->route_help);
    return n;
}

static int dd_cmd_opts_apply(const dd_cmd_t *cmd, const dd_cmd_opt_t *o, void *opts,
                             dd_cmd_ctx_t *ctx, char *arg)
{
    switch (o->kind) {
    case DD_CMD_OPT_FLAG:
        *(int *)(void *)((char *)opts + o->offset) = 1;
        return DD_EXIT_OK;
    case DD_CMD_OPT_STR:
        *(const char **)(void *)((char *)opts + o->offset) = arg;
        return DD_EXIT_OK;
    case DD_CMD_OPT_SET:
        if (o->id != DD_CMD_OPT_ROUTE_ID) return cmd->set(opts, o->id, arg);
        ctx->route = arg;
        return DD_EXIT_OK;
    }
    return DD_EXIT_USAGE;
}

/* The index in tab of what getopt_long returned, or -1. */
static int dd_cmd_opts_find(const dd_cmd_opt_t *tab, int n, int c)
{
    if (c >= 256 && c - 256 < n) return c - 256;
    for (int i = 0; i < n; i++)
        if (tab[i].letter && tab[i].letter == c) return i;
    return -1;
}

int dd_cmd_opts_parse(const dd_cmd_t *cmd, void *opts, dd_cmd_ctx_t *ctx, int argc, char **argv)
{
    dd_cmd_opt_t tab[DD_CMD_OPTS_MAX];
    struct option longopts[DD_CMD_OPTS_MAX];
    char shorts[2 * DD_CMD_OPTS_MAX + 1] = "";
    int n = dd_cmd_opts_table(cmd, tab), c, i, rc;
    size_t sl = 0;

    for (i = 0; i < n; i++) {
        longopts[i] = (struct option){tab[i].name, tab[i].arg ? required_argument : no_argument,
                                      NULL, 256 + i};
        if (tab[i].letter) {
            shorts[sl++] = (char)tab[i].letter;
            if (tab[i].arg) shorts[sl++] = ':';
        }
    }
    longopts[n] = (struct option){NULL, 0, NULL, 0};
    shorts[sl] = '\0';
    if (cmd->init) cmd->init(opts);
    optind = 1;
    while ((c = getopt_long(argc, argv, shorts, longopts, NULL)) != -1) {
        if ((i = dd_cmd_opts_find(tab, n, c)) < 0) return DD_EXIT_USAGE; /* getopt said why */
        if ((rc = dd_cmd_opts_apply(cmd, &tab[i], opts, ctx, optarg))) return rc;
    }
    if (cmd->check) return cmd->check(opts, argc - optind, argv + optind);
    if (optind < argc) {
        fprintf(stderr, "dedupd %s: unexpected argument '%s' (see dedupd %s --help)\n", cmd->name,
                argv[optind], cmd->name);
        return DD_EXIT_USAGE;
    }
    return DD_EXIT_OK;
}

/* "  --name ARG", "  -L, --name ARG" */
static void dd_cmd_opts_head(const dd_cmd_opt_t *o, char *buf, size_t size)
{
    char letter[8] = "";

    if (o->letter) snprintf(letter, sizeof(letter), "-%c, ", o->letter);
    snprintf(buf, size, "  %s--%s%s%s", letter, o->name, o->arg ? " " : "", o->arg ? o->arg : "");
}

/* One entry: its head, then its help from column col, continuation lines
 * (after "\n" in the help) indented to col; a head too wide for the column
 * gets its help on the next line. */
static void dd_cmd_opts_entry(FILE *out, const char *head, const char *help, int col)
{
    const char *p = help, *nl;

    if ((int)strlen(head) + 2 > col)
        fprintf(out, "%s\n%*s", head, col, "");
    else
        fprintf(out, "%-*s", col, head);
    while ((nl = strchr(p, '\n'))) {
        fprintf(out, "%.*s\n%*s", (int)(nl - p), p, col, "");
        p = nl + 1;
    }
    fprintf(out, "%s\n", p);
}

void dd_cmd_opts_help(const dd_cmd_t *cmd, FILE *out)
{
    dd_cmd_opt_t tab[DD_CMD_OPTS_MAX];
    int n = dd_cmd_opts_table(cmd, tab), col = 22;
    char head[128];

    for (int i = 0; i < n; i++) { /* wider heads get a line of their own */
        dd_cmd_opts_head(&tab[i], head, sizeof(head));
        if ((int)strlen(head) + 2 > col && strlen(head) <= 21) col = (int)strlen(head) + 2;
    }
    fprintf(out, "%s\nOptions:\n", cmd->usage);
    if (cmd->flags & DD_CMD_CONFIG)
        dd_cmd_opts_entry(out, "  -c, --config FILE", "configuration file (libconfig)", col);
    for (int i = 0; i < n; i++) {
        dd_cmd_opts_head(&tab[i], head, sizeof(head));
        dd_cmd_opts_entry(out, head, tab[i].help, col);
    }
    dd_cmd_opts_entry(out, "  -h, --help", "this text", col);
    if (cmd->more) fprintf(out, "\n%s", cmd->more);
    fprintf(out, "\nExit status:\n%s", cmd->exits);
}

/* Loads the handler of each covered route. */
static int dd_cmd_load_handlers(const dd_cmd_ctx_t *ctx, char *err, size_t err_size)
{
    const dd_conf_t *conf = ctx->conf;
    const dd_conf_handler_t *hc;

    if (ctx->only < 0) return dd_routes_load_handlers(conf, ctx->hs, err, err_size);
    hc = &conf->routes[ctx->only].handler;
    return dd_handler_load(&ctx->hs[ctx->only], hc->path, hc->config, conf->outbox.enabled, err,
                           err_size);
}

int dd_cmd_prepare(const dd_cmd_t *cmd, const void *opts, dd_cmd_ctx_t *ctx, dd_handler_t **hs)
{
    char err[1024];

    ctx->only = -1;
    if (ctx->route && (ctx->only = dd_conf_route_named(ctx->conf, ctx->route)) < 0) {
        dd_log(DD_LOG_ERROR, "dedupd %s: --route %s: %s has no route of that name", cmd->name,
               ctx->route, ctx->conf->path);
        return DD_EXIT_USAGE;
    }
    if (!(cmd->flags & DD_CMD_HANDLERS) || (cmd->wants_handlers && !cmd->wants_handlers(opts)))
        return DD_EXIT_OK;
    ctx->hs = hs;
    if (dd_cmd_load_handlers(ctx, err, sizeof(err)) == DD_OK) return DD_EXIT_OK;
    dd_log(DD_LOG_ERROR, "dedupd %s: %s", cmd->name, err);
    return DD_EXIT_FAIL;
}

void dd_cmd_finish(dd_cmd_ctx_t *ctx)
{
    if (ctx->hs) dd_routes_destroy_handlers(ctx->hs, ctx->conf->route_cnt);
    ctx->hs = NULL;
}
