/*
 * TLS to the database (see dd_tls.h).
 *
 * How the modes map onto MariaDB Connector/C 3.3:
 *  - every mode but disabled sets MYSQL_OPT_SSL_ENFORCE, which in 3.3 only
 *    asks for TLS: when the server offers none, Connector/C goes on in
 *    clear text unless it verifies the host name. So required and
 *    verify_ca check the session after connecting (dd_tls_check_session);
 *  - verify_ca gives the CA (MYSQL_OPT_SSL_CA) and leaves
 *    MYSQL_OPT_SSL_VERIFY_SERVER_CERT off: with a CA, Connector/C has
 *    OpenSSL verify the chain during the handshake (SSL_VERIFY_PEER), and
 *    only the verify flag adds the host name check (X509_check_host, then
 *    X509_check_ip_asc, against mysql.host). Test 33 holds this: verify_ca
 *    connects to a host name the certificate lacks, and refuses a
 *    certificate of another CA;
 *  - verify_identity sets the verify flag too, which also makes Connector/C
 *    refuse a server without TLS before logging in;
 *  - both flags are always set explicitly, so a Connector/C whose defaults
 *    differ (3.4 verifies by default) still does what the mode says.
 * Over a unix socket no TLS is used: the connection does not leave the
 * machine.
 */
#include "dd_tls.h"

#include <errno.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "dd_common.h"
#include "dd_log.h"

static const char *const dd_tls_modes[] = {
    [DD_TLS_DISABLED] = "disabled",
    [DD_TLS_PREFERRED] = "preferred",
    [DD_TLS_REQUIRED] = "required",
    [DD_TLS_VERIFY_CA] = "verify_ca",
    [DD_TLS_VERIFY_IDENTITY] = "verify_identity",
};

/* The protocol list Connector/C takes (MARIADB_OPT_TLS_VERSION): every
 * version from the minimum up. */
static const struct {
    const char *name, *allowed;
} dd_tls_versions[] = {
    [DD_TLS_V1_2] = {"TLSv1.2", "TLSv1.2,TLSv1.3"},
    [DD_TLS_V1_3] = {"TLSv1.3", "TLSv1.3"},
};

/* Set by the first session that logged its TLS state. */
static atomic_int dd_tls_logged;

int dd_tls_mode_parse(const char *name)
{
    for (int i = 0; i < (int)DD_ARRAY_LEN(dd_tls_modes); i++)
        if (strcasecmp(name, dd_tls_modes[i]) == 0) return i;
    return -1;
}

int dd_tls_version_parse(const char *name)
{
    for (int i = 0; i < (int)DD_ARRAY_LEN(dd_tls_versions); i++)
        if (strcasecmp(name, dd_tls_versions[i].name) == 0) return i;
    return -1;
}

const char *dd_tls_mode_name(int mode)
{
    return mode >= 0 && mode < (int)DD_ARRAY_LEN(dd_tls_modes) ? dd_tls_modes[mode] : "?";
}

const char *dd_tls_version_name(int version)
{
    return version >= 0 && version < (int)DD_ARRAY_LEN(dd_tls_versions)
               ? dd_tls_versions[version].name
               : "?";
}

int dd_tls_effective_mode(const dd_conf_t *conf)
{
    return conf->mysql.socket ? DD_TLS_DISABLED : conf->mysql.tls.mode;
}

/* ---- configuration ---- */

static int dd_tls_conf_fail(const char **setting, const char *which, char *msg, size_t msg_size,
                            const char *fmt, ...) __attribute__((format(printf, 5, 6)));

static int dd_tls_conf_fail(const char **setting, const char *which, char *msg, size_t msg_size,
                            const char *fmt, ...)
{
    va_list ap;

    *setting = which;
    va_start(ap, fmt);
    vsnprintf(msg, msg_size, fmt, ap);
    va_end(ap);
    return DD_TLS_CONF_ERROR;
}

int dd_tls_conf_check(const dd_conf_t *conf, int any_explicit, const char **setting, char *msg,
                      size_t msg_size)
{
    const char *mode = dd_tls_mode_name(conf->mysql.tls.mode);
    const struct {
        const char *setting, *path;
    } files[] = {{"mysql.tls.ca", conf->mysql.tls.ca},
                 {"mysql.tls.cert", conf->mysql.tls.cert},
                 {"mysql.tls.key", conf->mysql.tls.key}};

    for (size_t i = 0; i < DD_ARRAY_LEN(files); i++) {
        if (!files[i].path) continue;
        if (conf->mysql.tls.mode == DD_TLS_DISABLED)
            return dd_tls_conf_fail(setting, files[i].setting, msg, msg_size,
                                    "mysql.tls.mode is disabled, so it would not be used");
        if (access(files[i].path, R_OK) != 0)
            return dd_tls_conf_fail(setting, files[i].setting, msg, msg_size, "cannot read %s: %s",
                                    files[i].path, strerror(errno));
    }
    if (conf->mysql.tls.cert && !conf->mysql.tls.key)
        return dd_tls_conf_fail(setting, "mysql.tls.cert", msg, msg_size,
                                "needs mysql.tls.key, the certificate's private key");
    if (conf->mysql.tls.key && !conf->mysql.tls.cert)
        return dd_tls_conf_fail(setting, "mysql.tls.key", msg, msg_size,
                                "needs mysql.tls.cert, the certificate it belongs to");
    if (conf->mysql.tls.mode >= DD_TLS_VERIFY_CA && !conf->mysql.tls.ca)
        return dd_tls_conf_fail(setting, "mysql.tls.mode", msg, msg_size,
                                "%s needs mysql.tls.ca, the CA certificates the server's "
                                "certificate must be signed by (for a publicly trusted "
                                "certificate, the system's bundle, e.g. "
                                "/etc/ssl/certs/ca-certificates.crt)",
                                mode);
    if (conf->mysql.tls.ca && conf->mysql.tls.mode < DD_TLS_VERIFY_CA)
        return dd_tls_conf_fail(setting, "mysql.tls.ca", msg, msg_size,
                                "is only used by verify_ca and verify_identity: under "
                                "mysql.tls.mode %s the server's certificate is not checked; "
                                "set the mode to verify_identity (or verify_ca) to check it "
                                "against this CA",
                                mode);
    if (conf->mysql.socket && any_explicit && conf->mysql.tls.mode != DD_TLS_DISABLED) {
        *setting = "mysql.tls.mode";
        snprintf(msg, msg_size,
                 "dedupd connects through the unix socket %s (mysql.socket), which does not "
                 "leave this machine: TLS is not used and mysql.tls has no effect",
                 conf->mysql.socket);
        return DD_TLS_CONF_WARN;
    }
    return DD_TLS_CONF_OK;
}

/* ---- connecting ---- */

int dd_tls_set_options(MYSQL *mysql, const dd_conf_t *conf, char *errstr, size_t errstr_size)
{
    int mode = dd_tls_effective_mode(conf), bad = 0;
    my_bool use = mode != DD_TLS_DISABLED, verify = mode == DD_TLS_VERIFY_IDENTITY;

    bad |= mysql_optionsv(mysql, MYSQL_OPT_SSL_ENFORCE, &use);
    bad |= mysql_optionsv(mysql, MYSQL_OPT_SSL_VERIFY_SERVER_CERT, &verify);
    if (use) {
        /* The CA only in verify modes: with one, Connector/C checks the chain. */
        if (mode >= DD_TLS_VERIFY_CA)
            bad |= mysql_optionsv(mysql, MYSQL_OPT_SSL_CA, conf->mysql.tls.ca);
        if (conf->mysql.tls.cert) {
            bad |= mysql_optionsv(mysql, MYSQL_OPT_SSL_CERT, conf->mysql.tls.cert);
            bad |= mysql_optionsv(mysql, MYSQL_OPT_SSL_KEY, conf->mysql.tls.key);
        }
        bad |= mysql_optionsv(mysql, MARIADB_OPT_TLS_VERSION,
                              dd_tls_versions[conf->mysql.tls.min_version].allowed);
    }
    if (bad) {
        dd_errstr_set(errstr, errstr_size, "setting the TLS options: out of memory");
        return DD_ERR_NOMEM;
    }
    return DD_OK;
}

/* The server's view of the session: SHOW SESSION STATUS. Empty strings
 * when the session has no TLS or the statement fails. */
static void dd_tls_server_view(MYSQL *mysql, char *version, size_t version_size, char *cipher,
                               size_t cipher_size)
{
    static const char sql[] =
        "SHOW SESSION STATUS WHERE Variable_name IN ('Ssl_version', 'Ssl_cipher')";
    MYSQL_RES *res;
    MYSQL_ROW row;

    version[0] = cipher[0] = '\0';
    if (mysql_real_query(mysql, sql, sizeof(sql) - 1) != 0 || !(res = mysql_store_result(mysql)))
        return;
    while ((row = mysql_fetch_row(res))) {
        if (!row[0] || !row[1]) continue;
        if (strcmp(row[0], "Ssl_version") == 0) snprintf(version, version_size, "%s", row[1]);
        if (strcmp(row[0], "Ssl_cipher") == 0) snprintf(cipher, cipher_size, "%s", row[1]);
    }
    mysql_free_result(res);
}

void dd_tls_describe(MYSQL *mysql, char *out, size_t out_size)
{
    char version[32], cipher[128];

    dd_tls_server_view(mysql, version, sizeof(version), cipher, sizeof(cipher));
    if (!cipher[0])
        snprintf(out, out_size, "no TLS");
    else
        snprintf(out, out_size, "%s, cipher %s", version[0] ? version : "TLS", cipher);
}

int dd_tls_check_session(MYSQL *mysql, const dd_conf_t *conf, char *errstr, size_t errstr_size)
{
    int mode = dd_tls_effective_mode(conf), expected = 0;
    const char *cipher = mysql_get_ssl_cipher(mysql);
    char what[200];

    if (mode == DD_TLS_DISABLED) return DD_OK;
    if (!cipher && mode >= DD_TLS_REQUIRED) {
        dd_errstr_set(errstr, errstr_size,
                      "the server at %s:%d offers no TLS, and mysql.tls.mode is %s: dedupd "
                      "closed the session at once; enable TLS on the server "
                      "(ssl_cert, ssl_key), or set mysql.tls.mode to preferred or disabled "
                      "for a server reached only over a network you trust",
                      conf->mysql.host, conf->mysql.port, dd_tls_mode_name(mode));
        return DD_ERR_FATAL;
    }
    if (!atomic_compare_exchange_strong(&dd_tls_logged, &expected, 1)) return DD_OK;
    if (!cipher) {
        dd_log(DD_LOG_WARN,
               "The database session to %s:%d is not encrypted: the server offers no TLS "
               "(mysql.tls.mode is preferred).",
               conf->mysql.host, conf->mysql.port);
        return DD_OK;
    }
    dd_tls_describe(mysql, what, sizeof(what));
    dd_log(DD_LOG_INFO, "Database sessions to %s:%d use TLS: %s (mysql.tls.mode %s).",
           conf->mysql.host, conf->mysql.port, what, dd_tls_mode_name(mode));
    return DD_OK;
}

const char *dd_tls_explain(const dd_conf_t *conf, unsigned int err, const char *msg, char *out,
                           size_t out_size)
{
    int mode = dd_tls_effective_mode(conf);

    if (mode == DD_TLS_DISABLED || err != 2026 || !msg) return NULL;
    if (strstr(msg, "server does not support it"))
        snprintf(out, out_size,
                 "the server offers no TLS, and mysql.tls.mode is %s; enable TLS on the server "
                 "(ssl_cert, ssl_key), or set mysql.tls.mode to preferred or disabled for a "
                 "server reached only over a network you trust",
                 dd_tls_mode_name(mode));
    else if (strstr(msg, "Validation of SSL server certificate failed"))
        snprintf(out, out_size,
                 "the server's TLS certificate does not name the host %s, which "
                 "mysql.tls.mode verify_identity requires; set mysql.host to a name the "
                 "certificate has",
                 conf->mysql.host);
    else if (strstr(msg, "protocol"))
        snprintf(out, out_size,
                 "the server and dedupd have no TLS version in common at or above "
                 "mysql.tls.min_version (%s)",
                 dd_tls_version_name(conf->mysql.tls.min_version));
    else if (mode >= DD_TLS_VERIFY_CA && strstr(msg, "certificate"))
        snprintf(out, out_size,
                 "the server's TLS certificate could not be verified with the CA certificates "
                 "in mysql.tls.ca (%s): it is signed by another CA, or is expired or not yet "
                 "valid",
                 conf->mysql.tls.ca);
    else
        snprintf(out, out_size, "TLS failed (mysql.tls.mode %s)", dd_tls_mode_name(mode));
    return out;
}
