/*
 * Configuration: one schema table drives parsing, validation, defaults, the
 * --help-config text and the example file. Values come from a libconfig file
 * and may be overridden by DEDUPD_<SECTION>_<NAME> environment variables
 * (for containers). Every error names file:line (or the variable).
 *
 * The struct is public to the other modules because they read many fields;
 * only the configuration module (dd_conf*.c) writes it.
 */
#ifndef DD_CONF_H
#define DD_CONF_H

#include <stdint.h>
#include <stdio.h>

#include <regex.h>

#include <libconfig.h>
#include <librdkafka/rdkafka.h>

/* mysql.tls.mode, weakest to strongest: a mode includes what the ones
 * before it do (the names of MySQL's --ssl-mode). */
typedef enum {
    DD_TLS_DISABLED,
    DD_TLS_PREFERRED,
    DD_TLS_REQUIRED,
    DD_TLS_VERIFY_CA,
    DD_TLS_VERIFY_IDENTITY,
} dd_conf_tls_mode_t;

/* dedup.format: what a route's payloads are. */
typedef enum {
    DD_FORMAT_JSON = 0, /* JSON text */
    DD_FORMAT_AVRO,     /* Confluent wire format around an Avro binary record */
    DD_FORMAT_JSON_SR,  /* Confluent wire format around JSON text */
} dd_conf_format_t;
int dd_conf_format_parse(const char *name);
const char *dd_conf_format_name(int format);

/* mysql.tls.min_version */
typedef enum { DD_TLS_V1_2, DD_TLS_V1_3 } dd_conf_tls_version_t;

/* Most routes one configuration may have. */
#define DD_CONF_ROUTE_MAX 32

/* Most database shards (elements of mysql.shards). */
#define DD_CONF_SHARD_MAX 64

/* The connection settings of one database: the mysql group's, or one
 * element of mysql.shards over them. */
typedef struct {
    char *host;
    int port;
    char *hosts;  /* "host:port[,host:port...]": nodes of one cluster, or NULL */
    char *socket; /* NULL: TCP to host:port */
    char *user;
    char *password; /* resolved from password, password_env or password_file; never logged */
    char *database;
    int connect_timeout_s;
    int read_timeout_s;  /* one read of an answer; the session's lock waits end before it */
    int write_timeout_s; /* one write of a request */
    char *password_env;  /* name of the variable the password came from, or NULL */
    char *password_file; /* resolved path the password came from, or NULL */
    struct {
        int mode; /* dd_conf_tls_mode_t; not used over a unix socket */
        char *ca; /* resolved paths, or NULL */
        char *cert;
        char *key;
        int min_version; /* dd_conf_tls_version_t */
    } tls;
    char where[300]; /* "FILE:LINE" of its settings, for messages */
} dd_conf_mysql_t;

/* The schema registry of routes in avro format (schema_registry.*). */
typedef struct {
    char *url; /* NULL: no registry */
    char *user;
    char *password; /* resolved from password, password_env or password_file; never logged */
    char *password_env;
    char *password_file;
    struct {
        char *ca; /* resolved paths, or NULL */
        char *cert;
        char *key;
    } tls;
    int cleartext_auth; /* user and password may go over an http:// URL */
    int timeout_ms;
} dd_conf_registry_t;

/* The settings of one route: the business key and hash, the dedup table
 * and its retention (dedup.*), the handler (handler.*) and the dead-letter
 * topic (dlq.*). The top-level groups of those names are the one default
 * route's; each element of `routes` has its own. */
typedef struct {
    char *key;   /* key template, e.g. "pay:${merchant_id}:${order_no}" */
    char **hash; /* paths the request hash covers; empty: whole payload */
    int hash_cnt;
    int64_t ttl_s; /* how long a key is remembered */
    char *table;   /* dedup table name, [A-Za-z0-9_]+ */
    int retry_failed;
    int defer_claim;           /* new keys are claimed by the insert of their finished row */
    int64_t max_payload_bytes; /* larger messages are dead-lettered payload_too_large */
    char *lane_key;            /* template routing messages to workers; NULL: the business key */
    char *shard_key;           /* template choosing the database shard; NULL: the business key */
    int shard_by;              /* dd_shard_by_t */
    char *shard_map;           /* shard_by map: the ranges file, resolved; else NULL */
    char shard_map_digest[65]; /* what the map read at load decides (dd_shard.h); else "" */
    int format;                /* dd_conf_format_t: what the payloads are */
} dd_conf_dedup_t;

typedef struct {
    char *path; /* absolute, or relative to the config file's directory resolved; for a
                 * handler that ships with dedupd, where it was found */
    /* the name of the handler that ships with dedupd (its group: handler.sql is
     * "sql"), or NULL for a plugin named by handler.path */
    const char *builtin;
    const config_setting_t *config; /* the handler's own group (handler.sql's), or NULL */
    int batch;                      /* use handle_batch() when the handler has it */
    int64_t max_response_bytes;     /* longer responses are a handler error */
    char *grants; /* handler.grants: its GRANT statements, resolved; NULL: none declared */
} dd_conf_handler_t;

typedef struct {
    char *topic; /* NULL: "<source topic>.dlq" */
} dd_conf_dlq_t;

/* One route: which topics, and how their messages are recognised and
 * applied. A topic belongs to exactly one route. */
typedef struct dd_conf_route_s {
    char *name;    /* "default" for the route of the top-level settings */
    char **topics; /* names, or "^regex" patterns as librdkafka subscribes */
    int topic_cnt;
    regex_t *re; /* topic_cnt compiled patterns; only those of "^" topics are set */
    dd_conf_dedup_t dedup;
    dd_conf_handler_t handler;
    dd_conf_dlq_t dlq;
    char where[300]; /* "FILE:LINE" of the route's settings, for messages */
} dd_conf_route_t;

typedef struct dd_conf_s {
    char *path; /* the file that was loaded */
    char *dir;  /* its directory, for relative paths */

    struct {
        char *brokers;
        char *group;
        char **properties; /* "name=value", handed to librdkafka as is */
        int property_cnt;
        int tombstones; /* dd_conf_tombstones_t: kafka.tombstones */
    } kafka;

    dd_conf_registry_t schema_registry;

    /* The database shards, in the order of mysql.shards (a shard's index
     * is its position, from 0), each element's settings over the mysql
     * group's; without mysql.shards, one: the mysql group's values. */
    dd_conf_mysql_t *shards;
    int shard_cnt;
    int shard_check; /* dd_conf_shard_check_t: mysql.shard_check */

    int dlq_connect_headers; /* dlq.connect_headers: Kafka Connect's header names too */

    struct {
        int max_messages;
        int max_wait_ms;
        int max_inflight; /* messages polled but not yet committed, all lanes together */
    } batch;

    struct {
        int backoff_initial_ms;
        int backoff_max_ms;
        int max_attempts; /* handler RETRY attempts before dead-letter; 0: unlimited */
    } retry;

    int workers;
    int shutdown_timeout_ms;

    struct {
        char *listen;        /* "host:port" or NULL for no HTTP endpoint */
        int stuck_after_ms;  /* /healthz: in flight and nothing finished this long = stuck */
        int timeout_ms;      /* a request must arrive within this long of connecting */
        int max_connections; /* open connections, all clients together */
        int max_connections_per_ip;
    } http;

    struct {
        int level;  /* dd_log_level_t */
        int format; /* dd_log_format_t */
    } log;

    struct {
        int64_t interval_s; /* 0: no background purge */
        int batch;
    } purge;

    struct {
        int lease_ms;             /* how long a claim holds a key without renewal */
        int64_t scan_interval_ms; /* the compensation scan of run; 0: off */
        int64_t scan_after_ms;    /* past its lease this long, a row's message is taken as gone */
        int unknown_attempts;     /* reconcile UNKNOWN answers before `unresolved`; 0: unlimited */
        int in_flight;            /* act() calls at once per lane */
    } external;

    struct {
        int enabled;  /* handlers may emit; migrate creates dedupd_outbox */
        int relay;    /* dedupd run runs the relay */
        int batch;    /* events per relay read */
        int inflight; /* batches of a shard awaiting their reports at once */
        int poll_interval_ms;
        int send_timeout_ms; /* then the events not yet sent are taken back */
        int retry_max_ms;    /* longest pause of a failing topic */
    } outbox;

    /* The routes: the default route of the top-level settings (kafka.topics,
     * dedup, handler, dlq; named "default"), or the elements of `routes`,
     * in the file's order. Never empty. */
    dd_conf_route_t *routes;
    int route_cnt;
    int has_routes; /* the configuration has `routes` */

    config_t *lc; /* libconfig tree, kept alive for handler.config */

    /* What the load found allowed but probably wrong ("FILE:LINE: setting
     * mysql.password_file: ..."), reported by dd_validate_conf(). */
    char *warnings[8];
    int warning_cnt;
} dd_conf_t;

/* Loads and validates path. On failure *confp is NULL and errstr says
 * "file:line: what is wrong". */
int dd_conf_load(dd_conf_t **confp, const char *path, char *errstr, size_t errstr_size);
void dd_conf_destroy(dd_conf_t *conf);

/* The dead-letter topic of route for messages from source topic `topic`,
 * written to out. Returns out, or NULL when it does not fit in out_size. */
const char *dd_conf_dlq_topic(const dd_conf_route_t *route, const char *topic, char *out,
                              size_t out_size);

/* The route whose dead-letter topic topic is (its dlq.topic, or, without
 * one, "<t>.dlq" for a topic t the route consumes, by name or pattern), or
 * -1. Such a topic is never consumed: the loader refuses the routes' names
 * and patterns it can tell, and run does not consume one it is assigned. */
int dd_conf_dlq_route(const dd_conf_t *conf, const char *topic);

/* The route of topic: its index in conf->routes, or -1 when no route's
 * topics match it. When two routes match (two patterns may overlap; the
 * loader refuses every other overlap), *other is the second one's index,
 * else -1. other may be NULL. */
int dd_conf_route_find(const dd_conf_t *conf, const char *topic, int *other);
/* The index of the route named name, or -1. */
int dd_conf_route_named(const dd_conf_t *conf, const char *name);
/* 1 when a route of conf reads Avro (dedup.format = "avro"). */
int dd_conf_reads_avro(const dd_conf_t *conf);
/* 1 when the route's topic i is a pattern ("^..."). */
int dd_conf_topic_is_pattern(const char *topic);

/* Writes the reference of every setting (name, type, default, description). */
void dd_conf_print_reference(FILE *out);
/* The same reference as a markdown table (the generated part of docs/CONFIG.md). */
void dd_conf_print_reference_md(FILE *out);
/* The same reference as the SETTINGS section of dedupd.conf(5) (troff, the
 * generated part of man/dedupd.conf.5). */
void dd_conf_print_reference_man(FILE *out);
/* Path of the i-th setting of the schema ("kafka.brokers"), NULL past the end. */
const char *dd_conf_setting_path(int i);
/* Its description in the references (in_route: the one of its routes[]
 * row, NULL when that row says "As PATH, for the route."). */
const char *dd_conf_setting_desc(int i, int in_route);

/* Sets one librdkafka property; errors read "kafka property NAME: why". */
int dd_conf_kafka_set(rd_kafka_conf_t *kconf, const char *name, const char *value, char *errstr,
                      size_t errstr_size);
/* Sets one "name=value" property (split at the first '='), as
 * dd_conf_kafka_set; a string without a name is an error. */
int dd_conf_kafka_set_prop(rd_kafka_conf_t *kconf, const char *prop, char *errstr,
                           size_t errstr_size);
/* Applies kafka.properties (minus those skip() returns 1 for; skip may be
 * NULL) and then kafka.brokers to kconf: the common part of every Kafka
 * client dedupd creates. Callers set their own fixed properties after. */
int dd_conf_kafka_apply(const dd_conf_t *conf, rd_kafka_conf_t *kconf,
                        int (*skip)(const char *prop), char *errstr, size_t errstr_size);

/* Parses "7d", "12h", "30m", "45s", "250ms" or a plain number of seconds into
 * milliseconds. Returns 0 or -1. */
int dd_conf_parse_duration_ms(const char *s, int64_t *ms);

/* mysql.tls names as in the configuration ("verify_ca", "TLSv1.3"); -1 if
 * unknown. Case does not matter, as for MySQL's --ssl-mode. */
int dd_conf_tls_mode_parse(const char *name);
int dd_conf_tls_version_parse(const char *name);
const char *dd_conf_tls_mode_name(int mode);
const char *dd_conf_tls_version_name(int version);
/* The mode the connections to a database use: its tls.mode, or
 * DD_TLS_DISABLED over a unix socket (the connection does not leave the
 * machine). */
int dd_conf_tls_mode(const dd_conf_mysql_t *my);
/* "127.0.0.1:3307", its mysql.hosts or the socket path of a database,
 * written to out. */
const char *dd_conf_mysql_addr(const dd_conf_mysql_t *my, char *out, size_t out_size);
/* mysql.shard_check: when the wrong-shard check runs, and what it does when
 * another shard does not answer (docs/GUARANTEES.md). */
typedef enum {
    DD_SHARD_CHECK_SKIP = 0, /* go on without it, warn and count */
    DD_SHARD_CHECK_WAIT,     /* the batch waits until every shard answered */
    DD_SHARD_CHECK_OFF,      /* no check */
    DD_SHARD_CHECK_AUTO,     /* as skip, until dedup.ttl has passed since a layout change */
} dd_conf_shard_check_t;
int dd_conf_shard_check_parse(const char *name);

/* kafka.tombstones: what a message with a null value (a tombstone) gets. */
typedef enum {
    DD_CONF_TOMBSTONES_DEAD_LETTER = 0, /* dead-lettered, reason tombstone */
    DD_CONF_TOMBSTONES_SKIP,            /* counted, its offset committed, nothing run */
} dd_conf_tombstones_t;
int dd_conf_tombstones_parse(const char *name);
const char *dd_conf_shard_check_name(int check);

/* "shard 1 (127.0.0.1:3307)" for shard s of conf, or "the database
 * (127.0.0.1:3306)" when it has one; written to out. */
const char *dd_conf_shard_name(const dd_conf_t *conf, int s, char *out, size_t out_size);

#endif /* DD_CONF_H */
