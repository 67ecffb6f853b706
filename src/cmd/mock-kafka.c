/*
 * `dedupd mock-kafka`: a stand-in Kafka cluster for scripts, tests, the demo
 * and the bench.
 *
 * No Kafka broker is installed on the machines dedupd is built on, but
 * librdkafka ships a mock cluster that speaks the real protocol over TCP
 * (produce, fetch, consumer groups, offset commits). This module hosts one in
 * its own process so that several clients (dedupd, ddtk, kcat) can share it,
 * publishes its bootstrap list, and exposes librdkafka's fault-injection calls
 * through a line-oriented control FIFO so shell-driven tests can take brokers
 * down, add latency or make requests fail at chosen moments.
 *
 * The main thread only waits: on a signalfd (so SIGTERM/SIGINT end it
 * promptly, whatever else is happening) and on the control FIFO. The cluster
 * itself runs on librdkafka's own thread.
 */
#include "dd_cmd.h"
#include "dd_common.h"
#include "dd_log.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <librdkafka/rdkafka.h>
#include <librdkafka/rdkafka_mock.h>

#define DD_MOCK_MAX_BROKERS 32
#define DD_MOCK_MAX_PARTITIONS 1000
#define DD_MOCK_MAX_ERRCNT 100000
#define DD_MOCK_LINE_MAX 1024

typedef struct dd_mock_topic_s {
    char *name;
    int partitions;
    int replication;
} dd_mock_topic_t;

typedef struct dd_mock_opts_s {
    int broker_cnt;
    dd_mock_topic_t *topics; /* owned, topic_cnt entries */
    int topic_cnt;
    const char *bootstrap_file; /* borrowed from argv */
    const char *control_path;   /* borrowed from argv */
} dd_mock_opts_t;

/* The control channel: a FIFO we read command lines from. */
typedef struct dd_mock_ctl_s {
    const char *path;
    int fd;      /* read end, -1 when not open */
    int keep_fd; /* our own write end, see dd_mock_ctl_reopen() */
    int created; /* we made the FIFO, so we remove it on exit */
    char buf[DD_MOCK_LINE_MAX];
    size_t len;
    int overlong; /* discarding the rest of a too-long line */
} dd_mock_ctl_t;

/* Parses a decimal int in [min, max]; returns 0 on success. */
static int dd_mock_int_parse(const char *s, long min, long max, int *out)
{
    char *end;
    long v;

    errno = 0;
    v = strtol(s, &end, 10);
    if (errno || end == s || *end != '\0' || v < min || v > max) return -1;
    *out = (int)v;
    return 0;
}

/* NAME:PARTITIONS[:REPLICATION] */
static int dd_mock_topic_parse(const char *arg, dd_mock_topic_t *topic, char *errstr,
                               size_t errstr_size)
{
    char *copy = strdup(arg), *colon, *rf;
    int ret = -1;

    topic->name = NULL;
    topic->replication = 1;
    if (!copy) {
        dd_errstr_set(errstr, errstr_size, "out of memory");
        goto done;
    }
    colon = strchr(copy, ':');
    if (!colon || colon == copy) {
        dd_errstr_set(errstr, errstr_size, "--topic %s: expected NAME:PARTITIONS", arg);
        goto done;
    }
    *colon = '\0';
    rf = strchr(colon + 1, ':');
    if (rf) *rf++ = '\0';
    if (dd_mock_int_parse(colon + 1, 1, DD_MOCK_MAX_PARTITIONS, &topic->partitions)) {
        dd_errstr_set(errstr, errstr_size, "--topic %s: partition count must be 1..%d", arg,
                      DD_MOCK_MAX_PARTITIONS);
        goto done;
    }
    /* The broker count is final only after all options are read; the
     * replication factor is checked against it in dd_mock_opts_parse(). */
    if (rf && dd_mock_int_parse(rf, 1, DD_MOCK_MAX_BROKERS, &topic->replication)) {
        dd_errstr_set(errstr, errstr_size, "--topic %s: bad replication factor", arg);
        goto done;
    }
    topic->name = copy;
    copy = NULL;
    ret = 0;
done:
    free(copy);
    return ret;
}

static void dd_mock_opts_release(dd_mock_opts_t *opts)
{
    int i;

    for (i = 0; i < opts->topic_cnt; i++)
        free(opts->topics[i].name);
    free(opts->topics);
    opts->topics = NULL;
    opts->topic_cnt = 0;
}

/*
 * The mock cluster needs a client handle to live in; a producer that never
 * connects anywhere is the cheapest one.
 */
static rd_kafka_t *dd_mock_host_new(char *errstr, size_t errstr_size)
{
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    rd_kafka_t *rk;

    /* librdkafka's lines go through dedupd's logger (logfmt on stderr; the
     * acks are on stdout), like every other command's. */
    rd_kafka_conf_set_log_cb(conf, dd_log_rdkafka);
    /* Without bootstrap.servers librdkafka warns once at NOTICE level; that
     * is expected here, so keep only warnings and worse. */
    if (rd_kafka_conf_set(conf, "log_level", "4", errstr, errstr_size) != RD_KAFKA_CONF_OK) {
        rd_kafka_conf_destroy(conf);
        return NULL;
    }
    rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, errstr, errstr_size);
    if (!rk) rd_kafka_conf_destroy(conf);
    return rk;
}

static int dd_mock_topics_create(rd_kafka_mock_cluster_t *mcluster, const dd_mock_opts_t *opts,
                                 char *errstr, size_t errstr_size)
{
    int i;

    for (i = 0; i < opts->topic_cnt; i++) {
        const dd_mock_topic_t *t = &opts->topics[i];
        rd_kafka_resp_err_t err =
            rd_kafka_mock_topic_create(mcluster, t->name, t->partitions, t->replication);

        if (err) {
            dd_errstr_set(errstr, errstr_size, "creating topic %s: %s", t->name,
                          rd_kafka_err2str(err));
            return -1;
        }
    }
    return 0;
}

/* Temp file + rename, so a reader polling for the file never sees half. */
static int dd_mock_bootstrap_write(const char *path, const char *bootstraps, char *errstr,
                                   size_t errstr_size)
{
    char tmp[PATH_MAX];
    FILE *fp = NULL;
    int ret = -1;

    if (snprintf(tmp, sizeof(tmp), "%s.tmp.%ld", path, (long)getpid()) >= (int)sizeof(tmp)) {
        dd_errstr_set(errstr, errstr_size, "%s: path too long", path);
        goto done;
    }
    fp = fopen(tmp, "w");
    if (!fp || fprintf(fp, "%s\n", bootstraps) < 0 || fflush(fp) || fsync(fileno(fp))) {
        dd_errstr_set(errstr, errstr_size, "writing %s: %s", tmp, strerror(errno));
        goto done;
    }
    if (fclose(fp)) {
        fp = NULL;
        dd_errstr_set(errstr, errstr_size, "writing %s: %s", tmp, strerror(errno));
        goto done;
    }
    fp = NULL;
    if (rename(tmp, path)) {
        dd_errstr_set(errstr, errstr_size, "renaming %s to %s: %s", tmp, path, strerror(errno));
        goto done;
    }
    ret = 0;
done:
    if (fp) fclose(fp);
    if (ret) unlink(tmp);
    return ret;
}

/* ---- control commands ------------------------------------------------- */

typedef int (*dd_mock_cmd_fn)(rd_kafka_mock_cluster_t *mcluster, char **args, char *errstr,
                              size_t errstr_size);

/* Kafka error codes are small positives; librdkafka's own are negatives. */
static int dd_mock_errcode_parse(const char *s, rd_kafka_resp_err_t *err)
{
    int v;

    if (dd_mock_int_parse(s, -200, 1000, &v)) return -1;
    *err = (rd_kafka_resp_err_t)v;
    return 0;
}

static int dd_mock_cmd_result(rd_kafka_resp_err_t err, char *errstr, size_t errstr_size)
{
    if (!err) return 0;
    dd_errstr_set(errstr, errstr_size, "%s", rd_kafka_err2str(err));
    return -1;
}

static int dd_mock_cmd_broker_down(rd_kafka_mock_cluster_t *mcluster, char **args, char *errstr,
                                   size_t errstr_size)
{
    int id;

    if (dd_mock_int_parse(args[0], 1, INT_MAX, &id)) {
        dd_errstr_set(errstr, errstr_size, "bad broker id %s", args[0]);
        return -1;
    }
    return dd_mock_cmd_result(rd_kafka_mock_broker_set_down(mcluster, id), errstr, errstr_size);
}

static int dd_mock_cmd_broker_up(rd_kafka_mock_cluster_t *mcluster, char **args, char *errstr,
                                 size_t errstr_size)
{
    int id;

    if (dd_mock_int_parse(args[0], 1, INT_MAX, &id)) {
        dd_errstr_set(errstr, errstr_size, "bad broker id %s", args[0]);
        return -1;
    }
    return dd_mock_cmd_result(rd_kafka_mock_broker_set_up(mcluster, id), errstr, errstr_size);
}

static int dd_mock_cmd_rtt(rd_kafka_mock_cluster_t *mcluster, char **args, char *errstr,
                           size_t errstr_size)
{
    int id, ms;

    if (dd_mock_int_parse(args[0], 1, INT_MAX, &id) ||
        dd_mock_int_parse(args[1], 0, 3600000, &ms)) {
        dd_errstr_set(errstr, errstr_size, "usage: rtt BROKERID MS");
        return -1;
    }
    return dd_mock_cmd_result(rd_kafka_mock_broker_set_rtt(mcluster, id, ms), errstr, errstr_size);
}

static int dd_mock_cmd_request_errors(rd_kafka_mock_cluster_t *mcluster, char **args, char *errstr,
                                      size_t errstr_size)
{
    rd_kafka_resp_err_t err, *errs;
    int apikey, cnt, i;

    if (dd_mock_int_parse(args[0], 0, INT16_MAX, &apikey) || dd_mock_errcode_parse(args[1], &err) ||
        dd_mock_int_parse(args[2], 1, DD_MOCK_MAX_ERRCNT, &cnt)) {
        dd_errstr_set(errstr, errstr_size, "usage: request-errors APIKEY ERRCODE COUNT");
        return -1;
    }
    errs = malloc(sizeof(*errs) * (size_t)cnt);
    if (!errs) {
        dd_errstr_set(errstr, errstr_size, "out of memory");
        return -1;
    }
    for (i = 0; i < cnt; i++)
        errs[i] = err;
    rd_kafka_mock_push_request_errors_array(mcluster, (int16_t)apikey, (size_t)cnt, errs);
    free(errs);
    return 0;
}

static int dd_mock_cmd_clear_errors(rd_kafka_mock_cluster_t *mcluster, char **args, char *errstr,
                                    size_t errstr_size)
{
    int apikey;

    if (dd_mock_int_parse(args[0], 0, INT16_MAX, &apikey)) {
        dd_errstr_set(errstr, errstr_size, "usage: clear-errors APIKEY");
        return -1;
    }
    rd_kafka_mock_clear_request_errors(mcluster, (int16_t)apikey);
    return 0;
}

static int dd_mock_cmd_topic_error(rd_kafka_mock_cluster_t *mcluster, char **args, char *errstr,
                                   size_t errstr_size)
{
    rd_kafka_resp_err_t err;

    if (dd_mock_errcode_parse(args[1], &err)) {
        dd_errstr_set(errstr, errstr_size, "usage: topic-error TOPIC ERRCODE");
        return -1;
    }
    rd_kafka_mock_topic_set_error(mcluster, args[0], err);
    return 0;
}

static int dd_mock_cmd_coordinator(rd_kafka_mock_cluster_t *mcluster, char **args, char *errstr,
                                   size_t errstr_size)
{
    int id;

    if ((strcmp(args[0], "group") && strcmp(args[0], "transaction")) ||
        dd_mock_int_parse(args[2], 1, INT_MAX, &id)) {
        dd_errstr_set(errstr, errstr_size, "usage: coordinator group|transaction KEY BROKERID");
        return -1;
    }
    return dd_mock_cmd_result(rd_kafka_mock_coordinator_set(mcluster, args[0], args[1], id), errstr,
                              errstr_size);
}

/* Lets a test wait until everything it wrote before has been applied. */
static int dd_mock_cmd_ping(rd_kafka_mock_cluster_t *mcluster, char **args, char *errstr,
                            size_t errstr_size)
{
    (void)mcluster;
    (void)args;
    (void)errstr;
    (void)errstr_size;
    return 0;
}

static const struct {
    const char *name;
    int argc;
    dd_mock_cmd_fn fn;
} dd_mock_cmds[] = {
    {"broker-down", 1, dd_mock_cmd_broker_down},
    {"broker-up", 1, dd_mock_cmd_broker_up},
    {"rtt", 2, dd_mock_cmd_rtt},
    {"request-errors", 3, dd_mock_cmd_request_errors},
    {"clear-errors", 1, dd_mock_cmd_clear_errors},
    {"topic-error", 2, dd_mock_cmd_topic_error},
    {"coordinator", 3, dd_mock_cmd_coordinator},
    {"ping", 0, dd_mock_cmd_ping},
};

#define DD_MOCK_CMD_MAXARGS 4

/* Runs one command line and writes its "ok ..."/"error ..." line. */
static void dd_mock_command_exec(rd_kafka_mock_cluster_t *mcluster, const char *line)
{
    char copy[DD_MOCK_LINE_MAX], errstr[256] = "", *args[DD_MOCK_CMD_MAXARGS + 1], *save, *name;
    int argc = 0, ret = -1;
    size_t i;

    snprintf(copy, sizeof(copy), "%s", line);
    name = strtok_r(copy, " \t\r", &save);
    if (!name) return; /* blank lines are not commands */
    while (argc <= DD_MOCK_CMD_MAXARGS && (args[argc] = strtok_r(NULL, " \t\r", &save)))
        argc++;
    for (i = 0; i < sizeof(dd_mock_cmds) / sizeof(dd_mock_cmds[0]); i++) {
        if (strcmp(name, dd_mock_cmds[i].name)) continue;
        if (argc != dd_mock_cmds[i].argc)
            dd_errstr_set(errstr, sizeof(errstr), "%s takes %d argument(s), got %d", name,
                          dd_mock_cmds[i].argc, argc);
        else
            ret = dd_mock_cmds[i].fn(mcluster, args, errstr, sizeof(errstr));
        break;
    }
    if (i == sizeof(dd_mock_cmds) / sizeof(dd_mock_cmds[0]))
        dd_errstr_set(errstr, sizeof(errstr), "unknown command %s", name);
    if (ret == 0)
        printf("ok %s\n", line);
    else
        printf("error %s: %s\n", line, errstr);
    fflush(stdout);
}

/* ---- control FIFO ----------------------------------------------------- */

static int dd_mock_ctl_create(dd_mock_ctl_t *ctl, const char *path, char *errstr,
                              size_t errstr_size)
{
    struct stat st;

    memset(ctl, 0, sizeof(*ctl));
    ctl->fd = ctl->keep_fd = -1;
    ctl->path = path;
    if (mkfifo(path, 0600) == 0) {
        ctl->created = 1;
        return 0;
    }
    if (errno == EEXIST && stat(path, &st) == 0 && S_ISFIFO(st.st_mode))
        return 0; /* reuse a FIFO the test made for us */
    dd_errstr_set(errstr, errstr_size, "--control %s: %s", path,
                  errno == EEXIST ? "exists and is not a FIFO" : strerror(errno));
    return -1;
}

/*
 * Non-blocking open: a blocking one would wait for the first writer and keep
 * signals from being noticed.
 *
 * We also hold a write end ourselves. Otherwise every writer's close means
 * EOF, and a command written by the next writer between our EOF and our
 * reopen is lost with the pipe when we close the old read end (seen with
 * back-to-back `echo cmd > fifo`). With the write end held, EOF never comes
 * and the pipe lives as long as we do; commands must end with a newline.
 * Any previous fds are closed first, so this also recovers from errors.
 */
static int dd_mock_ctl_reopen(dd_mock_ctl_t *ctl, char *errstr, size_t errstr_size)
{
    if (ctl->keep_fd >= 0) close(ctl->keep_fd);
    if (ctl->fd >= 0) close(ctl->fd);
    ctl->keep_fd = -1;
    ctl->len = 0;
    ctl->overlong = 0;
    ctl->fd = open(ctl->path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (ctl->fd >= 0) ctl->keep_fd = open(ctl->path, O_WRONLY | O_NONBLOCK | O_CLOEXEC);
    if (ctl->fd < 0 || ctl->keep_fd < 0) {
        dd_errstr_set(errstr, errstr_size, "opening control FIFO %s: %s", ctl->path,
                      strerror(errno));
        return -1;
    }
    return 0;
}

static void dd_mock_ctl_release(dd_mock_ctl_t *ctl)
{
    if (ctl->keep_fd >= 0) close(ctl->keep_fd);
    if (ctl->fd >= 0) close(ctl->fd);
    ctl->fd = ctl->keep_fd = -1;
    if (ctl->created && ctl->path) unlink(ctl->path);
}

/* Runs every complete line in the buffer and keeps the unfinished tail. */
static void dd_mock_ctl_lines(dd_mock_ctl_t *ctl, rd_kafka_mock_cluster_t *mcluster)
{
    char *start = ctl->buf, *nl;

    while ((nl = memchr(start, '\n', ctl->len - (size_t)(start - ctl->buf)))) {
        *nl = '\0';
        if (ctl->overlong) {
            ctl->overlong = 0; /* the tail of a line already reported */
        } else {
            dd_mock_command_exec(mcluster, start);
        }
        start = nl + 1;
    }
    ctl->len -= (size_t)(start - ctl->buf);
    memmove(ctl->buf, start, ctl->len);
    if (ctl->len == sizeof(ctl->buf)) {
        if (!ctl->overlong) {
            printf("error line longer than %d bytes\n", DD_MOCK_LINE_MAX - 1);
            fflush(stdout);
        }
        ctl->overlong = 1;
        ctl->len = 0;
    }
}

/*
 * Reads what is available; returns 1 when the FIFO must be reopened (EOF or
 * a read error; EOF cannot happen while we hold our own write end).
 */
static int dd_mock_ctl_read(dd_mock_ctl_t *ctl, rd_kafka_mock_cluster_t *mcluster)
{
    ssize_t r = read(ctl->fd, ctl->buf + ctl->len, sizeof(ctl->buf) - ctl->len);

    if (r < 0) return errno == EAGAIN || errno == EINTR ? 0 : 1;
    if (r == 0) return 1;
    ctl->len += (size_t)r;
    dd_mock_ctl_lines(ctl, mcluster);
    return 0;
}

/* ---- main loop -------------------------------------------------------- */

/* Waits for SIGTERM/SIGINT, serving control commands meanwhile. */
static int dd_mock_wait(int sigfd, dd_mock_ctl_t *ctl, rd_kafka_mock_cluster_t *mcluster)
{
    struct signalfd_siginfo si;
    char errstr[256];
    struct pollfd pfd[2];

    for (;;) {
        int nfds = 1;

        pfd[0].fd = sigfd;
        pfd[0].events = POLLIN;
        if (ctl && ctl->fd >= 0) {
            pfd[1].fd = ctl->fd;
            pfd[1].events = POLLIN;
            pfd[1].revents = 0;
            nfds = 2;
        }
        if (poll(pfd, (nfds_t)nfds, -1) < 0) {
            if (errno == EINTR) continue;
            fprintf(stderr, "mock-kafka: poll: %s\n", strerror(errno));
            return DD_EXIT_FAIL;
        }
        if (pfd[0].revents & POLLIN) {
            if (read(sigfd, &si, sizeof(si)) == (ssize_t)sizeof(si))
                fprintf(stderr, "mock-kafka: got signal %u, stopping\n", si.ssi_signo);
            return DD_EXIT_OK;
        }
        if (nfds == 2 && (pfd[1].revents & (POLLIN | POLLHUP | POLLERR))) {
            if (dd_mock_ctl_read(ctl, mcluster) &&
                dd_mock_ctl_reopen(ctl, errstr, sizeof(errstr))) {
                fprintf(stderr, "mock-kafka: %s\n", errstr);
                return DD_EXIT_FAIL;
            }
        }
    }
}

/* Creates the cluster and topics, publishes the bootstrap list. */
static int dd_mock_start(const dd_mock_opts_t *opts, rd_kafka_t **rkp,
                         rd_kafka_mock_cluster_t **mclusterp, char *errstr, size_t errstr_size)
{
    const char *bootstraps;

    *rkp = dd_mock_host_new(errstr, errstr_size);
    if (!*rkp) return -1;
    *mclusterp = rd_kafka_mock_cluster_new(*rkp, opts->broker_cnt);
    if (!*mclusterp) {
        dd_errstr_set(errstr, errstr_size, "rd_kafka_mock_cluster_new failed");
        return -1;
    }
    if (dd_mock_topics_create(*mclusterp, opts, errstr, errstr_size)) return -1;
    bootstraps = rd_kafka_mock_cluster_bootstraps(*mclusterp);
    if (opts->bootstrap_file &&
        dd_mock_bootstrap_write(opts->bootstrap_file, bootstraps, errstr, errstr_size))
        return -1;
    printf("%s\n", bootstraps);
    fflush(stdout);
    return 0;
}

/* Blocks the stop signals (inherited by librdkafka's threads) into a signalfd. */
static int dd_mock_signals_setup(sigset_t *oldmask)
{
    sigset_t mask;

    sigemptyset(&mask);
    sigaddset(&mask, SIGTERM);
    sigaddset(&mask, SIGINT);
    /* A test that reads only the bootstrap line may close our stdout; later
     * acks must then fail quietly instead of killing the cluster. */
    signal(SIGPIPE, SIG_IGN);
    if (pthread_sigmask(SIG_BLOCK, &mask, oldmask)) return -1;
    return signalfd(-1, &mask, SFD_CLOEXEC);
}

static int dd_mock_usage(const char *errstr)
{
    fprintf(stderr, "mock-kafka: %s (see dedupd mock-kafka --help)\n", errstr);
    return DD_EXIT_USAGE;
}

static void dd_mock_init(void *opts)
{
    ((dd_mock_opts_t *)opts)->broker_cnt = 1;
}

/* --brokers N, --topic NAME:PARTITIONS[:REPLICATION] (repeatable). */
static int dd_mock_set(void *opts_, int id, char *arg)
{
    dd_mock_opts_t *opts = opts_;
    dd_mock_topic_t *t;
    char errstr[512];

    if (id == 'b') {
        if (!dd_mock_int_parse(arg, 1, DD_MOCK_MAX_BROKERS, &opts->broker_cnt)) return DD_EXIT_OK;
        snprintf(errstr, sizeof(errstr), "--brokers must be 1..%d", DD_MOCK_MAX_BROKERS);
        return dd_mock_usage(errstr);
    }
    if (!(t = realloc(opts->topics, (size_t)(opts->topic_cnt + 1) * sizeof(*t))))
        return dd_mock_usage("out of memory");
    opts->topics = t;
    if (dd_mock_topic_parse(arg, &opts->topics[opts->topic_cnt], errstr, sizeof(errstr)))
        return dd_mock_usage(errstr);
    opts->topic_cnt++;
    return DD_EXIT_OK;
}

/* The broker count is final only after every option: each topic's
 * replication factor is checked against it here. */
static int dd_mock_check(void *opts_, int argc, char **argv)
{
    const dd_mock_opts_t *opts = opts_;
    char errstr[512];

    if (argc > 0) {
        snprintf(errstr, sizeof(errstr), "%s: unknown option", argv[0]);
        return dd_mock_usage(errstr);
    }
    for (int i = 0; i < opts->topic_cnt; i++) {
        if (opts->topics[i].replication > opts->broker_cnt) {
            snprintf(errstr, sizeof(errstr), "topic %s: replication %d exceeds %d broker(s)",
                     opts->topics[i].name, opts->topics[i].replication, opts->broker_cnt);
            return dd_mock_usage(errstr);
        }
    }
    return DD_EXIT_OK;
}

static const dd_cmd_opt_t dd_mock_cmd_opts[] = {
    DD_CMD_SET("brokers", "N", 'b', "brokers in the cluster (1 by default)"),
    DD_CMD_SET("topic", "NAME:PARTITIONS[:REPLICATION]", 't', "create a topic at start"),
    DD_CMD_STR("bootstrap-file", "FILE", dd_mock_opts_t, bootstrap_file,
               "also write the bootstrap list to FILE"),
    DD_CMD_STR("control", "FIFO", dd_mock_opts_t, control_path,
               "read control commands from FIFO (created if absent)"),
    DD_CMD_OPT_END,
};

static void dd_mock_release(void *opts)
{
    dd_mock_opts_release(opts);
}

static int dd_mock_run(const dd_cmd_ctx_t *ctx, void *opts_)
{
    const dd_mock_opts_t *opts = opts_;
    dd_mock_ctl_t ctl = {.fd = -1, .keep_fd = -1};
    rd_kafka_t *rk = NULL;
    rd_kafka_mock_cluster_t *mcluster = NULL;
    sigset_t oldmask;
    char errstr[512];
    int sigfd = -1, ret = DD_EXIT_FAIL;

    (void)ctx;
    sigfd = dd_mock_signals_setup(&oldmask);
    if (sigfd < 0) {
        fprintf(stderr, "mock-kafka: signal setup: %s\n", strerror(errno));
        goto done;
    }
    if (opts->control_path &&
        (dd_mock_ctl_create(&ctl, opts->control_path, errstr, sizeof(errstr)) ||
         dd_mock_ctl_reopen(&ctl, errstr, sizeof(errstr)))) {
        fprintf(stderr, "mock-kafka: %s\n", errstr);
        goto done;
    }
    if (dd_mock_start(opts, &rk, &mcluster, errstr, sizeof(errstr))) {
        fprintf(stderr, "mock-kafka: %s\n", errstr);
        goto done;
    }
    ret = dd_mock_wait(sigfd, opts->control_path ? &ctl : NULL, mcluster);
done:
    if (mcluster) rd_kafka_mock_cluster_destroy(mcluster);
    if (rk) rd_kafka_destroy(rk);
    dd_mock_ctl_release(&ctl);
    if (sigfd >= 0) {
        close(sigfd);
        pthread_sigmask(SIG_SETMASK, &oldmask, NULL);
    }
    return ret;
}

const dd_cmd_t dd_cmd_mock = {
    .name = "mock-kafka",
    .args = "[--brokers N] [--topic NAME:PARTITIONS]... [options]",
    .summary = "host a mock Kafka cluster for tests and demos",
    .usage = "usage: dedupd mock-kafka [--brokers N] [--topic NAME:PARTITIONS[:REPLICATION]]...\n"
             "                         [--bootstrap-file FILE] [--control FIFO]\n"
             "\n"
             "Runs librdkafka's mock Kafka cluster until SIGTERM/SIGINT. The first line\n"
             "on stdout is the bootstrap list. Topics not created here are auto-created\n"
             "(4 partitions) as soon as any client asks for them by name (a producer,\n"
             "a subscribing consumer, kcat -L -t NAME).\n",
    .more = "Control FIFO commands (one per newline-terminated line, each answered on\n"
            "stdout with \"ok <command>\" or \"error <command>: <why>\"; wait for the\n"
            "answer rather than sleeping):\n"
            "  broker-down ID | broker-up ID | rtt ID MS\n"
            "  request-errors APIKEY ERRCODE COUNT | clear-errors APIKEY\n"
            "  topic-error TOPIC ERRCODE\n"
            "  coordinator group|transaction KEY BROKERID\n"
            "  ping\n",
    .exits = "  0  stopped by SIGTERM/SIGINT\n"
             "  1  failure: the cluster or the control FIFO could not be set up\n"
             "  2  usage error\n",
    .opts_size = sizeof(dd_mock_opts_t),
    .opts = dd_mock_cmd_opts,
    .init = dd_mock_init,
    .set = dd_mock_set,
    .check = dd_mock_check,
    .run = dd_mock_run,
    .release = dd_mock_release,
};
