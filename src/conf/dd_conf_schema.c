/*
 * The schema: every setting dedupd understands, described exactly once in
 * dd_conf_items[]: its path, type, default, bounds, whether it is
 * required, where it is stored in dd_conf_t, the check that needs the
 * final values, and one sentence for users. The table drives everything
 * else, so nothing can drift apart: reading the file, rejecting unknown
 * settings, type and bounds checks, defaults, DEDUPD_<SECTION>_<NAME>
 * environment overrides, freeing the struct, `dedupd --help-config`, the
 * settings table of docs/CONFIG.md and the SETTINGS section of
 * dedupd.conf(5) (unit tests compare both with what the table renders).
 */
#include "dd_conf_int.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dd_common.h"
#include "dd_log.h"
#include "dd_shard.h"

/* clang-format off */
#define DD_AT(field) .off = offsetof(dd_conf_t, field), .size = sizeof(((dd_conf_t *)0)->field)
#define DD_LIST_AT(field, cnt) DD_AT(field), .cnt_off = offsetof(dd_conf_t, cnt)
#define DD_GROUP(p, d) {.path = (p), .type = DD_CT_GROUP, .desc = (d)}
/* A setting every route has: its place in an element of `routes`, and in
 * dd_conf_route_t (the top-level value is the default route's). */
#define DD_RAT(rp, field) .per = DD_PER_ROUTE, .elem = (rp), \
    .elem_off = offsetof(dd_conf_route_t, field), .size = sizeof(((dd_conf_route_t *)0)->field)
#define DD_RLIST_AT(rp, field, cnt) DD_RAT(rp, field), .elem_cnt_off = offsetof(dd_conf_route_t, cnt)
/* A setting every database shard has: its place in an element of
 * mysql.shards, and in dd_conf_mysql_t (the top-level value is the mysql
 * group's, which the elements inherit). */
#define DD_SAT(sp, field) .per = DD_PER_SHARD, .elem = (sp), \
    .elem_off = offsetof(dd_conf_mysql_t, field), .size = sizeof(((dd_conf_mysql_t *)0)->field)

/* Kept out of clang-format, which would put every field on its own line. */
const dd_conf_item_t dd_conf_items[] = {
    DD_GROUP("kafka", "Kafka source."),
    {.path = "kafka.brokers", .type = DD_CT_STRING, .flags = DD_CF_REQUIRED,
     DD_AT(kafka.brokers), .desc = "Bootstrap brokers, \"host:port[,host:port...]\"."},
    {.path = "kafka.group", .type = DD_CT_STRING, .flags = DD_CF_REQUIRED, DD_AT(kafka.group),
     .desc = "Consumer group id; every dedupd instance consuming the same topics shares it."},
    {.path = "kafka.topics", .type = DD_CT_LIST, .min = 1, .max = 1000, .flags = DD_CF_REQUIRED,
     DD_RLIST_AT("topics", topics, topic_cnt),
     .check = dd_conf_check_topics,
     .desc = "Topics to consume: names, or \"^regex\" patterns as librdkafka subscribes to them. "
             "The topics of the one route when the configuration has no routes.",
     .elem_desc = "The route's topics: names, or \"^regex\" patterns. A topic belongs to one "
                   "route: a name two routes list, or a name one lists and another's pattern "
                   "matches, is refused when the file is loaded; a topic that comes to match "
                   "two routes' patterns stops dedupd when it is assigned. Together the routes' "
                   "topics are what dedupd subscribes to."},
    {.path = "kafka.properties", .type = DD_CT_LIST, .def = "", .max = 1000,
     DD_LIST_AT(kafka.properties, kafka.property_cnt), .check = dd_conf_check_properties,
     .desc = "Extra librdkafka properties as \"name=value\", each checked by librdkafka when "
             "the file is loaded. bootstrap.servers, group.id and enable.auto.offset.store "
             "are set by dedupd and are refused here. The dead-letter producer takes them "
             "too (consumer-only ones excepted), e.g. message.timeout.ms (30000 by default): "
             "how long one send is tried before dedupd sends the dead letter again. Its "
             "acks=all cannot be changed. dedupd's own defaults, which this list overrides: "
             "auto.offset.reset=earliest, queued.max.messages.kbytes=65536 (keep the "
             "prefetch queue above one second of the stream; docs/OPERATIONS.md, Backpressure "
             "and memory)."},
    {.path = "kafka.tombstones", .type = DD_CT_ENUM, .def = "dead_letter",
     DD_AT(kafka.tombstones), .parse = dd_conf_tombstones_parse, .allowed = "dead_letter|skip",
     .desc = "What a tombstone (a message with a null value: a compacted topic's delete, "
             "Debezium's after a delete) gets: dead_letter sends it to the dead-letter topic "
             "with reason tombstone; skip counts it (dedupd_tombstones_skipped_total) and "
             "commits its offset without running anything."},

    DD_GROUP("schema_registry", "The Confluent Schema Registry the writer schemas of routes in "
                                "dedup.format avro come from (docs/KEYS.md, Avro). Unused "
                                "without such a route."),
    {.path = "schema_registry.url", .type = DD_CT_STRING, DD_AT(schema_registry.url),
     .allowed = "http(s)://host[:port][/path]",
     .desc = "The registry's base URL, e.g. \"https://registry:8081\"; schemas are fetched "
             "from <url>/schemas/ids/<id>, once per id for the life of the process. Credentials "
             "go in user and password, never in the URL."},
    {.path = "schema_registry.user", .type = DD_CT_STRING, DD_AT(schema_registry.user),
     .desc = "User name for HTTP basic authentication; unset: none."},
    {.path = "schema_registry.password", .type = DD_CT_STRING,
     .flags = DD_CF_NOENV | DD_CF_SECRET | DD_CF_EMPTY_OK, DD_AT(schema_registry.password),
     .desc = "Basic authentication password in clear text; prefer password_env or "
             "password_file. At most one of the three may be set, and only with user."},
    {.path = "schema_registry.password_env", .type = DD_CT_STRING, .flags = DD_CF_NOENV,
     DD_AT(schema_registry.password_env),
     .desc = "Name of an environment variable holding the password; it must be set."},
    {.path = "schema_registry.password_file", .type = DD_CT_STRING, .flags = DD_CF_NOENV,
     DD_AT(schema_registry.password_file),
     .desc = "File holding the password, trailing newline removed; relative to the config "
             "file's directory."},
    DD_GROUP("schema_registry.tls", "TLS to the registry, for an https URL."),
    {.path = "schema_registry.tls.ca", .type = DD_CT_STRING, DD_AT(schema_registry.tls.ca),
     .desc = "CA certificates (PEM) the registry's certificate must be signed by; unset: the "
             "system's. An https URL always verifies the certificate and the host name. "
             "Relative to the config file's directory."},
    {.path = "schema_registry.tls.cert", .type = DD_CT_STRING, DD_AT(schema_registry.tls.cert),
     .desc = "Client certificate (PEM) for a registry that asks for one; needs "
             "schema_registry.tls.key. Relative to the config file's directory."},
    {.path = "schema_registry.tls.key", .type = DD_CT_STRING, DD_AT(schema_registry.tls.key),
     .desc = "Private key (PEM, not encrypted) of schema_registry.tls.cert. Relative to the "
             "config file's directory."},
    {.path = "schema_registry.cleartext_auth", .type = DD_CT_BOOL, .def = "false",
     DD_AT(schema_registry.cleartext_auth),
     .desc = "Lets user and password go to an http:// URL, where they cross the network in "
             "clear text (basic authentication's base64 is no encryption). false: a user with "
             "an http:// URL is refused when the file is loaded; use https://, or say true "
             "for a registry reached only over a network you trust."},
    {.path = "schema_registry.timeout", .type = DD_CT_DURATION, .def = "5s", .min = 100,
     .max = DD_MS_MIN, .unit_ms = 1, DD_AT(schema_registry.timeout_ms),
     .check = dd_conf_check_registry,
     .desc = "How long the fetch of one schema, with the schemas it references, may take, "
             "however slowly the answer comes. A registry that does not answer in time, "
             "answers with an error or with something that is not a registry's answer, is "
             "waited for: the messages that need the schema, and the later ones of their "
             "partitions, wait and the schema is fetched again with the retry backoff, no "
             "offset passes them, and /readyz says why (docs/OPERATIONS.md). The fetch runs "
             "on a thread of its own: other messages go on meanwhile."},

    DD_GROUP("mysql", "MySQL/MariaDB database holding the dedup table and the business tables."),
    {.path = "mysql.host", .type = DD_CT_STRING, .def = "127.0.0.1", DD_SAT("host", host),
     .desc = "Server host name or address."},
    {.path = "mysql.port", .type = DD_CT_INT, .def = "3306", .min = 1, .max = 65535,
     DD_SAT("port", port), .desc = "Server TCP port."},
    {.path = "mysql.hosts", .type = DD_CT_STRING, DD_SAT("hosts", hosts),
     .desc = "Nodes of one cluster (Galera), \"host:port[,host:port...]\", instead of host "
             "and port: dedupd connects to the first that answers, and when its node goes away "
             "(the batch replayed, as after any lost connection) to the next that answers. In "
             "an element of mysql.shards: that shard's nodes."},
    {.path = "mysql.socket", .type = DD_CT_STRING, DD_SAT("socket", socket),
     .desc = "Unix socket path; when set it is used instead of host and port."},
    {.path = "mysql.user", .type = DD_CT_STRING, .def = "dedupd", DD_SAT("user", user),
     .desc = "User name."},
    {.path = "mysql.password", .type = DD_CT_STRING,
     .flags = DD_CF_NOENV | DD_CF_SECRET | DD_CF_EMPTY_OK, DD_SAT("password", password),
     .desc = "Password in clear text; prefer password_env or password_file. At most one of "
             "the three may be set; none means an empty password."},
    {.path = "mysql.password_env", .type = DD_CT_STRING, .flags = DD_CF_NOENV,
     DD_SAT("password_env", password_env),
     .desc = "Name of an environment variable holding the password (conventionally "
             "DEDUPD_MYSQL_PASSWORD); it must be set."},
    {.path = "mysql.password_file", .type = DD_CT_STRING, .flags = DD_CF_NOENV,
     DD_SAT("password_file", password_file), .check = dd_conf_check_password,
     .desc = "File holding the password, trailing newline removed; relative paths are "
             "relative to the config file's directory."},
    {.path = "mysql.database", .type = DD_CT_STRING, .flags = DD_CF_REQUIRED,
     DD_SAT("database", database), .desc = "Database holding the dedup table and the business tables."},
    {.path = "mysql.connect_timeout", .type = DD_CT_DURATION, .def = "5s", .min = DD_MS_SEC,
     .max = DD_MS_HOUR, .unit_ms = DD_MS_SEC, DD_SAT("connect_timeout", connect_timeout_s),
     .desc = "Connect timeout (whole seconds)."},
    {.path = "mysql.read_timeout", .type = DD_CT_DURATION, .def = "20s", .min = 2 * DD_MS_SEC,
     .max = DD_MS_HOUR, .unit_ms = DD_MS_SEC, DD_SAT("read_timeout", read_timeout_s),
     .desc = "Longest wait for the server's answer to one statement (whole seconds); past it "
             "the connection counts as lost (a retriable error; the shard is down until it "
             "answers again). The session's innodb_lock_wait_timeout is lowered to end "
             "5 s before it, so a lock wait fails as a lock wait. dedupd migrate waits "
             "without a bound (its ALTER TABLE may take long)."},
    {.path = "mysql.write_timeout", .type = DD_CT_DURATION, .def = "20s", .min = DD_MS_SEC,
     .max = DD_MS_HOUR, .unit_ms = DD_MS_SEC, DD_SAT("write_timeout", write_timeout_s),
     .desc = "Longest wait for the server to take one request (whole seconds); past it the "
             "connection counts as lost."},

    {.path = "mysql.tls", .type = DD_CT_GROUP, .per = DD_PER_SHARD, .elem = "tls",
     .desc = "TLS to the database server over TCP. A unix socket (mysql.socket) does "
             "not leave the machine: connections through one never use TLS."},
    {.path = "mysql.tls.mode", .type = DD_CT_ENUM, .def = "required", DD_SAT("tls.mode", tls.mode),
     .parse = dd_conf_tls_mode_parse,
     .allowed = "disabled|preferred|required|verify_ca|verify_identity",
     .desc = "As MySQL's --ssl-mode. disabled: no TLS; preferred: TLS when the server offers "
             "it, else clear text; required: TLS or no session; verify_ca: also the server's "
             "certificate must be signed by a CA in mysql.tls.ca; verify_identity: also it must "
             "name mysql.host. preferred and required do not check the certificate, so they "
             "do not stop a machine in the middle: use verify_identity across any network you "
             "do not control. But for disabled and preferred, no password goes out unencrypted."},
    {.path = "mysql.tls.ca", .type = DD_CT_STRING, DD_SAT("tls.ca", tls.ca),
     .desc = "CA certificates (PEM) the server's certificate must be signed by; needed by, and "
             "only used by, verify_ca and verify_identity (for a publicly trusted server "
             "certificate, the system's bundle, e.g. /etc/ssl/certs/ca-certificates.crt). "
             "Relative paths are relative to the config file's directory."},
    {.path = "mysql.tls.cert", .type = DD_CT_STRING, DD_SAT("tls.cert", tls.cert),
     .desc = "Client certificate (PEM) for a server that asks for one (REQUIRE X509); needs "
             "mysql.tls.key. Relative to the config file's directory."},
    {.path = "mysql.tls.key", .type = DD_CT_STRING, DD_SAT("tls.key", tls.key),
     .desc = "Private key (PEM, not encrypted) of mysql.tls.cert. Relative to the config "
             "file's directory."},
    {.path = "mysql.tls.min_version", .type = DD_CT_ENUM, .def = "TLSv1.2",
     DD_SAT("tls.min_version", tls.min_version), .parse = dd_conf_tls_version_parse,
     .allowed = "TLSv1.2|TLSv1.3", .check = dd_conf_check_tls,
     .desc = "Oldest TLS version dedupd accepts."},
    {.path = "mysql.shards", .type = DD_CT_GROUPS, .list = &dd_conf_shard_list, .max = DD_CONF_SHARD_MAX, .flags = DD_CF_NOENV,
     .desc = "Database shards: a list of groups, ( { host = ...; }, { host = ...; port = ...; }, "
             "... ), one per MariaDB primary, each with any of the mysql settings above that say "
             "\"Per shard\"; a setting an element does not set is the mysql group's. "
             "A shard's index is its position, from 0. Each message's rows (its dedup row and "
             "its handler's) go to the shard dedup.shard_by picks for its dedup.shard_key. "
             "Unset: the mysql group is the one database (docs/SHARDS.md)."},
    {.path = "mysql.shard_check", .type = DD_CT_ENUM, .def = "auto", DD_AT(shard_check),
     .parse = dd_conf_shard_check_parse, .allowed = "auto|skip|wait|off",
     .desc = "With several shards: before a batch's claims, its lane asks the other shards "
             "whether they hold a row of its keys (rows not moved when the layout changed); "
             "such a message is dead-lettered wrong_shard, not applied again. auto asks only "
             "while a layout change is younger than the largest dedup.ttl (read from every "
             "shard's dedupd_shard_layout at start; older rows are not remembered anyway), as "
             "skip does; skip always asks, and goes on without a shard that does not answer "
             "(warned once per outage, counted in dedupd_shard_check_skipped_total); wait "
             "always asks, and holds the batch back until every shard answers (it then holds "
             "back every shard's new keys); off never asks (docs/GUARANTEES.md)."},

    DD_GROUP("dedup", "How messages are recognised as duplicates (the one route's, without "
                      "routes)."),
    {.path = "dedup.key", .type = DD_CT_STRING, .flags = DD_CF_REQUIRED, DD_RAT("key", dedup.key), .allowed = "contains ${path}", .check = dd_conf_check_key,
     .desc = "Business key template over the JSON payload, e.g. "
             "\"pay:${merchant_id}:${order_no}\"; values are escaped so that different "
             "payments never share a key (docs/KEYS.md)."},
    {.path = "dedup.format", .type = DD_CT_ENUM, .def = "json", DD_RAT("format", dedup.format), .parse = dd_conf_format_parse, .allowed = "json|avro|json_sr",
     .check = dd_conf_check_format,
     .desc = "What the payloads are. json: JSON text. avro: the Confluent wire format (a zero "
             "byte, a 4-byte big-endian schema id, the Avro binary record), decoded with the "
             "writer schema from schema_registry into JSON as docs/KEYS.md (Avro) says; keys, "
             "hashes and handlers then see that JSON. json_sr: the same 5-byte header before "
             "JSON text, as Confluent's JSON Schema serializer writes it (the schema is not "
             "fetched). Protobuf is not read (docs/KEYS.md says why)."},
    {.path = "dedup.hash", .type = DD_CT_LIST, .def = "", .max = 1000,
     DD_RLIST_AT("hash", dedup.hash, dedup.hash_cnt),
     .desc = "Payload paths covered by the request hash; empty: the whole payload. A path "
             "that finds nothing is left out of the hash (docs/KEYS.md)."},
    {.path = "dedup.ttl", .type = DD_CT_DURATION, .def = "7d", .min = DD_MS_SEC,
     .max = 3650 * DD_MS_DAY, .unit_ms = DD_MS_SEC, DD_RAT("ttl", dedup.ttl_s),
     .desc = "How long a key is remembered before the purge may delete it; must cover the "
             "longest redelivery or replay window."},
    {.path = "dedup.table", .type = DD_CT_STRING, .def = "dedup_record", DD_RAT("table", dedup.table), .flags = DD_CF_ROUTE_REQ, .allowed = "[A-Za-z0-9_]{1,64}",
     .check = dd_conf_check_table,
     .desc = "Name of the dedup table. Names starting with dedupd_, in any case, are "
             "dedupd's own tables and refused.",
     .elem_desc = "The route's dedup table. Each route has its own (two routes naming one "
                   "table, or names equal but for case, are refused), so the keys of two routes never meet. Required in a "
                   "route: to keep the keys a configuration without routes recorded, name its "
                   "table (dedup_record unless dedup.table said otherwise)."},
    {.path = "dedup.retry_failed", .type = DD_CT_BOOL, .def = "true", DD_RAT("retry_failed", dedup.retry_failed),
     .desc = "Whether a later message with the same key and hash may retry a rejected key."},
    {.path = "dedup.defer_claim", .type = DD_CT_BOOL, .def = "true", DD_RAT("defer_claim", dedup.defer_claim),
     .desc = "Claim a key that is not in the dedup table yet by inserting its finished row "
             "after the handler ran, in the same transaction: one row write instead of two. "
             "If another consumer inserted the key meanwhile, that insert fails, the batch is "
             "rolled back and replayed with the key claimed first. false: always claim "
             "first, so a handler is never called for a key another consumer is applying "
             "(choose it when handlers have effects outside the transaction)."},
    {.path = "dedup.max_payload_bytes", .type = DD_CT_INT, .def = "990000", .min = 1,
     .max = 100000000, DD_RAT("max_payload_bytes", dedup.max_payload_bytes),
     .desc = "Larger payloads are dead-lettered as payload_too_large. The default leaves a "
             "dead letter room for the key, the headers and the record overhead within the "
             "dead-letter producer's message.max.bytes (librdkafka's default 1000000); "
             "dedupd warns at start when it does not. A dead letter that would not fit "
             "carries its payload truncated (header dedupd.truncated)."},
    {.path = "dedup.lane_key", .type = DD_CT_STRING, DD_RAT("lane_key", dedup.lane_key),
     .allowed = "${path}s of dedup.key", .check = dd_conf_check_lane_key,
     .desc = "Template choosing the worker for a message, e.g. \"${merchant_id}\": messages "
             "with the same lane key run on one worker, so a handler updating shared rows "
             "(a merchant balance) is not deadlocked by other workers. Only fields of "
             "dedup.key, so one key stays on one worker; unset: the business key.",
     .elem_desc = "As dedup.lane_key, of the route's key. Messages of any route whose lane "
                   "keys are equal run on one worker, so two routes whose handlers update the "
                   "same rows may share a lane key (\"${merchant_id}\")."},

    {.path = "dedup.shard_key", .type = DD_CT_STRING, DD_RAT("shard_key", dedup.shard_key),
     .allowed = "${path}s of dedup.key", .check = dd_conf_check_shard_key,
     .desc = "Template choosing the database shard of a message (mysql.shards), e.g. "
             "\"${merchant_id}\": the key the business rows are sharded by. Only fields of "
             "dedup.key, so one business key always reaches one shard; unset: the business "
             "key. Unused with one database.",
     .elem_desc = "As dedup.shard_key, of the route's key."},
    {.path = "dedup.shard_by", .type = DD_CT_ENUM, .def = "hash", DD_RAT("shard_by", dedup.shard_by), .parse = dd_shard_by_parse, .allowed = "hash|modulo|map",
     .desc = "How the rendered shard key picks a shard. hash: CRC-32 of its bytes (MySQL's "
             "CRC32()) modulo the shard count; modulo: the key is a non-negative decimal "
             "integer, the shard is its value modulo the shard count; map: the key is such an "
             "integer up to 2^64-1, and dedup.shard_map's range holding it names the shard. A "
             "message whose key does not fit is dead-lettered shard_key_invalid, one in no "
             "range shard_unmapped (docs/SHARDS.md)."},
    {.path = "dedup.shard_map", .type = DD_CT_STRING, DD_RAT("shard_map", dedup.shard_map), .check = dd_conf_check_shard_map,
     .desc = "With shard_by map, required: a file of lines \"LOW HIGH SHARD\" (inclusive "
             "ranges of non-negative integers that do not overlap, '#' comments); relative "
             "paths are relative to the config file's directory."},

    {.path = "handler", .type = DD_CT_GROUP, .per = DD_PER_ROUTE, .elem = "handler",
     .desc = "The business handler plugin (the one route's, without routes)."},
    {.path = "handler.path", .type = DD_CT_STRING, .flags = DD_CF_REQUIRED, DD_RAT("handler.path", handler.path), .check = dd_conf_check_handler_path,
     .desc = "Handler shared object; relative paths are relative to the config file's "
             "directory. A handler that ships with dedupd is named by its own group instead "
             "(handler.sql, handler.http)."},
    {.path = "handler.sql", .type = DD_CT_GROUP, .flags = DD_CF_ANY, DD_RAT("handler.sql", handler.config), .replaces = "handler.path",
     .desc = "The SQL handler that ships with dedupd, in place of a plugin named by "
             "handler.path: the statements each message runs in dedupd's transaction "
             "(statements, each value a bound ${path}; expect and otherwise), and optionally its "
             "tables (migrate), a response query and events (docs/SQL.md). Read by the "
             "handler when it loads: run, migrate and check refuse a wrong one, naming the line "
             "and the statement."},
    {.path = "handler.http", .type = DD_CT_GROUP, .flags = DD_CF_ANY, DD_RAT("handler.http", handler.config), .replaces = "handler.path",
     .desc = "The HTTP handler that ships with dedupd, configured by this group instead of a "
             "plugin named by handler.path: in external mode, each message POSTed to url with "
             "its business key as Idempotency-Key and its claim's token as Dedupd-Fence, "
             "reconcile_url asked after a takeover; its settings (url, timeout, headers with "
             "${env:NAME} and ${file:PATH}, reconcile_url, statuses, tls, ...) are checked "
             "when it starts (docs/HANDLERS.md, \"External mode without C\")."},
    {.path = "handler.grants", .type = DD_CT_STRING, DD_RAT("handler.grants", handler.grants), .check = dd_conf_check_handler_grants,
     .desc = "The handler's GRANT statements (a file of GRANT lines, as the examples' "
             "grants.sql; relative to the config file's directory): run and check look each "
             "privilege up in the runtime user's before any message, and refuse to start "
             "naming what is missing. The database a line names is read as mysql.database. "
             "Unset: the handler's privileges show on its first message."},
    {.path = "handler.config", .type = DD_CT_GROUP, .flags = DD_CF_ANY, DD_RAT("handler.config", handler.config),
     .desc = "The handler's own settings, passed to its init() unchecked."},
    {.path = "handler.batch", .type = DD_CT_BOOL, .def = "true", DD_RAT("handler.batch", handler.batch),
     .desc = "Give a handler that has handle_batch() (ABI 2) all of a transaction's messages "
             "in one call; false: always handle() one message at a time."},
    {.path = "handler.max_response_bytes", .type = DD_CT_INT, .def = "65536", .min = 64,
     .max = 16777215, DD_RAT("handler.max_response_bytes", handler.max_response_bytes),
     .desc = "Longest response snapshot a handler may return, in bytes. A longer one is a "
             "handler error: the message is rejected (its writes rolled back, the key "
             "recorded failed, dead letter rejected); in external mode, where the effect "
             "happened, the response is dropped with a warning and the key recorded applied. "
             "The database's max_allowed_packet "
             "must hold a finished row with twice this much (escaped text); dedupd refuses "
             "to start when it does not. At most 16777215, the response column's capacity."},

    {.path = "dlq", .type = DD_CT_GROUP, .per = DD_PER_ROUTE, .elem = "dlq",
     .desc = "Dead-letter topic (the one route's, without routes)."},
    {.path = "dlq.topic", .type = DD_CT_STRING, DD_RAT("dlq.topic", dlq.topic),
     .check = dd_conf_check_dlq_topic,
     .desc = "Dead-letter topic; unset: the source topic's name followed by \".dlq\"."},
    {.path = "dlq.connect_headers", .type = DD_CT_BOOL, .def = "false", DD_AT(dlq_connect_headers),
     .desc = "Also write Kafka Connect's error headers on each dead letter, for tooling that "
             "reads them: __connect.errors.topic, .partition, .offset, .connector.name (the "
             "consumer group), .task.id, .stage, .class.name, .exception.class.name "
             "(dedupd.<reason>) and .exception.message (the error)."},

    {.path = "routes", .type = DD_CT_GROUPS, .list = &dd_conf_route_list, .max = DD_CONF_ROUTE_MAX, .flags = DD_CF_NOENV,
     .desc = "Several routes in one consumer group: a list of groups, ( { name = ...; topics = "
             "[...]; key = ...; table = ...; handler = { path = ...; }; }, ... ), one per "
             "route, each with its own topics, business key, request hash, dedup table, "
             "handler and dead-letter topic: the settings routes[].* below. A configuration "
             "has either routes or the top-level kafka.topics, dedup, handler and dlq (the "
             "one route, named default), never both (docs/CONFIG.md, Routes)."},
    {.path = "routes[].name", .type = DD_CT_STRING,
     .flags = DD_CF_ROUTE_ONLY | DD_CF_ROUTE_REQ | DD_CF_NOENV, DD_RAT("name", name), .allowed = "[A-Za-z0-9_.-]{1,64}", .check = dd_conf_check_route_name,
     .desc = "The route's name, unique: the route label of the metrics, the route field of "
             "the log lines, and what --route of replay, purge, stats and reconcile "
             "selects."},

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
             "long while what they wait for is up (a database that does not answer, or dead "
             "letters the broker has not acknowledged, stop the clock); the loop not turning "
             "for half of it counts too."},
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

    DD_GROUP("external", "Handlers in external mode: claims with a lease, takeover and the "
                         "compensation scan (docs/GUARANTEES.md, \"External effects\"), for "
                         "every route whose handler is in external mode. Unused by handlers in "
                         "local mode."),
    {.path = "external.lease", .type = DD_CT_DURATION, .def = "30s", .min = DD_MS_SEC,
     .max = DD_MS_HOUR, .unit_ms = 1, DD_AT(external.lease_ms),
     .desc = "How long a claim holds its key without being renewed, on the database's clock. "
             "The worker renews it every third of this while the handler's act() runs; a claim "
             "not renewed in time may be taken over by another consumer."},
    {.path = "external.scan_interval", .type = DD_CT_DURATION, .def = "1m", .min = 0,
     .max = DD_MS_DAY, .unit_ms = 1, DD_AT(external.scan_interval_ms),
     .desc = "Time between two compensation scans of dedupd run (the stuck-row gauges are "
             "refreshed by them); \"0\" turns the scan off."},
    {.path = "external.scan_after", .type = DD_CT_DURATION, .def = "5m", .min = 0,
     .max = 30 * DD_MS_DAY, .unit_ms = 1, DD_AT(external.scan_after_ms),
     .desc = "How long past its lease a processing row must be before the scan (and dedupd "
             "reconcile) resolves it, taking its message to be gone. Until then a redelivered "
             "message takes it over, which can act again; the scan cannot."},
    {.path = "external.unknown_attempts", .type = DD_CT_INT, .def = "10", .min = 0,
     .max = 1000000, DD_AT(external.unknown_attempts),
     .desc = "After a takeover, how many times reconcile() may answer UNKNOWN before the "
             "message is dead-lettered unresolved and its key recorded failed; 0: ask forever."},
    {.path = "external.in_flight", .type = DD_CT_INT, .def = "1", .min = 1, .max = 256,
     DD_AT(external.in_flight),
     .desc = "Calls of act() running at once per worker, each for a message of another lane "
             "key (the messages of one lane key act one after the other, in order), so a "
             "slow downstream does not make workers the ceiling: workers x in_flight calls "
             "in flight. 1: each worker calls act() itself, one message at a time; more: a "
             "worker has that many threads calling act() while it claims and finishes."},

    DD_GROUP("outbox", "Events out: handlers' host->emit() into the outbox table in their "
                       "transaction, and the relay publishing them to Kafka (docs/HANDLERS.md, "
                       "\"Events out\")."),
    {.path = "outbox.enabled", .type = DD_CT_BOOL, .def = "false", DD_AT(outbox.enabled),
     .desc = "Handlers may emit events: dedupd migrate creates the table dedupd_outbox in every "
             "database shard, and dedupd run relays it (see outbox.relay). Off: host->emit() "
             "fails."},
    {.path = "outbox.relay", .type = DD_CT_BOOL, .def = "true", DD_AT(outbox.relay),
     .desc = "dedupd run runs the relay beside the consumer, a thread per shard; false: it "
             "does not, and `dedupd relay` runs it apart. Several relays may run at once: per "
             "shard one publishes, the others wait for its lock."},
    {.path = "outbox.batch", .type = DD_CT_INT, .def = "2000", .min = 1, .max = 100000,
     DD_AT(outbox.batch),
     .desc = "Events the relay reads, sends and deletes (once acknowledged) at a time."},
    {.path = "outbox.inflight", .type = DD_CT_INT, .def = "4", .min = 1, .max = 64,
     DD_AT(outbox.inflight),
     .desc = "Batches of a shard the relay keeps on their way at once: it reads and sends the "
             "next while Kafka acknowledges the earlier ones, and deletes each batch's "
             "acknowledged events in the order they were read. 1: one batch in flight, each "
             "read waits for the last one's reports."},
    {.path = "outbox.poll_interval", .type = DD_CT_DURATION, .def = "100ms", .min = 1,
     .max = DD_MS_HOUR, .unit_ms = 1, DD_AT(outbox.poll_interval_ms),
     .desc = "How long the relay waits before looking again when the outbox was empty."},
    {.path = "outbox.send_timeout", .type = DD_CT_DURATION, .def = "30s", .min = DD_MS_SEC,
     .max = DD_MS_HOUR, .unit_ms = 1, DD_AT(outbox.send_timeout_ms),
     .desc = "How long the relay waits for Kafka to take the events of a batch before it "
             "takes back those not yet sent (a topic that does not exist, a broker down): they "
             "stay in the outbox and their topics are paused (outbox.retry_max). Events already "
             "on their way are waited for, never abandoned, so none is overtaken by a later one "
             "of its key."},
    {.path = "outbox.retry_max", .type = DD_CT_DURATION, .def = "30s", .min = 1,
     .max = DD_MS_HOUR, .unit_ms = 1, DD_AT(outbox.retry_max_ms),
     .desc = "Longest pause before a topic whose events failed for a reason that may pass (it "
             "does not exist, the broker refused for now) is tried again; the pause starts at "
             "outbox.poll_interval and doubles. Meanwhile the other topics' events go on."},
};
/* clang-format on */

const int dd_conf_item_cnt = (int)DD_ARRAY_LEN(dd_conf_items);
_Static_assert(DD_ARRAY_LEN(dd_conf_items) <= DD_CONF_MAX_ITEMS, "raise DD_CONF_MAX_ITEMS");

/*
 * Lookups and names
 */

int dd_conf_item_idx(const char *path)
{
    for (int i = 0; i < dd_conf_item_cnt; i++)
        if (strcmp(dd_conf_items[i].path, path) == 0) return i;
    return -1;
}

const dd_conf_list_t *dd_conf_list_of(const dd_conf_item_t *it)
{
    for (int i = 0; it->per && i < dd_conf_item_cnt; i++) {
        const dd_conf_list_t *list = dd_conf_items[i].list;
        if (list && (list->per & it->per)) return list;
    }
    return NULL;
}

void *dd_conf_elem_field(void *e, const dd_conf_item_t *it)
{
    return (char *)e + it->elem_off;
}

void *dd_conf_field(dd_conf_t *conf, const dd_conf_item_t *it)
{
    return (char *)conf + it->off;
}

/* The element item it's value goes in: the one being loaded, or, at the
 * top level, the list's top-level values. */
static void *dd_conf_slot_elem(dd_conf_ctx_t *ctx, const dd_conf_item_t *it)
{
    if (ctx->list && (ctx->list->per & it->per)) return ctx->elem;
    return ctx->top[dd_conf_list_of(it)->id];
}

void *dd_conf_slot(dd_conf_ctx_t *ctx, const dd_conf_item_t *it)
{
    if (!it->per) return dd_conf_field(ctx->conf, it);
    return dd_conf_elem_field(dd_conf_slot_elem(ctx, it), it);
}

int *dd_conf_slot_cnt(dd_conf_ctx_t *ctx, const dd_conf_item_t *it)
{
    if (!it->per) return (int *)((char *)ctx->conf + it->cnt_off);
    return (int *)((char *)dd_conf_slot_elem(ctx, it) + it->elem_cnt_off);
}

dd_conf_origin_t *dd_conf_origin(dd_conf_ctx_t *ctx, int idx)
{
    return ctx->list ? &ctx->elem_origin[idx] : &ctx->origin[idx];
}

/* "kafka.brokers" -> "DEDUPD_KAFKA_BROKERS". */
void dd_conf_env_name(const dd_conf_item_t *it, char *out, size_t out_size)
{
    size_t n = (size_t)snprintf(out, out_size, "DEDUPD_%s", it->path);

    for (size_t i = 0; i < n && i < out_size; i++)
        out[i] = out[i] == '.' ? '_' : (char)toupper((unsigned char)out[i]);
}

int dd_conf_has_env(const dd_conf_item_t *it)
{
    return it->type != DD_CT_GROUP && it->type != DD_CT_GROUPS &&
           !(it->flags & (DD_CF_NOENV | DD_CF_ROUTE_ONLY));
}

/* Formats ms in the largest unit that divides it: "7d", "30s", "250ms". */
void dd_conf_fmt_duration(int64_t ms, char *out, size_t out_size)
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

int dd_conf_parse_int(const char *s, int64_t *v)
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
    return i >= 0 && i < dd_conf_item_cnt ? dd_conf_items[i].path : NULL;
}

const char *dd_conf_setting_desc(int i, int in_route)
{
    if (i < 0 || i >= dd_conf_item_cnt) return NULL;
    return in_route ? dd_conf_items[i].elem_desc : dd_conf_items[i].desc;
}
