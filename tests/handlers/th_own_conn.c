/*
 * A broken handler, for `dedupd handler-test` (test 37): it writes on a
 * connection of its own instead of dedupd's `db`, so its write commits at
 * once, outside the claim transaction. When dedupd rolls that transaction
 * back (a deadlock, a lost COMMIT) and replays it, the write happens again.
 *
 * Payload {"id": "...", "n": 1}: one row of th_own_effect per call.
 */
#include "dedupd/handler.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int th_own_migrate(void *state, MYSQL *db, char *errstr, size_t errstr_size)
{
    (void)state;
    if (mysql_query(db,
                    "CREATE TABLE IF NOT EXISTS th_own_effect (id BIGINT NOT NULL"
                    " AUTO_INCREMENT PRIMARY KEY, k VARCHAR(64) NOT NULL) ENGINE=InnoDB") != 0) {
        snprintf(errstr, errstr_size, "%s", mysql_error(db));
        return -1;
    }
    return 0;
}

/* Its own connection to dedupd's server and database, autocommit on. */
static int th_own_conn_init(void *state, MYSQL *db, void **conn_state, char *errstr,
                            size_t errstr_size)
{
    MYSQL *own = mysql_init(NULL);

    (void)state;
    if (!own || !mysql_real_connect(own, db->host, db->user, db->passwd, db->db, db->port,
                                    db->unix_socket, 0)) {
        snprintf(errstr, errstr_size, "own connection: %s", own ? mysql_error(own) : "no memory");
        mysql_close(own);
        return -1;
    }
    *conn_state = own;
    return 0;
}

static void th_own_conn_fini(void *state, MYSQL *db, void *conn_state)
{
    (void)state, (void)db;
    mysql_close(conn_state);
}

static dedupd_status th_own_handle(void *state, void *conn_state, MYSQL *db, const dedupd_msg *msg,
                                   dedupd_result *res)
{
    const cJSON *id = cJSON_GetObjectItemCaseSensitive(msg->json, "id");
    MYSQL *own = conn_state;
    char k[129], sql[300];

    (void)state, (void)db;
    if (!cJSON_IsString(id) || strlen(id->valuestring) > 64) {
        snprintf(res->error, sizeof(res->error), "id must be a string");
        return DEDUPD_REJECT;
    }
    mysql_real_escape_string(own, k, id->valuestring, (unsigned long)strlen(id->valuestring));
    snprintf(sql, sizeof(sql), "INSERT INTO th_own_effect (k) VALUES ('%s')", k);
    if (mysql_query(own, sql) != 0) {
        snprintf(res->error, sizeof(res->error), "%s", mysql_error(own));
        return DEDUPD_RETRY;
    }
    return DEDUPD_OK;
}

static const dedupd_handler th_own = {
    .abi_version = DEDUPD_HANDLER_ABI_VERSION,
    .name = "th_own_conn",
    .migrate = th_own_migrate,
    .conn_init = th_own_conn_init,
    .conn_fini = th_own_conn_fini,
    .handle_conn = th_own_handle,
};

const dedupd_handler *dedupd_handler_v1(void)
{
    return &th_own;
}
