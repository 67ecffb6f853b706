/*
 * Inside `dedupd handler-test` (dd_htest.c), shared by its four files
 * only: dd_htest.c (the command: configuration, passes, verdict),
 * dd_htest_msgs.c (the messages and the order of each pass),
 * dd_htest_env.c (what it runs on: a private MariaDB, an in-process mock
 * Kafka cluster) and dd_htest_cmp.c (what it compares: dedup rows, dead
 * letters, the handler's tables).
 */
#ifndef DD_HTEST_INT_H
#define DD_HTEST_INT_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <librdkafka/rdkafka.h>
#include <mysql.h>

#include "dd_buf.h"
#include "dd_stats.h"

#define DD_HTEST_PASSES 2

/* One Kafka header of a test message. */
typedef struct dd_htest_hdr_s {
    char *name;
    char *value; /* NULL: a null value */
    size_t value_len;
} dd_htest_hdr_t;

/* One message of the file, as it is produced. */
typedef struct dd_htest_msg_s {
    int line; /* in the file, for messages */
    char *payload;
    size_t len;
    char *key; /* Kafka key, or NULL */
    size_t key_len;
    dd_htest_hdr_t *hdrs;
    size_t hdr_cnt;
    long group; /* messages of one lane key keep their order */
} dd_htest_msg_t;

/* A dead letter: the message (index into the file's messages) and why. */
typedef struct dd_htest_dl_s {
    size_t msg;
    char reason[32];
} dd_htest_dl_t;

/* The test bed: database server, Kafka cluster, scratch directory. */
typedef struct dd_htest_env_s {
    char dir[256];    /* scratch directory (configs, the private server) */
    int keep;         /* --keep: leave dir and the databases behind */
    char socket[300]; /* the server's unix socket */
    const char *user; /* database user (root on the private server) */
    const char *password;
    pid_t server;    /* the private mariadbd, 0 when --mysql-socket */
    MYSQL *admin;    /* for creating, reading and dropping the databases */
    rd_kafka_t *rk;  /* producer hosting the mock cluster */
    int undelivered; /* its delivery reports with an error */
    const char *bootstraps;
} dd_htest_env_t;

/* dd_htest_msgs.c */
/* Reads path ("-": stdin): a payload per line, empty lines skipped, or
 * with envelope {"payload", "key", "headers"} objects. Returns 0, or
 * DD_EXIT_USAGE (a bad file, "FILE:LINE: why") / DD_EXIT_FAIL in errstr.
 * *msgsp is malloc'd (dd_htest_msgs_free). */
int dd_htest_msgs_read(const char *path, int envelope, dd_htest_msg_t **msgsp, size_t *np,
                       char *errstr, size_t errstr_size);
void dd_htest_msgs_free(dd_htest_msg_t *msgs, size_t n);
/* Sets each message's group: messages whose lane key template (tmpl_text)
 * renders the same share one; a message without one is alone. */
int dd_htest_msgs_group(dd_htest_msg_t *msgs, size_t n, const char *tmpl_text, char *errstr,
                        size_t errstr_size);
/* The delivery orders (malloc'd indexes into msgs): order[0] the file's,
 * order[1] every message twice, shuffled with seed. -1 out of memory. */
int dd_htest_msgs_orders(const dd_htest_msg_t *msgs, size_t n, unsigned int seed, size_t *order[2],
                         size_t order_cnt[2]);

/* dd_htest_env.c */
/* Makes the scratch directory and, without a socket, starts a private
 * mariadbd in it; then connects the admin connection. */
int dd_htest_env_db_start(dd_htest_env_t *env, char *errstr, size_t errstr_size);
/* Creates the mock cluster with topics[0..n) of one partition each. */
int dd_htest_env_kafka_start(dd_htest_env_t *env, const char *const *topics, size_t n, char *errstr,
                             size_t errstr_size);
/* Produces msgs[order[i]] for i in 0..n to partition 0 of topic, in order
 * (offset i is order[i]), and waits for every delivery. */
int dd_htest_env_produce(dd_htest_env_t *env, const char *topic, const dd_htest_msg_t *msgs,
                         const size_t *order, size_t n, char *errstr, size_t errstr_size);
/* Reads the dead letters of dlq_topic (partition 0): *dls (malloc'd,
 * *cnt of them), each message being order[dedupd.offset]. */
int dd_htest_env_dead_letters(dd_htest_env_t *env, const char *dlq_topic, const size_t *order,
                              size_t order_cnt, dd_htest_dl_t **dls, size_t *cnt, char *errstr,
                              size_t errstr_size);
/* Runs the statements of file (--seed-sql) on mysql, every result read;
 * an error names the file and the statement's number. */
int dd_htest_env_seed(MYSQL *mysql, const char *file, char *errstr, size_t errstr_size);
/* Runs one statement on the admin connection. */
int dd_htest_env_sql(dd_htest_env_t *env, const char *sql, char *errstr, size_t errstr_size);
/* Stops what was started, drops the databases names[0..n) and removes the
 * directory, unless env->keep. Safe on a half-started env. */
void dd_htest_env_stop(dd_htest_env_t *env, const char *const *dbs, size_t n);

/* dd_htest_cmp.c: the checks, each printing its "ok"/"FAIL" line(s) to out
 * and returning 1 when it failed. */
typedef struct dd_htest_cmp_s {
    MYSQL *db;          /* the admin connection */
    const char *dbs[2]; /* pass 1's database, pass 2's */
    const char *table;  /* the dedup table */
    char **ignore;      /* --ignore-column TABLE.COLUMN */
    int ignore_cnt;
    int rows; /* rows to print per table */
    FILE *out;
} dd_htest_cmp_t;

/* Every business key recorded in pass 2 as in pass 1 (applied or failed),
 * none left processing. -1 on a database error (errstr). */
int dd_htest_cmp_dedup(const dd_htest_cmp_t *cmp, char *errstr, size_t errstr_size);
/* The same dead letters (message, reason) after both passes. */
int dd_htest_cmp_dead_letters(const dd_htest_cmp_t *cmp, const dd_htest_msg_t *msgs,
                              dd_htest_dl_t *dl1, size_t n1, dd_htest_dl_t *dl2, size_t n2);
/* The handler's tables hold the same rows after both passes; prints them
 * (or, on a difference, the rows that differ). -1 on a database error. */
int dd_htest_cmp_tables(const dd_htest_cmp_t *cmp, char *errstr, size_t errstr_size);

#endif /* DD_HTEST_INT_H */
