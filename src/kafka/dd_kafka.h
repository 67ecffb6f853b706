/*
 * Kafka clients that only look: `dedupd check`, `stats` and `replay` read
 * topic metadata, a group's committed offsets and watermarks, and must
 * change nothing while doing it. They never create a topic (a metadata
 * request that names one makes some brokers create it: the mock cluster,
 * or a broker with auto.create.topics.enable) and never join a group
 * (a member that joins makes the live consumers rebalance): offsets are
 * read with rd_kafka_committed() on a handle that does not subscribe.
 */
#ifndef DD_KAFKA_H
#define DD_KAFKA_H

#include <stddef.h>
#include <stdint.h>

#include <librdkafka/rdkafka.h>

#include "dd_conf.h"

/* A consumer handle that reads only: the user's kafka.properties,
 * group.id group (NULL: none; a group is needed to read its offsets),
 * no auto-commit, and dedupd's log callback.
 * The caller destroys it with rd_kafka_destroy() (it never subscribed, so
 * there is no group to leave). */
int dd_kafka_reader_new(rd_kafka_t **rkp, const dd_conf_t *conf, const char *group, char *errstr,
                        size_t errstr_size);
/* The same with extra[0..extra_cnt) ({name, value} pairs) set last, over
 * the user's. */
int dd_kafka_reader_new_with(rd_kafka_t **rkp, const dd_conf_t *conf, const char *group,
                             const char *const (*extra)[2], size_t extra_cnt, char *errstr,
                             size_t errstr_size);

/* The partition count of topic, from the metadata of every topic (so the
 * request names none). Returns 0; DD_ERR_PERMANENT when the cluster has
 * no such topic ("topic T does not exist"); DD_ERR_RETRIABLE when the
 * metadata could not be read within timeout_ms. */
int dd_kafka_topic_partitions(rd_kafka_t *rk, const char *topic, int timeout_ms, int *cnt,
                              char *errstr, size_t errstr_size);

/* The topics of conf's routes (of route `only`; every route's when only
 * is negative): the names they list, and the cluster's topics their
 * "^regex" patterns match (internal topics, "__...", excepted), read from
 * the metadata of every topic when a pattern needs it; each topic once, in
 * the routes' order. *topics (malloc'd, *cnt strings) is the caller's to
 * free with dd_kafka_topics_free, also after an error. Returns 0, or
 * DD_ERR_RETRIABLE when the metadata could not be read within timeout_ms. */
int dd_kafka_route_topics(rd_kafka_t *rk, const dd_conf_t *conf, int only, int timeout_ms,
                          char ***topics, int *cnt, char *errstr, size_t errstr_size);
void dd_kafka_topics_free(char **topics, int cnt);

/* One partition as a group sees it. */
typedef struct {
    const char *topic; /* borrowed from the caller's topic list */
    int32_t partition;
    int64_t committed; /* the group's committed offset, -1 none */
    int64_t low, high; /* watermarks, -1 unknown */
    int64_t lag;       /* high - committed (high - low without one), -1 unknown */
} dd_kafka_part_t;

/* Every partition of topics[0..topic_cnt) with the committed offsets of
 * rk's group.id and the watermarks, asking the brokers (timeout_ms per
 * request). *parts (malloc'd, *cnt entries) is the caller's to free, also
 * after an error. */
int dd_kafka_group_offsets(rd_kafka_t *rk, const char *const *topics, int topic_cnt, int timeout_ms,
                           dd_kafka_part_t **parts, int *cnt, char *errstr, size_t errstr_size);

/* Fills the committed offset of each element of list (-1 none) for rk's
 * group.id. Returns 0 or DD_ERR_RETRIABLE with errstr. */
int dd_kafka_committed(rd_kafka_t *rk, rd_kafka_topic_partition_list_t *list, int timeout_ms,
                       char *errstr, size_t errstr_size);

/* rd_kafka_destroy_flags(rk, flags), waited for timeout_ms at most: a
 * destroy waits for brokers (a group to leave, requests in flight) without
 * a bound of its own. Returns 1 when rk is destroyed; 0 when the destroy
 * goes on in a thread of its own, which the process may exit without. */
int dd_kafka_destroy_within(rd_kafka_t *rk, int flags, int timeout_ms);

#endif /* DD_KAFKA_H */
