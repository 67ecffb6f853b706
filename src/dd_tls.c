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

#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

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
