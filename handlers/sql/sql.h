/*
 * The SQL handler's own header, shared by its files (docs/SQL.md says what
 * it does for a user):
 *   sql.c        the descriptor: init, migrate, connections, handle()
 *   sql_conf.c   its configuration, the group handler.sql
 *   sql_parse.c  statements and templates: ${...} placeholders, quotes,
 *                comments, one statement per string
 *   sql_bind.c   a message's values as statement parameters (the binding
 *                rules)
 *   sql_run.c    the statements on a connection: prepared, executed for
 *                one message, their failures and affected rows judged
 *   sql_resp.c   the response snapshot, from the response query
 *   sql_batch.c  handle_batch(): each statement once for a whole batch
 *   sql_event.c  events out, rendered from templates
 * Built against include/dedupd/ alone, as a user's handler is: it reads
 * values through the host's path_value, never through cJSON's doubles.
 */
#ifndef SQL_H
#define SQL_H

#include <dedupd/handler.h>

#include <pthread.h>
#include <stddef.h>

#define SQL_NAME_MAX 64
/* Rows of one bulk execution: a packet of a few hundred kB. */
#define SQL_BULK_CHUNK 1000
/* A number bound as a decimal: the digits MariaDB's DECIMAL holds. */
#define SQL_DEC_DIGITS 65
#define SQL_DEC_SCALE 38
/* A decimal's plain text: sign, 65 digits, a point and a zero before it. */
#define SQL_DEC_TEXT (SQL_DEC_DIGITS + 4)

/* ---- sql_parse.c: statements and templates ---- */

/* What a placeholder reads. */
typedef enum {
    SQL_META_NONE = 0, /* a path into the payload */
    SQL_META_KEY,      /* ${@key}: the business key */
    SQL_META_TOPIC,    /* ${@topic} */
    SQL_META_PARTITION,
    SQL_META_OFFSET,
    SQL_META_EVENT_ID /* ${@event_id}: only in events */
} sql_meta;

/* One ${...}: [json:] then a path or @name, then an optional '?'. */
typedef struct sql_ph {
    int json;     /* ${json:...}: the value's JSON text */
    int optional; /* ${...?}: an absent value is NULL (a template: empty, or null) */
    int meta;     /* sql_meta */
    size_t at;    /* the path's text: text[at .. at + len) of the source */
    size_t len;
    size_t col;        /* 1-based column of its '$' in the source */
    dedupd_path *path; /* compiled by sql_conf (meta: NULL) */
} sql_ph;

/* A parsed statement: its text for the server, each placeholder a '?'. */
typedef struct sql_text {
    char *src; /* the text as configured */
    char *sql; /* as sent to prepare */
    sql_ph *ph;
    size_t ph_cnt;
} sql_text;

/* Which statements a string may hold (sql_text_parse). */
typedef enum {
    SQL_KIND_WRITE,   /* statements: INSERT, UPDATE, DELETE, REPLACE */
    SQL_KIND_QUERY,   /* response: SELECT, WITH */
    SQL_KIND_MIGRATE, /* migrate: any statement, no placeholder */
} sql_kind;

/* Parses one statement's text (src is copied). Refused, with errstr naming
 * the column: no statement, two statements, a placeholder inside a quoted
 * literal, identifier or comment, a '?', an executable comment, a quote
 * or comment left open, a malformed placeholder, a statement of another
 * kind. Paths are not compiled here. 0 or -1. */
int sql_text_parse(sql_text *t, const char *src, sql_kind kind, char *errstr, size_t errstr_size);
void sql_text_release(sql_text *t, const dedupd_host *host);

/* A template (events): literal pieces and placeholders, in order. */
typedef struct sql_piece {
    const char *lit; /* NULL: placeholder ph */
    size_t len;
    size_t ph;
} sql_piece;

typedef struct sql_tmpl {
    char *src;
    char *lits; /* the literal pieces, "$$" written "$" */
    sql_piece *pieces;
    size_t piece_cnt;
    sql_ph *ph;
    size_t ph_cnt;
    int json; /* a JSON template: placeholders render as JSON values */
} sql_tmpl;

/* Parses a template: "$$" is a '$', ${...} a placeholder (json: a JSON
 * text with placeholders where values go, none inside a string; checked
 * by sql_event). 0 or -1 with errstr naming the column. */
int sql_tmpl_parse(sql_tmpl *t, const char *src, int json, char *errstr, size_t errstr_size);
void sql_tmpl_release(sql_tmpl *t, const dedupd_host *host);

/* ---- sql_conf.c: the configuration ---- */

typedef struct sql_stmt {
    char name[SQL_NAME_MAX + 1];
    sql_text text;
    int has_expect;
    long long expect_min, expect_max; /* expect_max -1: no upper bound */
    int retry;                        /* otherwise = "retry" */
} sql_stmt;

typedef struct sql_event {
    sql_tmpl topic, key, value;
    int has_key, has_value; /* without a value, the payload */
} sql_event;

typedef struct sql_state {
    const dedupd_host *host;
    char where[160]; /* "FILE:LINE" of the group, for messages */
    sql_stmt *stmts;
    size_t stmt_cnt;
    sql_text *migrate;
    size_t migrate_cnt;
    sql_stmt response; /* name "response"; has_response */
    int has_response;
    sql_event *events;
    size_t event_cnt;
    size_t ph_max; /* the most placeholders a statement has */
    /* statements whose prepare failed: closing one clears the connection's
     * error dedupd reads, so they are closed by fini */
    pthread_mutex_t dead_mu;
    void **dead;
    size_t dead_cnt;
} sql_state;

/* Reads host->config into st; 0, or -1 with "FILE:LINE: ..." in errstr. */
int sql_conf_load(sql_state *st, const dedupd_host *host, char *errstr, size_t errstr_size);
void sql_conf_release(sql_state *st);

/* ---- sql_bind.c: values as parameters ---- */

typedef enum { SQL_P_NULL = 0, SQL_P_DECIMAL, SQL_P_STRING } sql_ptype;

/* One parameter's value: type and text (not NUL-terminated). */
typedef struct sql_param {
    int type; /* sql_ptype */
    const char *text;
    size_t len;
} sql_param;

/* Scratch memory for the texts a value needs written (decimals with an
 * exponent, numbers of meta placeholders), freed all at once. */
typedef struct sql_arena {
    char *block;
    size_t used, cap;
    struct sql_arena *next;
} sql_arena;

char *sql_arena_alloc(sql_arena **a, size_t n);
void sql_arena_free(sql_arena **a);

/* A growing text (events, the response); oom once a growth failed. */
typedef struct sql_buf {
    char *p;
    size_t len, cap;
    int oom;
} sql_buf;

void sql_buf_put(sql_buf *b, const char *s, size_t n);
/* s[0..n), UTF-8, as a JSON string (quotes and escapes) into out, which
 * has room for 6 * n + 2 bytes; its length. */
size_t sql_json_escape(const char *s, size_t n, char *out);
/* A value as JSON text: a string re-escaped, the rest as written. 0, or -1
 * out of memory. */
int sql_json_value(const dedupd_value *v, sql_buf *b);

/* A number's JSON text as a plain decimal (no exponent), exact, into out
 * (SQL_DEC_TEXT bytes): its length, or 0 when it needs more than
 * SQL_DEC_DIGITS digits or SQL_DEC_SCALE after the point. */
size_t sql_decimal(const char *num, size_t len, char *out);

/* The parameter of placeholder ph (of the text src) for msg, by the
 * binding rules; 0, or -1 with the reason in err (the message can never be
 * applied: missing, the wrong type, a number out of range). */
int sql_bind(const sql_state *st, const char *src, const sql_ph *ph, const dedupd_msg *msg,
             sql_param *p, sql_arena **arena, char *err, size_t err_size);
/* The parameters of every placeholder of t for msg, into p[0..ph_cnt). */
int sql_bind_all(const sql_state *st, const sql_text *t, const dedupd_msg *msg, sql_param *p,
                 sql_arena **arena, char *err, size_t err_size);

/* ---- sql_run.c: one message ---- */

/* A connection's statements: stmt[i] for st->stmts[i], then the response. */
typedef struct sql_conn {
    MYSQL_STMT **stmt;
    int bulk; /* the server executes a statement for arrays of rows */
} sql_conn;

int sql_conn_init(void *state, MYSQL *db, void **conn_state, char *errstr, size_t errstr_size);
void sql_conn_fini(void *state, MYSQL *db, void *conn_state);

/* Executes stmt with p (one row); 0, or -1 with the server's error left on
 * db and said in err. *affected gets its affected rows. */
int sql_exec_one(MYSQL_STMT *stmt, const sql_param *p, size_t n, unsigned long long *affected,
                 char *err, size_t err_size);
/* What a failed statement is: REJECT for a value the table refuses (too
 * long, out of range, a duplicate key, a failed CHECK), RETRY for the rest
 * (dedupd reads the server's error on db: deadlocks replay the batch). */
dedupd_status sql_failed(const sql_stmt *s, MYSQL_STMT *stmt, dedupd_result *res);
/* 1 when affected is what s expects (always, without expect). */
int sql_expected(const sql_stmt *s, unsigned long long affected);
/* "statement NAME: N row(s) affected, expected ..." into err. */
void sql_expect_error(const sql_stmt *s, unsigned long long affected, char *err, size_t err_size);
/* ---- sql_resp.c ---- */

/* The response of msg: the first row of the response query (its
 * parameters p) as a JSON object, malloc'd into *out (NULL without a row
 * or without a response query). DEDUPD_OK, or what to return with
 * res->error set. */
dedupd_status sql_response(const sql_state *st, sql_conn *c, const sql_param *p, char **out,
                           dedupd_result *res);

/* ---- sql.c ---- */

/* The parameters of every statement and of the response for msg, into
 * p[0 .. (stmt_cnt + 1) * ph_max): ph_max per statement, the response's
 * last. 0, or -1 with the reason in res->error (the message can never be
 * applied). */
int sql_bind_msg(const sql_state *st, const dedupd_msg *msg, sql_param *p, sql_arena **arena,
                 dedupd_result *res);
/* The statements of one message with its parameters p, in order, judged:
 * DEDUPD_OK, or what to return with res->error set. */
dedupd_status sql_run_stmts(const sql_state *st, sql_conn *c, const sql_param *p,
                            dedupd_result *res);

/* ---- sql_batch.c ---- */

dedupd_status sql_handle_batch(void *state, void *conn_state, MYSQL *db,
                               const dedupd_msg *const *msgs, size_t n, dedupd_result *res);

/* ---- sql_event.c: events out ---- */

/* Checks a JSON template (its placeholders where values go); 0 or -1. */
int sql_event_check(const sql_tmpl *t, char *errstr, size_t errstr_size);
/* Emits the configured events of msg (host->emit); DEDUPD_OK or what to
 * return, with res->error set. */
dedupd_status sql_events_emit(const sql_state *st, MYSQL *db, const dedupd_msg *msg,
                              dedupd_result *res);

#endif /* SQL_H */
