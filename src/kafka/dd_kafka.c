/*
 * Read-only Kafka clients (see dd_kafka.h): metadata without creating
 * topics, offsets without joining the group. And the destroy of any
 * client within a bound, for a shutdown that must end whatever the
 * brokers do.
 */
#include "dd_kafka.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "dd_common.h"
#include "dd_log.h"

int dd_kafka_reader_new(rd_kafka_t **rkp, const dd_conf_t *conf, const char *group, char *errstr,
                        size_t errstr_size)
{
    return dd_kafka_reader_new_with(rkp, conf, group, NULL, 0, errstr, errstr_size);
}

int dd_kafka_reader_new_with(rd_kafka_t **rkp, const dd_conf_t *conf, const char *group,
                             const char *const (*extra)[2], size_t extra_cnt, char *errstr,
                             size_t errstr_size)
{
    /* Not allow.auto.create.topics=false: the metadata requests here name
     * no topic, and brokers that predate the setting (the mock cluster)
     * answer it with a warning on every start. */
    static const char *const fixed[][2] = {{"enable.auto.commit", "false"},
                                           {"enable.auto.offset.store", "false"}};
    rd_kafka_conf_t *kconf = rd_kafka_conf_new();
    char err[512];
    int rc;

    *rkp = NULL;
    rc = dd_conf_kafka_apply(conf, kconf, NULL, errstr, errstr_size);
    if (!rc && group) rc = dd_conf_kafka_set(kconf, "group.id", group, errstr, errstr_size);
    for (size_t i = 0; !rc && i < DD_ARRAY_LEN(fixed); i++)
        rc = dd_conf_kafka_set(kconf, fixed[i][0], fixed[i][1], errstr, errstr_size);
    for (size_t i = 0; !rc && i < extra_cnt; i++)
        rc = dd_conf_kafka_set(kconf, extra[i][0], extra[i][1], errstr, errstr_size);
    if (rc) {
        rd_kafka_conf_destroy(kconf);
        return rc;
    }
    rd_kafka_conf_set_log_cb(kconf, dd_log_rdkafka);
    if (!(*rkp = rd_kafka_new(RD_KAFKA_CONSUMER, kconf, err, sizeof(err)))) {
        rd_kafka_conf_destroy(kconf);
        dd_errstr_set(errstr, errstr_size, "cannot create a Kafka client: %s", err);
        return DD_ERR_FATAL;
    }
    return DD_OK;
}

int dd_kafka_topic_partitions(rd_kafka_t *rk, const char *topic, int timeout_ms, int *cnt,
                              char *errstr, size_t errstr_size)
{
    const struct rd_kafka_metadata *md = NULL;
    rd_kafka_resp_err_t err;
    int rc = DD_ERR_PERMANENT;

    /* all_topics: a request naming the topic would create it on a cluster
     * that creates topics on demand (whatever allow.auto.create.topics
     * says, the mock cluster does). */
    err = rd_kafka_metadata(rk, 1, NULL, &md, timeout_ms);
    if (err) {
        dd_errstr_set(errstr, errstr_size, "cannot read the cluster's metadata: %s",
                      rd_kafka_err2str(err));
        return DD_ERR_RETRIABLE;
    }
    dd_errstr_set(errstr, errstr_size, "topic %s does not exist", topic);
    for (int i = 0; i < md->topic_cnt; i++) {
        if (strcmp(md->topics[i].topic, topic) != 0) continue;
        if (md->topics[i].err) {
            dd_errstr_set(errstr, errstr_size, "topic %s: %s", topic,
                          rd_kafka_err2str(md->topics[i].err));
            rc = md->topics[i].err == RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART ? DD_ERR_PERMANENT
                                                                              : DD_ERR_RETRIABLE;
        } else {
            *cnt = md->topics[i].partition_cnt;
            rc = DD_OK;
        }
        break;
    }
    rd_kafka_metadata_destroy(md);
    return rc;
}

void dd_kafka_topics_free(char **topics, int cnt)
{
    for (int i = 0; topics && i < cnt; i++)
        free(topics[i]);
    free(topics);
}

/* Appends topic to *topics unless it is there already. */
static int dd_kafka_topics_add(char ***topics, int *cnt, const char *topic)
{
    char **grown;

    for (int i = 0; i < *cnt; i++)
        if (strcmp((*topics)[i], topic) == 0) return DD_OK;
    if (!(grown = realloc(*topics, (size_t)(*cnt + 1) * sizeof(*grown)))) return DD_ERR_NOMEM;
    *topics = grown;
    if (!(grown[*cnt] = strdup(topic))) return DD_ERR_NOMEM;
    (*cnt)++;
    return DD_OK;
}

/* 1 (said in the log) when the topic route r's pattern i matches is a
 * dead-letter topic of a route: run never consumes it (dd_conf_dlq_route),
 * so neither replay nor stats nor check count it as the route's. */
static int dd_kafka_dlq_left_out(const dd_conf_t *conf, int r, int i, const char *name)
{
    int d = dd_conf_dlq_route(conf, name);

    if (d < 0) return 0;
    dd_log(DD_LOG_WARN,
           "Leaving out topic %s: pattern %s of route %s matches it, but it is a dead-letter "
           "topic of route %s (%s), which dedupd never consumes.",
           name, conf->routes[r].topics[i], conf->routes[r].name, conf->routes[d].name,
           conf->routes[d].where);
    return 1;
}

int dd_kafka_route_topics(rd_kafka_t *rk, const dd_conf_t *conf, int only, int timeout_ms,
                          char ***topics, int *cnt, char *errstr, size_t errstr_size)
{
    const struct rd_kafka_metadata *md = NULL;
    rd_kafka_resp_err_t err;
    int rc = DD_OK;

    *topics = NULL;
    *cnt = 0;
    for (int r = 0; !rc && r < conf->route_cnt; r++) {
        const dd_conf_route_t *route = &conf->routes[r];
        if (only >= 0 && r != only) continue;
        for (int i = 0; !rc && i < route->topic_cnt; i++) {
            if (!dd_conf_topic_is_pattern(route->topics[i])) {
                rc = dd_kafka_topics_add(topics, cnt, route->topics[i]);
                continue;
            }
            if (!md && (err = rd_kafka_metadata(rk, 1, NULL, &md, timeout_ms))) {
                dd_errstr_set(errstr, errstr_size, "cannot read the cluster's metadata: %s",
                              rd_kafka_err2str(err));
                return DD_ERR_RETRIABLE;
            }
            for (int t = 0; !rc && t < md->topic_cnt; t++) {
                const char *name = md->topics[t].topic;
                if (strncmp(name, "__", 2) != 0 && regexec(&route->re[i], name, 0, NULL, 0) == 0 &&
                    !dd_kafka_dlq_left_out(conf, r, i, name))
                    rc = dd_kafka_topics_add(topics, cnt, name);
            }
        }
    }
    if (md) rd_kafka_metadata_destroy(md);
    if (rc) dd_errstr_set(errstr, errstr_size, "out of memory");
    return rc;
}

int dd_kafka_committed(rd_kafka_t *rk, rd_kafka_topic_partition_list_t *list, int timeout_ms,
                       char *errstr, size_t errstr_size)
{
    rd_kafka_resp_err_t err = rd_kafka_committed(rk, list, timeout_ms);

    for (int i = 0; !err && i < list->cnt; i++) {
        if (list->elems[i].err) err = list->elems[i].err;
        if (list->elems[i].offset < 0) list->elems[i].offset = -1;
    }
    if (err) {
        dd_errstr_set(errstr, errstr_size, "cannot read the group's committed offsets: %s",
                      rd_kafka_err2str(err));
        return DD_ERR_RETRIABLE;
    }
    return DD_OK;
}

static int dd_kafka_parts_add(dd_kafka_part_t **parts, int *cnt, const char *topic, int32_t p)
{
    dd_kafka_part_t *np = realloc(*parts, (size_t)(*cnt + 1) * sizeof(*np));

    if (!np) return DD_ERR_NOMEM;
    *parts = np;
    np[*cnt] = (dd_kafka_part_t){
        .topic = topic, .partition = p, .committed = -1, .low = -1, .high = -1, .lag = -1};
    (*cnt)++;
    return DD_OK;
}

/* The watermarks of every partition, and the lag they give. */
static int dd_kafka_watermarks(rd_kafka_t *rk, dd_kafka_part_t *parts, int cnt, int timeout_ms,
                               char *errstr, size_t errstr_size)
{
    for (int i = 0; i < cnt; i++) {
        dd_kafka_part_t *p = &parts[i];
        rd_kafka_resp_err_t err = rd_kafka_query_watermark_offsets(rk, p->topic, p->partition,
                                                                   &p->low, &p->high, timeout_ms);
        if (err) {
            dd_errstr_set(errstr, errstr_size, "cannot read the watermarks of %s [%d]: %s",
                          p->topic, (int)p->partition, rd_kafka_err2str(err));
            return DD_ERR_RETRIABLE;
        }
        /* Nothing committed: everything the partition still holds is to
         * be consumed. A committed offset below the low watermark (deleted
         * by retention) counts from there. */
        p->lag = p->committed >= 0 ? p->high - (p->committed > p->low ? p->committed : p->low)
                                   : p->high - p->low;
        if (p->lag < 0) p->lag = 0;
    }
    return DD_OK;
}

int dd_kafka_group_offsets(rd_kafka_t *rk, const char *const *topics, int topic_cnt, int timeout_ms,
                           dd_kafka_part_t **parts, int *cnt, char *errstr, size_t errstr_size)
{
    rd_kafka_topic_partition_list_t *list = NULL;
    int rc = DD_OK;

    *parts = NULL;
    *cnt = 0;
    for (int t = 0; !rc && t < topic_cnt; t++) {
        int n = 0;
        rc = dd_kafka_topic_partitions(rk, topics[t], timeout_ms, &n, errstr, errstr_size);
        for (int p = 0; !rc && p < n; p++)
            rc = dd_kafka_parts_add(parts, cnt, topics[t], p);
    }
    if (rc == DD_ERR_NOMEM) dd_errstr_set(errstr, errstr_size, "out of memory");
    if (rc || *cnt == 0) return rc;
    list = rd_kafka_topic_partition_list_new(*cnt);
    for (int i = 0; i < *cnt; i++)
        rd_kafka_topic_partition_list_add(list, (*parts)[i].topic, (*parts)[i].partition);
    rc = dd_kafka_committed(rk, list, timeout_ms, errstr, errstr_size);
    for (int i = 0; !rc && i < *cnt; i++)
        (*parts)[i].committed = list->elems[i].offset;
    rd_kafka_topic_partition_list_destroy(list);
    if (!rc) rc = dd_kafka_watermarks(rk, *parts, *cnt, timeout_ms, errstr, errstr_size);
    return rc;
}

/* ---- destroying a client within a bound ---- */

/* One destroy in its own thread; freed by whichever of the thread and the
 * waiter is last. */
typedef struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    rd_kafka_t *rk;
    int flags;
    int done;
    int left; /* the waiter gave up: the thread frees it */
} dd_kafka_destroy_t;

static void dd_kafka_destroy_free(dd_kafka_destroy_t *d)
{
    pthread_cond_destroy(&d->cv);
    pthread_mutex_destroy(&d->mu);
    free(d);
}

static void *dd_kafka_destroy_main(void *arg)
{
    dd_kafka_destroy_t *d = arg;
    int left;

    rd_kafka_destroy_flags(d->rk, d->flags);
    pthread_mutex_lock(&d->mu);
    d->done = 1;
    left = d->left;
    pthread_cond_signal(&d->cv);
    pthread_mutex_unlock(&d->mu);
    if (left) dd_kafka_destroy_free(d);
    return NULL;
}

int dd_kafka_destroy_within(rd_kafka_t *rk, int flags, int timeout_ms)
{
    dd_kafka_destroy_t *d = calloc(1, sizeof(*d));
    struct timespec ts;
    pthread_t thr;
    int done;

    if (!d) {
        rd_kafka_destroy_flags(rk, flags); /* out of memory: unbounded, but freed */
        return 1;
    }
    pthread_mutex_init(&d->mu, NULL);
    dd_cond_init(&d->cv);
    d->rk = rk;
    d->flags = flags;
    if (pthread_create(&thr, NULL, dd_kafka_destroy_main, d) != 0) {
        dd_kafka_destroy_free(d);
        rd_kafka_destroy_flags(rk, flags);
        return 1;
    }
    pthread_detach(thr);
    dd_cond_deadline(&ts, timeout_ms);
    pthread_mutex_lock(&d->mu);
    while (!d->done && pthread_cond_timedwait(&d->cv, &d->mu, &ts) == 0)
        ;
    done = d->done;
    d->left = !done;
    pthread_mutex_unlock(&d->mu);
    if (done) dd_kafka_destroy_free(d);
    return done;
}
