/*
 * What `dedupd handler-test` runs on (see dd_htest_int.h): a scratch
 * directory, a database server and a Kafka cluster, all its own.
 *
 * The server is the team's (--mysql-socket) or, by default, a private
 * mariadbd started on a fresh data directory in the scratch directory, as
 * scripts/lib/mariadb.sh does for the test suite: no network, no system
 * my.cnf, gone when the test ends. Kafka is librdkafka's mock cluster in
 * this process: dedupd's real consumer, dead-letter producer and offset
 * commits run against it, so the handler is driven exactly as by
 * `dedupd run`.
 */
#include "dd_htest_int.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <pwd.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <librdkafka/rdkafka_mock.h>

#include "dd_common.h"
#include "dd_log.h"

extern char **environ;

#define DD_HTEST_SERVER_START_MS 60000
#define DD_HTEST_SERVER_STOP_MS 30000

/* ---- the scratch directory ---- */

static int dd_htest_env_mkdir(dd_htest_env_t *env, char *errstr, size_t errstr_size)
{
    const char *tmp = getenv("TMPDIR");

    /* The server's socket lives in it: keep the path short (sun_path). */
    if (!tmp || !*tmp || strlen(tmp) > 60) tmp = "/tmp";
    snprintf(env->dir, sizeof(env->dir), "%s/dedupd-htest.XXXXXX", tmp);
    if (!mkdtemp(env->dir)) {
        dd_errstr_set(errstr, errstr_size, "cannot make a directory in %s: %s", tmp,
                      strerror(errno));
        env->dir[0] = '\0';
        return DD_ERR_IO;
    }
    return DD_OK;
}

static int dd_htest_env_rm(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st, (void)flag, (void)ftw;
    remove(path);
    return 0;
}

/* ---- a private mariadbd ---- */

/* The first of names found in PATH or the usual sbin directories. */
static int dd_htest_which(const char *const *names, char *out, size_t out_size)
{
    const char *path = getenv("PATH");
    char dirs[4096], *save = NULL;

    for (; *names; names++) {
        snprintf(dirs, sizeof(dirs), "%s:/usr/sbin:/usr/local/sbin:/usr/bin:/usr/local/bin",
                 path ? path : "");
        for (char *d = strtok_r(dirs, ":", &save); d; d = strtok_r(NULL, ":", &save)) {
            snprintf(out, out_size, "%s/%s", *d ? d : ".", *names);
            if (access(out, X_OK) == 0) return 0;
        }
    }
    return -1;
}

/* Starts argv with its output appended to log, in its own process group
 * (a ctrl-c reaches handler-test, which then stops it in order). */
static int dd_htest_spawn(char *const argv[], const char *log, pid_t *pid)
{
    posix_spawn_file_actions_t fa;
    posix_spawnattr_t attr;
    int rc;

    posix_spawn_file_actions_init(&fa);
    posix_spawnattr_init(&attr);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&fa, 1, log, O_WRONLY | O_CREAT | O_APPEND, 0644);
    posix_spawn_file_actions_adddup2(&fa, 1, 2);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);
    posix_spawnattr_setpgroup(&attr, 0);
    rc = posix_spawn(pid, argv[0], &fa, &attr, argv, environ);
    posix_spawnattr_destroy(&attr);
    posix_spawn_file_actions_destroy(&fa);
    return rc;
}

static int dd_htest_env_connect(dd_htest_env_t *env, int quiet, char *errstr, size_t errstr_size)
{
    MYSQL *db = mysql_init(NULL);

    if (!db) {
        dd_errstr_set(errstr, errstr_size, "out of memory");
        return DD_ERR_NOMEM;
    }
    mysql_options(db, MYSQL_SET_CHARSET_NAME, "utf8mb4");
    if (!mysql_real_connect(db, NULL, env->user, env->password ? env->password : "", NULL, 0,
                            env->socket, 0)) {
        if (!quiet)
            dd_errstr_set(errstr, errstr_size, "cannot connect to %s as %s: %s", env->socket,
                          env->user, mysql_error(db));
        mysql_close(db);
        return DD_ERR_RETRIABLE;
    }
    env->admin = db;
    return DD_OK;
}

/* mariadb-install-db, then mariadbd, then waits until it answers. */
static int dd_htest_env_server(dd_htest_env_t *env, char *errstr, size_t errstr_size)
{
    static const char *const installers[] = {"mariadb-install-db", "mysql_install_db", NULL};
    static const char *const servers[] = {"mariadbd", "mysqld", NULL};
    char install[512], server[512], log[300], a[8][320];
    const struct passwd *pw = getpwuid(getuid());
    const char *user = pw ? pw->pw_name : "root";
    pid_t pid;
    int st;

    if (dd_htest_which(installers, install, sizeof(install)) ||
        dd_htest_which(servers, server, sizeof(server))) {
        dd_errstr_set(errstr, errstr_size,
                      "no MariaDB server to start: mariadbd and mariadb-install-db are not in "
                      "PATH, /usr/sbin or /usr/bin (install mariadb-server, or give "
                      "--mysql-socket of a running server)");
        return DD_ERR_FATAL;
    }
    snprintf(log, sizeof(log), "%s/install-db.log", env->dir);
    snprintf(a[0], sizeof(a[0]), "--datadir=%s/data", env->dir);
    snprintf(a[1], sizeof(a[1]), "--user=%s", user);
    {
        char *argv[] = {install,
                        "--no-defaults",
                        a[0],
                        a[1],
                        "--auth-root-authentication-method=normal",
                        "--skip-test-db",
                        NULL};
        if (dd_htest_spawn(argv, log, &pid) != 0 || waitpid(pid, &st, 0) != pid || !WIFEXITED(st) ||
            WEXITSTATUS(st) != 0) {
            dd_errstr_set(errstr, errstr_size, "%s failed (see %s)", install, log);
            env->keep = 1;
            return DD_ERR_FATAL;
        }
    }
    snprintf(env->socket, sizeof(env->socket), "%s/mysqld.sock", env->dir);
    snprintf(log, sizeof(log), "%s/mysqld.err", env->dir);
    snprintf(a[2], sizeof(a[2]), "--socket=%s", env->socket);
    snprintf(a[3], sizeof(a[3]), "--pid-file=%s/mysqld.pid", env->dir);
    snprintf(a[4], sizeof(a[4]), "--log-error=%s", log);
    snprintf(a[5], sizeof(a[5]), "--tmpdir=%s", env->dir);
    {
        char *argv[] = {server,
                        "--no-defaults",
                        a[0],
                        a[2],
                        a[3],
                        a[4],
                        a[5],
                        a[1],
                        "--skip-networking",
                        "--skip-name-resolve",
                        "--skip-log-bin",
                        "--performance-schema=OFF",
                        "--innodb-buffer-pool-size=64M",
                        "--character-set-server=utf8mb4",
                        NULL};
        if (dd_htest_spawn(argv, log, &env->server) != 0) {
            dd_errstr_set(errstr, errstr_size, "cannot start %s: %s", server, strerror(errno));
            env->server = 0;
            return DD_ERR_FATAL;
        }
    }
    for (int waited = 0; waited < DD_HTEST_SERVER_START_MS; waited += 100) {
        if (waitpid(env->server, &st, WNOHANG) == env->server) {
            env->server = 0;
            env->keep = 1;
            dd_errstr_set(errstr, errstr_size, "%s exited while starting (see %s)", server, log);
            return DD_ERR_FATAL;
        }
        if (dd_htest_env_connect(env, 1, errstr, errstr_size) == DD_OK) return DD_OK;
        dd_sleep_ms(100, NULL);
    }
    env->keep = 1;
    dd_errstr_set(errstr, errstr_size, "%s did not answer on %s within %d s (see %s)", server,
                  env->socket, DD_HTEST_SERVER_START_MS / 1000, log);
    return DD_ERR_FATAL;
}

static void dd_htest_env_server_stop(dd_htest_env_t *env)
{
    int st;

    if (!env->server) return;
    kill(env->server, SIGTERM);
    for (int waited = 0; waited < DD_HTEST_SERVER_STOP_MS; waited += 100) {
        if (waitpid(env->server, &st, WNOHANG) == env->server) {
            env->server = 0;
            return;
        }
        dd_sleep_ms(100, NULL);
    }
    kill(env->server, SIGKILL);
    waitpid(env->server, &st, 0);
    env->server = 0;
}

int dd_htest_env_db_start(dd_htest_env_t *env, char *errstr, size_t errstr_size)
{
    int rc = dd_htest_env_mkdir(env, errstr, errstr_size);

    if (!rc && !env->socket[0])
        rc = dd_htest_env_server(env, errstr, errstr_size);
    else if (!rc)
        rc = dd_htest_env_connect(env, 0, errstr, errstr_size);
    return rc;
}

int dd_htest_env_sql(dd_htest_env_t *env, const char *sql, char *errstr, size_t errstr_size)
{
    if (mysql_query(env->admin, sql) != 0) {
        dd_errstr_set(errstr, errstr_size, "%s: %u: %s", sql, mysql_errno(env->admin),
                      mysql_error(env->admin));
        return DD_ERR_FATAL;
    }
    mysql_free_result(mysql_store_result(env->admin));
    return DD_OK;
}

/* ---- the mock Kafka cluster ---- */

static void dd_htest_env_dr(rd_kafka_t *rk, const rd_kafka_message_t *rkm, void *opaque)
{
    (void)rk;
    if (rkm->err) (*(int *)opaque)++;
}

int dd_htest_env_kafka_start(dd_htest_env_t *env, const char *const *topics, size_t n, char *errstr,
                             size_t errstr_size)
{
    rd_kafka_conf_t *kc = rd_kafka_conf_new();
    rd_kafka_mock_cluster_t *mc;
    char err[256];

    rd_kafka_conf_set_log_cb(kc, dd_log_rdkafka);
    rd_kafka_conf_set_dr_msg_cb(kc, dd_htest_env_dr);
    rd_kafka_conf_set_opaque(kc, &env->undelivered);
    if (rd_kafka_conf_set(kc, "test.mock.num.brokers", "1", err, sizeof(err)) ||
        rd_kafka_conf_set(kc, "enable.idempotence", "true", err, sizeof(err)) ||
        rd_kafka_conf_set(kc, "linger.ms", "5", err, sizeof(err)) ||
        !(env->rk = rd_kafka_new(RD_KAFKA_PRODUCER, kc, err, sizeof(err)))) {
        rd_kafka_conf_destroy(kc);
        dd_errstr_set(errstr, errstr_size, "mock Kafka cluster: %s", err);
        return DD_ERR_FATAL;
    }
    mc = rd_kafka_handle_mock_cluster(env->rk);
    env->bootstraps = mc ? rd_kafka_mock_cluster_bootstraps(mc) : NULL;
    for (size_t i = 0; mc && i < n; i++) {
        rd_kafka_resp_err_t e = rd_kafka_mock_topic_create(mc, topics[i], 1, 1);
        if (e) {
            dd_errstr_set(errstr, errstr_size, "mock Kafka cluster: topic %s: %s", topics[i],
                          rd_kafka_err2str(e));
            return DD_ERR_FATAL;
        }
    }
    if (!env->bootstraps) {
        dd_errstr_set(errstr, errstr_size, "mock Kafka cluster: none was created");
        return DD_ERR_FATAL;
    }
    return DD_OK;
}

static rd_kafka_resp_err_t dd_htest_env_send(rd_kafka_t *rk, const char *topic,
                                             const dd_htest_msg_t *m)
{
    rd_kafka_headers_t *hdrs = m->hdr_cnt ? rd_kafka_headers_new(m->hdr_cnt) : NULL;
    rd_kafka_resp_err_t err;

    for (size_t i = 0; i < m->hdr_cnt; i++)
        rd_kafka_header_add(hdrs, m->hdrs[i].name, -1, m->hdrs[i].value,
                            (ssize_t)m->hdrs[i].value_len);
    if (hdrs)
        err = rd_kafka_producev(
            rk, RD_KAFKA_V_TOPIC(topic), RD_KAFKA_V_PARTITION(0),
            RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY), RD_KAFKA_V_VALUE(m->payload, m->len),
            RD_KAFKA_V_KEY(m->key, m->key_len), RD_KAFKA_V_HEADERS(hdrs), RD_KAFKA_V_END);
    else
        err = rd_kafka_producev(rk, RD_KAFKA_V_TOPIC(topic), RD_KAFKA_V_PARTITION(0),
                                RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
                                RD_KAFKA_V_VALUE(m->payload, m->len),
                                RD_KAFKA_V_KEY(m->key, m->key_len), RD_KAFKA_V_END);
    if (err && hdrs) rd_kafka_headers_destroy(hdrs); /* kept by librdkafka only on success */
    return err;
}

int dd_htest_env_produce(dd_htest_env_t *env, const char *topic, const dd_htest_msg_t *msgs,
                         const size_t *order, size_t n, char *errstr, size_t errstr_size)
{
    for (size_t i = 0; i < n; i++) {
        rd_kafka_resp_err_t err;
        while ((err = dd_htest_env_send(env->rk, topic, &msgs[order[i]])) ==
               RD_KAFKA_RESP_ERR__QUEUE_FULL)
            rd_kafka_poll(env->rk, 100);
        if (err) {
            dd_errstr_set(errstr, errstr_size, "producing to %s: %s", topic, rd_kafka_err2str(err));
            return DD_ERR_FATAL;
        }
    }
    if (rd_kafka_flush(env->rk, 30000) != RD_KAFKA_RESP_ERR_NO_ERROR || env->undelivered) {
        dd_errstr_set(errstr, errstr_size, "producing to %s: %d message(s) not delivered", topic,
                      env->undelivered ? env->undelivered : rd_kafka_outq_len(env->rk));
        return DD_ERR_FATAL;
    }
    return DD_OK;
}

/* The value of header name of rkm as a string in out, or "" . */
static void dd_htest_env_header(rd_kafka_message_t *rkm, const char *name, char *out, size_t size)
{
    rd_kafka_headers_t *hdrs;
    const void *v;
    size_t len;

    out[0] = '\0';
    if (rd_kafka_message_headers(rkm, &hdrs) || rd_kafka_header_get_last(hdrs, name, &v, &len) ||
        !v)
        return;
    snprintf(out, size, "%.*s", (int)len, (const char *)v);
}

/* Adds rkm, a dead letter, to *dls. */
static int dd_htest_env_dl_add(rd_kafka_message_t *rkm, const size_t *order, size_t order_cnt,
                               dd_htest_dl_t **dls, size_t *cnt)
{
    char offset[32];
    dd_htest_dl_t *p;
    unsigned long long off;

    dd_htest_env_header(rkm, "dedupd.offset", offset, sizeof(offset));
    off = strtoull(offset, NULL, 10);
    if (!offset[0] || off >= order_cnt) return 0; /* not one of ours */
    if (!(p = realloc(*dls, (*cnt + 1) * sizeof(*p)))) return -1;
    *dls = p;
    p[*cnt].msg = order[off];
    dd_htest_env_header(rkm, "dedupd.reason", p[*cnt].reason, sizeof(p[*cnt].reason));
    (*cnt)++;
    return 0;
}

int dd_htest_env_dead_letters(dd_htest_env_t *env, const char *dlq_topic, const size_t *order,
                              size_t order_cnt, dd_htest_dl_t **dls, size_t *cnt, char *errstr,
                              size_t errstr_size)
{
    rd_kafka_conf_t *kc = rd_kafka_conf_new();
    rd_kafka_topic_partition_list_t *tp = NULL;
    rd_kafka_t *rk = NULL;
    int64_t lo = 0, hi = 0, next = 0;
    int64_t deadline = dd_now_ms() + 30000;
    char err[256];
    int rc = DD_ERR_FATAL;

    *dls = NULL;
    *cnt = 0;
    rd_kafka_conf_set_log_cb(kc, dd_log_rdkafka);
    if (rd_kafka_conf_set(kc, "bootstrap.servers", env->bootstraps, err, sizeof(err)) ||
        rd_kafka_conf_set(kc, "group.id", "dedupd-handler-test", err, sizeof(err)) ||
        rd_kafka_conf_set(kc, "enable.auto.commit", "false", err, sizeof(err)) ||
        !(rk = rd_kafka_new(RD_KAFKA_CONSUMER, kc, err, sizeof(err)))) {
        rd_kafka_conf_destroy(kc);
        dd_errstr_set(errstr, errstr_size, "reading %s: %s", dlq_topic, err);
        return DD_ERR_FATAL;
    }
    rd_kafka_poll_set_consumer(rk);
    if (rd_kafka_query_watermark_offsets(rk, dlq_topic, 0, &lo, &hi, 10000)) {
        dd_errstr_set(errstr, errstr_size, "reading %s: no watermarks", dlq_topic);
        goto out;
    }
    tp = rd_kafka_topic_partition_list_new(1);
    rd_kafka_topic_partition_list_add(tp, dlq_topic, 0)->offset = RD_KAFKA_OFFSET_BEGINNING;
    if (hi > lo && rd_kafka_assign(rk, tp)) {
        dd_errstr_set(errstr, errstr_size, "reading %s: cannot assign", dlq_topic);
        goto out;
    }
    for (next = lo; next < hi && dd_now_ms() < deadline;) {
        rd_kafka_message_t *rkm = rd_kafka_consumer_poll(rk, 200);
        if (!rkm) continue;
        if (!rkm->err) {
            next = rkm->offset + 1;
            if (dd_htest_env_dl_add(rkm, order, order_cnt, dls, cnt)) next = hi + 1;
        }
        rd_kafka_message_destroy(rkm);
    }
    if (next != hi) {
        dd_errstr_set(errstr, errstr_size, "reading %s: %s", dlq_topic,
                      next > hi ? "out of memory" : "timed out");
        goto out;
    }
    rc = DD_OK;
out:
    if (tp) rd_kafka_topic_partition_list_destroy(tp);
    rd_kafka_consumer_close(rk);
    rd_kafka_destroy(rk);
    if (rc) {
        free(*dls);
        *dls = NULL;
        *cnt = 0;
    }
    return rc;
}

void dd_htest_env_stop(dd_htest_env_t *env, const char *const *dbs, size_t n)
{
    char sql[200];

    if (env->admin && !env->keep && !env->server) {
        for (size_t i = 0; i < n; i++) {
            snprintf(sql, sizeof(sql), "DROP DATABASE IF EXISTS `%s`", dbs[i]);
            mysql_query(env->admin, sql);
        }
    }
    mysql_close(env->admin);
    env->admin = NULL;
    if (env->rk) rd_kafka_destroy(env->rk);
    env->rk = NULL;
    dd_htest_env_server_stop(env);
    if (env->dir[0] && !env->keep) nftw(env->dir, dd_htest_env_rm, 16, FTW_DEPTH | FTW_PHYS);
}

int dd_htest_env_seed(MYSQL *mysql, const char *file, char *errstr, size_t errstr_size)
{
    FILE *f = fopen(file, "r");
    char *sql = NULL;
    size_t cap = 0, len;
    int failed = 0; /* the number of the statement that failed */

    if (!f) {
        dd_errstr_set(errstr, errstr_size, "--seed-sql %s: %s", file, strerror(errno));
        return DD_ERR_ARG;
    }
    len = getdelim(&sql, &cap, '\0', f) > 0 ? strlen(sql) : 0;
    fclose(f);
    if (len && mysql_real_query(mysql, sql, (unsigned long)len) != 0) failed = 1;
    for (int n = 1; len && !failed; n++) { /* each statement's result */
        MYSQL_RES *res = mysql_store_result(mysql);
        int more;
        if (res) mysql_free_result(res);
        more = mysql_next_result(mysql);
        if (more > 0) failed = n + 1;
        if (more != 0) break;
    }
    if (failed)
        dd_errstr_set(errstr, errstr_size, "--seed-sql %s: statement %d: %u: %s", file, failed,
                      mysql_errno(mysql), mysql_error(mysql));
    free(sql);
    return failed ? DD_ERR_FATAL : DD_OK;
}
