/*
 * A dedupd command: one entry of main.c's command table, declared where
 * the command is implemented (as nginx modules declare their
 * ngx_command_t). The dispatcher does what every command needs: --help,
 * taking -c FILE out of the arguments, parsing the command's own options
 * before anything is loaded (a usage error costs no connection), loading
 * the configuration and setting up logging. The command then only runs.
 *
 * Exit codes: DD_EXIT_OK, DD_EXIT_FAIL, DD_EXIT_USAGE, DD_EXIT_FINDINGS
 * for a command asked to fail on what it found (replay --fail-on-findings),
 * and DD_EXIT_APPLY_FAILED for messages it ran that were not applied
 * (redrive). Only main() exits.
 */
#ifndef DD_CMD_H
#define DD_CMD_H

#include <stddef.h>
#include <stdio.h>

#include "dd_conf.h"
#include "dd_handler.h"

#define DD_EXIT_OK 0
#define DD_EXIT_FAIL 1
#define DD_EXIT_USAGE 2
#define DD_EXIT_FINDINGS 3     /* the command ran, and found what it was asked to fail on */
#define DD_EXIT_APPLY_FAILED 4 /* the command ran messages, and some were not applied */

#define DD_CMD_CONFIG 1   /* takes -c FILE, required; the dispatcher loads it */
#define DD_CMD_ROUTE 2    /* takes --route NAME (help: route_help); the dispatcher finds it */
#define DD_CMD_HANDLERS 4 /* the dispatcher loads the handlers (only --route's, with it) */

typedef enum {
    DD_CMD_OPT_FLAG, /* no argument; sets the int at offset to 1 */
    DD_CMD_OPT_STR,  /* sets the const char * at offset to the argument */
    DD_CMD_OPT_SET,  /* the command's set(opts, id, argument) */
} dd_cmd_opt_kind_t;

/* One option of a command: the parser and the Options section of its
 * --help are made from its table, and man/dedupd.1 lists the same options
 * (tests/unit/cli_opts_man.py checks). */
typedef struct dd_cmd_opt_s {
    const char *name; /* --NAME; NULL ends the table */
    int letter;       /* -L as well; 0: none */
    const char *arg;  /* the argument's name in the help; NULL: takes none */
    const char *help; /* "\n" starts a continuation line */
    dd_cmd_opt_kind_t kind;
    size_t offset; /* FLAG and STR: of the field in the command's opts */
    int id;        /* SET: passed to set() */
} dd_cmd_opt_t;

#define DD_CMD_FLAG(name, type, field, help)                                                       \
    {                                                                                              \
        name, 0, NULL, help, DD_CMD_OPT_FLAG, offsetof(type, field), 0                             \
    }
#define DD_CMD_STR(name, arg, type, field, help)                                                   \
    {                                                                                              \
        name, 0, arg, help, DD_CMD_OPT_STR, offsetof(type, field), 0                               \
    }
#define DD_CMD_SET(name, arg, id, help)                                                            \
    {                                                                                              \
        name, 0, arg, help, DD_CMD_OPT_SET, 0, id                                                  \
    }
#define DD_CMD_OPT_END                                                                             \
    {                                                                                              \
        NULL, 0, NULL, NULL, DD_CMD_OPT_FLAG, 0, 0                                                 \
    }

/* What the dispatcher prepared for the command's run(). */
typedef struct dd_cmd_ctx_s {
    const dd_conf_t *conf; /* DD_CMD_CONFIG: loaded; else NULL */
    const char *route;     /* DD_CMD_ROUTE: --route NAME, or NULL */
    int only;              /* its index in conf->routes; -1: every route */
    dd_handler_t **hs;     /* DD_CMD_HANDLERS: hs[r] of each covered route, loaded */
} dd_cmd_ctx_t;

typedef struct dd_cmd_s {
    const char *name;
    const char *args;    /* after the name in the command list: "-c FILE [--exit-at-end]" */
    const char *summary; /* one line for the command list */
    /* `dedupd NAME --help`, in one layout for every command, is made of:
     * usage ("usage: dedupd NAME ..." lines, a blank line, a description),
     * "Options:" from the table (-c first with DD_CMD_CONFIG, --route
     * after the table's with DD_CMD_ROUTE, -h/--help last), more (other
     * sections, or NULL) and "Exit status:" with exits, one "  N  meaning"
     * line per code (tests/unit/cli_help.py checks). */
    const char *usage;
    const dd_cmd_opt_t *opts; /* up to DD_CMD_OPT_END; NULL: none */
    const char *route_help;   /* DD_CMD_ROUTE: the help of --route NAME */
    const char *more;
    const char *exits;
    int flags;        /* DD_CMD_* */
    size_t opts_size; /* the command's options, zeroed before parse */
    /* Defaults into opts, before the options are parsed; NULL: none. */
    void (*init)(void *opts);
    /* A DD_CMD_OPT_SET option. Returns 0 or DD_EXIT_USAGE (printed). */
    int (*set)(void *opts, int id, char *arg);
    /* After the options: the operands left (argc may be 0) and what needs
     * all the options. NULL: operands are a usage error. Returns 0 or
     * DD_EXIT_USAGE (printed). */
    int (*check)(void *opts, int argc, char **argv);
    /* With DD_CMD_HANDLERS, whether this run needs them; NULL: always. */
    int (*wants_handlers)(const void *opts);
    /* Runs the command. Returns the exit code. */
    int (*run)(const dd_cmd_ctx_t *ctx, void *opts);
    /* Frees what parse put in opts; NULL: nothing. */
    void (*release)(void *opts);
} dd_cmd_t;

/* Parses argv (argv[0] the command's name, -c FILE and --help taken out)
 * into opts and ctx->route by cmd's table. Returns 0 or DD_EXIT_USAGE
 * (printed). */
int dd_cmd_opts_parse(const dd_cmd_t *cmd, void *opts, dd_cmd_ctx_t *ctx, int argc, char **argv);

/* Prints `dedupd NAME --help`. */
void dd_cmd_opts_help(const dd_cmd_t *cmd, FILE *out);

/* After the configuration is loaded: finds --route's route and loads the
 * handlers the command declares it needs. Returns 0, or the exit code
 * (the error logged). */
int dd_cmd_prepare(const dd_cmd_t *cmd, const void *opts, dd_cmd_ctx_t *ctx, dd_handler_t **hs);

/* Destroys what dd_cmd_prepare() loaded. */
void dd_cmd_finish(dd_cmd_ctx_t *ctx);

extern const dd_cmd_t dd_cmd_run;          /* cmd/run.c */
extern const dd_cmd_t dd_cmd_migrate;      /* cmd/migrate.c */
extern const dd_cmd_t dd_cmd_check;        /* cmd/check.c */
extern const dd_cmd_t dd_cmd_replay;       /* cmd/replay/ */
extern const dd_cmd_t dd_cmd_redrive;      /* cmd/replay/dd_replay_redrive.c */
extern const dd_cmd_t dd_cmd_purge;        /* jobs/dd_purge.c */
extern const dd_cmd_t dd_cmd_stats;        /* cmd/stats.c */
extern const dd_cmd_t dd_cmd_mock;         /* cmd/mock-kafka.c */
extern const dd_cmd_t dd_cmd_handler_test; /* cmd/handler-test/ */

extern const dd_cmd_t dd_cmd_reconcile; /* jobs/dd_reconcile.c: external mode */
extern const dd_cmd_t dd_cmd_relay;     /* cmd/relay.c: the outbox relay */
extern const dd_cmd_t dd_cmd_describe;  /* cmd/describe/: the contract as AsyncAPI */
extern const dd_cmd_t dd_cmd_outbox;    /* cmd/outbox.c: the outbox's parked events */

#endif /* DD_CMD_H */
