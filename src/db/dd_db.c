/*
 * Connection handling and error classification. The one place that knows
 * MySQL error numbers: everything above works with dd_err_t classes.
 */
#include "dd_db.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include <errmsg.h>
#include <mysqld_error.h>

#include "dd_common.h"
#include "dd_db_hosts.h"
#include "dd_log.h"
#include "dd_text.h"
#include "dd_tls.h"

struct dd_db_s {
    MYSQL *mysql;
    const dd_conf_t *conf;
    const dd_conf_mysql_t *my; /* the shard's settings */
    int shard;
    int read_timeout_s;    /* the settings' or dd_db_new_shard_timeout's */
    pthread_mutex_t fd_mu; /* fd and aborted: dd_db_abort comes from another thread */
    int fd;                /* the connection's socket, -1 when there is none */
    int aborted;           /* dd_db_abort: no connection from now on */
    int returning;         /* the server has INSERT ... RETURNING */
    int bulk;              /* the server takes arrays of parameters (COM_STMT_BULK_EXECUTE) */
    size_t max_packet;     /* the server's max_allowed_packet */
    size_t need_stmt;      /* dd_db_require_statement(): 0 or the bytes required */
    char need_what[160];   /* and what requires them */
    MYSQL_STMT *stmts[DD_STMT_SLOTS];  /* prepared on this connection, or NULL */
    int node;                          /* mysql.hosts: the node connected to last */
    int cluster;                       /* a Galera node: it counts its aborts */
    unsigned long long cluster_aborts; /* wsrep_local_bf_aborts when last read */
};

int dd_db_classify(unsigned int err)
{
    switch (err) {
    case 0:
        return DD_OK;
    case 1205: /* lock wait timeout: only the statement was rolled back */
    case 1213: /* deadlock */
    case 1040: /* too many connections */
    case 1053: /* server shutdown in progress */
    case 1927: /* connection killed */
    case 4031: /* disconnected by the server (idle timeout) */
    case 1047: /* Galera: the node is not ready (joining, or not in the primary component) */
    case 1180: /* error during COMMIT (a Galera node leaving the primary component):
                * the transaction is rolled back, and should it have committed after
                * all, the replayed batch finds its claims and applies nothing twice */
    case 3101: /* MySQL group replication: a certification failure at COMMIT */
    case 9007: /* TiDB, optimistic transactions: a write conflict at COMMIT */
    case 1290: /* read-only (fail-over in progress) */
    case 1836: /* read-only mode */
    case 1152: /* aborted connection */
    case 1158:
    case 1159:
    case 1160:
    case 1161:
    case 2002: /* can't connect through socket */
    case 2003: /* can't connect to server */
    case 2006: /* server has gone away */
    case 2013: /* lost connection during query */
    case 2026: /* TLS error */
    case 2055: /* lost connection at reading */
    case 5014: /* Connector/C: connection error (MariaDB) */
        return DD_ERR_RETRIABLE;
    default:
        /* Access denied, unknown table or column, syntax: nothing a retry fixes. */
        return DD_ERR_FATAL;
    }
}

/* INSERT ... RETURNING exists in MariaDB from 10.5 on, not in MySQL.
 * DEDUPD_TEST_FAULTS=no_returning makes dedupd act as on a server without
 * it, so the tests cover that path too. */
static int dd_db_server_has_returning(MYSQL *mysql)
{
    const char *info = mysql_get_server_info(mysql);

    if (dd_test_fault("no_returning")) {
        dd_log(DD_LOG_WARN, "DEDUPD_TEST_FAULTS: acting as if the server had no "
                            "INSERT ... RETURNING (test fault injection).");
        return 0;
    }
    return info && strstr(info, "MariaDB") && mysql_get_server_version(mysql) >= 100500;
}

/* Array binding (one execution for many rows, no SQL text to parse per
 * row) exists in MariaDB from 10.2 on. DEDUPD_TEST_FAULTS=no_bulk makes
 * dedupd act as on a server without it. */
static int dd_db_server_has_bulk(MYSQL *mysql)
{
    unsigned long caps = 0;

    if (dd_test_fault("no_bulk")) {
        dd_log(DD_LOG_WARN, "DEDUPD_TEST_FAULTS: acting as if the server had no bulk "
                            "execution (test fault injection).");
        return 0;
    }
    if (mariadb_get_infov(mysql, MARIADB_CONNECTION_EXTENDED_SERVER_CAPABILITIES, &caps) != 0)
        return 0;
    return (caps & (MARIADB_CLIENT_STMT_BULK_OPERATIONS >> 32)) != 0;
}

/* Room for the protocol around a statement: the packet header, the
 * command byte and, for a bulk execution, the statement id, flags and
 * parameter types. */
#define DD_DB_PACKET_MARGIN 4096

/* Reads the server's max_allowed_packet: the session copy, taken at
 * connect, is what limits this connection. */
static int dd_db_read_max_packet(dd_db_t *db, char *errstr, size_t errstr_size)
{
    MYSQL_RES *res = NULL;
    MYSQL_ROW row;
    unsigned int err;

    if (mysql_real_query(db->mysql, "SELECT @@max_allowed_packet", 27) != 0 ||
        !(res = mysql_store_result(db->mysql)) || !(row = mysql_fetch_row(res)) || !row[0]) {
        err = mysql_errno(db->mysql);
        dd_errstr_set(errstr, errstr_size, "reading max_allowed_packet: %u: %s", err,
                      mysql_error(db->mysql));
        mysql_free_result(res);
        return err ? dd_db_classify(err) : DD_ERR_RETRIABLE;
    }
    db->max_packet = (size_t)strtoull(row[0], NULL, 10);
    mysql_free_result(res);
    return DD_OK;
}

/* The check of dd_db_require_statement() on the current connection. */
static int dd_db_check_statement(const dd_db_t *db, char *errstr, size_t errstr_size)
{
    if (!db->need_stmt || dd_db_max_statement(db) >= db->need_stmt) return DD_OK;
    dd_errstr_set(errstr, errstr_size,
                  "%s needs statements of up to %zu bytes, but the server's "
                  "max_allowed_packet is %zu: raise max_allowed_packet to at least %zu or "
                  "lower the setting",
                  db->need_what, db->need_stmt, db->max_packet,
                  db->need_stmt + DD_DB_PACKET_MARGIN);
    return DD_ERR_FATAL;
}

/* The read and write timeouts; a lock wait must end before the read
 * timeout does, or the server would go on waiting (holding the batch's
 * locks) for a session dedupd has given up on. */
static void dd_db_set_timeouts(dd_db_t *db)
{
    unsigned int rd = (unsigned int)(db->read_timeout_s > 0 ? db->read_timeout_s : 0);
    unsigned int wr = (unsigned int)(db->my->write_timeout_s > 0 ? db->my->write_timeout_s : 20);
    char sql[160];

    if (rd) mysql_options(db->mysql, MYSQL_OPT_READ_TIMEOUT, &rd);
    mysql_options(db->mysql, MYSQL_OPT_WRITE_TIMEOUT, &wr);
    if (!rd) return;
    snprintf(sql, sizeof(sql),
             "SET SESSION innodb_lock_wait_timeout = LEAST(@@SESSION.innodb_lock_wait_timeout, %u)",
             rd > 6 ? rd - 5 : 1);
    mysql_options(db->mysql, MYSQL_INIT_COMMAND, sql);
}

static int dd_db_aborted(dd_db_t *db)
{
    int aborted;

    pthread_mutex_lock(&db->fd_mu);
    aborted = db->aborted;
    pthread_mutex_unlock(&db->fd_mu);
    return aborted;
}

/* Connects to the server my names (db->my, or one node of its mysql.hosts). */
static int dd_db_connect_one(dd_db_t *db, const dd_conf_mysql_t *my, char *errstr,
                             size_t errstr_size)
{
    unsigned int timeout = (unsigned int)(my->connect_timeout_s > 0 ? my->connect_timeout_s : 5);
    my_bool off = 0;
    unsigned int err;
    char why[400], where[300], which[340] = "";
    const char *tls;
    int rc;

    if (dd_db_aborted(db)) {
        dd_errstr_set(errstr, errstr_size, "2013: the connection was cut (dedupd is stopping)");
        return DD_ERR_RETRIABLE;
    }
    db->mysql = mysql_init(NULL);
    if (!db->mysql) {
        dd_errstr_set(errstr, errstr_size, "mysql_init failed: out of memory");
        return DD_ERR_NOMEM;
    }
    mysql_options(db->mysql, MYSQL_OPT_RECONNECT, &off);
    mysql_options(db->mysql, MYSQL_OPT_CONNECT_TIMEOUT, &timeout);
    dd_db_set_timeouts(db);
    mysql_options(db->mysql, MYSQL_SET_CHARSET_NAME, "utf8mb4");
    /* Works on MariaDB and MySQL alike (the variable names differ). */
    mysql_options(db->mysql, MYSQL_INIT_COMMAND,
                  "SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED");
    mysql_options(db->mysql, MYSQL_INIT_COMMAND, "SET autocommit = 1");
    if ((rc = dd_tls_set_options(db->mysql, my, errstr, errstr_size))) {
        mysql_close(db->mysql);
        db->mysql = NULL;
        return rc;
    }

    if (!mysql_real_connect(db->mysql, my->socket ? NULL : my->host, my->user,
                            my->password ? my->password : "", my->database, (unsigned int)my->port,
                            my->socket, CLIENT_MULTI_STATEMENTS)) {
        err = mysql_errno(db->mysql);
        tls = dd_tls_explain(my, err, mysql_error(db->mysql), why, sizeof(why));
        dd_conf_mysql_addr(my, where, sizeof(where));
        if (db->conf->shard_cnt > 1)
            snprintf(which, sizeof(which), "shard %d (%s): ", db->shard, where);
        dd_errstr_set(errstr, errstr_size,
                      "%scannot connect to MySQL at %s (database %s): %s%s%u: %s", which, where,
                      my->database, tls ? tls : "", tls ? ": " : "", err, mysql_error(db->mysql));
        mysql_close(db->mysql);
        db->mysql = NULL;
        return err == 1045 || err == 1044 || err == 1049 ? DD_ERR_FATAL : DD_ERR_RETRIABLE;
    }
    db->returning = dd_db_server_has_returning(db->mysql);
    db->bulk = dd_db_server_has_bulk(db->mysql);
    rc = dd_tls_check_session(db->mysql, my, errstr, errstr_size);
    if (!rc) rc = dd_db_read_max_packet(db, errstr, errstr_size);
    if (!rc) rc = dd_db_check_statement(db, errstr, errstr_size);
    if (!rc) dd_db_cluster_aborted(db);
    if (rc) {
        mysql_close(db->mysql);
        db->mysql = NULL;
        return rc;
    }
    pthread_mutex_lock(&db->fd_mu);
    db->fd = (int)mysql_get_socket(db->mysql);
    if (db->aborted) shutdown(db->fd, SHUT_RDWR);
    pthread_mutex_unlock(&db->fd_mu);
    return DD_OK;
}

int dd_db_cluster_aborted(dd_db_t *db)
{
    MYSQL_RES *res = NULL;
    MYSQL_ROW row;
    unsigned long long n;
    int grew = 0;

    if (!db->mysql ||
        mysql_query(db->mysql, "SHOW GLOBAL STATUS LIKE 'wsrep_local_bf_aborts'") != 0 ||
        !(res = mysql_store_result(db->mysql)) || !(row = mysql_fetch_row(res)) || !row[1]) {
        mysql_free_result(res);
        return 0; /* not a Galera node, or it cannot tell */
    }
    n = strtoull(row[1], NULL, 10);
    grew = db->cluster && n > db->cluster_aborts;
    db->cluster = 1;
    db->cluster_aborts = n;
    mysql_free_result(res);
    return grew;
}

/* With mysql.hosts, each node in turn from the one last connected to,
 * until one answers; without, the one server. */
static int dd_db_connect(dd_db_t *db, char *errstr, size_t errstr_size)
{
    int n = db->my->socket ? 0 : dd_db_hosts_count(db->my->hosts), rc = DD_ERR_RETRIABLE;
    dd_conf_mysql_t node;
    char host[256];

    if (n <= 0) return dd_db_connect_one(db, db->my, errstr, errstr_size);
    for (int k = 0; k < n && rc == DD_ERR_RETRIABLE; k++) {
        int i = (db->node + k) % n;
        node = *db->my;
        if ((rc = dd_db_hosts_get(db->my->hosts, i, host, sizeof(host), &node.port, errstr,
                                  errstr_size)))
            return rc;
        node.host = host;
        node.hosts = NULL; /* messages name the node */
        rc = dd_db_connect_one(db, &node, errstr, errstr_size);
        if (rc == DD_ERR_RETRIABLE) dd_log(DD_LOG_INFO, "Node %s:%d: %s", host, node.port, errstr);
        if (!rc && i != db->node)
            dd_log(DD_LOG_INFO, "Connected to node %s:%d of mysql.hosts.", host, node.port);
        if (!rc) db->node = i;
    }
    return rc;
}

/* Prepared statements belong to their connection. */
static void dd_db_disconnect(dd_db_t *db)
{
    pthread_mutex_lock(&db->fd_mu);
    db->fd = -1; /* before the close: dd_db_abort never sees a closed descriptor */
    pthread_mutex_unlock(&db->fd_mu);
    for (int i = 0; i < DD_STMT_SLOTS; i++) {
        if (db->stmts[i]) mysql_stmt_close(db->stmts[i]);
        db->stmts[i] = NULL;
    }
    if (db->mysql) mysql_close(db->mysql);
    db->mysql = NULL;
}

int dd_db_new(dd_db_t **dbp, const dd_conf_t *conf, char *errstr, size_t errstr_size)
{
    return dd_db_new_shard(dbp, conf, 0, errstr, errstr_size);
}

int dd_db_new_shard(dd_db_t **dbp, const dd_conf_t *conf, int shard, char *errstr,
                    size_t errstr_size)
{
    return dd_db_new_shard_timeout(dbp, conf, shard, 0, errstr, errstr_size);
}

int dd_db_new_shard_timeout(dd_db_t **dbp, const dd_conf_t *conf, int shard, int read_timeout_s,
                            char *errstr, size_t errstr_size)
{
    dd_db_t *db;
    int rc;

    *dbp = NULL;
    if (shard < 0 || shard >= conf->shard_cnt) {
        dd_errstr_set(errstr, errstr_size, "shard %d does not exist (the configuration has %d)",
                      shard, conf->shard_cnt);
        return DD_ERR_ARG;
    }
    db = calloc(1, sizeof(*db));
    if (!db) {
        dd_errstr_set(errstr, errstr_size, "out of memory");
        return DD_ERR_NOMEM;
    }
    db->conf = conf;
    db->shard = shard;
    db->fd = -1;
    pthread_mutex_init(&db->fd_mu, NULL);
    db->my = &conf->shards[shard];
    db->read_timeout_s = read_timeout_s ? read_timeout_s : db->my->read_timeout_s;
    if (!read_timeout_s && db->read_timeout_s <= 0) db->read_timeout_s = 20;
    rc = dd_db_connect(db, errstr, errstr_size);
    if (rc) {
        pthread_mutex_destroy(&db->fd_mu);
        free(db);
        return rc;
    }
    *dbp = db;
    return DD_OK;
}

int dd_db_reconnect(dd_db_t *db, char *errstr, size_t errstr_size)
{
    dd_db_disconnect(db);
    return dd_db_connect(db, errstr, errstr_size);
}

void dd_db_destroy(dd_db_t *db)
{
    if (!db) return;
    dd_db_disconnect(db);
    pthread_mutex_destroy(&db->fd_mu);
    free(db);
}

void dd_db_abort(dd_db_t *db)
{
    if (!db) return;
    pthread_mutex_lock(&db->fd_mu);
    db->aborted = 1;
    if (db->fd >= 0) shutdown(db->fd, SHUT_RDWR);
    pthread_mutex_unlock(&db->fd_mu);
}

int dd_db_shard(const dd_db_t *db)
{
    return db->shard;
}

const dd_conf_mysql_t *dd_db_settings(const dd_db_t *db)
{
    return db->my;
}

int dd_db_has_bulk(const dd_db_t *db)
{
    return db->bulk;
}

size_t dd_db_max_statement(const dd_db_t *db)
{
    return db->max_packet > DD_DB_PACKET_MARGIN ? db->max_packet - DD_DB_PACKET_MARGIN : 0;
}

int dd_db_require_statement(dd_db_t *db, size_t bytes, const char *what, char *errstr,
                            size_t errstr_size)
{
    db->need_stmt = bytes;
    snprintf(db->need_what, sizeof(db->need_what), "%s", what);
    return dd_db_check_statement(db, errstr, errstr_size);
}

MYSQL_STMT *dd_db_stmt(dd_db_t *db, dd_stmt_slot_t slot)
{
    return db->stmts[slot];
}

int dd_db_prepare(dd_db_t *db, dd_stmt_slot_t slot, const char *sql, size_t len, MYSQL_STMT **stmtp,
                  char *errstr, size_t errstr_size)
{
    MYSQL_STMT *stmt;
    unsigned int err;

    *stmtp = NULL;
    if (!db->mysql) {
        dd_errstr_set(errstr, errstr_size, "2006: not connected");
        return DD_ERR_RETRIABLE;
    }
    if (!(stmt = mysql_stmt_init(db->mysql))) {
        dd_errstr_set(errstr, errstr_size, "out of memory");
        return DD_ERR_NOMEM;
    }
    if (mysql_stmt_prepare(stmt, sql, (unsigned long)len) != 0) {
        err = mysql_stmt_errno(stmt);
        dd_errstr_set(errstr, errstr_size, "prepare: %u: %s", err, mysql_stmt_error(stmt));
        mysql_stmt_close(stmt);
        return dd_db_classify(err);
    }
    if (db->stmts[slot]) mysql_stmt_close(db->stmts[slot]);
    db->stmts[slot] = *stmtp = stmt;
    return DD_OK;
}

int dd_db_has_returning(const dd_db_t *db)
{
    return db->returning;
}

MYSQL *dd_db_mysql(dd_db_t *db)
{
    return db->mysql;
}

static int dd_db_exec_len(MYSQL *mysql, const char *sql, size_t len, char *errstr,
                          size_t errstr_size)
{
    MYSQL_RES *res;
    unsigned int err;

    if (!mysql) {
        dd_errstr_set(errstr, errstr_size, "2006: not connected");
        return DD_ERR_RETRIABLE;
    }
    if (mysql_real_query(mysql, sql, (unsigned long)len) != 0) goto fail;
    /* Drain every result so the connection is ready for the next statement. */
    do {
        res = mysql_store_result(mysql);
        if (res)
            mysql_free_result(res);
        else if (mysql_field_count(mysql) != 0)
            goto fail;
    } while (mysql_next_result(mysql) == 0);
    if (mysql_errno(mysql)) goto fail;
    return DD_OK;
fail:
    err = mysql_errno(mysql);
    dd_errstr_set(errstr, errstr_size, "%u: %s", err, mysql_error(mysql));
    return dd_db_classify(err);
}

int dd_db_exec_raw(MYSQL *mysql, const char *sql, char *errstr, size_t errstr_size)
{
    return dd_db_exec_len(mysql, sql, strlen(sql), errstr, errstr_size);
}

int dd_db_exec(dd_db_t *db, const char *sql, size_t len, char *errstr, size_t errstr_size)
{
    return dd_db_exec_len(db->mysql, sql, len, errstr, errstr_size);
}

int dd_db_count(MYSQL *mysql, const char *sql, uint64_t *n, char *errstr, size_t errstr_size)
{
    MYSQL_RES *res;
    MYSQL_ROW row;

    *n = 0;
    if (mysql_query(mysql, sql) != 0 || !(res = mysql_store_result(mysql))) {
        dd_errstr_set(errstr, errstr_size, "%u: %s", mysql_errno(mysql), mysql_error(mysql));
        return dd_db_classify(mysql_errno(mysql));
    }
    row = mysql_fetch_row(res);
    *n = row && row[0] ? strtoull(row[0], NULL, 10) : 0;
    mysql_free_result(res);
    return DD_OK;
}

/* ---- SQL literals ---- */

void dd_db_hex(dd_buf_t *b, const void *data, size_t n)
{
    char *o;

    if (n == 0) {
        dd_buf_puts(b, "''");
        return;
    }
    if (!(o = dd_buf_reserve(b, 2 * n + 3))) return;
    o[0] = 'X';
    o[1] = '\'';
    dd_text_hex(o + 2, data, n, 0);
    o[2 * n + 2] = '\'';
    dd_buf_commit(b, 2 * n + 3);
}

void dd_db_quote(dd_buf_t *b, MYSQL *mysql, const char *s, size_t n)
{
    char *o = dd_buf_reserve(b, 2 * n + 2);
    unsigned long len;

    if (!o) return;
    o[0] = '\'';
    len = mysql_real_escape_string(mysql, o + 1, s, (unsigned long)n);
    o[len + 1] = '\'';
    dd_buf_commit(b, len + 2);
}
