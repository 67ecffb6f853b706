/*
 * dedup.format and the schema_registry settings (see dd_conf.h): the rules
 * that need several of their values at once.
 *
 * A route in avro format cannot read a single message without the
 * registry, so its absence is a load error, not a dead letter per message.
 * Credentials never appear in a URL, where logs, metrics and error texts
 * would carry them; the password comes from the file, the environment or a
 * file, as the database's does, and never reaches a message. Nor do they
 * go to an http:// URL, in clear text on the network, unless the
 * configuration says so (schema_registry.cleartext_auth), as the database
 * goes without TLS only when mysql.tls.mode says disabled.
 */
#include "dd_conf_int.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "dd_common.h"

static const char *const dd_conf_format_names[] = {"json", "avro", "json_sr"};

int dd_conf_format_parse(const char *name)
{
    for (size_t i = 0; i < DD_ARRAY_LEN(dd_conf_format_names); i++)
        if (strcmp(name, dd_conf_format_names[i]) == 0) return (int)i;
    return -1;
}

const char *dd_conf_format_name(int format)
{
    return format >= 0 && format < (int)DD_ARRAY_LEN(dd_conf_format_names)
               ? dd_conf_format_names[format]
               : "unknown";
}

int dd_conf_reads_avro(const dd_conf_t *conf)
{
    for (int r = 0; r < conf->route_cnt; r++)
        if (conf->routes[r].dedup.format == DD_FORMAT_AVRO) return 1;
    return 0;
}

int dd_conf_check_format(dd_conf_ctx_t *ctx, int idx)
{
    if (dd_conf_cur_dedup(ctx)->format == DD_FORMAT_AVRO && !ctx->conf->schema_registry.url)
        return dd_conf_fail(ctx, idx, NULL,
                            "avro needs the writer schemas: set schema_registry.url");
    return 0;
}

/* http:// or https://, a host, no user:password@. */
static int dd_conf_registry_url(dd_conf_ctx_t *ctx)
{
    const char *url = ctx->conf->schema_registry.url, *host, *end;
    int idx = dd_conf_item_idx("schema_registry.url");

    if (strncasecmp(url, "http://", 7) == 0)
        host = url + 7;
    else if (strncasecmp(url, "https://", 8) == 0)
        host = url + 8;
    else
        return dd_conf_fail(ctx, idx, NULL, "expected an http:// or https:// URL");
    end = host + strcspn(host, "/?#");
    if (end == host) return dd_conf_fail(ctx, idx, NULL, "the URL has no host");
    if (memchr(host, '@', (size_t)(end - host)))
        return dd_conf_fail(ctx, idx, NULL,
                            "credentials in the URL would be logged: set schema_registry.user "
                            "and password_env or password_file instead");
    if (strpbrk(url, "?#"))
        return dd_conf_fail(ctx, idx, NULL, "the URL must not have a query or fragment");
    return 0;
}

/* At most one password source, only with a user; resolved into password. */
static int dd_conf_registry_password(dd_conf_ctx_t *ctx)
{
    dd_conf_registry_t *sr = &ctx->conf->schema_registry;
    int pw = dd_conf_item_idx("schema_registry.password");
    int env = dd_conf_item_idx("schema_registry.password_env");
    int file = dd_conf_item_idx("schema_registry.password_file");
    int set = dd_conf_is_explicit(ctx, pw) + dd_conf_is_explicit(ctx, env) +
              dd_conf_is_explicit(ctx, file);
    char msg[512], *resolved;
    mode_t mode = 0;
    int err;

    if (set > 1)
        return dd_conf_fail(ctx, file, NULL,
                            "at most one of schema_registry.password, password_env and "
                            "password_file may be set");
    if (set && !sr->user)
        return dd_conf_fail(ctx, dd_conf_item_idx("schema_registry.user"), NULL,
                            "a registry password needs schema_registry.user");
    if (sr->password_env) {
        const char *val = getenv(sr->password_env);
        if (!val)
            return dd_conf_fail(ctx, env, NULL, "environment variable %s is not set",
                                sr->password_env);
        dd_conf_free_str(&sr->password, 1);
        if (!(sr->password = strdup(val))) return dd_conf_nomem(ctx);
    } else if (sr->password_file) {
        if (!(resolved = dd_conf_resolve(ctx->conf, sr->password_file))) return dd_conf_nomem(ctx);
        free(sr->password_file);
        sr->password_file = resolved;
        dd_conf_free_str(&sr->password, 1);
        if ((err = dd_conf_read_secret(resolved, &sr->password, &mode, msg, sizeof(msg))))
            return err == DD_ERR_NOMEM ? dd_conf_nomem(ctx)
                                       : dd_conf_fail(ctx, file, NULL, "%s", msg);
        if ((mode & 077) && dd_conf_warn(ctx, file,
                                         "%s has mode %04o: users other than its owner can "
                                         "read or change it, and it holds the registry "
                                         "password; chmod 600 it",
                                         resolved, (unsigned)mode))
            return dd_conf_nomem(ctx);
    }
    return 0;
}

static int dd_conf_registry_path(dd_conf_ctx_t *ctx, char **path)
{
    char *resolved;

    if (!*path) return 0;
    if (!(resolved = dd_conf_resolve(ctx->conf, *path))) return dd_conf_nomem(ctx);
    free(*path);
    *path = resolved;
    return 0;
}

int dd_conf_check_registry(dd_conf_ctx_t *ctx, int idx)
{
    dd_conf_registry_t *sr = &ctx->conf->schema_registry;
    int err;

    (void)idx;
    if (!sr->url) return 0;
    if ((err = dd_conf_registry_url(ctx)) || (err = dd_conf_registry_password(ctx))) return err;
    if (sr->user && strncasecmp(sr->url, "http://", 7) == 0 && !sr->cleartext_auth)
        return dd_conf_fail(ctx, dd_conf_item_idx("schema_registry.user"), NULL,
                            "user and password would cross the network in clear text to an "
                            "http:// URL: use https://, or set schema_registry.cleartext_auth "
                            "= true to say the network is trusted");
    if (!sr->tls.cert != !sr->tls.key)
        return dd_conf_fail(ctx, dd_conf_item_idx("schema_registry.tls.cert"), NULL,
                            "schema_registry.tls.cert and tls.key go together");
    if ((err = dd_conf_registry_path(ctx, &sr->tls.ca)) ||
        (err = dd_conf_registry_path(ctx, &sr->tls.cert)) ||
        (err = dd_conf_registry_path(ctx, &sr->tls.key)))
        return err;
    return 0;
}
