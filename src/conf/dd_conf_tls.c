/*
 * The mysql.tls settings: their names, and the rules between them, checked
 * when the configuration is loaded. How the modes become Connector/C
 * options is dd_tls's business, when dedupd connects.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "dd_common.h"
#include "dd_conf_int.h"

static const char *const dd_tls_modes[] = {
    [DD_TLS_DISABLED] = "disabled",
    [DD_TLS_PREFERRED] = "preferred",
    [DD_TLS_REQUIRED] = "required",
    [DD_TLS_VERIFY_CA] = "verify_ca",
    [DD_TLS_VERIFY_IDENTITY] = "verify_identity",
};

static const char *const dd_tls_versions[] = {
    [DD_TLS_V1_2] = "TLSv1.2",
    [DD_TLS_V1_3] = "TLSv1.3",
};

int dd_conf_tls_mode_parse(const char *name)
{
    for (int i = 0; i < (int)DD_ARRAY_LEN(dd_tls_modes); i++)
        if (strcasecmp(name, dd_tls_modes[i]) == 0) return i;
    return -1;
}

int dd_conf_tls_version_parse(const char *name)
{
    for (int i = 0; i < (int)DD_ARRAY_LEN(dd_tls_versions); i++)
        if (strcasecmp(name, dd_tls_versions[i]) == 0) return i;
    return -1;
}

const char *dd_conf_tls_mode_name(int mode)
{
    return mode >= 0 && mode < (int)DD_ARRAY_LEN(dd_tls_modes) ? dd_tls_modes[mode] : "?";
}

const char *dd_conf_tls_version_name(int version)
{
    return version >= 0 && version < (int)DD_ARRAY_LEN(dd_tls_versions) ? dd_tls_versions[version]
                                                                        : "?";
}

int dd_conf_tls_mode(const dd_conf_mysql_t *my)
{
    return my->socket ? DD_TLS_DISABLED : my->tls.mode;
}

const char *dd_conf_shard_name(const dd_conf_t *conf, int s, char *out, size_t out_size)
{
    char addr[300];

    dd_conf_mysql_addr(&conf->shards[s], addr, sizeof(addr));
    if (conf->shard_cnt > 1)
        snprintf(out, out_size, "shard %d (%s)", s, addr);
    else
        snprintf(out, out_size, "the database (%s)", addr);
    return out;
}

const char *dd_conf_mysql_addr(const dd_conf_mysql_t *my, char *out, size_t out_size)
{
    if (my->socket)
        snprintf(out, out_size, "%s", my->socket);
    else if (my->hosts && *my->hosts)
        snprintf(out, out_size, "%s", my->hosts);
    else
        snprintf(out, out_size, "%s:%d", my->host, my->port);
    return out;
}

/* The rules between the settings, on the final values with their paths
 * resolved. `any_explicit`: some mysql.tls setting was given, which over a
 * unix socket earns a warning. Returns 0, 1 (error) or 2 (warning); then
 * *setting names the setting msg is about. */
static int dd_conf_tls_fail(const char **setting, const char *which, char *msg, size_t msg_size,
                            const char *fmt, ...) __attribute__((format(printf, 5, 6)));

static int dd_conf_tls_fail(const char **setting, const char *which, char *msg, size_t msg_size,
                            const char *fmt, ...)
{
    va_list ap;

    *setting = which;
    va_start(ap, fmt);
    vsnprintf(msg, msg_size, fmt, ap);
    va_end(ap);
    return 1;
}

static int dd_conf_tls_rules(const dd_conf_mysql_t *my, int any_explicit, const char **setting,
                             char *msg, size_t msg_size)
{
    const char *mode = dd_conf_tls_mode_name(my->tls.mode);
    const struct {
        const char *setting, *path;
    } files[] = {{"mysql.tls.ca", my->tls.ca},
                 {"mysql.tls.cert", my->tls.cert},
                 {"mysql.tls.key", my->tls.key}};

    for (size_t i = 0; i < DD_ARRAY_LEN(files); i++) {
        if (!files[i].path) continue;
        if (my->tls.mode == DD_TLS_DISABLED)
            return dd_conf_tls_fail(setting, files[i].setting, msg, msg_size,
                                    "mysql.tls.mode is disabled, so it would not be used");
        if (access(files[i].path, R_OK) != 0)
            return dd_conf_tls_fail(setting, files[i].setting, msg, msg_size, "cannot read %s: %s",
                                    files[i].path, strerror(errno));
    }
    if (my->tls.cert && !my->tls.key)
        return dd_conf_tls_fail(setting, "mysql.tls.cert", msg, msg_size,
                                "needs mysql.tls.key, the certificate's private key");
    if (my->tls.key && !my->tls.cert)
        return dd_conf_tls_fail(setting, "mysql.tls.key", msg, msg_size,
                                "needs mysql.tls.cert, the certificate it belongs to");
    if (my->tls.mode >= DD_TLS_VERIFY_CA && !my->tls.ca)
        return dd_conf_tls_fail(setting, "mysql.tls.mode", msg, msg_size,
                                "%s needs mysql.tls.ca, the CA certificates the server's "
                                "certificate must be signed by (for a publicly trusted "
                                "certificate, the system's bundle, e.g. "
                                "/etc/ssl/certs/ca-certificates.crt)",
                                mode);
    if (my->tls.ca && my->tls.mode < DD_TLS_VERIFY_CA)
        return dd_conf_tls_fail(setting, "mysql.tls.ca", msg, msg_size,
                                "is only used by verify_ca and verify_identity: under "
                                "mysql.tls.mode %s the server's certificate is not checked; "
                                "set the mode to verify_identity (or verify_ca) to check it "
                                "against this CA",
                                mode);
    if (my->socket && any_explicit && my->tls.mode != DD_TLS_DISABLED) {
        *setting = "mysql.tls.mode";
        snprintf(msg, msg_size,
                 "dedupd connects through the unix socket %s (mysql.socket), which does not "
                 "leave this machine: TLS is not used and mysql.tls has no effect",
                 my->socket);
        return 2;
    }
    return 0;
}

/* mysql.tls: paths resolved like handler.path, then the rules between the
 * settings. The hook sits on min_version, the last of the group. */
int dd_conf_check_tls(dd_conf_ctx_t *ctx, int idx)
{
    dd_conf_mysql_t *my = dd_conf_cur_mysql(ctx);
    char **paths[] = {&my->tls.ca, &my->tls.cert, &my->tls.key};
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
    rc = dd_conf_tls_rules(my, explicit, &setting, msg, sizeof(msg));
    if (rc == 2)
        return dd_conf_warn(ctx, dd_conf_item_idx(setting), "%s", msg) ? dd_conf_nomem(ctx) : 0;
    if (rc) return dd_conf_fail(ctx, dd_conf_item_idx(setting), NULL, "%s", msg);
    return 0;
}
