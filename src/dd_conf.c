/*
 * Configuration loader.
 *
 * Every setting dedupd understands is described exactly once, in the
 * dd_conf_items[] table below: its path, type, default, bounds, whether it is
 * required, where it is stored in dd_conf_t, and one sentence for users. The
 * table drives everything else, so nothing can drift apart: reading the
 * libconfig file, rejecting unknown settings, type and bounds checks,
 * defaults, DEDUPD_<SECTION>_<NAME> environment overrides, freeing the
 * struct, `dedupd --help-config` and the reference in docs/CONFIG.md (a unit
 * test compares that file with dd_conf_print_reference_md()).
 *
 * Order of precedence: table default, then the file, then the environment;
 * validation that involves several settings runs last, on the final values.
 * Every error names FILE:LINE (or the environment variable). Secret values
 * (the MySQL password, values of sensitive librdkafka properties) never
 * appear in any message.
 */
#include "dd_conf.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <librdkafka/rdkafka.h>

#include "dd_common.h"
#include "dd_log.h"
#include "dd_tls.h"

typedef enum {
    DD_CT_GROUP,
    DD_CT_STRING,
    DD_CT_INT,
    DD_CT_BOOL,
    DD_CT_DURATION,
    DD_CT_LIST, /* list of strings */
    DD_CT_ENUM, /* a string from a fixed set, stored as an int */
} dd_conf_type_t;

#define DD_CF_REQUIRED 0x01 /* no default: the file or the environment must set it */
#define DD_CF_ANY 0x02      /* group owned by someone else (the handler): not checked */
#define DD_CF_NOENV 0x04    /* no DEDUPD_* override */
#define DD_CF_SECRET 0x08   /* value never appears in messages */
#define DD_CF_EMPTY_OK 0x10 /* an empty string is a valid value */

#define DD_MS_SEC INT64_C(1000)
#define DD_MS_MIN (60 * DD_MS_SEC)
#define DD_MS_HOUR (60 * DD_MS_MIN)
#define DD_MS_DAY (24 * DD_MS_HOUR)

#define DD_CONF_MAX_ITEMS 64
#define DD_CONF_SECRET_MAX 4096 /* longest password file accepted */

/* Where the current value of one setting came from. */
typedef enum { DD_ORIGIN_UNSET, DD_ORIGIN_DEFAULT, DD_ORIGIN_FILE, DD_ORIGIN_ENV } dd_origin_kind_t;

typedef struct dd_conf_origin_s {
    dd_origin_kind_t kind;
    const config_setting_t *setting; /* DD_ORIGIN_FILE */
    char env[80];                    /* DD_ORIGIN_ENV: the variable's name */
} dd_conf_origin_t;

/* State of one dd_conf_load() call. */
typedef struct dd_conf_ctx_s {
    dd_conf_t *conf;
    dd_conf_origin_t origin[DD_CONF_MAX_ITEMS];
    char *errstr;
    size_t errstr_size;
} dd_conf_ctx_t;

/* Validation that runs after all values are known. Returns 0 or DD_ERR_*. */
typedef int (*dd_conf_check_t)(dd_conf_ctx_t *ctx, int idx);

typedef struct dd_conf_item_s {
    const char *path; /* "kafka.brokers"; top-level settings have no dot */
    dd_conf_type_t type;
    const char *def;                /* default, as environment text; NULL: unset */
    int64_t min, max;               /* int: value; duration: ms; list: element count */
    int flags;                      /* DD_CF_* */
    size_t off;                     /* where the value lives in dd_conf_t */
    size_t size;                    /* size of that field; 0: not stored (plain groups) */
    size_t cnt_off;                 /* lists: the int element count */
    int64_t unit_ms;                /* durations: 1 stores ms, 1000 stores seconds */
    int (*parse)(const char *name); /* enums: name -> value, -1 if unknown */
    const char *allowed;            /* text for the reference when bounds do not say it */
    dd_conf_check_t check;
    const char *desc;
} dd_conf_item_t;

static int dd_conf_check_properties(dd_conf_ctx_t *ctx, int idx);
static int dd_conf_check_password(dd_conf_ctx_t *ctx, int idx);
static int dd_conf_check_key(dd_conf_ctx_t *ctx, int idx);
static int dd_conf_check_table(dd_conf_ctx_t *ctx, int idx);
static int dd_conf_check_handler_path(dd_conf_ctx_t *ctx, int idx);
static int dd_conf_check_inflight(dd_conf_ctx_t *ctx, int idx);
static int dd_conf_check_backoff(dd_conf_ctx_t *ctx, int idx);
static int dd_conf_check_listen(dd_conf_ctx_t *ctx, int idx);
static int dd_conf_check_lane_key(dd_conf_ctx_t *ctx, int idx);
static int dd_conf_check_tls(dd_conf_ctx_t *ctx, int idx);

/* clang-format off */
#define DD_AT(field) .off = offsetof(dd_conf_t, field), .size = sizeof(((dd_conf_t *)0)->field)
#define DD_LIST_AT(field, cnt) DD_AT(field), .cnt_off = offsetof(dd_conf_t, cnt)
#define DD_GROUP(p, d) {.path = (p), .type = DD_CT_GROUP, .desc = (d)}

/* The schema. Groups come before their members; the order is the order of
 * the reference and of validation. Kept out of clang-format, which would put
 * every field on its own line. */
static const dd_conf_item_t dd_conf_items[] = {
    DD_GROUP("kafka", "Kafka source."),
    {.path = "kafka.brokers", .type = DD_CT_STRING, .flags = DD_CF_REQUIRED,
     DD_AT(kafka.brokers), .desc = "Bootstrap brokers, \"host:port[,host:port...]\"."},
    {.path = "kafka.group", .type = DD_CT_STRING, .flags = DD_CF_REQUIRED, DD_AT(kafka.group),
     .desc = "Consumer group id; every dedupd instance consuming the same topics shares it."},
    {.path = "kafka.topics", .type = DD_CT_LIST, .min = 1, .max = 1000, .flags = DD_CF_REQUIRED,
     DD_LIST_AT(kafka.topics, kafka.topic_cnt), .desc = "Topics to consume."},
    {.path = "kafka.properties", .type = DD_CT_LIST, .def = "", .max = 1000,
     DD_LIST_AT(kafka.properties, kafka.property_cnt), .check = dd_conf_check_properties,
     .desc = "Extra librdkafka properties as \"name=value\", each checked by librdkafka when "
             "the file is loaded. bootstrap.servers, group.id and enable.auto.offset.store "
             "are set by dedupd and are refused here. The dead-letter producer takes them "
             "too (consumer-only ones excepted), e.g. message.timeout.ms (30000 by default): "
             "how long one send is tried before dedupd sends the dead letter again. Its "
             "acks=all cannot be changed. dedupd's own defaults, which this list overrides: "
             "auto.offset.reset=earliest, queued.max.messages.kbytes=65536 (keep the "
             "prefetch queue above one second of the stream; README, Backpressure and "
             "memory)."},

    DD_GROUP("mysql", "MySQL/MariaDB database holding the dedup table and the business tables."),
    {.path = "mysql.host", .type = DD_CT_STRING, .def = "127.0.0.1", DD_AT(mysql.host),
     .desc = "Server host name or address."},
    {.path = "mysql.port", .type = DD_CT_INT, .def = "3306", .min = 1, .max = 65535,
     DD_AT(mysql.port), .desc = "Server TCP port."},
    {.path = "mysql.socket", .type = DD_CT_STRING, DD_AT(mysql.socket),
     .desc = "Unix socket path; when set it is used instead of host and port."},
    {.path = "mysql.user", .type = DD_CT_STRING, .def = "dedupd", DD_AT(mysql.user),
     .desc = "User name."},
    {.path = "mysql.password", .type = DD_CT_STRING,
     .flags = DD_CF_NOENV | DD_CF_SECRET | DD_CF_EMPTY_OK, DD_AT(mysql.password),
     .desc = "Password in clear text; prefer password_env or password_file. At most one of "
             "the three may be set; none means an empty password."},
    {.path = "mysql.password_env", .type = DD_CT_STRING, .flags = DD_CF_NOENV,
     DD_AT(mysql.password_env),
     .desc = "Name of an environment variable holding the password (conventionally "
             "DEDUPD_MYSQL_PASSWORD); it must be set."},
    {.path = "mysql.password_file", .type = DD_CT_STRING, .flags = DD_CF_NOENV,
     DD_AT(mysql.password_file), .check = dd_conf_check_password,
     .desc = "File holding the password, trailing newline removed; relative paths are "
             "relative to the config file's directory."},
    {.path = "mysql.database", .type = DD_CT_STRING, .flags = DD_CF_REQUIRED,
     DD_AT(mysql.database), .desc = "Database holding the dedup table and the business tables."},
    {.path = "mysql.connect_timeout", .type = DD_CT_DURATION, .def = "5s", .min = DD_MS_SEC,
     .max = DD_MS_HOUR, .unit_ms = DD_MS_SEC, DD_AT(mysql.connect_timeout_s),
     .desc = "Connect timeout (whole seconds)."},

    DD_GROUP("mysql.tls", "TLS to the database server over TCP. A unix socket (mysql.socket) does "
                          "not leave the machine: connections through one never use TLS."),
    {.path = "mysql.tls.mode", .type = DD_CT_ENUM, .def = "required", DD_AT(mysql.tls.mode),
     .parse = dd_tls_mode_parse,
     .allowed = "disabled|preferred|required|verify_ca|verify_identity",
     .desc = "As MySQL's --ssl-mode. disabled: no TLS; preferred: TLS when the server offers "
             "it, else clear text; required: TLS or no session; verify_ca: also the server's "
             "certificate must be signed by a CA in mysql.tls.ca; verify_identity: also it must "
             "name mysql.host. preferred and required do not check the certificate, so they "
             "do not stop a machine in the middle: use verify_identity across any network you "
             "do not control."},
    {.path = "mysql.tls.ca", .type = DD_CT_STRING, DD_AT(mysql.tls.ca),
     .desc = "CA certificates (PEM) the server's certificate must be signed by; needed by, and "
             "only used by, verify_ca and verify_identity (for a publicly trusted server "
             "certificate, the system's bundle, e.g. /etc/ssl/certs/ca-certificates.crt). "
             "Relative paths are relative to the config file's directory."},
    {.path = "mysql.tls.cert", .type = DD_CT_STRING, DD_AT(mysql.tls.cert),
     .desc = "Client certificate (PEM) for a server that asks for one (REQUIRE X509); needs "
             "mysql.tls.key. Relative to the config file's directory."},
    {.path = "mysql.tls.key", .type = DD_CT_STRING, DD_AT(mysql.tls.key),
     .desc = "Private key (PEM, not encrypted) of mysql.tls.cert. Relative to the config "
             "file's directory."},
    {.path = "mysql.tls.min_version", .type = DD_CT_ENUM, .def = "TLSv1.2",
     DD_AT(mysql.tls.min_version), .parse = dd_tls_version_parse, .allowed = "TLSv1.2|TLSv1.3",
     .check = dd_conf_check_tls, .desc = "Oldest TLS version dedupd accepts."},

    DD_GROUP("dedup", "How messages are recognised as duplicates."),
    {.path = "dedup.key", .type = DD_CT_STRING, .flags = DD_CF_REQUIRED, DD_AT(dedup.key),
     .allowed = "contains ${path}", .check = dd_conf_check_key,
     .desc = "Business key template over the JSON payload, e.g. "
             "\"pay:${merchant_id}:${order_no}\"; values are escaped so that different "
             "payments never share a key (docs/KEYS.md)."},
    {.path = "dedup.hash", .type = DD_CT_LIST, .def = "", .max = 1000,
     DD_LIST_AT(dedup.hash, dedup.hash_cnt),
     .desc = "Payload paths covered by the request hash; empty: the whole payload. A path "
             "that finds nothing is left out of the hash (docs/KEYS.md)."},
    {.path = "dedup.ttl", .type = DD_CT_DURATION, .def = "7d", .min = DD_MS_SEC,
     .max = 3650 * DD_MS_DAY, .unit_ms = DD_MS_SEC, DD_AT(dedup.ttl_s),
     .desc = "How long a key is remembered before the purge may delete it; must cover the "
             "longest redelivery or replay window."},
    {.path = "dedup.table", .type = DD_CT_STRING, .def = "dedup_record", DD_AT(dedup.table),
     .allowed = "[A-Za-z0-9_]{1,64}", .check = dd_conf_check_table,
     .desc = "Name of the dedup table."},
    {.path = "dedup.retry_failed", .type = DD_CT_BOOL, .def = "true", DD_AT(dedup.retry_failed),
     .desc = "Whether a later message with the same key and hash may retry a rejected key."},
    {.path = "dedup.defer_claim", .type = DD_CT_BOOL, .def = "true", DD_AT(dedup.defer_claim),
     .desc = "Claim a key that is not in the dedup table yet by inserting its finished row "
             "after the handler ran, in the same transaction: one row write instead of two. "
             "If another consumer inserted the key meanwhile, that insert fails, the batch is "
             "rolled back and replayed with the key claimed first. false: always claim "
             "first, so a handler is never called for a key another consumer is applying "
             "(choose it when handlers have effects outside the transaction)."},
    {.path = "dedup.max_payload_bytes", .type = DD_CT_INT, .def = "990000", .min = 1,
     .max = 100000000, DD_AT(dedup.max_payload_bytes),
     .desc = "Larger payloads are dead-lettered as payload_too_large. The default leaves a "
             "dead letter room for the key, the headers and the record overhead within the "
             "dead-letter producer's message.max.bytes (librdkafka's default 1000000); "
             "dedupd warns at start when it does not. A dead letter that would not fit "
             "carries its payload truncated (header dedupd.truncated)."},
    {.path = "dedup.lane_key", .type = DD_CT_STRING, DD_AT(dedup.lane_key),
     .allowed = "${path}s of dedup.key", .check = dd_conf_check_lane_key,
     .desc = "Template choosing the worker for a message, e.g. \"${merchant_id}\": messages "
             "with the same lane key run on one worker, so a handler updating shared rows "
             "(a merchant balance) is not deadlocked by other workers. Only fields of "
             "dedup.key, so one key stays on one worker; unset: the business key."},

    DD_GROUP("handler", "The business handler plugin."),
    {.path = "handler.path", .type = DD_CT_STRING, .flags = DD_CF_REQUIRED, DD_AT(handler.path),
     .check = dd_conf_check_handler_path,
     .desc = "Handler shared object; relative paths are relative to the config file's "
             "directory."},
    {.path = "handler.config", .type = DD_CT_GROUP, .flags = DD_CF_ANY, DD_AT(handler.config),
     .desc = "The handler's own settings, passed to its init() unchecked."},
    {.path = "handler.batch", .type = DD_CT_BOOL, .def = "true", DD_AT(handler.batch),
     .desc = "Give a handler that has handle_batch() (ABI 2) all of a transaction's messages "
             "in one call; false: always handle() one message at a time."},
    {.path = "handler.max_response_bytes", .type = DD_CT_INT, .def = "65536", .min = 64,
     .max = 16777215, DD_AT(handler.max_response_bytes),
     .desc = "Longest response snapshot a handler may return, in bytes. A longer one is a "
             "handler error: the message is rejected (its writes rolled back, the key "
             "recorded failed, dead letter rejected). The database's max_allowed_packet "
             "must hold a finished row with twice this much (escaped text); dedupd refuses "
             "to start when it does not. At most 16777215, the response column's capacity."},

    DD_GROUP("dlq", "Dead-letter topic."),
    {.path = "dlq.topic", .type = DD_CT_STRING, DD_AT(dlq.topic),
     .desc = "Dead-letter topic; unset: the source topic's name followed by \".dlq\"."},

    DD_GROUP("batch", "Batching: one database transaction per batch."),
    {.path = "batch.max_messages", .type = DD_CT_INT, .def = "1000", .min = 1, .max = 100000,
     DD_AT(batch.max_messages), .desc = "Most messages in one batch."},
    {.path = "batch.max_wait_ms", .type = DD_CT_INT, .def = "20", .min = 0, .max = 60000,
     DD_AT(batch.max_wait_ms), .desc = "Longest wait for a batch to fill, in milliseconds."},
    {.path = "batch.max_inflight", .type = DD_CT_INT, .def = "20000", .min = 1, .max = 10000000,
     DD_AT(batch.max_inflight), .allowed = "1..10000000, >= batch.max_messages",
     .check = dd_conf_check_inflight,
     .desc = "Most messages polled but not yet committed, all workers together; at the limit "
             "polling waits for the workers."},

    DD_GROUP("retry", "Backoff after transient errors and handler RETRY."),
    {.path = "retry.backoff_initial", .type = DD_CT_DURATION, .def = "100ms", .min = 1,
     .max = DD_MS_HOUR, .unit_ms = 1, DD_AT(retry.backoff_initial_ms),
     .desc = "First backoff; doubled after each failure."},
    {.path = "retry.backoff_max", .type = DD_CT_DURATION, .def = "30s", .min = 1,
     .max = DD_MS_DAY, .unit_ms = 1, DD_AT(retry.backoff_max_ms),
     .allowed = "1ms..1d, >= retry.backoff_initial", .check = dd_conf_check_backoff,
     .desc = "Longest backoff."},
    {.path = "retry.max_attempts", .type = DD_CT_INT, .def = "0", .min = 0, .max = 1000000,
     DD_AT(retry.max_attempts),
     .desc = "Handler RETRY attempts before the message is dead-lettered; 0: unlimited."},

    {.path = "workers", .type = DD_CT_INT, .def = "4", .min = 1, .max = 64, DD_AT(workers),
     .desc = "Worker threads, each with its own database connection."},
    {.path = "shutdown_timeout", .type = DD_CT_DURATION, .def = "30s", .min = 0,
     .max = DD_MS_HOUR, .unit_ms = 1, DD_AT(shutdown_timeout_ms),
     .desc = "How long SIGTERM waits for the current transaction before abandoning it."},

    DD_GROUP("http", "Health and metrics endpoint."),
    {.path = "http.listen", .type = DD_CT_STRING, DD_AT(http.listen), .allowed = "host:port",
     .check = dd_conf_check_listen,
     .desc = "Address to listen on, e.g. \"127.0.0.1:9464\"; unset: no HTTP endpoint."},
    {.path = "http.stuck_after", .type = DD_CT_DURATION, .def = "60s", .min = DD_MS_SEC,
     .max = DD_MS_DAY, .unit_ms = 1, DD_AT(http.stuck_after_ms),
     .desc = "/healthz answers 503 when messages are in flight and none finished for this "
             "long (the loop not turning for half of it counts too)."},
    {.path = "http.timeout", .type = DD_CT_DURATION, .def = "10s", .min = DD_MS_SEC,
     .max = DD_MS_HOUR, .unit_ms = 1, DD_AT(http.timeout_ms),
     .desc = "A connection is closed when it has not sent a whole request this long after "
             "connecting or after its previous answer, however slowly it keeps sending."},
    {.path = "http.max_connections", .type = DD_CT_INT, .def = "64", .min = 1, .max = 10000,
     DD_AT(http.max_connections),
     .desc = "Open connections, all clients together. A new connection beyond it closes the "
             "one that has waited longest for its request, so a probe always gets in."},
    {.path = "http.max_connections_per_ip", .type = DD_CT_INT, .def = "16", .min = 1,
     .max = 10000, DD_AT(http.max_connections_per_ip),
     .desc = "Open connections from one client address; beyond it, as for max_connections "
             "among that address's connections."},

    DD_GROUP("log", "Logging to stderr."),
    {.path = "log.level", .type = DD_CT_ENUM, .def = "info", DD_AT(log.level),
     .parse = dd_log_level_parse, .allowed = "error|warn|info|debug",
     .desc = "Least severe level written."},
    {.path = "log.format", .type = DD_CT_ENUM, .def = "logfmt", DD_AT(log.format),
     .parse = dd_log_format_parse, .allowed = "logfmt|json", .desc = "Line format."},

    DD_GROUP("purge", "Background deletion of expired dedup records."),
    {.path = "purge.interval", .type = DD_CT_DURATION, .def = "10m", .min = 0,
     .max = 30 * DD_MS_DAY, .unit_ms = DD_MS_SEC, DD_AT(purge.interval_s),
     .desc = "Time between purge runs (whole seconds); \"0\" disables the background purge."},
    {.path = "purge.batch", .type = DD_CT_INT, .def = "1000", .min = 1, .max = 100000,
     DD_AT(purge.batch), .desc = "Rows deleted per purge statement."},
};
/* clang-format on */

#define DD_CONF_ITEM_CNT ((int)DD_ARRAY_LEN(dd_conf_items))
_Static_assert(DD_ARRAY_LEN(dd_conf_items) <= DD_CONF_MAX_ITEMS, "raise DD_CONF_MAX_ITEMS");

/*
 * Small helpers
 */

static int dd_conf_item_idx(const char *path)
{
    for (int i = 0; i < DD_CONF_ITEM_CNT; i++)
        if (strcmp(dd_conf_items[i].path, path) == 0) return i;
    return -1;
}

static void *dd_conf_field(dd_conf_t *conf, const dd_conf_item_t *it)
{
    return (char *)conf + it->off;
}

/* "kafka.brokers" -> "DEDUPD_KAFKA_BROKERS". */
static void dd_conf_env_name(const dd_conf_item_t *it, char *out, size_t out_size)
{
    size_t n = (size_t)snprintf(out, out_size, "DEDUPD_%s", it->path);

    for (size_t i = 0; i < n && i < out_size; i++)
        out[i] = out[i] == '.' ? '_' : (char)toupper((unsigned char)out[i]);
}

static int dd_conf_has_env(const dd_conf_item_t *it)
{
    return it->type != DD_CT_GROUP && !(it->flags & DD_CF_NOENV);
}

/* Formats ms in the largest unit that divides it: "7d", "30s", "250ms". */
static void dd_conf_fmt_duration(int64_t ms, char *out, size_t out_size)
{
    static const struct {
        const char *name;
        int64_t ms;
    } units[] = {{"d", DD_MS_DAY}, {"h", DD_MS_HOUR}, {"m", DD_MS_MIN}, {"s", DD_MS_SEC}};

    if (ms == 0) {
        snprintf(out, out_size, "0");
        return;
    }
    for (size_t i = 0; i < DD_ARRAY_LEN(units); i++) {
        if (ms % units[i].ms == 0) {
            snprintf(out, out_size, "%lld%s", (long long)(ms / units[i].ms), units[i].name);
            return;
        }
    }
    snprintf(out, out_size, "%lldms", (long long)ms);
}

static char *dd_conf_resolve(const dd_conf_t *conf, const char *path)
{
    char *out = NULL;

    if (path[0] == '/') return strdup(path);
    if (asprintf(&out, "%s/%s", conf->dir, path) < 0) return NULL;
    return out;
}

static void dd_conf_free_str(char **s, int secret)
{
    if (*s && secret) explicit_bzero(*s, strlen(*s));
    free(*s);
    *s = NULL;
}

static void dd_conf_free_list(char ***list, int *cnt)
{
    for (int i = 0; *list && i < *cnt; i++)
        free((*list)[i]);
    free(*list);
    *list = NULL;
    *cnt = 0;
}

/*
 * Errors
 */

/* The name of the file a setting (or a syntax error) comes from, as users
 * should see it. libconfig records @include'd files by the name written in
 * the directive, which is relative to the config file's directory. */
static void dd_conf_file_name(const dd_conf_t *conf, const char *file, char *out, size_t out_size)
{
    if (!file || strcmp(file, conf->path) == 0)
        snprintf(out, out_size, "%s", conf->path);
    else if (file[0] != '/' && conf->dir)
        snprintf(out, out_size, "%s/%s", conf->dir, file);
    else
        snprintf(out, out_size, "%s", file);
}

/* The line of a list element. libconfig records an element's line after
 * reading the token that follows it, so the last element of a list whose
 * closing bracket sits on its own line gets the bracket's line. For string
 * elements, step back to the last line up to that one holding a quote. */
static unsigned dd_conf_elem_line(const char *file, unsigned list_line, unsigned line)
{
    unsigned best = line, cur = 0;
    char buf[4096];
    FILE *fp;

    if (line <= list_line || !(fp = fopen(file, "r"))) return line;
    while (cur < line && fgets(buf, sizeof(buf), fp)) {
        if (strchr(buf, '\n') || feof(fp)) cur++;
        if (cur >= list_line && strchr(buf, '"')) best = cur;
    }
    fclose(fp);
    return best;
}

/* Line of a file setting, or of one of its elements when `at` is given. */
static unsigned dd_conf_line(const char *file, const config_setting_t *s,
                             const config_setting_t *at)
{
    unsigned line = config_setting_source_line(s);

    if (!at || config_setting_source_line(at) == 0) return line;
    if (config_setting_type(at) != CONFIG_TYPE_STRING) return config_setting_source_line(at);
    return dd_conf_elem_line(file, line, config_setting_source_line(at));
}

/* Writes "<where>: <msg>" for setting idx to out, where <where> follows the
 * origin of its current value: FILE:LINE, the environment variable, or the
 * file alone for defaults. `at` narrows a file location to a list element. */
static void dd_conf_where(dd_conf_ctx_t *ctx, int idx, const config_setting_t *at, char *out,
                          size_t out_size, const char *msg)
{
    const dd_conf_origin_t *o = &ctx->origin[idx];
    const char *path = dd_conf_items[idx].path;
    char file[PATH_MAX];

    if (o->kind == DD_ORIGIN_ENV) {
        dd_errstr_set(out, out_size, "environment variable %s (setting %s): %s", o->env, path, msg);
    } else if (o->kind == DD_ORIGIN_FILE) {
        dd_conf_file_name(ctx->conf, config_setting_source_file(o->setting), file, sizeof(file));
        dd_errstr_set(out, out_size, "%s:%u: setting %s: %s", file,
                      dd_conf_line(file, o->setting, at), path, msg);
    } else {
        dd_errstr_set(out, out_size, "%s: setting %s: %s", ctx->conf->path, path, msg);
    }
}

/* Sets errstr to "<where>: <msg>" for setting idx (dd_conf_where). */
static int dd_conf_fail(dd_conf_ctx_t *ctx, int idx, const config_setting_t *at, const char *fmt,
                        ...) __attribute__((format(printf, 4, 5)));

static int dd_conf_fail(dd_conf_ctx_t *ctx, int idx, const config_setting_t *at, const char *fmt,
                        ...)
{
    char msg[768];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    dd_conf_where(ctx, idx, at, ctx->errstr, ctx->errstr_size, msg);
    return DD_ERR_CONFIG;
}

/* Keeps "<where>: <msg>" in conf->warnings: what is allowed but probably
 * wrong, for the caller to report once logging is set up (dd_validate). */
static int dd_conf_warn(dd_conf_ctx_t *ctx, int idx, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int dd_conf_warn(dd_conf_ctx_t *ctx, int idx, const char *fmt, ...)
{
    dd_conf_t *conf = ctx->conf;
    char msg[768], text[1024];
    va_list ap;

    if (conf->warning_cnt >= (int)DD_ARRAY_LEN(conf->warnings)) return 0;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    dd_conf_where(ctx, idx, NULL, text, sizeof(text), msg);
    if (!(conf->warnings[conf->warning_cnt] = strdup(text))) return DD_ERR_NOMEM;
    conf->warning_cnt++;
    return 0;
}

static int dd_conf_nomem(dd_conf_ctx_t *ctx)
{
    dd_errstr_set(ctx->errstr, ctx->errstr_size, "%s: out of memory", ctx->conf->path);
    return DD_ERR_NOMEM;
}

static int dd_conf_is_explicit(const dd_conf_ctx_t *ctx, int idx)
{
    return ctx->origin[idx].kind == DD_ORIGIN_FILE || ctx->origin[idx].kind == DD_ORIGIN_ENV;
}

/*
 * Storing values (every path ends here, so bounds are checked once)
 */

static int dd_conf_store_str(dd_conf_ctx_t *ctx, int idx, const char *val)
{
    const dd_conf_item_t *it = &dd_conf_items[idx];
    char **field = dd_conf_field(ctx->conf, it);

    if (!*val && !(it->flags & DD_CF_EMPTY_OK))
        return dd_conf_fail(ctx, idx, NULL, "must not be empty");
    dd_conf_free_str(field, it->flags & DD_CF_SECRET);
    if (!(*field = strdup(val))) return dd_conf_nomem(ctx);
    return 0;
}

static int dd_conf_store_int(dd_conf_ctx_t *ctx, int idx, int64_t v)
{
    const dd_conf_item_t *it = &dd_conf_items[idx];
    void *field = dd_conf_field(ctx->conf, it);

    if (v < it->min || v > it->max)
        return dd_conf_fail(ctx, idx, NULL, "must be between %lld and %lld, got %lld",
                            (long long)it->min, (long long)it->max, (long long)v);
    if (it->size == sizeof(int64_t))
        *(int64_t *)field = v;
    else
        *(int *)field = (int)v;
    return 0;
}

static int dd_conf_store_duration(dd_conf_ctx_t *ctx, int idx, int64_t ms)
{
    const dd_conf_item_t *it = &dd_conf_items[idx];
    void *field = dd_conf_field(ctx->conf, it);
    char min[32], max[32], got[32];

    if (ms < it->min || ms > it->max) {
        dd_conf_fmt_duration(it->min, min, sizeof(min));
        dd_conf_fmt_duration(it->max, max, sizeof(max));
        dd_conf_fmt_duration(ms, got, sizeof(got));
        return dd_conf_fail(ctx, idx, NULL, "must be between %s and %s, got %s", min, max, got);
    }
    if (ms % it->unit_ms != 0)
        return dd_conf_fail(ctx, idx, NULL, "must be a whole number of seconds");
    if (it->size == sizeof(int64_t))
        *(int64_t *)field = ms / it->unit_ms;
    else
        *(int *)field = (int)(ms / it->unit_ms);
    return 0;
}

static int dd_conf_store_enum(dd_conf_ctx_t *ctx, int idx, const char *val)
{
    const dd_conf_item_t *it = &dd_conf_items[idx];
    int v = it->parse(val);

    if (v < 0)
        return dd_conf_fail(ctx, idx, NULL, "expected one of %s, got \"%s\"", it->allowed, val);
    *(int *)dd_conf_field(ctx->conf, it) = v;
    return 0;
}

/* Takes ownership of list (cnt strings) in every case. */
static int dd_conf_store_list(dd_conf_ctx_t *ctx, int idx, char **list, int cnt)
{
    const dd_conf_item_t *it = &dd_conf_items[idx];
    char ***field = dd_conf_field(ctx->conf, it);
    int *field_cnt = (int *)((char *)ctx->conf + it->cnt_off);

    dd_conf_free_list(field, field_cnt);
    *field = list;
    *field_cnt = cnt;
    if (cnt < it->min)
        return dd_conf_fail(ctx, idx, NULL, "must have at least %lld element(s)",
                            (long long)it->min);
    if (cnt > it->max)
        return dd_conf_fail(ctx, idx, NULL, "must have at most %lld elements", (long long)it->max);
    return 0;
}

/*
 * Values given as text: defaults and environment variables
 */

static int dd_conf_parse_int(const char *s, int64_t *v)
{
    char *end;
    long long n;

    if (!*s || isspace((unsigned char)*s)) return -1;
    errno = 0;
    n = strtoll(s, &end, 10);
    if (errno || *end) return -1;
    *v = n;
    return 0;
}

static int dd_conf_parse_bool(const char *s, int *v)
{
    static const char *const yes[] = {"true", "yes", "on", "1"};
    static const char *const no[] = {"false", "no", "off", "0"};

    for (size_t i = 0; i < DD_ARRAY_LEN(yes); i++) {
        if (strcasecmp(s, yes[i]) == 0) return *v = 1, 0;
        if (strcasecmp(s, no[i]) == 0) return *v = 0, 0;
    }
    return -1;
}

/* "a, b,c" -> {"a", "b", "c"}; "" -> no elements. */
static int dd_conf_list_from_text(dd_conf_ctx_t *ctx, int idx, const char *text)
{
    char **list = NULL, **grown;
    int cnt = 0, err = 0;
    const char *p = text, *end = text;

    while (*text && end) {
        size_t len;

        end = strchr(p, ',');
        len = end ? (size_t)(end - p) : strlen(p);
        while (len > 0 && isspace((unsigned char)*p))
            p++, len--;
        while (len > 0 && isspace((unsigned char)p[len - 1]))
            len--;
        if (len == 0) {
            err = dd_conf_fail(ctx, idx, NULL, "element %d is empty", cnt + 1);
            break;
        }
        if (!(grown = realloc(list, sizeof(*list) * (size_t)(cnt + 1))) ||
            !(grown[cnt] = strndup(p, len))) {
            list = grown ? grown : list;
            err = dd_conf_nomem(ctx);
            break;
        }
        list = grown;
        cnt++;
        p = end + 1;
    }
    if (err) {
        dd_conf_free_list(&list, &cnt);
        return err;
    }
    return dd_conf_store_list(ctx, idx, list, cnt);
}

static int dd_conf_take_text(dd_conf_ctx_t *ctx, int idx, const char *text)
{
    const dd_conf_item_t *it = &dd_conf_items[idx];
    int64_t v;
    int b;

    switch (it->type) {
    case DD_CT_STRING:
        return dd_conf_store_str(ctx, idx, text);
    case DD_CT_ENUM:
        return dd_conf_store_enum(ctx, idx, text);
    case DD_CT_INT:
        if (dd_conf_parse_int(text, &v) != 0)
            return dd_conf_fail(ctx, idx, NULL, "expected an integer, got \"%s\"", text);
        return dd_conf_store_int(ctx, idx, v);
    case DD_CT_BOOL:
        if (dd_conf_parse_bool(text, &b) != 0)
            return dd_conf_fail(ctx, idx, NULL, "expected true or false, got \"%s\"", text);
        *(int *)dd_conf_field(ctx->conf, it) = b;
        return 0;
    case DD_CT_DURATION:
        if (dd_conf_parse_duration_ms(text, &v) != 0)
            return dd_conf_fail(ctx, idx, NULL,
                                "expected a duration like \"250ms\", \"30s\" or \"1h30m\", "
                                "got \"%s\"",
                                text);
        return dd_conf_store_duration(ctx, idx, v);
    case DD_CT_LIST:
        return dd_conf_list_from_text(ctx, idx, text);
    case DD_CT_GROUP:
        break;
    }
    return 0;
}

/*
 * Values from the libconfig file
 */

static int dd_conf_list_from_setting(dd_conf_ctx_t *ctx, int idx, const config_setting_t *s)
{
    int t = config_setting_type(s), n, cnt = 0, err = 0;
    char **list = NULL;

    if (t != CONFIG_TYPE_ARRAY && t != CONFIG_TYPE_LIST)
        return dd_conf_fail(ctx, idx, NULL, "expected a list of strings");
    n = config_setting_length(s);
    if (n > 0 && !(list = calloc((size_t)n, sizeof(*list)))) return dd_conf_nomem(ctx);
    for (cnt = 0; cnt < n; cnt++) {
        const config_setting_t *e = config_setting_get_elem(s, (unsigned)cnt);
        const char *val = config_setting_get_string(e);

        if (config_setting_type(e) != CONFIG_TYPE_STRING) {
            err = dd_conf_fail(ctx, idx, e, "element %d: expected a string", cnt + 1);
            break;
        }
        if (!*val) {
            err = dd_conf_fail(ctx, idx, e, "element %d is empty", cnt + 1);
            break;
        }
        if (!(list[cnt] = strdup(val))) {
            err = dd_conf_nomem(ctx);
            break;
        }
    }
    if (err) {
        dd_conf_free_list(&list, &cnt);
        return err;
    }
    return dd_conf_store_list(ctx, idx, list, cnt);
}

static int dd_conf_duration_from_setting(dd_conf_ctx_t *ctx, int idx, const config_setting_t *s)
{
    int t = config_setting_type(s);
    int64_t v;

    if (t == CONFIG_TYPE_INT || t == CONFIG_TYPE_INT64) {
        v = config_setting_get_int64(s); /* plain numbers are seconds */
        if (v < 0 || v > INT64_MAX / DD_MS_SEC)
            return dd_conf_fail(ctx, idx, NULL, "duration out of range");
        return dd_conf_store_duration(ctx, idx, v * DD_MS_SEC);
    }
    if (t == CONFIG_TYPE_STRING) return dd_conf_take_text(ctx, idx, config_setting_get_string(s));
    return dd_conf_fail(ctx, idx, NULL, "expected a duration like \"30s\" or a number of seconds");
}

static int dd_conf_take_setting(dd_conf_ctx_t *ctx, int idx, const config_setting_t *s)
{
    const dd_conf_item_t *it = &dd_conf_items[idx];
    int t = config_setting_type(s);

    switch (it->type) {
    case DD_CT_STRING:
    case DD_CT_ENUM:
        if (t != CONFIG_TYPE_STRING) return dd_conf_fail(ctx, idx, NULL, "expected a string");
        return dd_conf_take_text(ctx, idx, config_setting_get_string(s));
    case DD_CT_INT:
        if (t != CONFIG_TYPE_INT && t != CONFIG_TYPE_INT64)
            return dd_conf_fail(ctx, idx, NULL, "expected an integer");
        return dd_conf_store_int(ctx, idx, config_setting_get_int64(s));
    case DD_CT_BOOL:
        if (t != CONFIG_TYPE_BOOL) return dd_conf_fail(ctx, idx, NULL, "expected true or false");
        *(int *)dd_conf_field(ctx->conf, it) = config_setting_get_bool(s);
        return 0;
    case DD_CT_DURATION:
        return dd_conf_duration_from_setting(ctx, idx, s);
    case DD_CT_LIST:
        return dd_conf_list_from_setting(ctx, idx, s);
    case DD_CT_GROUP:
        if (it->size) /* the group is handed to its owner as is */
            *(const config_setting_t **)dd_conf_field(ctx->conf, it) = s;
        return 0;
    }
    return 0;
}

/*
 * Loading
 */

/* Rejects settings the table does not know and groups given as scalars,
 * recursing into groups except those owned by someone else. */
static int dd_conf_walk(dd_conf_ctx_t *ctx, const config_setting_t *group, const char *prefix)
{
    int n = config_setting_length(group);

    for (int i = 0; i < n; i++) {
        const config_setting_t *s = config_setting_get_elem(group, (unsigned)i);
        char path[256], file[PATH_MAX];
        int idx, err;

        snprintf(path, sizeof(path), "%s%s%s", prefix, *prefix ? "." : "",
                 config_setting_name(s) ? config_setting_name(s) : "?");
        dd_conf_file_name(ctx->conf, config_setting_source_file(s), file, sizeof(file));
        if ((idx = dd_conf_item_idx(path)) < 0) {
            dd_errstr_set(ctx->errstr, ctx->errstr_size, "%s:%u: unknown setting %s", file,
                          (unsigned)config_setting_source_line(s), path);
            return DD_ERR_CONFIG;
        }
        if (dd_conf_items[idx].type != DD_CT_GROUP) continue;
        if (config_setting_type(s) != CONFIG_TYPE_GROUP) {
            dd_errstr_set(ctx->errstr, ctx->errstr_size, "%s:%u: setting %s: expected a group",
                          file, (unsigned)config_setting_source_line(s), path);
            return DD_ERR_CONFIG;
        }
        if (!(dd_conf_items[idx].flags & DD_CF_ANY) && (err = dd_conf_walk(ctx, s, path)))
            return err;
    }
    return 0;
}

/* Default, then file, then environment, for one setting. */
static int dd_conf_apply(dd_conf_ctx_t *ctx, int idx)
{
    const dd_conf_item_t *it = &dd_conf_items[idx];
    dd_conf_origin_t *o = &ctx->origin[idx];
    const config_setting_t *s = config_lookup(ctx->conf->lc, it->path);
    const char *val;
    int err;

    if (it->def) {
        o->kind = DD_ORIGIN_DEFAULT;
        if ((err = dd_conf_take_text(ctx, idx, it->def))) return err;
    }
    if (s) {
        o->kind = DD_ORIGIN_FILE;
        o->setting = s;
        if ((err = dd_conf_take_setting(ctx, idx, s))) return err;
    }
    if (dd_conf_has_env(it)) {
        dd_conf_env_name(it, o->env, sizeof(o->env));
        if ((val = getenv(o->env))) {
            o->kind = DD_ORIGIN_ENV;
            if ((err = dd_conf_take_text(ctx, idx, val))) return err;
        }
    }
    return 0;
}

static int dd_conf_apply_all(dd_conf_ctx_t *ctx)
{
    int err;

    for (int i = 0; i < DD_CONF_ITEM_CNT; i++)
        if ((err = dd_conf_apply(ctx, i))) return err;
    for (int i = 0; i < DD_CONF_ITEM_CNT; i++) {
        if ((dd_conf_items[i].flags & DD_CF_REQUIRED) && !dd_conf_is_explicit(ctx, i)) {
            dd_errstr_set(ctx->errstr, ctx->errstr_size, "%s: missing required setting %s",
                          ctx->conf->path, dd_conf_items[i].path);
            return DD_ERR_CONFIG;
        }
    }
    for (int i = 0; i < DD_CONF_ITEM_CNT; i++)
        if (dd_conf_items[i].check && (err = dd_conf_items[i].check(ctx, i))) return err;
    return 0;
}

/* Sets path and dir, and parses the file into conf->lc. */
static int dd_conf_read(dd_conf_t *conf, const char *path, char *errstr, size_t errstr_size)
{
    char *copy = NULL, file[PATH_MAX];
    int err = DD_ERR_CONFIG;
    struct stat st;

    if (!(conf->path = strdup(path)) || !(copy = strdup(path)) ||
        !(conf->lc = malloc(sizeof(*conf->lc)))) {
        dd_errstr_set(errstr, errstr_size, "%s: out of memory", path);
        err = DD_ERR_NOMEM;
        goto done;
    }
    config_init(conf->lc);
    if (stat(path, &st) != 0) {
        dd_errstr_set(errstr, errstr_size, "%s: cannot read: %s", path, strerror(errno));
        goto done;
    }
    if (!S_ISREG(st.st_mode)) {
        dd_errstr_set(errstr, errstr_size, "%s: cannot read: not a regular file", path);
        goto done;
    }
    if (!(conf->dir = realpath(dirname(copy), NULL))) {
        dd_errstr_set(errstr, errstr_size, "%s: cannot resolve its directory: %s", path,
                      strerror(errno));
        goto done;
    }
    config_set_include_dir(conf->lc, conf->dir);
    if (!config_read_file(conf->lc, path)) {
        dd_conf_file_name(conf, config_error_file(conf->lc), file, sizeof(file));
        dd_errstr_set(errstr, errstr_size, "%s:%d: %s", file, config_error_line(conf->lc),
                      config_error_text(conf->lc));
        goto done;
    }
    err = 0;
done:
    free(copy);
    return err;
}

int dd_conf_load(dd_conf_t **confp, const char *path, char *errstr, size_t errstr_size)
{
    dd_conf_ctx_t *ctx = NULL;
    dd_conf_t *conf = NULL;
    int err;

    *confp = NULL;
    if (!(conf = calloc(1, sizeof(*conf))) || !(ctx = calloc(1, sizeof(*ctx)))) {
        dd_errstr_set(errstr, errstr_size, "%s: out of memory", path);
        err = DD_ERR_NOMEM;
        goto done;
    }
    ctx->conf = conf;
    ctx->errstr = errstr;
    ctx->errstr_size = errstr_size;
    if ((err = dd_conf_read(conf, path, errstr, errstr_size))) goto done;
    if ((err = dd_conf_walk(ctx, config_root_setting(conf->lc), ""))) goto done;
    if ((err = dd_conf_apply_all(ctx))) goto done;
    *confp = conf;
    conf = NULL;
done:
    free(ctx);
    dd_conf_destroy(conf);
    return err;
}

void dd_conf_destroy(dd_conf_t *conf)
{
    if (!conf) return;
    for (int i = 0; i < DD_CONF_ITEM_CNT; i++) {
        const dd_conf_item_t *it = &dd_conf_items[i];

        if (it->type == DD_CT_STRING)
            dd_conf_free_str(dd_conf_field(conf, it), it->flags & DD_CF_SECRET);
        else if (it->type == DD_CT_LIST)
            dd_conf_free_list(dd_conf_field(conf, it), (int *)((char *)conf + it->cnt_off));
    }
    for (int i = 0; i < conf->warning_cnt; i++)
        free(conf->warnings[i]);
    if (conf->lc) {
        config_destroy(conf->lc);
        free(conf->lc);
    }
    free(conf->path);
    free(conf->dir);
    free(conf);
}

/*
 * Checks that need the final values
 */

/* Properties whose values may be secrets: librdkafka's message would quote them. */
static int dd_conf_property_is_sensitive(const char *name)
{
    return strstr(name, "password") || strstr(name, "secret") || strstr(name, "key") ||
           strstr(name, "sasl") || strstr(name, "token");
}

static const char *dd_conf_property_owner(const char *name)
{
    if (strcmp(name, "bootstrap.servers") == 0 || strcmp(name, "metadata.broker.list") == 0)
        return "kafka.brokers sets it";
    if (strcmp(name, "group.id") == 0) return "kafka.group sets it";
    if (strcmp(name, "enable.auto.offset.store") == 0)
        return "dedupd stores offsets itself, only after the database commit";
    return NULL;
}

static int dd_conf_check_property(dd_conf_ctx_t *ctx, int idx, rd_kafka_conf_t *rkc, int i)
{
    const char *prop = ctx->conf->kafka.properties[i], *eq = strchr(prop, '=');
    const config_setting_t *at = NULL;
    char rkerr[512], *name = NULL;
    int err = 0;

    if (ctx->origin[idx].kind == DD_ORIGIN_FILE)
        at = config_setting_get_elem(ctx->origin[idx].setting, (unsigned)i);
    if (!eq || eq == prop) {
        err = dd_conf_fail(ctx, idx, at, "element %d is not of the form \"name=value\"", i + 1);
        goto done;
    }
    if (!(name = strndup(prop, (size_t)(eq - prop)))) {
        err = dd_conf_nomem(ctx);
        goto done;
    }
    if (dd_conf_property_owner(name)) {
        err = dd_conf_fail(ctx, idx, at, "property %s cannot be set here: %s", name,
                           dd_conf_property_owner(name));
        goto done;
    }
    if (rd_kafka_conf_set(rkc, name, eq + 1, rkerr, sizeof(rkerr)) != RD_KAFKA_CONF_OK)
        err =
            dd_conf_fail(ctx, idx, at, "librdkafka rejected property %s: %s", name,
                         dd_conf_property_is_sensitive(name) ? "invalid value (not shown)" : rkerr);
done:
    free(name);
    return err;
}

/* Each property goes through librdkafka now, on a throwaway conf, so a typo
 * is a config error with a line number instead of a failure at startup. */
static int dd_conf_check_properties(dd_conf_ctx_t *ctx, int idx)
{
    rd_kafka_conf_t *rkc;
    int err = 0;

    if (ctx->conf->kafka.property_cnt == 0) return 0;
    if (!(rkc = rd_kafka_conf_new())) return dd_conf_nomem(ctx);
    for (int i = 0; i < ctx->conf->kafka.property_cnt && !err; i++)
        err = dd_conf_check_property(ctx, idx, rkc, i);
    rd_kafka_conf_destroy(rkc);
    return err;
}

/* Reads a password file, and its permission bits into *mode; the contents
 * never reach errstr. */
static int dd_conf_read_secret(const char *path, char **out, mode_t *mode, char *errstr,
                               size_t errstr_size)
{
    char buf[DD_CONF_SECRET_MAX + 1];
    size_t len = 0;
    ssize_t n = 1;
    struct stat st;
    int fd = -1, err = DD_ERR_CONFIG;

    /* stat first: opening a FIFO would block */
    if (stat(path, &st) != 0 || (fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK)) < 0) {
        dd_errstr_set(errstr, errstr_size, "cannot read %s: %s", path, strerror(errno));
        goto done;
    }
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        dd_errstr_set(errstr, errstr_size, "%s is not a regular file", path);
        goto done;
    }
    *mode = st.st_mode & 07777;
    while (len < sizeof(buf) && (n = read(fd, buf + len, sizeof(buf) - len)) > 0)
        len += (size_t)n;
    if (n < 0 || len > DD_CONF_SECRET_MAX) {
        dd_errstr_set(errstr, errstr_size, n < 0 ? "cannot read %s" : "%s is too long", path);
        goto done;
    }
    while (len > 0 && (buf[len - 1] == '\n' || buf[len - 1] == '\r'))
        len--;
    if (!(*out = strndup(buf, len))) {
        dd_errstr_set(errstr, errstr_size, "out of memory");
        err = DD_ERR_NOMEM;
        goto done;
    }
    err = 0;
done:
    explicit_bzero(buf, sizeof(buf));
    if (fd >= 0) close(fd);
    return err;
}

static int dd_conf_password_from_file(dd_conf_ctx_t *ctx, int idx)
{
    dd_conf_t *conf = ctx->conf;
    char *resolved = dd_conf_resolve(conf, conf->mysql.password_file), msg[512];
    mode_t mode = 0;
    int err;

    if (!resolved) return dd_conf_nomem(ctx);
    free(conf->mysql.password_file);
    conf->mysql.password_file = resolved;
    if ((err = dd_conf_read_secret(resolved, &conf->mysql.password, &mode, msg, sizeof(msg))))
        return err == DD_ERR_NOMEM ? dd_conf_nomem(ctx) : dd_conf_fail(ctx, idx, NULL, "%s", msg);
    /* A password anyone on the machine can read is not much of a secret;
     * container runtimes often mount files 0644, so a warning, not an error. */
    if ((mode & 077) && dd_conf_warn(ctx, idx,
                                     "%s has mode %04o: users other than its owner can %s it, "
                                     "and it holds the database password; make it readable by "
                                     "its owner only (chmod 600)",
                                     resolved, (unsigned)mode, (mode & 044) ? "read" : "change"))
        return dd_conf_nomem(ctx);
    return 0;
}

/* At most one password source; resolves it into conf->mysql.password. The
 * hook sits on password_file, the last of the three in the table. */
static int dd_conf_check_password(dd_conf_ctx_t *ctx, int idx)
{
    dd_conf_t *conf = ctx->conf;
    int pw = dd_conf_item_idx("mysql.password"), env = dd_conf_item_idx("mysql.password_env");
    int set = dd_conf_is_explicit(ctx, pw) + dd_conf_is_explicit(ctx, env) +
              dd_conf_is_explicit(ctx, idx);
    const char *val;

    if (set > 1)
        return dd_conf_fail(ctx, dd_conf_is_explicit(ctx, idx) ? idx : env, NULL,
                            "at most one of mysql.password, mysql.password_env and "
                            "mysql.password_file may be set");
    if (conf->mysql.password_env) {
        if (!(val = getenv(conf->mysql.password_env)))
            return dd_conf_fail(ctx, env, NULL, "environment variable %s is not set",
                                conf->mysql.password_env);
        if (!(conf->mysql.password = strdup(val))) return dd_conf_nomem(ctx);
    } else if (conf->mysql.password_file) {
        return dd_conf_password_from_file(ctx, idx);
    } else if (!conf->mysql.password && !(conf->mysql.password = strdup(""))) {
        return dd_conf_nomem(ctx);
    }
    return 0;
}

/* mysql.tls: paths resolved like handler.path, then the rules between the
 * settings (dd_tls_conf_check). The hook sits on min_version, the last of
 * the group. */
static int dd_conf_check_tls(dd_conf_ctx_t *ctx, int idx)
{
    char **paths[] = {&ctx->conf->mysql.tls.ca, &ctx->conf->mysql.tls.cert,
                      &ctx->conf->mysql.tls.key};
    const char *setting = NULL;
    int explicit = 0, rc;
    char msg[512];

    for (size_t i = 0; i < DD_ARRAY_LEN(paths); i++) {
        char *resolved;
        if (!*paths[i]) continue;
        if (!(resolved = dd_conf_resolve(ctx->conf, *paths[i]))) return dd_conf_nomem(ctx);
        free(*paths[i]);
        *paths[i] = resolved;
    }
    for (int i = dd_conf_item_idx("mysql.tls.mode"); i <= idx; i++)
        explicit |= dd_conf_is_explicit(ctx, i);
    rc = dd_tls_conf_check(ctx->conf, explicit, &setting, msg, sizeof(msg));
    if (rc == DD_TLS_CONF_WARN)
        return dd_conf_warn(ctx, dd_conf_item_idx(setting), "%s", msg) ? dd_conf_nomem(ctx) : 0;
    if (rc) return dd_conf_fail(ctx, dd_conf_item_idx(setting), NULL, "%s", msg);
    return 0;
}

/* Only the shape is checked here; the template itself is compiled by
 * dd_key, which the loader does not link against. */
static int dd_conf_check_key(dd_conf_ctx_t *ctx, int idx)
{
    const char *dollar = strstr(ctx->conf->dedup.key, "${");

    if (!dollar || !strchr(dollar + 2, '}'))
        return dd_conf_fail(ctx, idx, NULL, "must contain at least one ${path}");
    return 0;
}

/* The table name is pasted into SQL, so only plain identifiers pass. */
static int dd_conf_check_table(dd_conf_ctx_t *ctx, int idx)
{
    const char *t = ctx->conf->dedup.table;
    size_t len = strspn(t, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_");

    if (t[len] != '\0' || len < 1 || len > 64)
        return dd_conf_fail(ctx, idx, NULL,
                            "expected a name matching [A-Za-z0-9_]{1,64}, got \"%s\"", t);
    return 0;
}

static int dd_conf_check_handler_path(dd_conf_ctx_t *ctx, int idx)
{
    char *resolved = dd_conf_resolve(ctx->conf, ctx->conf->handler.path);

    if (!resolved) return dd_conf_nomem(ctx);
    free(ctx->conf->handler.path);
    ctx->conf->handler.path = resolved;
    return 0;
}

/* For a rule between two settings, blames the one the user wrote: `later`
 * unless only `earlier` was given explicitly. */
static int dd_conf_blame(const dd_conf_ctx_t *ctx, int earlier, int later)
{
    return !dd_conf_is_explicit(ctx, later) && dd_conf_is_explicit(ctx, earlier) ? earlier : later;
}

static int dd_conf_check_inflight(dd_conf_ctx_t *ctx, int idx)
{
    int other = dd_conf_item_idx("batch.max_messages");
    int msgs = ctx->conf->batch.max_messages, inflight = ctx->conf->batch.max_inflight;

    if (inflight >= msgs) return 0;
    if (dd_conf_blame(ctx, other, idx) == other)
        return dd_conf_fail(ctx, other, NULL, "must be at most batch.max_inflight (%d), got %d",
                            inflight, msgs);
    return dd_conf_fail(ctx, idx, NULL, "must be at least batch.max_messages (%d), got %d", msgs,
                        inflight);
}

static int dd_conf_check_backoff(dd_conf_ctx_t *ctx, int idx)
{
    int other = dd_conf_item_idx("retry.backoff_initial");
    int64_t initial = ctx->conf->retry.backoff_initial_ms, max = ctx->conf->retry.backoff_max_ms;
    char a[32], b[32];

    if (max >= initial) return 0;
    dd_conf_fmt_duration(initial, a, sizeof(a));
    dd_conf_fmt_duration(max, b, sizeof(b));
    if (dd_conf_blame(ctx, other, idx) == other)
        return dd_conf_fail(ctx, other, NULL, "must be at most retry.backoff_max (%s), got %s", b,
                            a);
    return dd_conf_fail(ctx, idx, NULL, "must be at least retry.backoff_initial (%s), got %s", a,
                        b);
}

/* Every ${path} of the lane key must be one of dedup.key's, so all copies
 * of a business key land on the same worker (per-key order, no two lanes
 * racing for one key). */
static int dd_conf_check_lane_key(dd_conf_ctx_t *ctx, int idx)
{
    const char *lane = ctx->conf->dedup.lane_key, *key = ctx->conf->dedup.key, *p, *end;
    char ref[256];

    if (!lane) return 0;
    if (!strstr(lane, "${"))
        return dd_conf_fail(ctx, idx, NULL, "must contain at least one ${path}");
    for (p = strstr(lane, "${"); p; p = strstr(end, "${")) {
        end = strchr(p, '}');
        if (!end) return dd_conf_fail(ctx, idx, NULL, "unclosed ${");
        end++;
        snprintf(ref, sizeof(ref), "%.*s", (int)(end - p), p);
        if (!key || !strstr(key, ref))
            return dd_conf_fail(ctx, idx, NULL, "%s is not a field of dedup.key", ref);
    }
    return 0;
}

/* "host:port", "[v6]:port"; the port is after the last colon. */
static int dd_conf_check_listen(dd_conf_ctx_t *ctx, int idx)
{
    const char *l = ctx->conf->http.listen, *colon;
    int64_t port;

    if (!l) return 0;
    colon = strrchr(l, ':');
    if (!colon || colon == l || dd_conf_parse_int(colon + 1, &port) != 0 || port < 1 ||
        port > 65535 || colon[1] == '+' || colon[1] == '-')
        return dd_conf_fail(ctx, idx, NULL,
                            "expected \"host:port\" with a port from 1 to 65535, got \"%s\"", l);
    return 0;
}

/*
 * Public helpers
 */

const char *dd_conf_dlq_topic(const dd_conf_t *conf, const char *topic, char *out, size_t out_size)
{
    int n;

    if (conf->dlq.topic)
        n = snprintf(out, out_size, "%s", conf->dlq.topic);
    else
        n = snprintf(out, out_size, "%s.dlq", topic);
    return n >= 0 && (size_t)n < out_size ? out : NULL;
}

/* Units in descending order; each may appear once: "1h30m", not "30m1h". */
static int dd_conf_duration_unit(const char **p, int *rank, int64_t *factor)
{
    static const struct {
        const char *name;
        int64_t ms;
    } units[] = {
        {"d", DD_MS_DAY}, {"h", DD_MS_HOUR}, {"ms", 1}, {"m", DD_MS_MIN}, {"s", DD_MS_SEC}};
    static const int ranks[] = {0, 1, 4, 2, 3};

    for (int i = 0; i < (int)DD_ARRAY_LEN(units); i++) {
        size_t len = strlen(units[i].name);

        if (strncmp(*p, units[i].name, len) == 0) {
            *p += len;
            *rank = ranks[i];
            *factor = units[i].ms;
            return 0;
        }
    }
    return -1;
}

int dd_conf_parse_duration_ms(const char *s, int64_t *ms)
{
    int64_t total = 0, v, factor;
    int rank, last = -1;
    const char *p = s;

    if (!s || !*s) return -1;
    if (strspn(s, "0123456789") == strlen(s)) { /* plain number: seconds */
        if (dd_conf_parse_int(s, &v) != 0 || v > INT64_MAX / DD_MS_SEC) return -1;
        *ms = v * DD_MS_SEC;
        return 0;
    }
    while (*p) {
        if (!isdigit((unsigned char)*p)) return -1;
        for (v = 0; isdigit((unsigned char)*p); p++) {
            if (v > (INT64_MAX - (*p - '0')) / 10) return -1;
            v = v * 10 + (*p - '0');
        }
        if (dd_conf_duration_unit(&p, &rank, &factor) != 0 || rank <= last) return -1;
        if (v > (INT64_MAX - total) / factor) return -1;
        total += v * factor;
        last = rank;
    }
    *ms = total;
    return 0;
}

const char *dd_conf_setting_path(int i)
{
    return i >= 0 && i < DD_CONF_ITEM_CNT ? dd_conf_items[i].path : NULL;
}

/*
 * Reference
 */

static const char *dd_conf_type_name(const dd_conf_item_t *it)
{
    static const char *const names[] = {
        [DD_CT_GROUP] = "group",  [DD_CT_STRING] = "string",     [DD_CT_INT] = "integer",
        [DD_CT_BOOL] = "boolean", [DD_CT_DURATION] = "duration", [DD_CT_LIST] = "list of strings",
        [DD_CT_ENUM] = "string",
    };
    return names[it->type];
}

/* Allowed values, from the bounds unless the item says it better. */
static void dd_conf_allowed(const dd_conf_item_t *it, char *out, size_t out_size)
{
    char min[32], max[32];

    out[0] = '\0';
    if (it->allowed) {
        snprintf(out, out_size, "%s", it->allowed);
    } else if (it->type == DD_CT_INT) {
        snprintf(out, out_size, "%lld..%lld", (long long)it->min, (long long)it->max);
    } else if (it->type == DD_CT_DURATION) {
        dd_conf_fmt_duration(it->min, min, sizeof(min));
        dd_conf_fmt_duration(it->max, max, sizeof(max));
        snprintf(out, out_size, "%s..%s", min, max);
    } else if (it->type == DD_CT_LIST && it->min > 0) {
        snprintf(out, out_size, "at least %lld", (long long)it->min);
    }
}

/* The default as it would be written in the file. */
static void dd_conf_default(const dd_conf_item_t *it, char *out, size_t out_size)
{
    if (it->flags & DD_CF_REQUIRED)
        snprintf(out, out_size, "required");
    else if (!it->def)
        snprintf(out, out_size, "unset");
    else if (it->type == DD_CT_LIST)
        snprintf(out, out_size, "[%s]", it->def);
    else if (it->type == DD_CT_STRING || it->type == DD_CT_ENUM || it->type == DD_CT_DURATION)
        snprintf(out, out_size, "\"%s\"", it->def);
    else
        snprintf(out, out_size, "%s", it->def);
}

/* Writes text wrapped at 80 columns, each line indented by 4. */
static void dd_conf_print_wrapped(FILE *out, const char *text)
{
    const char *p = text;
    int col = 4;

    fputs("    ", out);
    while (*p) {
        size_t len = strcspn(p, " ");

        if (col > 4 && col + 1 + (int)len > 80) {
            fputs("\n    ", out);
            col = 4;
        } else if (col > 4) {
            fputc(' ', out);
            col++;
        }
        fwrite(p, 1, len, out);
        col += (int)len;
        p += len;
        p += strspn(p, " ");
    }
    fputc('\n', out);
}

void dd_conf_print_reference(FILE *out)
{
    char allowed[128], def[128], env[80];

    fputs("dedupd configuration settings (libconfig syntax; see docs/CONFIG.md).\n"
          "Durations: \"250ms\", \"45s\", \"30m\", \"12h\", \"7d\", \"1h30m\", or a number of "
          "seconds.\n",
          out);
    for (int i = 0; i < DD_CONF_ITEM_CNT; i++) {
        const dd_conf_item_t *it = &dd_conf_items[i];

        dd_conf_allowed(it, allowed, sizeof(allowed));
        dd_conf_default(it, def, sizeof(def));
        fprintf(out, "\n%s  (%s", it->path, dd_conf_type_name(it));
        if (it->type != DD_CT_GROUP)
            fprintf(out, "%s%s; %s%s", *allowed ? ", " : "", allowed,
                    (it->flags & DD_CF_REQUIRED) ? "" : "default ", def);
        fputs(")\n", out);
        dd_conf_print_wrapped(out, it->desc);
        if (dd_conf_has_env(it)) {
            dd_conf_env_name(it, env, sizeof(env));
            fprintf(out, "    Environment: %s\n", env);
        }
    }
}

/* One markdown table cell; '|' would end the cell. */
static void dd_conf_md_cell(FILE *out, const char *text, int code)
{
    fputs(" ", out);
    if (code && *text) fputc('`', out);
    for (const char *p = text; *p; p++) {
        if (*p == '|') fputc('\\', out);
        fputc(*p, out);
    }
    if (code && *text) fputc('`', out);
    fputs(" |", out);
}

void dd_conf_print_reference_md(FILE *out)
{
    char allowed[128], def[128], env[80];

    fputs("| Setting | Type | Default | Allowed | Environment | Description |\n"
          "|---|---|---|---|---|---|\n",
          out);
    for (int i = 0; i < DD_CONF_ITEM_CNT; i++) {
        const dd_conf_item_t *it = &dd_conf_items[i];

        dd_conf_allowed(it, allowed, sizeof(allowed));
        dd_conf_default(it, def, sizeof(def));
        env[0] = '\0';
        if (dd_conf_has_env(it)) dd_conf_env_name(it, env, sizeof(env));
        fputs("|", out);
        dd_conf_md_cell(out, it->path, 1);
        dd_conf_md_cell(out, dd_conf_type_name(it), 0);
        dd_conf_md_cell(out, it->type == DD_CT_GROUP ? "" : def, it->def != NULL);
        dd_conf_md_cell(out, allowed, 1);
        dd_conf_md_cell(out, env, 1);
        dd_conf_md_cell(out, it->desc, 0);
        fputc('\n', out);
    }
}

/* ---- Kafka client configuration shared by consumer, producer, replay ---- */

int dd_conf_kafka_set(rd_kafka_conf_t *kconf, const char *name, const char *value, char *errstr,
                      size_t errstr_size)
{
    char err[512];

    if (rd_kafka_conf_set(kconf, name, value, err, sizeof(err)) != RD_KAFKA_CONF_OK) {
        dd_errstr_set(errstr, errstr_size, "kafka property %s: %s", name, err);
        return DD_ERR_CONFIG;
    }
    return DD_OK;
}

int dd_conf_kafka_set_prop(rd_kafka_conf_t *kconf, const char *prop, char *errstr,
                           size_t errstr_size)
{
    const char *eq = strchr(prop, '=');
    char name[256];

    if (!eq || eq == prop || (size_t)(eq - prop) >= sizeof(name)) {
        /* not shown: without its name, nothing says whether it is a secret */
        dd_errstr_set(errstr, errstr_size, "a kafka property is not of the form name=value");
        return DD_ERR_CONFIG;
    }
    snprintf(name, sizeof(name), "%.*s", (int)(eq - prop), prop);
    return dd_conf_kafka_set(kconf, name, eq + 1, errstr, errstr_size);
}

int dd_conf_kafka_apply(const dd_conf_t *conf, rd_kafka_conf_t *kconf,
                        int (*skip)(const char *prop), char *errstr, size_t errstr_size)
{
    int rc = DD_OK;

    /* Every entry was checked by librdkafka when the file was loaded. */
    for (int i = 0; !rc && i < conf->kafka.property_cnt; i++) {
        const char *p = conf->kafka.properties[i];
        if (!(skip && skip(p))) rc = dd_conf_kafka_set_prop(kconf, p, errstr, errstr_size);
    }
    if (!rc) rc = dd_conf_kafka_set(kconf, "bootstrap.servers", conf->kafka.brokers, errstr,
                                    errstr_size);
    return rc;
}
