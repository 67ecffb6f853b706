/*
 * The configuration checks that need the final values (see dd_conf_int.h):
 * each is a hook of one setting of the schema table, run after every value
 * is known, so a rule between two settings can blame the one the user
 * wrote. Secrets (the MySQL password, sensitive librdkafka properties)
 * never reach a message.
 */
#include "dd_conf_int.h"

#include <errno.h>
#include <limits.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include <librdkafka/rdkafka.h>

#include "dd_common.h"
#include "dd_key.h"
#include "dd_shard.h"

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
int dd_conf_check_properties(dd_conf_ctx_t *ctx, int idx)
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

/* Frees a resolved password, wiping it first. */
static void dd_conf_drop_password(dd_conf_mysql_t *my)
{
    if (my->password) explicit_bzero(my->password, strlen(my->password));
    free(my->password);
    my->password = NULL;
}

/* Reads a password file, and its permission bits into *mode; the contents
 * never reach errstr. */
int dd_conf_read_secret(const char *path, char **out, mode_t *mode, char *errstr,
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
    dd_conf_mysql_t *my = dd_conf_cur_mysql(ctx);
    char *resolved = dd_conf_resolve(ctx->conf, my->password_file), msg[512];
    mode_t mode = 0;
    int err;

    if (!resolved) return dd_conf_nomem(ctx);
    free(my->password_file);
    my->password_file = resolved;
    dd_conf_drop_password(my);
    if ((err = dd_conf_read_secret(resolved, &my->password, &mode, msg, sizeof(msg))))
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

/* At most one password source; resolves it into my->password. The
 * hook sits on password_file, the last of the three in the table. */
int dd_conf_check_password(dd_conf_ctx_t *ctx, int idx)
{
    dd_conf_mysql_t *my = dd_conf_cur_mysql(ctx);
    int pw = dd_conf_item_idx("mysql.password"), env = dd_conf_item_idx("mysql.password_env");
    int set = dd_conf_is_explicit(ctx, pw) + dd_conf_is_explicit(ctx, env) +
              dd_conf_is_explicit(ctx, idx);
    const char *val;

    if (ctx->shard_pw_kept) return 0;
    if (set > 1)
        return dd_conf_fail(ctx, dd_conf_is_explicit(ctx, idx) ? idx : env, NULL,
                            "at most one of mysql.password, mysql.password_env and "
                            "mysql.password_file may be set");
    if (my->password_env) {
        if (!(val = getenv(my->password_env)))
            return dd_conf_fail(ctx, env, NULL, "environment variable %s is not set",
                                my->password_env);
        dd_conf_drop_password(my);
        if (!(my->password = strdup(val))) return dd_conf_nomem(ctx);
    } else if (my->password_file) {
        return dd_conf_password_from_file(ctx, idx);
    } else if (!my->password && !(my->password = strdup(""))) {
        return dd_conf_nomem(ctx);
    }
    return 0;
}

/* Compiles the template text as the routes will (dd_key), so that its
 * mistakes are found with their line. */
static int dd_conf_compile_tmpl(dd_conf_ctx_t *ctx, int idx, const char *text,
                                dd_key_tmpl_t **tmplp)
{
    char msg[512];
    int err = dd_key_tmpl_new(tmplp, text, msg, sizeof(msg));

    if (err == DD_ERR_NOMEM) return dd_conf_nomem(ctx);
    return err ? dd_conf_fail(ctx, idx, NULL, "%s", msg) : 0;
}

int dd_conf_check_key(dd_conf_ctx_t *ctx, int idx)
{
    dd_key_tmpl_t *tmpl = NULL;
    int err = dd_conf_compile_tmpl(ctx, idx, dd_conf_cur_dedup(ctx)->key, &tmpl);

    dd_key_tmpl_destroy(tmpl);
    return err;
}

/* dedupd's own tables (dedupd_schema, dedupd_shard_layout, ...) are named
 * dedupd_*: a dedup table of that name would have migrate alter one of
 * them, and the server may not tell case apart (lower_case_table_names). */
static int dd_conf_table_reserved(const char *t)
{
    return strncasecmp(t, "dedupd_", 7) == 0;
}

/* The table name is pasted into SQL, so only plain identifiers pass. */
int dd_conf_check_table(dd_conf_ctx_t *ctx, int idx)
{
    const char *t = dd_conf_cur_dedup(ctx)->table;
    size_t len = strspn(t, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_");

    if (t[len] != '\0' || len < 1 || len > 64)
        return dd_conf_fail(ctx, idx, NULL,
                            "expected a name matching [A-Za-z0-9_]{1,64}, got \"%s\"", t);
    if (dd_conf_table_reserved(t))
        return dd_conf_fail(ctx, idx, NULL,
                            "\"%s\": names starting with dedupd_ (in any case) are dedupd's own "
                            "tables; choose another",
                            t);
    return 0;
}

/* Where the handler that ships with dedupd as name.so is: beside the
 * executable in a build tree (handlers/<name>/), in a relocated install
 * (<bindir>/../<libdir>/dedupd), or in the install directory this dedupd was
 * configured with. The first that exists into out; -1 when none does, with
 * the places looked in in looked. */
static int dd_conf_builtin_find(const char *name, char *out, size_t out_size, char *looked,
                                size_t looked_size)
{
    char exe[PATH_MAX], *slash;
    ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
    size_t len;

    exe[n > 0 ? n : 0] = '\0';
    if ((slash = strrchr(exe, '/'))) *slash = '\0';
    looked[0] = '\0';
    for (int i = 0; i < 3; i++) {
        if (i == 0 && *exe)
            snprintf(out, out_size, "%s/handlers/%s/%s.so", exe, name, name);
        else if (i == 1 && *exe)
            snprintf(out, out_size, "%s/../%s/dedupd/%s.so", exe, DD_LIBDIR, name);
        else if (i == 2)
            snprintf(out, out_size, "%s/%s.so", DD_HANDLER_DIR, name);
        else
            continue;
        if (access(out, R_OK) == 0) return 0;
        len = strlen(looked);
        snprintf(looked + len, looked_size - len, "%s%s", len ? ", " : "", out);
    }
    return -1;
}

/* handler.path, or one of the groups that replace it (a handler that
 * ships with dedupd): exactly one names the handler. */
int dd_conf_check_handler_path(dd_conf_ctx_t *ctx, int idx)
{
    dd_conf_handler_t *h = dd_conf_cur_handler(ctx);
    int chosen = dd_conf_is_explicit(ctx, idx) ? idx : -1;
    char *resolved, found[2 * PATH_MAX], looked[6 * PATH_MAX], a[128], b[128];

    for (int i = 0; i < dd_conf_item_cnt; i++) {
        const dd_conf_item_t *it = &dd_conf_items[i];
        if (!it->replaces || strcmp(it->replaces, dd_conf_items[idx].path) != 0 ||
            !dd_conf_is_explicit(ctx, i))
            continue;
        if (chosen >= 0)
            return dd_conf_fail(ctx, i, NULL, "%s and %s both name the handler; give one",
                                dd_conf_name(ctx, it->path, a, sizeof(a)),
                                dd_conf_name(ctx, dd_conf_items[chosen].path, b, sizeof(b)));
        chosen = i;
    }
    if (chosen < 0) return 0; /* the required check has said so */
    if (chosen != idx) {
        const char *path = dd_conf_items[chosen].path;
        int cfg = dd_conf_item_idx("handler.config");
        if (cfg >= 0 && dd_conf_is_explicit(ctx, cfg))
            return dd_conf_fail(ctx, cfg, NULL,
                                "%s is for a plugin named by handler.path; %s takes its "
                                "settings in its own group",
                                dd_conf_name(ctx, "handler.config", a, sizeof(a)),
                                dd_conf_name(ctx, path, b, sizeof(b)));
        h->builtin = strrchr(path, '.') + 1;
        if (dd_conf_builtin_find(h->builtin, found, sizeof(found), looked, sizeof(looked)))
            return dd_conf_fail(ctx, chosen, NULL,
                                "the %s handler that ships with dedupd is not installed "
                                "(looked for %s)",
                                h->builtin, looked);
        free(h->path);
        return (h->path = strdup(found)) ? 0 : dd_conf_nomem(ctx);
    }
    if (!(resolved = dd_conf_resolve(ctx->conf, h->path))) return dd_conf_nomem(ctx);
    free(h->path);
    h->path = resolved;
    return 0;
}

int dd_conf_check_handler_grants(dd_conf_ctx_t *ctx, int idx)
{
    dd_conf_handler_t *h = dd_conf_cur_handler(ctx);
    char *resolved;

    if (!h->grants) return 0;
    if (!(resolved = dd_conf_resolve(ctx->conf, h->grants))) return dd_conf_nomem(ctx);
    free(h->grants);
    h->grants = resolved;
    if (access(resolved, R_OK) != 0)
        return dd_conf_fail(ctx, idx, NULL, "cannot read %s: %s", resolved, strerror(errno));
    return 0;
}

/* For a rule between two settings, blames the one the user wrote: `later`
 * unless only `earlier` was given explicitly. */
static int dd_conf_blame(dd_conf_ctx_t *ctx, int earlier, int later)
{
    return !dd_conf_is_explicit(ctx, later) && dd_conf_is_explicit(ctx, earlier) ? earlier : later;
}

int dd_conf_check_inflight(dd_conf_ctx_t *ctx, int idx)
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

int dd_conf_check_backoff(dd_conf_ctx_t *ctx, int idx)
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

/* Every ${path} of text must name a field of dedup.key's ${path}s, as the
 * two compiled templates say: "$${a}" in the key is literal text, not the
 * field a. A key that does not compile is its own check's to report. */
static int dd_conf_check_key_fields(dd_conf_ctx_t *ctx, int idx, const char *text)
{
    dd_key_tmpl_t *key = NULL, *sub = NULL;
    const dd_jpath_t *outside;
    char name[64], msg[8];
    int err;

    if (!text) return 0;
    if ((err = dd_conf_compile_tmpl(ctx, idx, text, &sub))) return err;
    err = dd_key_tmpl_new(&key, dd_conf_cur_dedup(ctx)->key, msg, sizeof(msg));
    if (err == DD_ERR_NOMEM)
        err = dd_conf_nomem(ctx);
    else if (err)
        err = 0;
    else if ((outside = dd_key_tmpl_outside(sub, key)))
        err = dd_conf_fail(ctx, idx, NULL, "${%s} is not a field of %s", outside->text,
                           dd_conf_name(ctx, "dedup.key", name, sizeof(name)));
    dd_key_tmpl_destroy(key);
    dd_key_tmpl_destroy(sub);
    return err;
}

/* Every ${path} of the lane key must be one of dedup.key's, so all copies
 * of a business key land on the same worker (per-key order, no two lanes
 * racing for one key). */
int dd_conf_check_lane_key(dd_conf_ctx_t *ctx, int idx)
{
    return dd_conf_check_key_fields(ctx, idx, dd_conf_cur_dedup(ctx)->lane_key);
}

/* The same for the shard key: all copies of a business key reach one
 * shard, where its dedup row is. */
int dd_conf_check_shard_key(dd_conf_ctx_t *ctx, int idx)
{
    return dd_conf_check_key_fields(ctx, idx, dd_conf_cur_dedup(ctx)->shard_key);
}

/* shard_map is required by, and only used by, shard_by map; the file is
 * read now so that its mistakes are found with their lines, and what it
 * decides kept for the recorded layout (dd_migrate.h). */
/* modulo and map read the shard key as a number: a literal byte that is
 * not a digit in its template (the business key's when shard_key is
 * unset) would make every message's shard key invalid. */
static int dd_conf_check_shard_digits(dd_conf_ctx_t *ctx)
{
    dd_conf_dedup_t *d = dd_conf_cur_dedup(ctx);
    int by = dd_conf_item_idx("dedup.shard_by"), sk = dd_conf_item_idx("dedup.shard_key"), c;
    char name[64], key[64], what[16], msg[8];
    const char *skn;
    dd_key_tmpl_t *tmpl = NULL;

    if (d->shard_by == DD_SHARD_HASH) return 0;
    if (dd_key_tmpl_new(&tmpl, d->shard_key ? d->shard_key : d->key, msg, sizeof(msg)))
        return 0; /* its own check says why */
    c = dd_key_tmpl_literal_outside(tmpl, "0123456789");
    dd_key_tmpl_destroy(tmpl);
    if (c < 0) return 0;
    snprintf(what, sizeof(what), c > 0x20 && c < 0x7f ? "'%c'" : "byte 0x%02x", c);
    skn = dd_conf_name(ctx, "dedup.shard_key", name, sizeof(name));
    if (d->shard_key)
        return dd_conf_fail(ctx, dd_conf_blame(ctx, by, sk), NULL,
                            "shard_by %s reads the shard key as a number, but the literal text "
                            "of %s holds %s: every message would be dead-lettered "
                            "shard_key_invalid",
                            dd_shard_by_name(d->shard_by), skn, what);
    return dd_conf_fail(ctx, by, NULL,
                        "%s reads the shard key as a number, and without %s it is %s, whose "
                        "literal text holds %s: every message would be dead-lettered "
                        "shard_key_invalid (set %s to the numeric field)",
                        dd_shard_by_name(d->shard_by), skn,
                        dd_conf_name(ctx, "dedup.key", key, sizeof(key)), what, skn);
}

int dd_conf_check_shard_map(dd_conf_ctx_t *ctx, int idx)
{
    dd_conf_dedup_t *d = dd_conf_cur_dedup(ctx);
    int by = dd_conf_item_idx("dedup.shard_by"), err;
    char name[64], msg[512], *resolved;
    dd_shard_map_t *map = NULL;

    if (d->shard_by != DD_SHARD_MAP) {
        if (!d->shard_map) return dd_conf_check_shard_digits(ctx);
        return dd_conf_fail(ctx, idx, NULL, "is only used with %s map",
                            dd_conf_name(ctx, "dedup.shard_by", name, sizeof(name)));
    }
    if (!d->shard_map)
        return dd_conf_fail(ctx, by, NULL, "map needs %s, the file of ranges",
                            dd_conf_name(ctx, "dedup.shard_map", name, sizeof(name)));
    if ((err = dd_conf_check_shard_digits(ctx))) return err;
    if (!(resolved = dd_conf_resolve(ctx->conf, d->shard_map))) return dd_conf_nomem(ctx);
    free(d->shard_map);
    d->shard_map = resolved;
    err = dd_shard_map_load(&map, resolved, dd_conf_shard_count(ctx->conf), msg, sizeof(msg));
    if (!err) memcpy(d->shard_map_digest, map->digest, sizeof(d->shard_map_digest));
    dd_shard_map_destroy(map);
    if (err == DD_ERR_NOMEM) return dd_conf_nomem(ctx);
    if (err) return dd_conf_fail(ctx, idx, NULL, "%s", msg);
    return 0;
}

/* Topic patterns compile as regcomp() compiles them for dd_conf_route_find
 * (POSIX extended, as librdkafka matches them); names are taken as they
 * are (the broker judges them). */
/* Kafka's rule for topic names: what a broker refuses would stop the
 * subscription or, as a dead-letter topic, every dead letter. */
static int dd_conf_topic_name_ok(const char *t)
{
    size_t len = strspn(t, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-");

    return t[len] == '\0' && len >= 1 && len <= 249 && strcmp(t, ".") != 0 && strcmp(t, "..") != 0;
}

#define DD_CONF_TOPIC_RULE "1 to 249 of [A-Za-z0-9._-], not \".\" or \"..\""

int dd_conf_check_dlq_topic(dd_conf_ctx_t *ctx, int idx)
{
    const char *t = *(char **)dd_conf_slot(ctx, &dd_conf_items[idx]);

    if (!t || dd_conf_topic_name_ok(t)) return 0;
    return dd_conf_fail(ctx, idx, NULL, "\"%s\" is not a topic name (" DD_CONF_TOPIC_RULE ")", t);
}

int dd_conf_check_topics(dd_conf_ctx_t *ctx, int idx)
{
    const dd_conf_origin_t *o = dd_conf_origin(ctx, idx);
    char **topics = *(char ***)dd_conf_slot(ctx, &dd_conf_items[idx]);
    int cnt = *dd_conf_slot_cnt(ctx, &dd_conf_items[idx]);

    for (int i = 0; i < cnt; i++) {
        char why[256];
        regex_t re;
        int rc;

        if (!dd_conf_topic_is_pattern(topics[i])) {
            if (dd_conf_topic_name_ok(topics[i])) continue;
            return dd_conf_fail(
                ctx, idx,
                o->kind == DD_ORIGIN_FILE ? config_setting_get_elem(o->setting, (unsigned)i) : NULL,
                "element %d: \"%s\" is not a topic name (" DD_CONF_TOPIC_RULE
                "), nor a pattern (starting with ^)",
                i + 1, topics[i]);
        }
        if ((rc = regcomp(&re, topics[i], REG_EXTENDED | REG_NOSUB)) == 0) {
            regfree(&re);
            continue;
        }
        regerror(rc, &re, why, sizeof(why));
        return dd_conf_fail(
            ctx, idx,
            o->kind == DD_ORIGIN_FILE ? config_setting_get_elem(o->setting, (unsigned)i) : NULL,
            "element %d: \"%s\" is not a valid pattern: %s", i + 1, topics[i], why);
    }
    return 0;
}

/* Names go into metric labels, log fields and --route: plain words. */
int dd_conf_check_route_name(dd_conf_ctx_t *ctx, int idx)
{
    const dd_conf_route_t *route = dd_conf_cur_route(ctx);
    const char *n = route ? route->name : NULL;
    size_t len =
        n ? strspn(n, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-") : 0;

    if (!n || n[len] != '\0' || len < 1 || len > 64)
        return dd_conf_fail(ctx, idx, NULL,
                            "expected a name matching [A-Za-z0-9_.-]{1,64}, got \"%s\"",
                            n ? n : "");
    return 0;
}

/* "host:port", "[v6]:port"; the port is after the last colon. */
int dd_conf_check_listen(dd_conf_ctx_t *ctx, int idx)
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
