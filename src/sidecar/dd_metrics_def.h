/*
 * The metrics of /metrics, as one table: each metric's name, type, labels,
 * flags, its Prometheus HELP text and the longer sentence of the reference.
 * dd_metrics.c prints every HELP and TYPE line from it, `dedupd
 * --help-metrics` lists it, and the metrics table of docs/SIDECAR.md is
 * generated from it; a unit test renders a snapshot and fails unless the
 * rendered metrics are exactly the table's. Adding a metric: a line here,
 * its samples in dd_metrics.c, then scripts/regen-docs.
 *
 * X(ID, name, type, labels, flags, help, doc): labels is the list of label
 * names ("" for none); the order is the one /metrics prints them in.
 */
#ifndef DD_METRICS_DEF_H
#define DD_METRICS_DEF_H

typedef enum { DD_METRIC_COUNTER, DD_METRIC_GAUGE, DD_METRIC_HISTOGRAM } dd_metric_type_t;

/* When a metric is present (none of these: always). */
#define DD_METRIC_F_SHARDS 0x1  /* with several database shards only */
#define DD_METRIC_F_SCAN 0x2    /* a series per route the compensation scan counted */
#define DD_METRIC_F_RELAY 0x4   /* with the outbox relay in this process only */
#define DD_METRIC_F_PROCESS 0x8 /* the process's figures: absent when unreadable */

/* Two lists, joined in DD_METRIC_TABLE: what dd_metrics_counters() prints
 * (the build, the counters, the shards'), then the histogram, the gauges
 * and the process's figures. */
/* clang-format off */
#define DD_METRIC_TABLE_COUNTERS(X)                                                                \
    X(BUILD_INFO, "dedupd_build_info", GAUGE, "version,librdkafka,mysql_client", 0,                \
      "Always 1; the labels are the versions of dedupd, librdkafka and the MySQL client "          \
      "library.",                                                                                  \
      "always 1; the labels are the versions of dedupd, librdkafka and the MySQL client "          \
      "library (MariaDB Connector/C), e.g. `dedupd_build_info{version=\"0.1.0\","                  \
      "librdkafka=\"2.0.2\",mysql_client=\"3.3.20\"} 1`")                                          \
    X(MESSAGES, "dedupd_messages_total", COUNTER, "route", 0,                                      \
      "Messages consumed, each counted once.",                                                     \
      "messages consumed, each counted once")                                                      \
    X(APPLIED, "dedupd_applied_total", COUNTER, "route", 0,                                        \
      "Messages applied by the handler and committed.",                                            \
      "applied by the handler and committed")                                                      \
    X(DUPLICATES, "dedupd_duplicates_total", COUNTER, "route", 0,                                  \
      "Messages skipped because the same key and request hash were applied.",                      \
      "skipped: same key and same request hash already applied")                                   \
    X(CONFLICTS, "dedupd_conflicts_total", COUNTER, "route", 0,                                    \
      "Messages whose key was applied with a different request hash.",                             \
      "same key, different request hash (dead-lettered `conflict`)")                               \
    X(RETRIES, "dedupd_retries_total", COUNTER, "route", 0,                                        \
      "Handler RETRY results.",                                                                    \
      "handler RETRY results")                                                                     \
    X(BATCHES, "dedupd_batches_total", COUNTER, "", 0,                                             \
      "Claim transactions committed.",                                                             \
      "claim transactions committed")                                                              \
    X(BATCHED, "dedupd_batched_total", COUNTER, "route", 0,                                        \
      "Messages applied through the handler's handle_batch().",                                    \
      "messages applied through the handler's `handle_batch()`")                                   \
    X(BATCH_DECLINED, "dedupd_batch_declined_total", COUNTER, "route", 0,                          \
      "handle_batch() calls the handler declined; those transactions went message by message.",    \
      "`handle_batch()` calls the route's handler declined (those transactions went message by "   \
      "message)")                                                                                  \
    X(CLAIM_RACES, "dedupd_claim_races_total", COUNTER, "", 0,                                     \
      "Transactions rolled back and replayed with the locking claim because another consumer "     \
      "inserted a deferred key first.",                                                            \
      "transactions rolled back and replayed with the locking claim because another consumer "     \
      "inserted a deferred key first (`dedup.defer_claim`)")                                       \
    X(POSITION_REWINDS, "dedupd_position_rewinds_total", COUNTER, "", 0,                           \
      "Partitions assigned where the database's position was behind Kafka's committed offset: "    \
      "the database went back in time, and what it lost was read again.",                          \
      "partitions assigned where the database's position (`dedupd_position`) was behind "          \
      "Kafka's committed offset: the database went back in time (a restore, a failover to a "      \
      "lagging replica) and what it lost was read again (docs/OPERATIONS.md, \"After a restore "   \
      "or a failover\"). `position_rewinds` in the `summary` line")                                \
    X(POSITION_GAPS, "dedupd_position_gaps_total", COUNTER, "", 0,                                 \
      "Partitions assigned where the database's position was below the log start offset: what "    \
      "the database lost there cannot be read again.",                                             \
      "partitions assigned where the database's position was below the log start offset: what "    \
      "the database lost there cannot be read again from Kafka (an error line names the range; "   \
      "`/readyz` says it). `position_gaps` in the `summary` line")                                 \
    X(POSITION_GAP_OFFSETS, "dedupd_position_gap_offsets_total", COUNTER, "", 0,                   \
      "Offsets between the database's position and the log start offset, over those "              \
      "partitions: messages to reconcile from the source.",                                        \
      "the offsets of those ranges, over the partitions: the messages to reconcile from the "      \
      "source system")                                                                             \
    X(POSITION_MISMATCHES, "dedupd_position_mismatches_total", COUNTER, "", 0,                     \
      "Partitions assigned where the database's position was not used: taken in another life of "  \
      "the topic (deleted and created again, truncated), or not to be checked.",                   \
      "partitions assigned where the database's position was not used to skip anything: the "      \
      "partition no longer holds the message it was written with (the topic deleted and created "  \
      "again, truncated and refilled, or the database restored from before that; an error line "   \
      "names both), or that message could not be read (a warn line says why); the partition "      \
      "started at its log start offset (docs/GUARANTEES.md, \"A topic created again or "           \
      "truncated\"). `position_mismatches` in the `summary` line")                                 \
    X(POSITION_ERRORS, "dedupd_position_errors_total", COUNTER, "", 0,                             \
      "Statements on dedupd_position that failed; each is tried again every second, and one no "   \
      "retry fixes stops dedupd.",                                                                 \
      "statements of the position writers on `dedupd_position` that failed: a database that is "   \
      "down is tried again every second (Kafka's offsets wait), and an error no retry fixes (a "    \
      "privilege taken away, the table changed) stops dedupd with exit status 1 and an error "     \
      "line naming it. `position_errors` in the `summary` line")                                   \
    X(FETCH_WAIT, "dedupd_fetch_wait_seconds_total", COUNTER, "", 0,                               \
      "Time the consumer waited for librdkafka to deliver messages that the broker already had "   \
      "(a prefetch queue too small, or a slow broker).",                                           \
      "time the consumer waited for librdkafka to deliver messages the broker already had (an "    \
      "empty poll while an assigned partition's cached high watermark was more than one offset "   \
      "past what was polled). Rising while there is lag: the prefetch queue holds less than a "    \
      "second of the stream (docs/OPERATIONS.md, Backpressure and memory), or the broker is "      \
      "slow. `fetch_wait_s` in the `summary` line")                                                \
    X(DEAD_LETTERS, "dedupd_dead_letters_total", COUNTER, "route,reason", 0,                       \
      "Dead letters acknowledged by the dead-letter topic, by route and reason.",                  \
      "dead letters acknowledged by the DLQ topic; `reason` is one of the dead-letter reasons "    \
      "(docs/OPERATIONS.md, \"Dead-letter reasons\"), the shard reasons with several database "    \
      "shards only (every route and reason is always present)")                                    \
    X(TOMBSTONES_SKIPPED, "dedupd_tombstones_skipped_total", COUNTER, "route", 0,                  \
      "Tombstones (null values) skipped, their offsets committed (kafka.tombstones = \"skip\").",  \
      "tombstones (null values) skipped with `kafka.tombstones = \"skip\"`, their offsets "        \
      "committed")                                                                                 \
    X(REGISTRY_FAULTS, "dedupd_schema_registry_faults_total", COUNTER, "fault", 0,                 \
      "Schema fetches that failed, by fault; the messages of their ids wait.",                     \
      "schema fetches from the schema registry that failed, the messages needing the schema "      \
      "waiting: `unreachable` (no answer in time, an HTTP error), `bad_answer` (a 200 that is "     \
      "no registry answer, such as a maintenance page; a reference the registry lacks), "          \
      "`changed_schema` (another schema than the database recorded for the id: never used, an "   \
      "error line says which), `unverified` (the database could not be asked); "                   \
      "docs/OPERATIONS.md, \"Avro and the schema registry\"")                                     \
    X(EXTERNAL_WAITS, "dedupd_external_waits_total", COUNTER, "route", 0,                          \
      "External mode: times a message found its key in progress under another claim and "          \
      "waited.",                                                                                   \
      "external mode: times a message found its key in progress under another claim and waited "   \
      "(0 for a route in local mode)")                                                             \
    X(EXTERNAL_TAKEOVERS, "dedupd_external_takeovers_total", COUNTER, "route", 0,                  \
      "External mode: claims taken over after their lease ran out (or failed keys claimed "        \
      "again).",                                                                                   \
      "external mode: claims taken over after their lease ran out, and failed keys claimed "       \
      "again")                                                                                     \
    X(EXTERNAL_RECONCILE, "dedupd_external_reconcile_total", COUNTER, "route,answer", 0,           \
      "External mode: reconcile() answers after takeovers, by route and answer.",                  \
      "external mode: `reconcile()` answers after takeovers, `answer` one of `done`, "             \
      "`not_done`, `unknown`")                                                                     \
    X(EXTERNAL_LOST_CLAIMS, "dedupd_external_lost_claims_total", COUNTER, "route", 0,              \
      "External mode: claims lost (taken over, or not renewed in time) before their finish; the "  \
      "worker finished nothing.",                                                                  \
      "external mode: claims lost (taken over, or not renewed within the lease) before their "     \
      "finish; the worker finished nothing")                                                       \
    X(DB_ERRORS, "dedupd_db_errors_total", COUNTER, "class", 0,                                    \
      "Database errors by class: retriable (batch replayed) or fatal (shutdown); with several "    \
      "database shards, by shard too.",                                                            \
      "database errors: `retriable` (batch rolled back and replayed) or `fatal` (shutdown); with " \
      "several database shards `{class,shard}`, by shard (the index of its element of "            \
      "`mysql.shards`)")                                                                           \
    X(SHARD_UP, "dedupd_shard_up", GAUGE, "shard", DD_METRIC_F_SHARDS,                             \
      "1 when the lanes of the database shard reach it, 0 while they reconnect after losing "      \
      "their connection.",                                                                         \
      "with several database shards: 1 when the shard answers, 0 while its lanes reconnect "       \
      "after losing their connection or the readiness ping fails or has waited more than 5 s "     \
      "for it (its messages wait; the other shards' go on)")                                       \
    X(SHARD_APPLIED, "dedupd_shard_applied_total", COUNTER, "shard", DD_METRIC_F_SHARDS,           \
      "Messages applied and committed, by database shard.",                                        \
      "with several database shards: messages applied and committed in the shard")                 \
    X(SHARD_CHECK_SKIPPED, "dedupd_shard_check_skipped_total", COUNTER, "shard",                   \
      DD_METRIC_F_SHARDS,                                                                          \
      "Batches whose wrong-shard check went on without asking the database shard, which did "      \
      "not answer (mysql.shard_check = skip, or auto while it checks).",                           \
      "with several database shards: batches whose wrong-shard check went on without asking "      \
      "the shard, which did not answer (`mysql.shard_check = skip`, or `auto` while it checks; "   \
      "docs/GUARANTEES.md, \"Database shards\")")

#define DD_METRIC_TABLE_GAUGES(X)                                                                  \
    X(BATCH_SECONDS, "dedupd_batch_seconds", HISTOGRAM, "", 0,                                     \
      "Duration of committed claim transactions, handler included.",                               \
      "duration of committed claim transactions, handler included; buckets 1 ms … 2.5 s")          \
    X(END_TO_END, "dedupd_end_to_end_seconds", HISTOGRAM, "route", 0,                              \
      "Seconds from an applied message's Kafka timestamp to the commit of its transaction.",       \
      "seconds from an applied message's Kafka timestamp (`CreateTime`: the producer's clock; "    \
      "`LogAppendTime`: the broker's) to the commit of the transaction that applied it: what "     \
      "the sender waits for, consumer lag included. Duplicates and dead letters are not "          \
      "counted, nor a message without a timestamp; a timestamp ahead of dedupd's clock counts "    \
      "as 0. Buckets 1 ms … 10 min")                                                               \
    X(POLL_TO_COMMIT, "dedupd_poll_to_commit_seconds", HISTOGRAM, "route", 0,                      \
      "Seconds from a message's poll to its finish (transaction committed or dead letter "         \
      "acknowledged): when its offset may be committed.",                                          \
      "seconds from a message's poll to its finish: its transaction committed (or its dead "       \
      "letter acknowledged, or it was skipped), so its offset may be committed; every message. "   \
      "The time dedupd itself takes, waits for the database and retries included. Buckets 1 ms "   \
      "… 10 min; the summary's `latency_p50_le_ms` and `latency_p99_le_ms` are the same "          \
      "measure, over all routes")                                                                  \
    X(INFLIGHT, "dedupd_inflight_messages", GAUGE, "", 0,                                          \
      "Messages polled and not yet finished.",                                                     \
      "polled and not yet finished")                                                               \
    X(ASSIGNED, "dedupd_assigned_partitions", GAUGE, "", 0,                                        \
      "Partitions assigned to this consumer.",                                                     \
      "partitions assigned to this instance")                                                      \
    X(DLQ_SKIPPED, "dedupd_dead_letter_partitions_skipped", GAUGE, "", 0,                          \
      "Assigned partitions of dead-letter topics a route's pattern matches: never consumed.",      \
      "of them, partitions of a dead-letter topic that a route's pattern matches: never "          \
      "consumed (nothing applied or committed; the log names the topic; docs/CONFIG.md, "          \
      "Routes). Above 0: change the pattern")                                                      \
    X(RUNNING, "dedupd_running", GAUGE, "", 0,                                                     \
      "1 while the consumer loop runs.",                                                           \
      "1 while the consumer loop runs")                                                            \
    X(PROCESSING_STUCK, "dedupd_processing_stuck", GAUGE, "route", DD_METRIC_F_SCAN,               \
      "External mode: rows of the route's dedup table in processing past their lease, as the "     \
      "last compensation scan counted them (summed over the database shards).",                    \
      "external mode: rows of the route's dedup table processing past their lease, as the last "   \
      "compensation scan counted them (docs/OPERATIONS.md, \"External mode: stuck rows\"); a "     \
      "series per route in external mode, absent for a route in local mode, before the first "     \
      "scan and with `external.scan_interval = 0`; with several database shards, the sum over "    \
      "the shards (each as its last scan counted it)")                                             \
    X(PROCESSING_OLDEST, "dedupd_processing_oldest_seconds", GAUGE, "route", DD_METRIC_F_SCAN,     \
      "External mode: how long ago the lease of the oldest stuck row of the route's dedup table "  \
      "ran out (0: none), as the last compensation scan found it (the oldest over the database "   \
      "shards).",                                                                                  \
      "external mode: how long ago the lease of the route's oldest stuck row ran out (0: none), "  \
      "from the same scan; with several database shards, the oldest over the shards")              \
    X(OUTBOX_BACKLOG, "dedupd_outbox_backlog", GAUGE, "", DD_METRIC_F_RELAY,                       \
      "Events in the outbox waiting to be published (all shards).",                                \
      "with `outbox.enabled` and the relay in this process: events waiting in the outbox to be "   \
      "published, all shards, as counted about once a second (docs/HANDLERS.md, \"Events "         \
      "out\"); absent until first counted")                                                        \
    X(OUTBOX_OLDEST, "dedupd_outbox_oldest_seconds", GAUGE, "", DD_METRIC_F_RELAY,                 \
      "How long the oldest event waiting in the outbox has waited (0: none).",                     \
      "how long the oldest of them has waited (0: none): rising while the backlog does not fall "  \
      "means the relay cannot publish (broker down, a topic missing; `/readyz` says which)")       \
    X(OUTBOX_PARKED, "dedupd_outbox_parked", GAUGE, "", DD_METRIC_F_RELAY,                         \
      "Events parked in the outbox: refused by Kafka for good, not sent again.",                   \
      "events parked in the outbox: refused by Kafka for good (too large, not authorized), not "   \
      "sent again")                                                                                \
    X(OUTBOX_LEADING, "dedupd_outbox_relay_leading", GAUGE, "", DD_METRIC_F_RELAY,                 \
      "Shards whose outbox this process relays (holding their lock).",                             \
      "shards whose outbox this process relays (it holds their lock; another relay holds the "     \
      "others)")                                                                                   \
    X(OUTBOX_SENT, "dedupd_outbox_sent_total", COUNTER, "", DD_METRIC_F_RELAY,                     \
      "Events this process published, acknowledged and deleted.",                                  \
      "events this process published, had acknowledged and deleted")                               \
    X(OUTBOX_PARKED_TOTAL, "dedupd_outbox_parked_total", COUNTER, "", DD_METRIC_F_RELAY,           \
      "Events this process parked.",                                                               \
      "events this process parked")                                                                \
    X(OUTBOX_FAILURES, "dedupd_outbox_failures_total", COUNTER, "", DD_METRIC_F_RELAY,             \
      "Deliveries that failed for a reason that may pass; tried again.",                           \
      "deliveries that failed for a reason that may pass; those events stay in the outbox and "    \
      "are tried again")                                                                           \
    X(CONSUMER_LAG, "dedupd_consumer_lag", GAUGE, "group,topic,partition", 0,                      \
      "High watermark minus the next offset to finish, per consumer group and assigned "           \
      "partition (refreshed every few seconds; absent while unknown).",                            \
      "high watermark minus the next offset to finish, per assigned partition (`group`: "          \
      "`kafka.group`, as kafka_exporter's `consumergroup`), refreshed every 2 s from "             \
      "librdkafka's cache; absent while unknown")                                                  \
    X(PROCESS_CPU, "process_cpu_seconds_total", COUNTER, "", DD_METRIC_F_PROCESS,                  \
      "Total user and system CPU time spent in seconds.",                                          \
      "user + system CPU seconds of the whole process, all threads (`getrusage`)")                 \
    X(PROCESS_START, "process_start_time_seconds", GAUGE, "", DD_METRIC_F_PROCESS,                 \
      "Start time of the process since unix epoch in seconds.",                                    \
      "when the process started, Unix time")                                                       \
    X(PROCESS_RESIDENT, "process_resident_memory_bytes", GAUGE, "", DD_METRIC_F_PROCESS,           \
      "Resident memory size in bytes.",                                                            \
      "resident memory (`/proc/self/statm`)")                                                      \
    X(PROCESS_VIRTUAL, "process_virtual_memory_bytes", GAUGE, "", DD_METRIC_F_PROCESS,             \
      "Virtual memory size in bytes.",                                                             \
      "virtual memory (`/proc/self/statm`)")                                                       \
    X(PROCESS_OPEN_FDS, "process_open_fds", GAUGE, "", DD_METRIC_F_PROCESS,                        \
      "Number of open file descriptors.",                                                          \
      "open file descriptors")                                                                     \
    X(PROCESS_MAX_FDS, "process_max_fds", GAUGE, "", DD_METRIC_F_PROCESS,                          \
      "Maximum number of open file descriptors.",                                                  \
      "the soft limit of open file descriptors (`RLIMIT_NOFILE`; absent when unlimited)")

#define DD_METRIC_TABLE(X) DD_METRIC_TABLE_COUNTERS(X) DD_METRIC_TABLE_GAUGES(X)
/* clang-format on */

typedef enum {
#define DD_METRIC_ENUM(id, name, type, labels, flags, help, doc) DD_METRIC_##id,
    DD_METRIC_TABLE(DD_METRIC_ENUM)
#undef DD_METRIC_ENUM
        DD_METRIC_CNT
} dd_metric_t;

typedef struct {
    const char *name;
    dd_metric_type_t type;
    const char *labels; /* comma-separated label names, "" for none */
    unsigned flags;     /* DD_METRIC_F_* */
    const char *help;   /* the HELP line */
    const char *doc;    /* the reference's sentence */
} dd_metric_def_t;

/* The table's row of a metric. */
extern const dd_metric_def_t dd_metric_defs[DD_METRIC_CNT];

/* "counter", "gauge" or "histogram". */
const char *dd_metric_type2str(dd_metric_type_t type);

#endif /* DD_METRICS_DEF_H */
