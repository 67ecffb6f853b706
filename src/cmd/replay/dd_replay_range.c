/*
 * `dedupd replay`'s Kafka side: a consumer of its own (assign(), its own
 * group id, no commits: invisible to the live consumer group), the
 * partitions and the range [from, to) of each, resolved from offsets,
 * times and watermarks when replay starts, and the position in each.
 */
#include "dd_replay_int.h"

#include <stdlib.h>
#include <string.h>

#include "dd_common.h"
#include "dd_kafka.h"
#include "dd_log.h"

/* The user's properties first, then what makes replay invisible to the
 * group: its own group id (assign() needs one; it never joins), no commits,
 * no stored offsets. */
static int dd_replay_kafka_conf(rd_kafka_conf_t *kconf, const dd_replay_t *rp, char *errstr,
                                size_t errstr_size)
{
    const dd_conf_t *conf = rp->conf;
    static const char *const fixed[][2] = {{"enable.auto.commit", "false"},
                                           {"enable.auto.offset.store", "false"},
                                           {"enable.partition.eof", "true"},
                                           {"auto.offset.reset", "earliest"}};
    char group[300];
    int rc;

    rc = dd_conf_kafka_apply(conf, kconf, NULL, errstr, errstr_size);
    /* redrive's group commits its progress (dd_replay_redrive.c) */
    snprintf(group, sizeof(group), "%s", rp->rd ? rp->rd->group : "");
    if (!rp->rd) snprintf(group, sizeof(group), "%s.replay", conf->kafka.group);
    if (!rc) rc = dd_conf_kafka_set(kconf, "group.id", group, errstr, errstr_size);
    for (size_t i = 0; !rc && i < DD_ARRAY_LEN(fixed); i++)
        rc = dd_conf_kafka_set(kconf, fixed[i][0], fixed[i][1], errstr, errstr_size);
    return rc;
}

int dd_replay_kafka_new(dd_replay_t *rp, char *errstr, size_t errstr_size)
{
    rd_kafka_conf_t *kconf = rd_kafka_conf_new();
    char err[512];
    int rc = dd_replay_kafka_conf(kconf, rp, errstr, errstr_size);

    if (rc) {
        rd_kafka_conf_destroy(kconf);
        return rc;
    }
    rd_kafka_conf_set_log_cb(kconf, dd_log_rdkafka);
    rp->rk = rd_kafka_new(RD_KAFKA_CONSUMER, kconf, err, sizeof(err));
    if (!rp->rk) {
        rd_kafka_conf_destroy(kconf);
        dd_errstr_set(errstr, errstr_size, "cannot create Kafka consumer: %s", err);
        return DD_ERR_FATAL;
    }
    rd_kafka_poll_set_consumer(rp->rk);
    return DD_OK;
}

/* Partition count of topic, looked up without creating it (a misspelled
 * --topic is an error, not a new topic); retries while the cluster is
 * settling. */
static int dd_replay_partition_count(dd_replay_t *rp, const char *topic, int *cnt, char *errstr,
                                     size_t errstr_size)
{
    int rc = DD_OK;

    for (int attempt = 0; attempt < 5; attempt++) {
        rc = dd_kafka_topic_partitions(rp->rk, topic, DD_REPLAY_TIMEOUT_MS, cnt, errstr,
                                       errstr_size);
        if (rc != DD_ERR_RETRIABLE) break;
        dd_sleep_ms(500, &dd_stop_requested);
    }
    return rc ? DD_ERR_FATAL : DD_OK;
}

/* The live group's committed offsets, read without joining it (a second,
 * read-only handle under kafka.group: replay's own consumer has its own
 * group id). A message at or past its partition's committed offset that
 * has no row is `pending`, not `missing`: the live consumer may simply
 * not have got there yet. */
int dd_replay_group_offsets(dd_replay_t *rp, char *errstr, size_t errstr_size)
{
    rd_kafka_topic_partition_list_t *list = rd_kafka_topic_partition_list_new(rp->part_cnt);
    rd_kafka_t *rk = NULL;
    int rc;

    for (int i = 0; i < rp->part_cnt; i++)
        rd_kafka_topic_partition_list_add(list, rp->parts[i].topic, rp->parts[i].partition);
    rc = dd_kafka_reader_new(&rk, rp->conf, rp->rd ? rp->rd->group : rp->conf->kafka.group, errstr,
                             errstr_size);
    if (!rc) rc = dd_kafka_committed(rk, list, DD_REPLAY_TIMEOUT_MS, errstr, errstr_size);
    for (int i = 0; !rc && i < rp->part_cnt; i++) {
        rp->parts[i].group_committed = list->elems[i].offset;
        dd_log(DD_LOG_DEBUG, "The group %s has committed %s [%d] up to offset %lld.",
               rp->rd ? rp->rd->group : rp->conf->kafka.group, rp->parts[i].topic,
               (int)rp->parts[i].partition, (long long)list->elems[i].offset);
    }
    if (rk) rd_kafka_destroy(rk);
    rd_kafka_topic_partition_list_destroy(list);
    return rc ? DD_ERR_FATAL : DD_OK;
}

static int dd_replay_part_add(dd_replay_t *rp, const char *topic, int32_t partition, int route)
{
    dd_replay_part_t *np = realloc(rp->parts, (size_t)(rp->part_cnt + 1) * sizeof(*np));

    if (!np) return DD_ERR_NOMEM;
    rp->parts = np;
    memset(&np[rp->part_cnt], 0, sizeof(*np));
    np[rp->part_cnt].topic = topic;
    np[rp->part_cnt].partition = partition;
    np[rp->part_cnt].route = route;
    np[rp->part_cnt].from_ts = np[rp->part_cnt].to_ts = -1;
    np[rp->part_cnt].group_committed = -1;
    rp->part_cnt++;
    return DD_OK;
}

/* The route of topic: found by the routes' topics; without routes any
 * topic is the one route's, as --topic has always allowed. */
static int dd_replay_route_of(const dd_replay_t *rp, const char *topic, int *other)
{
    *other = -1;
    return rp->conf->has_routes ? dd_conf_route_find(rp->conf, topic, other) : 0;
}

/* The topics to read, into rp->topics: --topic's, each of one route (of
 * --route's, with it), or the topics of the routes (of --route's), their
 * patterns resolved against the cluster's topics now. */
static int dd_replay_topics(dd_replay_t *rp, char *errstr, size_t errstr_size)
{
    const dd_replay_args_t *args = rp->args;
    const dd_conf_t *conf = rp->conf;
    int rc;

    if (rp->rd) { /* the dead-letter topic: each letter names its route */
        if (!(rp->topics = calloc(1, sizeof(*rp->topics))) ||
            !(rp->topics[0] = strdup(rp->rd->dlq)))
            return DD_ERR_NOMEM;
        rp->topic_cnt = 1;
        return DD_OK;
    }
    if (!args->topic_cnt) {
        for (int attempt = 0;; attempt++) {
            rc = dd_kafka_route_topics(rp->rk, conf, rp->only, DD_REPLAY_TIMEOUT_MS, &rp->topics,
                                       &rp->topic_cnt, errstr, errstr_size);
            if (rc != DD_ERR_RETRIABLE || attempt >= 4) break;
            dd_kafka_topics_free(rp->topics, rp->topic_cnt);
            rp->topics = NULL;
            dd_sleep_ms(500, &dd_stop_requested);
        }
        return rc ? DD_ERR_FATAL : DD_OK;
    }
    if (!(rp->topics = calloc((size_t)args->topic_cnt, sizeof(*rp->topics)))) return DD_ERR_NOMEM;
    for (int t = 0; t < args->topic_cnt; t++) {
        const char *topic = args->topics[t];
        int other, r = dd_replay_route_of(rp, topic, &other);
        if (r < 0) {
            dd_errstr_set(errstr, errstr_size, "--topic %s: no route of %s has this topic", topic,
                          conf->path);
            return DD_ERR_ARG;
        }
        if (other >= 0) {
            dd_errstr_set(errstr, errstr_size,
                          "--topic %s: the topics of two routes match it: %s and %s", topic,
                          conf->routes[r].name, conf->routes[other].name);
            return DD_ERR_ARG;
        }
        if (dd_conf_dlq_route(conf, topic) >= 0) {
            dd_errstr_set(errstr, errstr_size,
                          "--topic %s is a dead-letter topic of route %s: its messages are "
                          "dead letters, never consumed by run",
                          topic, conf->routes[dd_conf_dlq_route(conf, topic)].name);
            return DD_ERR_ARG;
        }
        if (rp->only >= 0 && r != rp->only) {
            dd_errstr_set(errstr, errstr_size, "--topic %s is route %s's, not route %s's", topic,
                          conf->routes[r].name, conf->routes[rp->only].name);
            return DD_ERR_ARG;
        }
        if (!(rp->topics[t] = strdup(topic))) return DD_ERR_NOMEM;
        rp->topic_cnt = t + 1;
    }
    return DD_OK;
}

/* The partitions to read: every partition of every topic, or the listed
 * ones, which must exist. A topic two routes' patterns match is refused:
 * which route judges it would be a guess. */
int dd_replay_partitions(dd_replay_t *rp, char *errstr, size_t errstr_size)
{
    const dd_replay_args_t *args = rp->args;
    int rc = dd_replay_topics(rp, errstr, errstr_size);

    for (int t = 0; !rc && t < rp->topic_cnt; t++) {
        const char *topic = rp->topics[t];
        int cnt = 0, other = -1, route = rp->rd ? -1 : dd_replay_route_of(rp, topic, &other);
        if (!rp->rd && (route < 0 || other >= 0)) {
            dd_errstr_set(errstr, errstr_size,
                          "topic %s: the topics of two routes match it (%s and %s): a topic "
                          "must belong to one route",
                          topic, route >= 0 ? rp->conf->routes[route].name : "?",
                          other >= 0 ? rp->conf->routes[other].name : "?");
            return DD_ERR_FATAL;
        }
        rc = dd_replay_partition_count(rp, topic, &cnt, errstr, errstr_size);
        for (int p = 0; !rc && !args->parts && p < cnt; p++)
            rc = dd_replay_part_add(rp, topic, p, route);
        for (int i = 0; !rc && i < args->part_cnt; i++) {
            if (args->parts[i] >= cnt) {
                dd_errstr_set(errstr, errstr_size, "topic %s has %d partition(s): no partition %d",
                              topic, cnt, (int)args->parts[i]);
                rc = DD_ERR_ARG;
            } else {
                rc = dd_replay_part_add(rp, topic, args->parts[i], route);
            }
        }
    }
    return rc;
}

/* Resolves TIME positions of every partition in one offsets_for_times call;
 * out[i] is the first offset at or after the time, or -1 for none. */
static int dd_replay_times(dd_replay_t *rp, int64_t ts, int64_t *out, char *errstr,
                           size_t errstr_size)
{
    rd_kafka_topic_partition_list_t *list = rd_kafka_topic_partition_list_new(rp->part_cnt);
    rd_kafka_resp_err_t err;

    for (int i = 0; i < rp->part_cnt; i++)
        rd_kafka_topic_partition_list_add(list, rp->parts[i].topic, rp->parts[i].partition)
            ->offset = ts;
    err = rd_kafka_offsets_for_times(rp->rk, list, DD_REPLAY_TIMEOUT_MS);
    for (int i = 0; !err && i < rp->part_cnt; i++) {
        rd_kafka_topic_partition_t *p = &list->elems[i];
        if (p->err)
            err = p->err;
        else
            out[i] = p->offset >= 0 ? p->offset : -1;
    }
    rd_kafka_topic_partition_list_destroy(list);
    if (err)
        dd_errstr_set(errstr, errstr_size, "offsets for time %lld: %s", (long long)ts,
                      rd_kafka_err2str(err));
    return err ? DD_ERR_FATAL : DD_OK;
}

static int64_t dd_replay_clamp(int64_t v, int64_t lo, int64_t hi)
{
    return v < lo ? lo : v > hi ? hi : v;
}

/* The timestamp of a partition's last message, or -1. */
static int64_t dd_replay_last_ts(dd_replay_t *rp, const dd_replay_part_t *pt)
{
    rd_kafka_topic_partition_list_t *list = rd_kafka_topic_partition_list_new(1);
    int64_t deadline = dd_now_ms() + DD_REPLAY_TIMEOUT_MS, ts = -1;

    rd_kafka_topic_partition_list_add(list, pt->topic, pt->partition)->offset = pt->high - 1;
    rd_kafka_assign(rp->rk, list);
    while (ts < 0 && dd_now_ms() < deadline && !atomic_load(&dd_stop_requested)) {
        rd_kafka_message_t *rkm = rd_kafka_consumer_poll(rp->rk, 100);
        if (rkm && !rkm->err && rkm->partition == pt->partition &&
            !strcmp(rd_kafka_topic_name(rkm->rkt), pt->topic))
            ts = rd_kafka_message_timestamp(rkm, NULL);
        if (rkm) rd_kafka_message_destroy(rkm);
    }
    rd_kafka_assign(rp->rk, NULL);
    rd_kafka_topic_partition_list_destroy(list);
    return ts;
}

/* A TIME position the broker answered -1 for ("no message at or after
 * it"). For --to that means the whole partition. For --from it means an
 * empty range, unless the last message is in fact that recent: then the
 * broker cannot search by time (the mock cluster cannot), and replay reads
 * from the low watermark, skipping messages older than the time. */
static int64_t dd_replay_time_none(dd_replay_t *rp, dd_replay_part_t *pt, int64_t ts, int is_end)
{
    int64_t last;

    if (is_end || pt->high <= pt->low) return pt->high;
    last = dd_replay_last_ts(rp, pt);
    if (last >= 0 && last < ts) return pt->high;
    dd_log(DD_LOG_INFO,
           "%s [%d]: the broker did not look the time up; reading from offset "
           "%lld and skipping older messages.",
           pt->topic, (int)pt->partition, (long long)pt->low);
    return pt->low;
}

/* One end of every partition's range, from a position. */
static int dd_replay_resolve(dd_replay_t *rp, const dd_replay_pos_t *pos, int is_end, char *errstr,
                             size_t errstr_size)
{
    int64_t *val = calloc((size_t)rp->part_cnt, sizeof(*val));
    int rc = val ? DD_OK : DD_ERR_NOMEM;

    if (!rc && pos->kind == DD_REPLAY_POS_TIME)
        rc = dd_replay_times(rp, pos->value, val, errstr, errstr_size);
    for (int i = 0; !rc && i < rp->part_cnt; i++) {
        dd_replay_part_t *pt = &rp->parts[i];
        int64_t v = pos->kind == DD_REPLAY_POS_EARLIEST ? pt->low
                    : pos->kind == DD_REPLAY_POS_LATEST ? pt->high
                                                        : pos->value;
        if (pos->kind == DD_REPLAY_POS_TIME) {
            v = val[i] >= 0 ? val[i] : dd_replay_time_none(rp, pt, pos->value, is_end);
            *(is_end ? &pt->to_ts : &pt->from_ts) = pos->value;
        }
        /* Offsets below the low watermark are gone (retention): start there. */
        v = dd_replay_clamp(v, pt->low, pt->high);
        if (is_end)
            pt->end = v;
        else
            pt->start = v;
    }
    free(val);
    return rc;
}

int dd_replay_ranges(dd_replay_t *rp, char *errstr, size_t errstr_size)
{
    int rc = DD_OK;

    for (int i = 0; !rc && i < rp->part_cnt; i++) {
        dd_replay_part_t *pt = &rp->parts[i];
        rd_kafka_resp_err_t err = rd_kafka_query_watermark_offsets(
            rp->rk, pt->topic, pt->partition, &pt->low, &pt->high, DD_REPLAY_TIMEOUT_MS);
        if (err) {
            dd_errstr_set(errstr, errstr_size, "watermarks of %s [%d]: %s", pt->topic,
                          (int)pt->partition, rd_kafka_err2str(err));
            rc = DD_ERR_FATAL;
        }
    }
    if (!rc) rc = dd_replay_resolve(rp, &rp->args->from, 0, errstr, errstr_size);
    if (!rc) rc = dd_replay_resolve(rp, &rp->args->to, 1, errstr, errstr_size);
    for (int i = 0; !rc && i < rp->part_cnt; i++) {
        dd_replay_part_t *pt = &rp->parts[i];
        if (pt->end < pt->start) pt->end = pt->start;
        pt->pos = pt->start;
        pt->done = pt->start >= pt->end;
        rp->parts_left += !pt->done;
        rp->total += pt->end - pt->start;
        if (!rp->rd)
            dd_log(DD_LOG_INFO, "Replaying %s [%d] offsets %lld to %lld (watermarks %lld..%lld).",
                   pt->topic, (int)pt->partition, (long long)pt->start, (long long)pt->end,
                   (long long)pt->low, (long long)pt->high);
    }
    /* Legitimate (a time window nothing was produced in), but often a typo. */
    if (!rc && rp->total == 0)
        dd_log(DD_LOG_WARN,
               "Nothing to replay: [--from, --to) holds no message in any of the "
               "%d partition(s); the report will be empty.",
               rp->part_cnt);
    return rc;
}

int dd_replay_assign(dd_replay_t *rp, char *errstr, size_t errstr_size)
{
    rd_kafka_topic_partition_list_t *list = rd_kafka_topic_partition_list_new(rp->part_cnt);
    rd_kafka_resp_err_t err;

    for (int i = 0; i < rp->part_cnt; i++)
        if (!rp->parts[i].done)
            rd_kafka_topic_partition_list_add(list, rp->parts[i].topic, rp->parts[i].partition)
                ->offset = rp->parts[i].pos;
    err = rd_kafka_assign(rp->rk, list);
    rd_kafka_topic_partition_list_destroy(list);
    if (err) dd_errstr_set(errstr, errstr_size, "assign: %s", rd_kafka_err2str(err));
    return err ? DD_ERR_FATAL : DD_OK;
}

dd_replay_part_t *dd_replay_part_find(dd_replay_t *rp, const char *topic, int32_t partition)
{
    for (int i = 0; i < rp->part_cnt; i++)
        if (rp->parts[i].partition == partition && !strcmp(rp->parts[i].topic, topic))
            return &rp->parts[i];
    return NULL;
}

/* Moves a partition's position; a partition at its end is paused so the
 * consumer stops fetching what replay would throw away. */
void dd_replay_advance(dd_replay_t *rp, dd_replay_part_t *pt, int64_t next)
{
    if (pt->done) return;
    next = next > pt->end ? pt->end : next;
    if (next > pt->pos) {
        rp->progress += next - pt->pos;
        pt->pos = next;
    }
    if (pt->pos >= pt->end) {
        rd_kafka_topic_partition_list_t *list = rd_kafka_topic_partition_list_new(1);
        rd_kafka_topic_partition_list_add(list, pt->topic, pt->partition);
        rd_kafka_pause_partitions(rp->rk, list);
        rd_kafka_topic_partition_list_destroy(list);
        pt->done = 1;
        rp->parts_left--;
    }
}

int dd_replay_reread(dd_replay_t *rp, const int64_t *to, char *errstr, size_t errstr_size)
{
    /* A new consumer, rather than a seek: a seek whose wait times out may
     * still hand over messages fetched before it, a new client has none. */
    rd_kafka_consumer_close(rp->rk);
    rd_kafka_destroy(rp->rk);
    rp->rk = NULL;
    rp->parts_left = 0;
    for (int i = 0; i < rp->part_cnt; i++) {
        dd_replay_part_t *pt = &rp->parts[i];
        if (to[i] < pt->pos) {
            rp->progress -= pt->pos - to[i];
            pt->pos = to[i];
        }
        pt->done = pt->pos >= pt->end;
        rp->parts_left += !pt->done;
    }
    if (dd_replay_kafka_new(rp, errstr, errstr_size)) return DD_ERR_FATAL;
    return dd_replay_assign(rp, errstr, errstr_size);
}

/* Applies the TIME bounds to a message in the range. Returns 1 when the
 * message is to be judged; moves the range's ends as the bounds show them,
 * so --orphans looks at the range that was actually judged. */
int dd_replay_in_time(dd_replay_t *rp, dd_replay_part_t *pt, rd_kafka_message_t *rkm)
{
    int64_t ts = rd_kafka_message_timestamp(rkm, NULL);

    if (pt->to_ts >= 0 && ts >= pt->to_ts) {
        pt->end = rkm->offset;
        dd_replay_advance(rp, pt, pt->end);
        return 0;
    }
    dd_replay_advance(rp, pt, rkm->offset + 1);
    if (pt->from_ts < 0) return 1;
    if (ts >= 0 && ts < pt->from_ts) {
        pt->start = rkm->offset + 1;
        return 0;
    }
    pt->from_ts = -1; /* the first message at or after the time: take the rest */
    return 1;
}
