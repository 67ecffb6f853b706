/*
 * TLS to the database: how each mysql.tls mode (the names of MySQL's
 * --ssl-mode; the settings and their rules are dd_conf's) maps onto MariaDB
 * Connector/C options, and what is checked after connecting, where
 * Connector/C alone would let a session go on in clear text. Every
 * connection dedupd opens goes through dd_db, which calls
 * dd_tls_set_options() before connecting and dd_tls_check_session() after.
 */
#ifndef DD_TLS_H
#define DD_TLS_H

#include <stddef.h>

#include <mysql.h>

#include "dd_conf.h"

/* Sets the Connector/C options of the mode on a handle from mysql_init(),
 * before mysql_real_connect(). Returns 0 or DD_ERR_NOMEM. */
int dd_tls_set_options(MYSQL *mysql, const dd_conf_mysql_t *my, char *errstr, size_t errstr_size);

/* After mysql_real_connect(): under required and stronger a session
 * without TLS is DD_ERR_FATAL (Connector/C falls back to clear text when
 * the server offers no TLS, unless it checks the host name). The first
 * session of the process logs its TLS version and cipher as the server
 * sees them (SHOW SESSION STATUS), or that it has none. */
int dd_tls_check_session(MYSQL *mysql, const dd_conf_mysql_t *my, char *errstr, size_t errstr_size);

/* "TLSv1.3, cipher TLS_AES_256_GCM_SHA384" as the server reports the
 * session (Ssl_version, Ssl_cipher), or "no TLS". */
void dd_tls_describe(MYSQL *mysql, char *out, size_t out_size);

/* What a failed connect means for TLS, in a sentence ("the server's TLS
 * certificate does not name the host 10.0.0.5, which verify_identity
 * requires: ..."), from the Connector/C error; NULL when the error is not
 * about TLS. Written to out. */
const char *dd_tls_explain(const dd_conf_mysql_t *my, unsigned int err, const char *msg, char *out,
                           size_t out_size);

#endif /* DD_TLS_H */
