/*
 * TLS to the database (see dd_tls.h).
 *
 * How the modes map onto MariaDB Connector/C 3.3:
 *  - every mode but disabled sets MYSQL_OPT_SSL_ENFORCE, which in 3.3 only
 *    asks for TLS: when the server offers none, Connector/C goes on in
 *    clear text unless it verifies the host name;
 *  - so no secret may leave before dedupd has seen the session: every mode
 *    but disabled logs in through a guard, a client authentication plugin
 *    of dedupd's own (MYSQL_DEFAULT_AUTH). The guard's first packet carries
 *    the user name and no password: Connector/C starts TLS for it when the
 *    server offers TLS. Then the guard looks at the session. Under required
 *    and stronger a session without TLS ends there; under preferred it ends
 *    when the server asks, without TLS, for a plugin that would send the
 *    password itself (clear text, PAM's dialog, or RSA with a key the
 *    server hands over). Otherwise the server, which knows no such plugin,
 *    names the user's real one, and Connector/C goes on with it;
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

#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include <errmsg.h>
#include <mysql/plugin_auth.h>

#include "dd_common.h"
#include "dd_log.h"

/* The protocol list Connector/C takes (MARIADB_OPT_TLS_VERSION): every
 * version from the minimum up. */
static const char *const dd_tls_allowed[] = {
    [DD_TLS_V1_2] = "TLSv1.2,TLSv1.3",
    [DD_TLS_V1_3] = "TLSv1.3",
};

/* Set by the first session that logged its TLS state. */
static atomic_int dd_tls_logged;

/* ---- the guard: nothing secret before the session is seen ---- */

/* Plugins that hand the password itself to whoever answers. */
static const char *const dd_tls_password_plugins[] = {
    "mysql_clear_password",
    "dialog",
    "sha256_password",
    "caching_sha2_password",
};

/* Ends the login: the error, and the packet read no longer a switch (with
 * one, Connector/C would take CR_ERROR for "switch plugins"). */
static int dd_tls_guard_refuse(MYSQL *mysql, const char *why)
{
    mysql->net.read_pos[0] = 0;
    mysql->net.last_errno = CR_SSL_CONNECTION_ERROR;
    snprintf(mysql->net.sqlstate, sizeof(mysql->net.sqlstate), "HY000");
    snprintf(mysql->net.last_error, sizeof(mysql->net.last_error),
             "SSL connection error: %s (dedupd sent no password)", why);
    return CR_ERROR;
}

static int dd_tls_password_plugin(const char *name)
{
    for (size_t i = 0; i < DD_ARRAY_LEN(dd_tls_password_plugins); i++)
        if (strcmp(name, dd_tls_password_plugins[i]) == 0) return 1;
    return 0;
}

/* One login's guard. Reading first makes Connector/C send the first packet
 * (the user name, no password; over TLS when the server offers it); the
 * answer must be a switch to the user's plugin, which Connector/C makes
 * when the guard returns CR_ERROR with it read. need_tls: required and
 * stronger. */
static int dd_tls_guard(MYSQL_PLUGIN_VIO *vio, MYSQL *mysql, int need_tls)
{
    unsigned char *pkt;
    int len = vio->read_packet(vio, &pkt), switched, encrypted;

    switched = len < 0 && mysql->net.read_pos[0] == 254;
    if (len < 0 && !switched) return CR_ERROR; /* TLS's or the server's error, already set */
    encrypted = mysql_get_ssl_cipher(mysql) != NULL;
    if (!encrypted && need_tls)
        return dd_tls_guard_refuse(mysql, "SSL is required, but the server does not support it");
    if (!switched) return dd_tls_guard_refuse(mysql, "the server answered the login unasked");
    if (!encrypted && dd_tls_password_plugin((const char *)mysql->net.read_pos + 1))
        return dd_tls_guard_refuse(mysql, "the server offers no TLS and asks for the password "
                                          "itself (mysql.tls.mode is preferred)");
    return CR_ERROR;
}

static int dd_tls_guard_required(MYSQL_PLUGIN_VIO *vio, MYSQL *mysql)
{
    return dd_tls_guard(vio, mysql, 1);
}

static int dd_tls_guard_preferred(MYSQL_PLUGIN_VIO *vio, MYSQL *mysql)
{
    return dd_tls_guard(vio, mysql, 0);
}

/* An authentication plugin as mysql/client_plugin.h declares it (that
 * header needs headers libmariadb-dev does not install): the common plugin
 * header, then the login function. */
struct dd_tls_plugin {
    int type;
    unsigned int interface_version;
    const char *name, *author, *desc;
    unsigned int version[3];
    const char *license;
    void *mysql_api;
    int (*init)(char *, size_t, int, va_list);
    int (*deinit)(void);
    int (*options)(const char *option, const void *);
    int (*authenticate_user)(MYSQL_PLUGIN_VIO *vio, MYSQL *mysql);
};

#define DD_TLS_AUTH_PLUGIN 2         /* MYSQL_CLIENT_AUTHENTICATION_PLUGIN */
#define DD_TLS_AUTH_INTERFACE 0x0100 /* ..._PLUGIN_INTERFACE_VERSION */

#define DD_TLS_GUARD(NAME, FN)                                                                     \
    {                                                                                              \
        DD_TLS_AUTH_PLUGIN, DD_TLS_AUTH_INTERFACE, NAME, "dedupd",                                 \
            "no password before the session is seen", {1, 0, 0}, "MIT", NULL, NULL, NULL, NULL, FN \
    }

static struct dd_tls_plugin dd_tls_guards[] = {
    DD_TLS_GUARD("dedupd_tls_required", dd_tls_guard_required),
    DD_TLS_GUARD("dedupd_tls_preferred", dd_tls_guard_preferred),
};

static pthread_once_t dd_tls_guards_once = PTHREAD_ONCE_INIT;
static atomic_int dd_tls_guards_ok;

static void dd_tls_guards_register(void)
{
    MYSQL *mysql = mysql_init(NULL);
    int ok = mysql != NULL;

    for (size_t i = 0; ok && i < DD_ARRAY_LEN(dd_tls_guards); i++)
        ok = mysql_client_register_plugin(
                 mysql, (struct st_mysql_client_plugin *)&dd_tls_guards[i]) != NULL;
    if (mysql) mysql_close(mysql);
    atomic_store(&dd_tls_guards_ok, ok);
}

/* Logs in through the guard of the mode. */
static int dd_tls_set_guard(MYSQL *mysql, int mode)
{
    pthread_once(&dd_tls_guards_once, dd_tls_guards_register);
    if (!atomic_load(&dd_tls_guards_ok)) return 1;
    return mysql_optionsv(mysql, MYSQL_DEFAULT_AUTH, dd_tls_guards[mode == DD_TLS_PREFERRED].name);
}

/* ---- connecting ---- */

int dd_tls_set_options(MYSQL *mysql, const dd_conf_mysql_t *my, char *errstr, size_t errstr_size)
{
    int mode = dd_conf_tls_mode(my), bad = 0;
    my_bool use = mode != DD_TLS_DISABLED, verify = mode == DD_TLS_VERIFY_IDENTITY;

    bad |= mysql_optionsv(mysql, MYSQL_OPT_SSL_ENFORCE, &use);
    bad |= mysql_optionsv(mysql, MYSQL_OPT_SSL_VERIFY_SERVER_CERT, &verify);
    if (use) {
        /* The CA only in verify modes: with one, Connector/C checks the chain. */
        if (mode >= DD_TLS_VERIFY_CA) bad |= mysql_optionsv(mysql, MYSQL_OPT_SSL_CA, my->tls.ca);
        if (my->tls.cert) {
            bad |= mysql_optionsv(mysql, MYSQL_OPT_SSL_CERT, my->tls.cert);
            bad |= mysql_optionsv(mysql, MYSQL_OPT_SSL_KEY, my->tls.key);
        }
        bad |= mysql_optionsv(mysql, MARIADB_OPT_TLS_VERSION, dd_tls_allowed[my->tls.min_version]);
        bad |= dd_tls_set_guard(mysql, mode);
    }
    if (bad) {
        dd_errstr_set(errstr, errstr_size,
                      "setting the TLS options (or registering the login guard) failed: out "
                      "of memory");
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

int dd_tls_check_session(MYSQL *mysql, const dd_conf_mysql_t *my, char *errstr, size_t errstr_size)
{
    int mode = dd_conf_tls_mode(my), expected = 0;
    const char *cipher = mysql_get_ssl_cipher(mysql);
    char what[200];

    if (mode == DD_TLS_DISABLED) return DD_OK;
    if (!cipher && mode >= DD_TLS_REQUIRED) {
        dd_errstr_set(errstr, errstr_size,
                      "the server at %s:%d offers no TLS, and mysql.tls.mode is %s: dedupd "
                      "closed the session at once; enable TLS on the server "
                      "(ssl_cert, ssl_key), or set mysql.tls.mode to preferred or disabled "
                      "for a server reached only over a network you trust",
                      my->host, my->port, dd_conf_tls_mode_name(mode));
        return DD_ERR_FATAL;
    }
    if (!atomic_compare_exchange_strong(&dd_tls_logged, &expected, 1)) return DD_OK;
    if (!cipher) {
        dd_log(DD_LOG_WARN,
               "The database session to %s:%d is not encrypted: the server offers no TLS "
               "(mysql.tls.mode is preferred).",
               my->host, my->port);
        return DD_OK;
    }
    dd_tls_describe(mysql, what, sizeof(what));
    dd_log(DD_LOG_INFO, "Database sessions to %s:%d use TLS: %s (mysql.tls.mode %s).", my->host,
           my->port, what, dd_conf_tls_mode_name(mode));
    return DD_OK;
}

const char *dd_tls_explain(const dd_conf_mysql_t *my, unsigned int err, const char *msg, char *out,
                           size_t out_size)
{
    int mode = dd_conf_tls_mode(my);

    if (mode == DD_TLS_DISABLED || err != 2026 || !msg) return NULL;
    if (strstr(msg, "server does not support it"))
        snprintf(out, out_size,
                 "the server offers no TLS, and mysql.tls.mode is %s; enable TLS on the server "
                 "(ssl_cert, ssl_key), or set mysql.tls.mode to preferred or disabled for a "
                 "server reached only over a network you trust",
                 dd_conf_tls_mode_name(mode));
    else if (strstr(msg, "asks for the password itself"))
        snprintf(out, out_size,
                 "the server offers no TLS and asks for the password in clear text (or "
                 "encrypted with a key it sends), which mysql.tls.mode preferred never "
                 "sends unencrypted; enable TLS on the server, or set mysql.tls.mode to "
                 "disabled for a server reached only over a network you trust");
    else if (strstr(msg, "Validation of SSL server certificate failed"))
        snprintf(out, out_size,
                 "the server's TLS certificate does not name the host %s, which "
                 "mysql.tls.mode verify_identity requires; set mysql.host to a name the "
                 "certificate has",
                 my->host);
    else if (strstr(msg, "protocol"))
        snprintf(out, out_size,
                 "the server and dedupd have no TLS version in common at or above "
                 "mysql.tls.min_version (%s)",
                 dd_conf_tls_version_name(my->tls.min_version));
    else if (mode >= DD_TLS_VERIFY_CA && strstr(msg, "certificate"))
        snprintf(out, out_size,
                 "the server's TLS certificate could not be verified with the CA certificates "
                 "in mysql.tls.ca (%s): it is signed by another CA, or is expired or not yet "
                 "valid",
                 my->tls.ca);
    else
        snprintf(out, out_size, "TLS failed (mysql.tls.mode %s)", dd_conf_tls_mode_name(mode));
    return out;
}
