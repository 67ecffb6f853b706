/*
 * The smallest useful dedupd handler: copy this directory to start yours.
 *
 * Each message {"user_id": "...", "email": "..."} becomes one row of the
 * table `signup`. dedupd calls handle() inside the transaction that claims
 * the message's business key (dedup.key, e.g. "signup:${user_id}"), so the
 * row is written exactly once however often Kafka delivers the message:
 * the table needs no unique index for that.
 *
 * Bad input is REJECTed (the message goes to the dead-letter topic with
 * res->error); a failed statement is RETRY, with the server's error left on
 * `db`, where dedupd finds deadlocks and lost connections and replays the
 * batch. Values go into SQL escaped, never pasted.
 */
#include <dedupd/handler.h>

#include <stdio.h>
#include <string.h>

#define FIELD_MAX 190 /* bytes; the columns are VARCHAR(190) */

static int minimal_migrate(void *state, MYSQL *db, char *errstr, size_t errstr_size)
{
    (void)state;
    if (mysql_query(db, "CREATE TABLE IF NOT EXISTS signup ("
                        " id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,"
                        " user_id VARCHAR(190) NOT NULL,"
                        " email VARCHAR(190) NOT NULL"
                        ") ENGINE=InnoDB DEFAULT CHARSET=utf8mb4") != 0) {
        snprintf(errstr, errstr_size, "create table signup: %s", mysql_error(db));
        return -1;
    }
    return 0;
}

/* The string field `name` of the payload as an escaped SQL literal in out
 * (2 * FIELD_MAX + 3 bytes). -1 with the reason in res->error. */
static int minimal_field(MYSQL *db, const dedupd_msg *msg, const char *name, char *out,
                         dedupd_result *res)
{
    const cJSON *f = cJSON_GetObjectItemCaseSensitive(msg->json, name);
    size_t n = cJSON_IsString(f) ? strlen(f->valuestring) : 0;

    if (n == 0 || n > FIELD_MAX) {
        snprintf(res->error, sizeof(res->error), "%s must be a string of 1 to %d bytes", name,
                 FIELD_MAX);
        return -1;
    }
    out[0] = '\'';
    n = mysql_real_escape_string(db, out + 1, f->valuestring, (unsigned long)n);
    strcpy(out + 1 + n, "'");
    return 0;
}

static dedupd_status minimal_handle(void *state, MYSQL *db, const dedupd_msg *msg,
                                    dedupd_result *res)
{
    char user[2 * FIELD_MAX + 3], email[2 * FIELD_MAX + 3], sql[5 * FIELD_MAX + 100];

    (void)state;
    if (minimal_field(db, msg, "user_id", user, res) || minimal_field(db, msg, "email", email, res))
        return DEDUPD_REJECT;
    snprintf(sql, sizeof(sql), "INSERT INTO signup (user_id, email) VALUES (%s, %s)", user, email);
    if (mysql_query(db, sql) != 0) {
        snprintf(res->error, sizeof(res->error), "insert into signup: %s", mysql_error(db));
        return DEDUPD_RETRY;
    }
    return DEDUPD_OK;
}

static const dedupd_handler minimal = {
    .abi_version = DEDUPD_HANDLER_ABI_VERSION,
    .name = "minimal",
    .migrate = minimal_migrate,
    .handle = minimal_handle,
};

const dedupd_handler *dedupd_handler_v1(void)
{
    return &minimal;
}
