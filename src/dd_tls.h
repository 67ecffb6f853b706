/*
 * TLS to the database: the mysql.tls modes (the names of MySQL's
 * --ssl-mode), how each maps onto MariaDB Connector/C options, and what is
 * checked after connecting, where Connector/C alone would let a session go
 * on in clear text. Every connection dedupd opens goes through dd_db, which
 * calls dd_tls_set_options() before connecting and dd_tls_check_session()
 * after.
 */
#ifndef DD_TLS_H
#define DD_TLS_H

#include <stddef.h>

#include <mysql.h>

#include "dd_conf.h"

/* Weakest to strongest: a mode includes what the ones before it do. */
typedef enum {
    DD_TLS_DISABLED,
    DD_TLS_PREFERRED,
    DD_TLS_REQUIRED,
    DD_TLS_VERIFY_CA,
    DD_TLS_VERIFY_IDENTITY,
} dd_tls_mode_t;

typedef enum { DD_TLS_V1_2, DD_TLS_V1_3 } dd_tls_version_t;

/* Names as in the configuration ("verify_ca", "TLSv1.3"); -1 if unknown.
 * Case does not matter, as for MySQL's --ssl-mode. */
int dd_tls_mode_parse(const char *name);
int dd_tls_version_parse(const char *name);
const char *dd_tls_mode_name(int mode);
const char *dd_tls_version_name(int version);

/* Results of dd_tls_conf_check(). */
#define DD_TLS_CONF_OK 0
#define DD_TLS_CONF_ERROR 1
#define DD_TLS_CONF_WARN 2

/* The rules between the mysql.tls settings, on the final values with their
 * paths resolved: a certificate needs its key and the reverse, verify modes
 * need a CA, a CA is refused where it would not be used, files must be
 * readable. `any_explicit`: some mysql.tls setting was given (not only
 * defaults), which over a unix socket earns a warning. Returns a
 * DD_TLS_CONF_* result; on other than OK, *setting names the setting the
 * message in msg is about ("mysql.tls.cert"). */
int dd_tls_conf_check(const dd_conf_t *conf, int any_explicit, const char **setting, char *msg,
                      size_t msg_size);

/* The mode the connections use: conf's, or DD_TLS_DISABLED over a socket. */
int dd_tls_effective_mode(const dd_conf_t *conf);

/* Sets the Connector/C options of the mode on a handle from mysql_init(),
 * before mysql_real_connect(). Returns 0 or DD_ERR_NOMEM. */
int dd_tls_set_options(MYSQL *mysql, const dd_conf_t *conf, char *errstr, size_t errstr_size);

/* After mysql_real_connect(): under required and stronger a session
 * without TLS is DD_ERR_FATAL (Connector/C falls back to clear text when
 * the server offers no TLS, unless it checks the host name). The first
 * session of the process logs its TLS version and cipher as the server
 * sees them (SHOW SESSION STATUS), or that it has none. */
int dd_tls_check_session(MYSQL *mysql, const dd_conf_t *conf, char *errstr, size_t errstr_size);

/* "TLSv1.3, cipher TLS_AES_256_GCM_SHA384" as the server reports the
 * session (Ssl_version, Ssl_cipher), or "no TLS". */
void dd_tls_describe(MYSQL *mysql, char *out, size_t out_size);

/* What a failed connect means for TLS, in a sentence ("the server's TLS
 * certificate does not name the host 10.0.0.5, which verify_identity
 * requires: ..."), from the Connector/C error; NULL when the error is not
 * about TLS. Written to out. */
const char *dd_tls_explain(const dd_conf_t *conf, unsigned int err, const char *msg, char *out,
                           size_t out_size);

#endif /* DD_TLS_H */
