/*
 * `dedupd handler-test`: does a handler apply each message exactly once?
 *
 * A handler is exactly once under dedupd when all its effects go through
 * the transaction dedupd gives it: then a message delivered twice, or a
 * transaction rolled back and replayed (a deadlock, a lost connection, a
 * COMMIT whose answer was lost), leaves the same database as one clean
 * delivery. A handler that writes on a connection of its own, or keeps
 * state in memory, does not, and nothing shows it until production
 * redelivers. This command shows it, in a team's CI:
 *
 *   pass 1  every message of the file once, in order, into database 1;
 *   pass 2  every message twice, shuffled (--seed), each transaction rolled
 *           back once after its handler succeeded and run again, into
 *           database 2;
 *
 * then compares the two: the same business keys recorded, the same dead
 * letters, the same rows in the handler's tables (dd_htest_cmp.c). Both
 * passes run the real consumer (dd_pipeline: claim, handler, dead letters,
 * offsets) against an in-process mock Kafka cluster and a private MariaDB
 * (dd_htest_env.c). The shuffle keeps what dedupd keeps in production: the
 * order of messages with the same lane key (dedup.lane_key, by default the
 * business key), a copy never before its original.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <libconfig.h>

#include "dd_cmd.h"
#include "dd_common.h"
#include "dd_db.h"
#include "dd_handler.h"
#include "dd_htest_int.h"
#include "dd_log.h"
#include "dd_migrate.h"
#include "dd_outbox.h"
#include "dd_pipeline.h"
#include "dd_validate.h"

typedef struct {
    const char *config, *handler, *key, *lane_key, *socket, *user, *messages;
    const char *seed_sql; /* --seed-sql FILE: run in each pass's database before it */
    unsigned int seed;
    char **ignore;
    int ignore_cnt;
    int rows, keep, envelope;
} dd_htest_opts_t;

/* One pass: its configuration, handler and consumer, and what it did. */
typedef struct {
    dd_conf_t *conf;
    dd_handler_t *h;
    dd_pipeline_t *pl;
    dd_stats_t stats;
} dd_htest_pass_t;

#define DD_HTEST_EVENT_NS "68616e646c65722d7465737400000000"

/* One run of the command. */
typedef struct {
    const dd_htest_opts_t *o;
    dd_htest_msg_t *msgs;
    size_t n;
    size_t *order[DD_HTEST_PASSES]; /* the messages of each pass, in delivery order */
    size_t order_cnt[DD_HTEST_PASSES];
    config_t lc; /* the configuration both passes are written from */
    char db[DD_HTEST_PASSES][64];
    char topic[DD_HTEST_PASSES][32];
    char dlq[DD_HTEST_PASSES][40];
    char handler[200];           /* the handler's name */
    char handler_path[PATH_MAX]; /* and where it was loaded from */
    dd_htest_env_t env;
    dd_htest_pass_t pass[DD_HTEST_PASSES];
} dd_htest_t;

/* ---- options ---- */

static void dd_htest_init(void *opts)
{
    dd_htest_opts_t *o = opts;

    o->user = "root";
    o->seed = 1;
    o->rows = 20;
}

/* --seed, --rows: a number; --ignore-column: TABLE.COLUMN, repeatable. */
static int dd_htest_opt_set(void *opts, int id, char *arg)
{
    dd_htest_opts_t *o = opts;
    char **p, *end;
    long v;

    if (id == 'i') {
        if (!strchr(arg, '.') || arg[0] == '.' || !arg[strlen(arg) - 1]) {
            fprintf(stderr, "dedupd handler-test: --ignore-column takes TABLE.COLUMN\n");
            return DD_EXIT_USAGE;
        }
        if (!(p = realloc(o->ignore, (size_t)(o->ignore_cnt + 1) * sizeof(*p))))
            return DD_EXIT_FAIL;
        o->ignore = p;
        o->ignore[o->ignore_cnt++] = arg;
        return DD_EXIT_OK;
    }
    errno = 0;
    v = strtol(arg, &end, 10);
    if (errno || *end || v < 0 || v > INT_MAX) {
        fprintf(stderr, "dedupd handler-test: --%s takes a number, not '%s'\n",
                id == 's' ? "seed" : "rows", arg);
        return DD_EXIT_USAGE;
    }
    if (id == 's')
        o->seed = (unsigned int)v;
    else
        o->rows = (int)v;
    return DD_EXIT_OK;
}

/* One MESSAGES operand, and a handler to test. */
static int dd_htest_operands(void *opts, int argc, char **argv)
{
    dd_htest_opts_t *o = opts;

    if (argc != 1) {
        fprintf(stderr, "dedupd handler-test: %s (see dedupd handler-test --help)\n",
                argc > 1 ? "one MESSAGES file, please" : "missing the MESSAGES file");
        return DD_EXIT_USAGE;
    }
    if (!o->config && (!o->handler || !o->key)) {
        fprintf(stderr, "dedupd handler-test: give -c FILE, or --handler PATH and --key TEMPLATE "
                        "(see dedupd handler-test --help)\n");
        return DD_EXIT_USAGE;
    }
    o->messages = argv[0];
    return DD_EXIT_OK;
}

#define DD_HTEST_STR(name, arg, field, help) DD_CMD_STR(name, arg, dd_htest_opts_t, field, help)

static const dd_cmd_opt_t dd_htest_opts[] = {
    {"config", 'c', "FILE",
     "the handler's configuration: handler.*, dedup.* and\n"
     "the rest are used; kafka, mysql, http, purge and dlq\n"
     "are replaced, batches made small and retries fast",
     DD_CMD_OPT_STR, offsetof(dd_htest_opts_t, config), 0},
    DD_HTEST_STR("handler", "PATH", handler, "the handler (instead of handler.path)"),
    DD_HTEST_STR("key", "TEMPLATE", key, "the business key (instead of dedup.key)"),
    DD_HTEST_STR("lane-key", "TEMPLATE", lane_key,
                 "the lane key (instead of dedup.lane_key): messages with\n"
                 "the same one keep their order in pass 2"),
    DD_HTEST_STR("mysql-socket", "PATH", socket,
                 "use this running server (two databases are created\n"
                 "and dropped) instead of starting mariadbd"),
    DD_HTEST_STR("mysql-user", "USER", user,
                 "its user (default root; password from\n"
                 "DEDUPD_MYSQL_PASSWORD)"),
    DD_CMD_SET("seed", "N", 's', "the shuffle of pass 2 (default 1)"),
    DD_CMD_SET("ignore-column", "TABLE.COLUMN", 'i',
               "leave a column out of the comparison (repeatable)"),
    DD_CMD_SET("rows", "N", 'r', "rows printed per table (default 20)"),
    DD_CMD_FLAG("envelope", dd_htest_opts_t, envelope,
                "MESSAGES lines are envelopes with key and headers"),
    DD_HTEST_STR("seed-sql", "FILE", seed_sql,
                 "SQL statements run in each pass's database after the\n"
                 "migrations, before its messages: the rows a handler\n"
                 "works on (stock levels, accounts)"),
    DD_CMD_FLAG("keep", dd_htest_opts_t, keep,
                "keep the scratch directory (and, with\n"
                "--mysql-socket, the databases)"),
    DD_CMD_OPT_END,
};

static void dd_htest_release(void *opts)
{
    free(((dd_htest_opts_t *)opts)->ignore);
}

/* ---- the configuration ---- */

/* The group `name` of the root, made as needed. */
static config_setting_t *dd_htest_group_of(config_t *lc, const char *name)
{
    config_setting_t *root = config_root_setting(lc), *g = config_setting_get_member(root, name);

    if (g && !config_setting_is_group(g)) {
        config_setting_remove(root, name);
        g = NULL;
    }
    return g ? g : config_setting_add(root, name, CONFIG_TYPE_GROUP);
}

static void dd_htest_set(config_t *lc, const char *group, const char *name, int type, const char *s,
                         long long n)
{
    config_setting_t *g = dd_htest_group_of(lc, group), *v;

    if (config_setting_get_member(g, name)) config_setting_remove(g, name);
    if (!(v = config_setting_add(g, name, type))) return;
    if (type == CONFIG_TYPE_STRING) config_setting_set_string(v, s);
    if (type == CONFIG_TYPE_INT) config_setting_set_int(v, (int)n);
    if (type == CONFIG_TYPE_ARRAY)
        for (const char *p = s; p && *p; p += strlen(p) + 1) /* "a\0b\0\0" */
            config_setting_set_string_elem(v, -1, p);
}

/* A string setting of lc, or NULL. */
static const char *dd_htest_get(const config_t *lc, const char *path)
{
    const char *s = NULL;

    return config_lookup_string(lc, path, &s) == CONFIG_TRUE ? s : NULL;
}

/* The team's configuration (or none) with the options applied, less what
 * handler-test replaces for each pass (Kafka, the database, HTTP, the
 * background purge). handler.path is made absolute: the passes' files are
 * written elsewhere. */
static int dd_htest_conf(dd_htest_t *ht, char *errstr, size_t errstr_size)
{
    static const char *const dropped[] = {"kafka", "mysql", "http",
                                          "purge", "dlq",   "schema_registry"};
    const dd_htest_opts_t *o = ht->o;
    char dir[PATH_MAX] = ".", cwd[PATH_MAX] = ".", path[2 * PATH_MAX];
    const char *handler;
    long long attempts = 0;
    config_setting_t *s;

    config_init(&ht->lc);
    if (!getcwd(cwd, sizeof(cwd))) snprintf(cwd, sizeof(cwd), ".");
    snprintf(dir, sizeof(dir), "%s", cwd);
    if (o->config) {
        char *copy = strdup(o->config), *slash = copy ? strrchr(copy, '/') : NULL;
        if (slash) *slash = '\0';
        if (!copy || !realpath(slash ? copy : ".", dir)) snprintf(dir, sizeof(dir), ".");
        free(copy);
        config_set_include_dir(&ht->lc, dir);
        if (config_read_file(&ht->lc, o->config) != CONFIG_TRUE) {
            dd_errstr_set(errstr, errstr_size, "%s:%d: %s",
                          config_error_file(&ht->lc) ? config_error_file(&ht->lc) : o->config,
                          config_error_line(&ht->lc), config_error_text(&ht->lc));
            return DD_EXIT_USAGE;
        }
    }
    /* It tests one handler: a configuration with routes gives it by the
     * options, as a configuration of one route would have it. */
    if (config_setting_get_member(config_root_setting(&ht->lc), "routes")) {
        if (!o->handler || !o->key) {
            dd_errstr_set(errstr, errstr_size,
                          "%s has routes, and handler-test tests one handler: give the route's "
                          "with --handler and --key (and --lane-key)",
                          o->config);
            return DD_EXIT_USAGE;
        }
        config_setting_remove(config_root_setting(&ht->lc), "routes");
    }
    for (size_t i = 0; i < DD_ARRAY_LEN(dropped); i++)
        if (config_setting_get_member(config_root_setting(&ht->lc), dropped[i]))
            config_setting_remove(config_root_setting(&ht->lc), dropped[i]);
    if (o->handler) dd_htest_set(&ht->lc, "handler", "path", CONFIG_TYPE_STRING, o->handler, 0);
    if (o->key) dd_htest_set(&ht->lc, "dedup", "key", CONFIG_TYPE_STRING, o->key, 0);
    if (o->lane_key) dd_htest_set(&ht->lc, "dedup", "lane_key", CONFIG_TYPE_STRING, o->lane_key, 0);
    /* The messages are JSON: what a route's Avro records decode to is what
     * its handler sees (docs/KEYS.md, "Avro"). */
    dd_htest_set(&ht->lc, "dedup", "format", CONFIG_TYPE_STRING, "json", 0);
    if (!dd_htest_get(&ht->lc, "dedup.key")) {
        dd_errstr_set(errstr, errstr_size, "%s has no dedup.key", o->config);
        return DD_EXIT_USAGE;
    }
    /* its private server's user holds every privilege: nothing to declare */
    if ((s = config_lookup(&ht->lc, "handler")) && config_setting_get_member(s, "grants"))
        config_setting_remove(s, "grants");
    /* relative to the configuration's directory, or to here for --handler;
     * without one, a handler that ships with dedupd (handler.sql) names it */
    if ((handler = dd_htest_get(&ht->lc, "handler.path")) && handler[0] != '/') {
        snprintf(path, sizeof(path), "%s/%s", o->handler ? cwd : dir, handler);
        dd_htest_set(&ht->lc, "handler", "path", CONFIG_TYPE_STRING, path, 0);
    }
    /* Small batches: every message's first success rolls its transaction
     * back once, so a batch of k owned keys runs k + 1 times. */
    dd_htest_set(&ht->lc, "batch", "max_messages", CONFIG_TYPE_INT, NULL, 32);
    dd_htest_set(&ht->lc, "batch", "max_wait_ms", CONFIG_TYPE_INT, NULL, 5);
    /* A RETRY is tried again soon, and not forever. */
    if ((s = config_lookup(&ht->lc, "retry.max_attempts"))) attempts = config_setting_get_int64(s);
    dd_htest_set(&ht->lc, "retry", "backoff_initial", CONFIG_TYPE_STRING, "10ms", 0);
    dd_htest_set(&ht->lc, "retry", "backoff_max", CONFIG_TYPE_STRING, "100ms", 0);
    dd_htest_set(&ht->lc, "retry", "max_attempts", CONFIG_TYPE_INT, NULL,
                 attempts > 0 ? attempts : 10);
    if (!o->config) dd_htest_set(&ht->lc, "log", "level", CONFIG_TYPE_STRING, "warn", 0);
    return DD_EXIT_OK;
}

/* A pass's configuration was refused: an error about a setting the
 * user's file holds ("pass1.conf:4: setting dedup.lane_key: ...") is told
 * at that setting's line of the user's file instead. 1 (err rewritten)
 * when it is such an error. */
static int dd_htest_conf_own_error(const dd_htest_t *ht, char *err, size_t err_size)
{
    const char *at = strstr(err, ": setting "), *path = ht->o->config;
    char name[128], rest[700];
    size_t len;
    const config_setting_t *st;
    int line;

    if (!path || !at) return 0;
    at += strlen(": setting ");
    len = strcspn(at, ": ");
    if (len == 0 || len >= sizeof(name)) return 0;
    memcpy(name, at, len);
    name[len] = '\0';
    if (!(st = config_lookup(&ht->lc, name)) || (line = config_setting_source_line(st)) <= 0)
        return 0;
    snprintf(rest, sizeof(rest), "%s", at - strlen("setting "));
    snprintf(err, err_size, "%.200s:%d: %.480s", path, line, rest);
    return 1;
}

/* Writes pass p's configuration and loads it. */
static int dd_htest_conf_pass(dd_htest_t *ht, int p, dd_conf_t **confp, char *errstr,
                              size_t errstr_size)
{
    char path[300], group[32], err[700];
    int rc;

    snprintf(group, sizeof(group), "dedupd-handler-test-%d", p + 1);
    dd_htest_set(&ht->lc, "kafka", "brokers", CONFIG_TYPE_STRING, ht->env.bootstraps, 0);
    dd_htest_set(&ht->lc, "kafka", "group", CONFIG_TYPE_STRING, group, 0);
    dd_htest_set(&ht->lc, "kafka", "topics", CONFIG_TYPE_ARRAY, ht->topic[p], 0);
    dd_htest_set(&ht->lc, "kafka", "properties", CONFIG_TYPE_ARRAY,
                 "session.timeout.ms=6000\0heartbeat.interval.ms=500\0max.poll.interval.ms=10000\0",
                 0);
    dd_htest_set(&ht->lc, "mysql", "socket", CONFIG_TYPE_STRING, ht->env.socket, 0);
    dd_htest_set(&ht->lc, "mysql", "user", CONFIG_TYPE_STRING, ht->env.user, 0);
    dd_htest_set(&ht->lc, "mysql", "database", CONFIG_TYPE_STRING, ht->db[p], 0);
    if (ht->env.password)
        dd_htest_set(&ht->lc, "mysql", "password_env", CONFIG_TYPE_STRING, "DEDUPD_MYSQL_PASSWORD",
                     0);
    dd_htest_set(&ht->lc, "dlq", "topic", CONFIG_TYPE_STRING, ht->dlq[p], 0);
    snprintf(path, sizeof(path), "%s/pass%d.conf", ht->env.dir, p + 1);
    if (config_write_file(&ht->lc, path) != CONFIG_TRUE) {
        dd_errstr_set(errstr, errstr_size, "cannot write %s", path);
        return DD_ERR_IO;
    }
    if ((rc = dd_conf_load(confp, path, err, sizeof(err))) &&
        !dd_htest_conf_own_error(ht, err, sizeof(err))) {
        ht->env.keep = 1; /* the file the error names */
        dd_errstr_set(errstr, errstr_size, "%s (the configuration of pass %d, made from %s)", err,
                      p + 1, ht->o->config ? ht->o->config : "the options");
    } else if (rc) {
        dd_errstr_set(errstr, errstr_size, "%s", err);
    }
    return rc;
}

/* ---- the passes ---- */

static void dd_htest_report(void *opaque, dd_validate_level_t level, const char *what,
                            const char *text)
{
    (void)opaque;
    if (level == DD_VALIDATE_WARN) dd_log(DD_LOG_WARN, "%s: %s", what, text);
}

/* Pass p ready to run: its configuration loaded and checked (as `dedupd
 * run` checks it), the handler loaded, both migrations run, the consumer
 * made. Pass 2's lanes are made with the rollback fault. */
static int dd_htest_pass_new(dd_htest_t *ht, int p, char *errstr, size_t errstr_size)
{
    dd_htest_pass_t *ps = &ht->pass[p];
    dd_db_t *db = NULL;
    int rc;

    rc = dd_htest_conf_pass(ht, p, &ps->conf, errstr, errstr_size);
    if (!rc)
        dd_log_setup((dd_log_level_t)ps->conf->log.level, (dd_log_format_t)ps->conf->log.format);
    if (!rc) rc = dd_validate_conf(ps->conf, &ps->h, dd_htest_report, NULL, errstr, errstr_size);
    if (!rc) snprintf(ht->handler, sizeof(ht->handler), "%s", dd_handler_name(ps->h));
    if (!rc) snprintf(ht->handler_path, sizeof(ht->handler_path), "%s", dd_handler_path(ps->h));
    if (!rc) rc = dd_db_new(&db, ps->conf, errstr, errstr_size);
    if (!rc)
        rc = dd_migrate_run(dd_db_mysql(db), ps->conf->routes[0].dedup.table, errstr, errstr_size);
    /* one event namespace in both passes' databases, so their events' ids
     * compare */
    if (!rc && ps->conf->outbox.enabled)
        rc = dd_outbox_migrate(dd_db_mysql(db), DD_HTEST_EVENT_NS, errstr, errstr_size);
    if (!rc) rc = dd_handler_migrate(ps->h, dd_db_mysql(db), errstr, errstr_size);
    if (!rc && ht->o->seed_sql)
        rc = dd_htest_env_seed(dd_db_mysql(db), ht->o->seed_sql, errstr, errstr_size);
    dd_db_destroy(db);
    if (p == 1) dd_test_fault_set("rollback_after_handler");
    if (!rc) rc = dd_pipeline_new(&ps->pl, ps->conf, &ps->h, errstr, errstr_size);
    dd_test_fault_set(NULL); /* read by the lanes as they were made */
    return rc;
}

static void dd_htest_pass_destroy(dd_htest_pass_t *ps)
{
    dd_pipeline_destroy(ps->pl);
    dd_handler_destroy(ps->h);
    dd_conf_destroy(ps->conf);
    ps->pl = NULL, ps->h = NULL, ps->conf = NULL; /* the stats stay */
}

/* Runs the passes one after the other (one consumer per process: the parse
 * pool is the process's), each until the end of its topic. */
static int dd_htest_passes(dd_htest_t *ht, char *errstr, size_t errstr_size)
{
    int rc = 0;

    for (int p = 0; !rc && p < DD_HTEST_PASSES; p++) {
        dd_htest_pass_t *ps = &ht->pass[p];
        rc = dd_htest_pass_new(ht, p, errstr, errstr_size);
        if (!rc) rc = dd_pipeline_run(ps->pl, 1, &dd_stop_requested, errstr, errstr_size);
        if (ps->pl) dd_pipeline_stats(ps->pl, &ps->stats);
        dd_htest_pass_destroy(ps);
        if (!rc && atomic_load(&dd_stop_requested)) {
            dd_errstr_set(errstr, errstr_size, "interrupted");
            rc = DD_ERR_FATAL;
        }
    }
    return rc;
}

static void dd_htest_print_pass(const dd_htest_t *ht, int p)
{
    const dd_stats_t *s = &ht->pass[p].stats;
    uint64_t dl = 0;

    for (int i = 0; i < DD_REASON_CNT; i++)
        dl += s->dead_letters[i];
    if (p == 0)
        printf("pass 1: each message once, in file order: ");
    else
        printf("pass 2: each message twice, shuffled (--seed %u), every transaction rolled back "
               "once after its handler succeeded: ",
               ht->o->seed);
    printf("%llu delivered, %llu applied, %llu duplicate(s), %llu dead letter(s)",
           (unsigned long long)s->messages, (unsigned long long)s->applied,
           (unsigned long long)s->duplicates, (unsigned long long)dl);
    for (int i = 0; i < DD_REASON_CNT; i++)
        if (s->dead_letters[i])
            printf(" %s=%llu", dd_reason2str((dd_reason_t)i),
                   (unsigned long long)s->dead_letters[i]);
    printf("\n");
}

/* Unsets the DEDUPD_<SECTION>_<NAME> overrides: handler-test writes every
 * setting it needs itself, and the team's environment must not point a
 * pass at its real Kafka or database. The test faults and the password
 * stay. */
static void dd_htest_unset_overrides(void)
{
    extern char **environ;
    char name[128];
    int again = 1;

    while (again) {
        again = 0;
        for (char **e = environ; *e; e++) {
            size_t len = strcspn(*e, "=");
            if (strncmp(*e, "DEDUPD_", 7) || len >= sizeof(name)) continue;
            snprintf(name, sizeof(name), "%.*s", (int)len, *e);
            if (!strcmp(name, "DEDUPD_TEST_FAULTS") || !strcmp(name, "DEDUPD_MYSQL_PASSWORD"))
                continue;
            unsetenv(name); /* environ changed: start over */
            again = 1;
            break;
        }
    }
}

/* The checks, after both passes. Returns 0 when all passed, 1 when one
 * failed, -1 on an error (errstr). */
static int dd_htest_check(dd_htest_t *ht, const char *table, char *errstr, size_t errstr_size)
{
    dd_htest_dl_t *dl[DD_HTEST_PASSES] = {NULL, NULL};
    size_t dl_cnt[DD_HTEST_PASSES] = {0, 0};
    dd_htest_cmp_t cmp = {
        .db = ht->env.admin,
        .dbs = {ht->db[0], ht->db[1]},
        .table = table,
        .ignore = ht->o->ignore,
        .ignore_cnt = ht->o->ignore_cnt,
        .rows = ht->o->rows,
        .out = stdout,
    };
    int rc = 0, r;

    for (int p = 0; p < DD_HTEST_PASSES && !rc; p++)
        if (dd_htest_env_dead_letters(&ht->env, ht->dlq[p], ht->order[p], ht->order_cnt[p], &dl[p],
                                      &dl_cnt[p], errstr, errstr_size))
            rc = -1;
    if (!rc) printf("checks:\n");
    if (!rc && (r = dd_htest_cmp_dedup(&cmp, errstr, errstr_size)) != 0) rc = r < 0 ? -1 : 1;
    if (rc >= 0)
        rc |= dd_htest_cmp_dead_letters(&cmp, ht->msgs, dl[0], dl_cnt[0], dl[1], dl_cnt[1]);
    if (rc >= 0 && (r = dd_htest_cmp_tables(&cmp, errstr, errstr_size)) != 0) rc = r < 0 ? -1 : 1;
    free(dl[0]);
    free(dl[1]);
    return rc;
}

static int dd_htest_run(const dd_cmd_ctx_t *unused, void *opts)
{
    dd_htest_t ht = {.o = opts};
    const char *dbs[DD_HTEST_PASSES] = {ht.db[0], ht.db[1]};
    const char *topics[2 * DD_HTEST_PASSES];
    char err[1024], sql[200], table[128] = "dedup_record";
    int rc, verdict = -1;

    (void)unused;
    dd_htest_unset_overrides();
    dd_signals_install();
    ht.env.user = ht.o->user;
    ht.env.keep = ht.o->keep;
    ht.env.password = ht.o->socket ? getenv("DEDUPD_MYSQL_PASSWORD") : NULL;
    if (ht.o->socket) snprintf(ht.env.socket, sizeof(ht.env.socket), "%s", ht.o->socket);
    for (int p = 0; p < DD_HTEST_PASSES; p++) {
        snprintf(ht.db[p], sizeof(ht.db[p]), "dedupd_htest_%d_%d", (int)getpid(), p + 1);
        snprintf(ht.topic[p], sizeof(ht.topic[p]), "handler-test.%d", p + 1);
        snprintf(ht.dlq[p], sizeof(ht.dlq[p]), "handler-test.%d.dlq", p + 1);
        topics[2 * p] = ht.topic[p];
        topics[2 * p + 1] = ht.dlq[p];
    }
    rc = dd_htest_msgs_read(ht.o->messages, ht.o->envelope, &ht.msgs, &ht.n, err, sizeof(err));
    if (!rc) rc = dd_htest_conf(&ht, err, sizeof(err));
    if (rc) {
        fprintf(stderr, "dedupd handler-test: %s\n", err);
        goto out;
    }
    if (dd_htest_get(&ht.lc, "dedup.table"))
        snprintf(table, sizeof(table), "%s", dd_htest_get(&ht.lc, "dedup.table"));
    rc = dd_htest_msgs_group(ht.msgs, ht.n,
                             dd_htest_get(&ht.lc, "dedup.lane_key")
                                 ? dd_htest_get(&ht.lc, "dedup.lane_key")
                                 : dd_htest_get(&ht.lc, "dedup.key"),
                             err, sizeof(err));
    if (!rc && dd_htest_msgs_orders(ht.msgs, ht.n, ht.o->seed, ht.order, ht.order_cnt))
        rc = DD_ERR_NOMEM, snprintf(err, sizeof(err), "out of memory");
    if (!rc) rc = dd_htest_env_db_start(&ht.env, err, sizeof(err));
    for (int p = 0; !rc && p < DD_HTEST_PASSES; p++) {
        snprintf(sql, sizeof(sql), "DROP DATABASE IF EXISTS `%s`", ht.db[p]);
        rc = dd_htest_env_sql(&ht.env, sql, err, sizeof(err));
        snprintf(sql, sizeof(sql), "CREATE DATABASE `%s`", ht.db[p]);
        if (!rc) rc = dd_htest_env_sql(&ht.env, sql, err, sizeof(err));
    }
    if (!rc) rc = dd_htest_env_kafka_start(&ht.env, topics, 2 * DD_HTEST_PASSES, err, sizeof(err));
    for (int p = 0; !rc && p < DD_HTEST_PASSES; p++)
        rc = dd_htest_env_produce(&ht.env, ht.topic[p], ht.msgs, ht.order[p], ht.order_cnt[p], err,
                                  sizeof(err));
    if (!rc) rc = dd_htest_passes(&ht, err, sizeof(err));
    if (!rc) {
        printf("dedupd handler-test: handler %s (%s), %zu message(s) from %s\n", ht.handler,
               ht.handler_path, ht.n, ht.o->messages);
        dd_htest_print_pass(&ht, 0);
        dd_htest_print_pass(&ht, 1);
    }
    if (!rc && (verdict = dd_htest_check(&ht, table, err, sizeof(err))) < 0) rc = DD_ERR_FATAL;
    if (rc)
        fprintf(stderr, "dedupd handler-test: %s\n", err);
    else if (verdict)
        printf("handler-test: FAIL: the handler's effects are not exactly once (see the FAIL "
               "lines)\n");
    else
        printf("handler-test: PASS\n");
    fflush(stdout);
out:
    for (int p = 0; p < DD_HTEST_PASSES; p++)
        dd_htest_pass_destroy(&ht.pass[p]);
    dd_htest_env_stop(&ht.env, dbs, DD_HTEST_PASSES);
    if (ht.env.keep && ht.env.dir[0])
        fprintf(stderr, "dedupd handler-test: kept %s%s\n", ht.env.dir,
                ht.o->socket ? " and the databases" : "");
    config_destroy(&ht.lc);
    dd_htest_msgs_free(ht.msgs, ht.n);
    free(ht.order[0]);
    free(ht.order[1]);
    if (rc == DD_EXIT_USAGE) return DD_EXIT_USAGE;
    return rc || verdict ? DD_EXIT_FAIL : DD_EXIT_OK;
}

const dd_cmd_t dd_cmd_handler_test = {
    .name = "handler-test",
    .args = "[-c FILE] [options] MESSAGES",
    .summary = "check that a handler applies each message exactly once",
    .usage = "usage: dedupd handler-test [-c FILE] [--handler PATH] [--key TEMPLATE]\n"
             "                           [--lane-key TEMPLATE] [--mysql-socket PATH]\n"
             "                           [--mysql-user USER] [--seed N]\n"
             "                           [--ignore-column TABLE.COLUMN]... [--rows N]\n"
             "                           [--envelope] [--seed-sql FILE] [--keep] MESSAGES\n"
             "\n"
             "Runs a handler twice over the messages of MESSAGES (a file, or - for stdin)\n"
             "with dedupd's real consumer, on an in-process mock Kafka cluster and a\n"
             "private MariaDB: pass 1 delivers each message once, in order; pass 2 each\n"
             "message twice, shuffled, and rolls every transaction back once after its\n"
             "handler succeeded, then runs it again. A handler that applies each message\n"
             "exactly once leaves the same database both times: the same business keys\n"
             "recorded, the same dead letters, the same rows in each of its tables\n"
             "(compared without AUTO_INCREMENT columns and columns set to the current\n"
             "time). Prints the checks and the handler's tables.\n"
             "\n"
             "MESSAGES has one payload per line, sent as it is (empty lines are skipped);\n"
             "with --envelope, one {\"payload\": ..., \"key\": \"...\", \"headers\": {...}} per\n"
             "line (a string payload is sent as its text, another value as it is written).\n",
    .more = "DEDUPD_* setting overrides in the environment are ignored.\n",
    .exits = "  0  each message was applied exactly once\n"
             "  1  it was not (the FAIL lines say how), or an error\n"
             "  2  usage error\n",
    .opts_size = sizeof(dd_htest_opts_t),
    .opts = dd_htest_opts,
    .init = dd_htest_init,
    .set = dd_htest_opt_set,
    .check = dd_htest_operands,
    .run = dd_htest_run,
    .release = dd_htest_release,
};
