/*
 * A dedupd command: one entry of main.c's command table, declared where
 * the command is implemented (as nginx modules declare their
 * ngx_command_t). The dispatcher does what every command needs: --help,
 * taking -c FILE out of the arguments, parsing the command's own options
 * before anything is loaded (a usage error costs no connection), loading
 * the configuration and setting up logging. The command then only runs.
 *
 * Exit codes: DD_EXIT_OK, DD_EXIT_FAIL, DD_EXIT_USAGE, and DD_EXIT_FINDINGS
 * for a command asked to fail on what it found (replay --fail-on-findings).
 * Only main() exits.
 */
#ifndef DD_CMD_H
#define DD_CMD_H

#include <stddef.h>

#include "dd_conf.h"

#define DD_EXIT_OK 0
#define DD_EXIT_FAIL 1
#define DD_EXIT_USAGE 2
#define DD_EXIT_FINDINGS 3 /* the command ran, and found what it was asked to fail on */

#define DD_CMD_CONFIG 1 /* takes -c FILE, required; the dispatcher loads it */

typedef struct dd_cmd_s {
    const char *name;
    const char *args;    /* after the name in the command list: "-c FILE [--exit-at-end]" */
    const char *summary; /* one line for the command list */
    /* The whole of `dedupd NAME --help`, in one layout for every command:
     * "usage: dedupd NAME ..." lines, a description, "Options:" (each
     * option of the usage explained, -h/--help last), "Exit status:" with
     * one "  N  meaning" line per code (tests/unit/cli_help.py checks). */
    const char *help;
    int flags;        /* DD_CMD_* */
    size_t opts_size; /* the command's options, zeroed before parse */
    /* Parses the command's own arguments into opts: argv[0] is its name,
     * -c FILE and --help are taken out. NULL: it takes none. Returns 0 or
     * DD_EXIT_USAGE (the error printed). */
    int (*parse)(void *opts, int argc, char **argv);
    /* Runs the command; conf is loaded when flags has DD_CMD_CONFIG, else
     * NULL. Returns the exit code. */
    int (*run)(const dd_conf_t *conf, void *opts);
    /* Frees what parse put in opts; NULL: nothing. */
    void (*release)(void *opts);
} dd_cmd_t;

extern const dd_cmd_t dd_cmd_run;          /* dd_run.c */
extern const dd_cmd_t dd_cmd_migrate;      /* dd_migrate_cmd.c */
extern const dd_cmd_t dd_cmd_check;        /* dd_check.c */
extern const dd_cmd_t dd_cmd_replay;       /* dd_replay.c */
extern const dd_cmd_t dd_cmd_purge;        /* dd_purge.c */
extern const dd_cmd_t dd_cmd_stats;        /* dd_tablestats.c */
extern const dd_cmd_t dd_cmd_mock;         /* dd_mock.c */
extern const dd_cmd_t dd_cmd_handler_test; /* dd_htest.c */

extern const dd_cmd_t dd_cmd_reconcile; /* dd_reconcile.c: external mode */

#endif /* DD_CMD_H */
