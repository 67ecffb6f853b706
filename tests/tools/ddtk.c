/*
 * ddtk: the test kit's small Kafka tool, used by integration tests, the demo
 * and the bench.
 *
 * kcat is close, but tests need a few things in exactly one shape: bulk
 * produce from a tab-separated stream (fast enough to load a bench), a
 * consume that always stops at the high watermark taken at start and prints
 * one JSON object per message with headers, a group's committed offsets read
 * without joining (and so without disturbing) the group, and the watermarks.
 * Each subcommand does one job; output is meant for scripts.
 *
 *   ddtk produce    -b BROKERS -t TOPIC [-H n=v]   stdin: PARTITION\tKEY\tPAYLOAD
 *   ddtk consume    -b BROKERS -t TOPIC [-e]       stdout: JSON lines
 *   ddtk committed  -b BROKERS -g GROUP -t TOPIC   stdout: PARTITION OFFSET
 *   ddtk watermarks -b BROKERS -t TOPIC            stdout: PARTITION LOW HIGH
 *   ddtk partitions -b BROKERS -t TOPIC            stdout: COUNT
 * Every subcommand also takes -X prop=value (librdkafka property, repeatable).
 * produce -H name=value (repeatable) adds that header to every message;
 * consume prints the headers twice: as an object ("headers", where a name
 * that occurs more than once keeps its last value) and in their order
 * ("header_list", [name, value] pairs).
 * Exit 0 on success, 1 on error (the message names what failed), 2 on usage.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>
#include <librdkafka/rdkafka.h>

#define DDTK_EXIT_OK 0
#define DDTK_EXIT_FAIL 1
#define DDTK_EXIT_USAGE 2

#define DDTK_TIMEOUT_MS 10000
/* consume gives up when no message or EOF arrives for this long */
#define DDTK_IDLE_TIMEOUT_MS 30000
#define DDTK_MAX_PROPS 64
#define DDTK_MAX_HEADERS 16

typedef struct ddtk_args_s {
    const char *cmd;
    const char *brokers;
    const char *topic;
    const char *group;
    int exit_eof; /* -e: accepted for kcat habits; consume always stops at the end */
    const char *props[DDTK_MAX_PROPS]; /* -X name=value, applied last */
    int prop_cnt;
    const char *headers[DDTK_MAX_HEADERS]; /* produce -H name=value */
    int header_cnt;
    long long timestamp; /* produce -T ms: each message's timestamp; 0: now */
} ddtk_args_t;

/* Delivery accounting for produce. */
typedef struct ddtk_dr_s {
    long ok;
    long failed;
    char first_err[256];
} ddtk_dr_t;

static void ddtk_usage(FILE *fp)
{
    fprintf(fp, "usage:\n"
                "  ddtk produce    -b BROKERS -t TOPIC [-H name=value]... [-T MS]\n"
                "                  (stdin: PARTITION<TAB>KEY<TAB>PAYLOAD; PARTITION -1 = by key,\n"
                "                  KEY - = null, PAYLOAD hex:... = binary, null: = a null value\n"
                "                  (a tombstone); -H: a header on each; -T: each one's timestamp)\n"
                "  ddtk consume    -b BROKERS -t TOPIC [-e]\n"
                "  ddtk committed  -b BROKERS -g GROUP -t TOPIC\n"
                "  ddtk watermarks -b BROKERS -t TOPIC\n"
                "  ddtk partitions -b BROKERS -t TOPIC\n"
                "common option: -X prop=value (librdkafka property, repeatable)\n");
}

static int64_t ddtk_now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Returns 0, or -1 after printing a usage error. */
static int ddtk_args_parse(int argc, char **argv, ddtk_args_t *args)
{
    int c;

    memset(args, 0, sizeof(*args));
    args->cmd = argv[0];
    optind = 1;
    while ((c = getopt(argc, argv, "b:t:g:eX:H:T:")) != -1) {
        switch (c) {
        case 'b':
            args->brokers = optarg;
            break;
        case 't':
            args->topic = optarg;
            break;
        case 'g':
            args->group = optarg;
            break;
        case 'e':
            args->exit_eof = 1;
            break;
        case 'T':
            args->timestamp = strtoll(optarg, NULL, 10);
            break;
        case 'X':
            if (args->prop_cnt == DDTK_MAX_PROPS || !strchr(optarg, '=')) {
                fprintf(stderr, "ddtk: -X %s: expected prop=value (at most %d)\n", optarg,
                        DDTK_MAX_PROPS);
                return -1;
            }
            args->props[args->prop_cnt++] = optarg;
            break;
        case 'H':
            if (args->header_cnt == DDTK_MAX_HEADERS || !strchr(optarg, '=')) {
                fprintf(stderr, "ddtk: -H %s: expected name=value (at most %d)\n", optarg,
                        DDTK_MAX_HEADERS);
                return -1;
            }
            args->headers[args->header_cnt++] = optarg;
            break;
        default:
            return -1;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "ddtk: %s: unexpected argument %s\n", args->cmd, argv[optind]);
        return -1;
    }
    if (!args->brokers || !args->topic) {
        fprintf(stderr, "ddtk: %s: -b BROKERS and -t TOPIC are required\n", args->cmd);
        return -1;
    }
    if (!strcmp(args->cmd, "committed") && !args->group) {
        fprintf(stderr, "ddtk: committed: -g GROUP is required\n");
        return -1;
    }
    return 0;
}

static int ddtk_conf_set(rd_kafka_conf_t *conf, const char *name, const char *value)
{
    char errstr[512];

    if (rd_kafka_conf_set(conf, name, value, errstr, sizeof(errstr)) != RD_KAFKA_CONF_OK) {
        fprintf(stderr, "ddtk: config %s=%s: %s\n", name, value, errstr);
        return -1;
    }
    return 0;
}

/*
 * Builds a client from NULL-terminated name/value pairs, then the user's -X
 * overrides.
 *
 * consume/committed/watermarks/partitions must not create topics by accident.
 * Consumers default to allow.auto.create.topics=false, but the mock cluster
 * only speaks Metadata v0-v2, which has no such flag: there, asking for one
 * topic by name creates it. So these commands look the topic up in the
 * all-topics metadata first and touch it only if it exists. (Setting the
 * property explicitly would merely make librdkafka warn about the old
 * Metadata version on every run.)
 */
static rd_kafka_t *ddtk_client_new(const ddtk_args_t *args, rd_kafka_type_t type,
                                   const char **defaults, ddtk_dr_t *dr,
                                   void (*dr_cb)(rd_kafka_t *, const rd_kafka_message_t *, void *))
{
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    rd_kafka_t *rk = NULL;
    char errstr[512];
    int i;

    if (ddtk_conf_set(conf, "bootstrap.servers", args->brokers)) goto fail;
    for (i = 0; defaults && defaults[i]; i += 2)
        if (ddtk_conf_set(conf, defaults[i], defaults[i + 1])) goto fail;
    for (i = 0; i < args->prop_cnt; i++) {
        char name[256];
        const char *eq = strchr(args->props[i], '=');

        snprintf(name, sizeof(name), "%.*s", (int)(eq - args->props[i]), args->props[i]);
        if (ddtk_conf_set(conf, name, eq + 1)) goto fail;
    }
    if (dr_cb) {
        rd_kafka_conf_set_opaque(conf, dr);
        rd_kafka_conf_set_dr_msg_cb(conf, dr_cb);
    }
    rk = rd_kafka_new(type, conf, errstr, sizeof(errstr));
    if (rk) return rk;
    fprintf(stderr, "ddtk: %s: creating client: %s\n", args->cmd, errstr);
fail:
    rd_kafka_conf_destroy(conf);
    return NULL;
}

/* ---- metadata --------------------------------------------------------- */

/*
 * Partition count of topic: 0 found, 1 topic does not exist, -1 error.
 * Asks for all topics, because asking for one topic by name may create it.
 */
static int ddtk_partition_cnt(rd_kafka_t *rk, const ddtk_args_t *args, int *cntp)
{
    const struct rd_kafka_metadata *md = NULL;
    rd_kafka_resp_err_t err = RD_KAFKA_RESP_ERR_NO_ERROR;
    int64_t deadline = ddtk_now_ms() + DDTK_TIMEOUT_MS;
    int ret = -1, i;

    /* A topic created a moment ago may still report LEADER_NOT_AVAILABLE. */
    while (ddtk_now_ms() < deadline) {
        err = rd_kafka_metadata(rk, 1, NULL, &md, DDTK_TIMEOUT_MS);
        if (err) break;
        ret = 1;
        for (i = 0; i < md->topic_cnt; i++) {
            if (strcmp(md->topics[i].topic, args->topic)) continue;
            err = md->topics[i].err;
            *cntp = md->topics[i].partition_cnt;
            ret = err ? -1 : 0;
        }
        rd_kafka_metadata_destroy(md);
        if (ret >= 0 || err != RD_KAFKA_RESP_ERR_LEADER_NOT_AVAILABLE) break;
        usleep(100 * 1000);
    }
    if (ret < 0)
        fprintf(stderr, "ddtk: %s: metadata for topic %s: %s\n", args->cmd, args->topic,
                rd_kafka_err2str(err ? err : RD_KAFKA_RESP_ERR__TIMED_OUT));
    return ret;
}

/* As above, but a missing topic is an error. */
static int ddtk_partition_cnt_required(rd_kafka_t *rk, const ddtk_args_t *args, int *cntp)
{
    int r = ddtk_partition_cnt(rk, args, cntp);

    if (r == 1) fprintf(stderr, "ddtk: %s: topic %s does not exist\n", args->cmd, args->topic);
    return r == 0 ? 0 : -1;
}

/* ---- produce ---------------------------------------------------------- */

static void ddtk_dr_cb(rd_kafka_t *rk, const rd_kafka_message_t *rkm, void *opaque)
{
    ddtk_dr_t *dr = opaque;

    (void)rk;
    if (!rkm->err) {
        dr->ok++;
        return;
    }
    if (dr->failed++ == 0)
        snprintf(dr->first_err, sizeof(dr->first_err), "partition %" PRId32 ": %s", rkm->partition,
                 rd_kafka_err2str(rkm->err));
}

static int ddtk_hexval(int c)
{
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* Decodes hex in place; returns the byte length or -1. */
static ssize_t ddtk_hex_decode(char *s, size_t len)
{
    size_t i;

    if (len % 2) return -1;
    for (i = 0; i < len; i += 2) {
        int hi = ddtk_hexval((unsigned char)s[i]), lo = ddtk_hexval((unsigned char)s[i + 1]);

        if (hi < 0 || lo < 0) return -1;
        s[i / 2] = (char)(hi << 4 | lo);
    }
    return (ssize_t)(len / 2);
}

/* One parsed input line; pointers into the line buffer. */
typedef struct ddtk_line_s {
    int32_t partition;
    const char *key; /* NULL = null key */
    size_t key_len;
    char *payload;
    size_t payload_len;
} ddtk_line_t;

/* Splits PARTITION\tKEY\tPAYLOAD (newline already removed). */
static int ddtk_line_parse(char *buf, size_t len, ddtk_line_t *line)
{
    char *tab1 = memchr(buf, '\t', len), *tab2, *end;
    long p;

    if (!tab1 || !(tab2 = memchr(tab1 + 1, '\t', len - (size_t)(tab1 + 1 - buf)))) return -1;
    *tab1 = '\0';
    errno = 0;
    p = strtol(buf, &end, 10);
    if (errno || end == buf || *end || p < -1 || p > INT32_MAX) return -1;
    line->partition = p == -1 ? RD_KAFKA_PARTITION_UA : (int32_t)p;
    line->key = tab1 + 1;
    line->key_len = (size_t)(tab2 - line->key);
    if (line->key_len == 1 && line->key[0] == '-') line->key = NULL, line->key_len = 0;
    line->payload = tab2 + 1;
    line->payload_len = len - (size_t)(line->payload - buf);
    if (line->payload_len == 5 && !memcmp(line->payload, "null:", 5)) {
        line->payload = NULL; /* a tombstone */
        line->payload_len = 0;
    } else if (line->payload_len >= 4 && !memcmp(line->payload, "hex:", 4)) {
        ssize_t n = ddtk_hex_decode(line->payload + 4, line->payload_len - 4);

        if (n < 0) return -1;
        line->payload += 4;
        line->payload_len = (size_t)n;
    }
    return 0;
}

/* The -H headers for one message, or NULL when there are none. */
static rd_kafka_headers_t *ddtk_headers(const ddtk_args_t *args)
{
    rd_kafka_headers_t *hdrs;
    int i;

    if (!args->header_cnt) return NULL;
    hdrs = rd_kafka_headers_new((size_t)args->header_cnt);
    for (i = 0; i < args->header_cnt; i++) {
        const char *eq = strchr(args->headers[i], '=');

        rd_kafka_header_add(hdrs, args->headers[i], eq - args->headers[i], eq + 1, -1);
    }
    return hdrs;
}

/* Enqueues one message, waiting for room while the local queue is full. */
static int ddtk_produce_one(rd_kafka_t *rk, rd_kafka_topic_t *rkt, const ddtk_args_t *args,
                            const ddtk_line_t *line)
{
    for (;;) {
        rd_kafka_headers_t *hdrs = ddtk_headers(args);
        rd_kafka_resp_err_t err =
            rd_kafka_producev(rk, RD_KAFKA_V_RKT(rkt), RD_KAFKA_V_PARTITION(line->partition),
                              RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
                              RD_KAFKA_V_VALUE(line->payload, line->payload_len),
                              RD_KAFKA_V_KEY(line->key, line->key_len), RD_KAFKA_V_HEADERS(hdrs),
                              RD_KAFKA_V_TIMESTAMP(args->timestamp), RD_KAFKA_V_END);

        if (!err) return 0;
        if (hdrs) rd_kafka_headers_destroy(hdrs);
        if (err != RD_KAFKA_RESP_ERR__QUEUE_FULL) {
            fprintf(stderr, "ddtk: produce: %s\n", rd_kafka_err2str(err));
            return -1;
        }
        rd_kafka_poll(rk, 10);
    }
}

/* Reads stdin and enqueues every line; returns the number enqueued or -1. */
static long ddtk_produce_stdin(rd_kafka_t *rk, rd_kafka_topic_t *rkt, const ddtk_args_t *args)
{
    char *buf = NULL;
    size_t cap = 0;
    ssize_t len;
    long lineno = 0, cnt = -1;
    ddtk_line_t line;

    while ((len = getline(&buf, &cap, stdin)) >= 0) {
        lineno++;
        if (len > 0 && buf[len - 1] == '\n') buf[--len] = '\0';
        if (ddtk_line_parse(buf, (size_t)len, &line)) {
            fprintf(stderr,
                    "ddtk: produce: stdin line %ld: expected PARTITION<TAB>KEY<TAB>PAYLOAD"
                    " (PARTITION >= -1, hex: payload of even length)\n",
                    lineno);
            goto done;
        }
        if (ddtk_produce_one(rk, rkt, args, &line)) {
            fprintf(stderr, "ddtk: produce: stdin line %ld failed\n", lineno);
            goto done;
        }
        if (lineno % 1000 == 0) rd_kafka_poll(rk, 0);
    }
    cnt = lineno;
done:
    free(buf);
    return cnt;
}

static int ddtk_produce(const ddtk_args_t *args)
{
    static const char *defaults[] = {"linger.ms",
                                     "10",
                                     "batch.num.messages",
                                     "10000",
                                     "queue.buffering.max.messages",
                                     "1000000",
                                     "queue.buffering.max.kbytes",
                                     "1048576",
                                     "enable.idempotence",
                                     "false",
                                     NULL};
    ddtk_dr_t dr = {0};
    rd_kafka_t *rk = ddtk_client_new(args, RD_KAFKA_PRODUCER, defaults, &dr, ddtk_dr_cb);
    rd_kafka_topic_t *rkt = NULL;
    long cnt;
    int ret = DDTK_EXIT_FAIL;

    if (!rk) goto done;
    rkt = rd_kafka_topic_new(rk, args->topic, NULL);
    if (!rkt) {
        fprintf(stderr, "ddtk: produce: topic %s: %s\n", args->topic,
                rd_kafka_err2str(rd_kafka_last_error()));
        goto done;
    }
    cnt = ddtk_produce_stdin(rk, rkt, args);
    /* Even after an input error, wait for what was sent so the count is true;
     * undeliverable messages fail after message.timeout.ms. */
    while (rd_kafka_outq_len(rk) > 0)
        rd_kafka_flush(rk, 1000);
    fprintf(stderr, "produced %ld\n", dr.ok);
    if (dr.failed)
        fprintf(stderr, "ddtk: produce: %ld message(s) failed, first: %s\n", dr.failed,
                dr.first_err);
    else if (cnt >= 0)
        ret = DDTK_EXIT_OK;
done:
    if (rkt) rd_kafka_topic_destroy(rkt);
    if (rk) rd_kafka_destroy(rk);
    return ret;
}

/* ---- consume ---------------------------------------------------------- */

/* Strict UTF-8 (no overlongs, surrogates or NUL, which JSON strings from
 * cJSON cannot carry). */
static int ddtk_utf8_valid(const unsigned char *s, size_t len)
{
    size_t i = 0;

    while (i < len) {
        unsigned c = s[i], n, cp, k;

        if (c == 0) return 0;
        if (c < 0x80) {
            i++;
            continue;
        }
        if (c >= 0xC2 && c <= 0xDF)
            n = 1, cp = c & 0x1F;
        else if (c >= 0xE0 && c <= 0xEF)
            n = 2, cp = c & 0x0F;
        else if (c >= 0xF0 && c <= 0xF4)
            n = 3, cp = c & 0x07;
        else
            return 0;
        if (i + n >= len) return 0;
        for (k = 1; k <= n; k++) {
            if ((s[i + k] & 0xC0) != 0x80) return 0;
            cp = cp << 6 | (s[i + k] & 0x3F);
        }
        if ((n == 2 && (cp < 0x800 || (cp >= 0xD800 && cp <= 0xDFFF))) ||
            (n == 3 && (cp < 0x10000 || cp > 0x10FFFF)))
            return 0;
        i += n + 1;
    }
    return 1;
}

/* NUL-terminated lowercase hex of buf, with an optional prefix; caller frees. */
static char *ddtk_hex_encode(const char *prefix, const void *buf, size_t len)
{
    static const char digits[] = "0123456789abcdef";
    size_t plen = strlen(prefix), i;
    char *out = malloc(plen + len * 2 + 1);

    if (!out) return NULL;
    memcpy(out, prefix, plen);
    for (i = 0; i < len; i++) {
        out[plen + 2 * i] = digits[((const unsigned char *)buf)[i] >> 4];
        out[plen + 2 * i + 1] = digits[((const unsigned char *)buf)[i] & 0xF];
    }
    out[plen + 2 * len] = '\0';
    return out;
}

/*
 * Adds name: bytes as a JSON string when valid UTF-8, else name_hex (or,
 * with hex_name NULL, a "hex:..." string under name). NULL bytes add null.
 */
static void ddtk_json_add_bytes(cJSON *obj, const char *name, const char *hex_name, const void *buf,
                                size_t len)
{
    char *str;

    if (!buf) {
        cJSON_AddNullToObject(obj, name);
        return;
    }
    if (ddtk_utf8_valid(buf, len)) {
        str = strndup(buf, len);
        if (str) cJSON_AddStringToObject(obj, name, str);
    } else {
        str = ddtk_hex_encode(hex_name ? "" : "hex:", buf, len);
        if (str) cJSON_AddStringToObject(obj, hex_name ? hex_name : name, str);
    }
    free(str);
}

static void ddtk_message_print(const rd_kafka_message_t *rkm)
{
    cJSON *obj = cJSON_CreateObject(), *hdrs, *list, *pair;
    rd_kafka_headers_t *headers = NULL;
    const char *hname;
    const void *hval;
    size_t hsize, i;
    char *out;

    cJSON_AddNumberToObject(obj, "partition", rkm->partition);
    cJSON_AddNumberToObject(obj, "offset", (double)rkm->offset);
    cJSON_AddNumberToObject(obj, "timestamp", (double)rd_kafka_message_timestamp(rkm, NULL));
    if (!rkm->payload) cJSON_AddBoolToObject(obj, "null_value", 1);
    ddtk_json_add_bytes(obj, "key", "key_hex", rkm->key, rkm->key_len);
    /* An empty payload is "" rather than null: tests compare strings. */
    ddtk_json_add_bytes(obj, "payload", "payload_hex", rkm->payload ? rkm->payload : "", rkm->len);
    hdrs = cJSON_AddObjectToObject(obj, "headers");
    list = cJSON_AddArrayToObject(obj, "header_list");
    if (rd_kafka_message_headers(rkm, &headers) == RD_KAFKA_RESP_ERR_NO_ERROR)
        for (i = 0; !rd_kafka_header_get_all(headers, i, &hname, &hval, &hsize); i++) {
            cJSON *one = cJSON_CreateObject();

            /* A repeated name: the object keeps the last value. */
            cJSON_DeleteItemFromObjectCaseSensitive(hdrs, hname);
            ddtk_json_add_bytes(hdrs, hname, NULL, hval, hsize);
            ddtk_json_add_bytes(one, "v", NULL, hval, hsize);
            pair = cJSON_CreateArray();
            cJSON_AddItemToArray(pair, cJSON_CreateString(hname));
            cJSON_AddItemToArray(pair, cJSON_DetachItemFromObject(one, "v"));
            cJSON_AddItemToArray(list, pair);
            cJSON_Delete(one);
        }
    out = cJSON_PrintUnformatted(obj);
    if (out) puts(out);
    free(out);
    cJSON_Delete(obj);
}

/*
 * Assigns every non-empty partition from its low watermark; *ends receives
 * each partition's high watermark. Returns the number assigned, or -1.
 */
static int ddtk_consume_assign(rd_kafka_t *rk, const ddtk_args_t *args, int cnt, int64_t *ends)
{
    rd_kafka_topic_partition_list_t *parts = rd_kafka_topic_partition_list_new(cnt);
    rd_kafka_resp_err_t err;
    int64_t lo, hi;
    int p, ret = -1;

    for (p = 0; p < cnt; p++) {
        err = rd_kafka_query_watermark_offsets(rk, args->topic, p, &lo, &hi, DDTK_TIMEOUT_MS);
        if (err) {
            fprintf(stderr, "ddtk: consume: watermarks of %s [%d]: %s\n", args->topic, p,
                    rd_kafka_err2str(err));
            goto done;
        }
        ends[p] = hi;
        if (hi > lo) rd_kafka_topic_partition_list_add(parts, args->topic, p)->offset = lo;
    }
    err = rd_kafka_assign(rk, parts);
    if (err) {
        fprintf(stderr, "ddtk: consume: assign: %s\n", rd_kafka_err2str(err));
        goto done;
    }
    ret = parts->cnt;
done:
    rd_kafka_topic_partition_list_destroy(parts);
    return ret;
}

/* Polls until each assigned partition reached its end; 0 or -1. */
static int ddtk_consume_until_end(rd_kafka_t *rk, int remaining, int64_t *ends, int cnt)
{
    int64_t last_progress = ddtk_now_ms();

    while (remaining > 0) {
        rd_kafka_message_t *rkm = rd_kafka_consumer_poll(rk, 200);
        int32_t p;

        if (!rkm) {
            if (ddtk_now_ms() - last_progress > DDTK_IDLE_TIMEOUT_MS) {
                fprintf(stderr,
                        "ddtk: consume: no progress for %d ms, %d partition(s) "
                        "not at their end\n",
                        DDTK_IDLE_TIMEOUT_MS, remaining);
                return -1;
            }
            continue;
        }
        p = rkm->partition;
        if (rkm->err && rkm->err != RD_KAFKA_RESP_ERR__PARTITION_EOF) {
            fprintf(stderr, "ddtk: consume: %s\n", rd_kafka_message_errstr(rkm));
        } else if (p >= 0 && p < cnt && ends[p] >= 0) {
            last_progress = ddtk_now_ms();
            if (!rkm->err && rkm->offset < ends[p]) ddtk_message_print(rkm);
            if (rkm->err || rkm->offset >= ends[p] - 1) {
                ends[p] = -1; /* done */
                remaining--;
            }
        }
        rd_kafka_message_destroy(rkm);
    }
    return 0;
}

static int ddtk_consume(const ddtk_args_t *args)
{
    /* assign() without subscribe never joins the group; the group.id only
     * lets rd_kafka_consumer_poll() serve the assigned partitions. */
    char group[64];
    const char *defaults[] = {"group.id",
                              group,
                              "enable.auto.commit",
                              "false",
                              "enable.auto.offset.store",
                              "false",
                              "enable.partition.eof",
                              "true",
                              "auto.offset.reset",
                              "earliest",
                              NULL};
    rd_kafka_t *rk;
    int64_t *ends = NULL;
    int cnt = 0, assigned, r, ret = DDTK_EXIT_FAIL;

    snprintf(group, sizeof(group), "ddtk-consume-%ld", (long)getpid());
    rk = ddtk_client_new(args, RD_KAFKA_CONSUMER, defaults, NULL, NULL);
    if (!rk) goto done;
    r = ddtk_partition_cnt(rk, args, &cnt);
    if (r != 0) {
        ret = r == 1 ? DDTK_EXIT_OK : DDTK_EXIT_FAIL; /* no topic: nothing to print */
        goto done;
    }
    ends = calloc((size_t)cnt, sizeof(*ends));
    if (!ends) goto done;
    assigned = ddtk_consume_assign(rk, args, cnt, ends);
    if (assigned >= 0 && ddtk_consume_until_end(rk, assigned, ends, cnt) == 0) ret = DDTK_EXIT_OK;
    fflush(stdout);
done:
    free(ends);
    if (rk) {
        rd_kafka_consumer_close(rk);
        rd_kafka_destroy(rk);
    }
    return ret;
}

/* ---- committed, watermarks, partitions -------------------------------- */

static int ddtk_committed(const ddtk_args_t *args)
{
    /* Not subscribing keeps us out of the group: reading offsets must not
     * trigger a rebalance of the consumers under test. */
    const char *defaults[] = {"group.id", args->group, "enable.auto.commit", "false", NULL};
    rd_kafka_t *rk = ddtk_client_new(args, RD_KAFKA_CONSUMER, defaults, NULL, NULL);
    rd_kafka_topic_partition_list_t *parts = NULL;
    rd_kafka_resp_err_t err;
    int cnt, p, ret = DDTK_EXIT_FAIL;

    if (!rk || ddtk_partition_cnt_required(rk, args, &cnt)) goto done;
    parts = rd_kafka_topic_partition_list_new(cnt);
    for (p = 0; p < cnt; p++)
        rd_kafka_topic_partition_list_add(parts, args->topic, p);
    err = rd_kafka_committed(rk, parts, DDTK_TIMEOUT_MS);
    if (err) {
        fprintf(stderr, "ddtk: committed: group %s: %s\n", args->group, rd_kafka_err2str(err));
        goto done;
    }
    for (p = 0; p < parts->cnt; p++) {
        const rd_kafka_topic_partition_t *tp = &parts->elems[p];

        if (tp->err) {
            fprintf(stderr, "ddtk: committed: group %s %s [%d]: %s\n", args->group, args->topic,
                    tp->partition, rd_kafka_err2str(tp->err));
            goto done;
        }
        printf("%d %" PRId64 "\n", tp->partition, tp->offset < 0 ? (int64_t)-1 : tp->offset);
    }
    ret = DDTK_EXIT_OK;
done:
    if (parts) rd_kafka_topic_partition_list_destroy(parts);
    if (rk) rd_kafka_destroy(rk);
    return ret;
}

static int ddtk_watermarks(const ddtk_args_t *args)
{
    rd_kafka_t *rk = ddtk_client_new(args, RD_KAFKA_CONSUMER, NULL, NULL, NULL);
    rd_kafka_resp_err_t err;
    int64_t lo, hi;
    int cnt, p, ret = DDTK_EXIT_FAIL;

    if (!rk || ddtk_partition_cnt_required(rk, args, &cnt)) goto done;
    for (p = 0; p < cnt; p++) {
        err = rd_kafka_query_watermark_offsets(rk, args->topic, p, &lo, &hi, DDTK_TIMEOUT_MS);
        if (err) {
            fprintf(stderr, "ddtk: watermarks: %s [%d]: %s\n", args->topic, p,
                    rd_kafka_err2str(err));
            goto done;
        }
        printf("%d %" PRId64 " %" PRId64 "\n", p, lo, hi);
    }
    ret = DDTK_EXIT_OK;
done:
    if (rk) rd_kafka_destroy(rk);
    return ret;
}

static int ddtk_partitions(const ddtk_args_t *args)
{
    rd_kafka_t *rk = ddtk_client_new(args, RD_KAFKA_CONSUMER, NULL, NULL, NULL);
    int cnt, ret = DDTK_EXIT_FAIL;

    if (!rk || ddtk_partition_cnt_required(rk, args, &cnt)) goto done;
    printf("%d\n", cnt);
    ret = DDTK_EXIT_OK;
done:
    if (rk) rd_kafka_destroy(rk);
    return ret;
}

static const struct {
    const char *name;
    int (*fn)(const ddtk_args_t *args);
} ddtk_cmds[] = {
    {"produce", ddtk_produce},       {"consume", ddtk_consume},       {"committed", ddtk_committed},
    {"watermarks", ddtk_watermarks}, {"partitions", ddtk_partitions},
};

int main(int argc, char **argv)
{
    ddtk_args_t args;
    size_t i;

    if (argc < 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
        ddtk_usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? DDTK_EXIT_USAGE : DDTK_EXIT_OK;
    }
    for (i = 0; i < sizeof(ddtk_cmds) / sizeof(ddtk_cmds[0]); i++) {
        if (strcmp(argv[1], ddtk_cmds[i].name)) continue;
        if (ddtk_args_parse(argc - 1, argv + 1, &args)) {
            ddtk_usage(stderr);
            return DDTK_EXIT_USAGE;
        }
        return ddtk_cmds[i].fn(&args);
    }
    fprintf(stderr, "ddtk: unknown command %s\n", argv[1]);
    ddtk_usage(stderr);
    return DDTK_EXIT_USAGE;
}
