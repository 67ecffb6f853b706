/*
 * The privileges a handler declares it needs (handler.grants, see
 * dd_grants.h), checked before any message arrives.
 *
 * dedupd cannot know what a handler's statements do, so without a
 * declaration a missing grant shows on the first message, as a RETRY the
 * lane logs and tries again. A handler ships its GRANT statements anyway
 * (examples/coupon/grants.sql); the file is its declaration. Each
 * privilege of each GRANT line is looked up among those the session's
 * account holds, directly or through an enabled role, globally, on the
 * database or on the table (information_schema's *_PRIVILEGES views show
 * a session its own). The database a line names is read as the
 * connection's (mysql.database, each shard's), so one file serves every
 * environment and shard.
 */
#include "dd_grants.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "dd_buf.h"
#include "dd_common.h"

#define DD_GRANTS_DECL_LINE 1024

/* One GRANT line: its privileges and table (empty: the database's `*`). */
typedef struct {
    char privs[16][40];
    int priv_cnt;
    char table[128];
} dd_grants_decl_t;

/* Copies an identifier (`quoted`, or bare) from *p into out; 0 or -1. */
static int dd_grants_decl_ident(const char **p, char *out, size_t out_size)
{
    size_t n = 0;
    char end = **p == '`' ? '`' : '\0';

    if (end) (*p)++;
    while (**p && (end ? **p != end : (isalnum((unsigned char)**p) || **p == '_' || **p == '$'))) {
        if (n + 1 < out_size) out[n++] = **p;
        (*p)++;
    }
    if (end && **p != end) return -1;
    if (end) (*p)++;
    out[n] = '\0';
    return n ? 0 : -1;
}

/* "GRANT SELECT, INSERT ON `db`.`t` TO ..." (case-insensitive). Returns 1
 * for a GRANT line parsed, 0 for another line, -1 for a GRANT line it
 * cannot read. */
static int dd_grants_decl_parse(const char *line, dd_grants_decl_t *g)
{
    const char *p = line, *on;
    char db[128];

    while (isspace((unsigned char)*p))
        p++;
    if (strncasecmp(p, "GRANT ", 6) != 0) return 0;
    memset(g, 0, sizeof(*g));
    p += 6;
    if (!(on = strcasestr(p, " ON "))) return -1;
    while (p < on && g->priv_cnt < 16) {
        size_t n;
        while (p < on && (isspace((unsigned char)*p) || *p == ','))
            p++;
        for (n = 0; p + n < on && p[n] != ','; n++)
            ;
        while (n && isspace((unsigned char)p[n - 1]))
            n--;
        if (n && n < sizeof(g->privs[0])) {
            for (size_t i = 0; i < n; i++)
                g->privs[g->priv_cnt][i] = (char)toupper((unsigned char)p[i]);
            g->priv_cnt++;
        }
        while (p < on && *p != ',')
            p++;
    }
    p = on + 4;
    while (isspace((unsigned char)*p))
        p++;
    if (dd_grants_decl_ident(&p, db, sizeof(db)) || *p++ != '.') return -1;
    if (*p == '*') return g->priv_cnt ? 1 : -1;
    return dd_grants_decl_ident(&p, g->table, sizeof(g->table)) || !g->priv_cnt ? -1 : 1;
}

/* The grantees whose privileges the session has: its account, as
 * information_schema writes it ('user'@'host'), and its enabled roles. */
static void dd_grants_decl_grantees(dd_buf_t *sql)
{
    dd_buf_puts(sql, " GRANTEE IN (SELECT CONCAT('''', SUBSTRING_INDEX(CURRENT_USER(), '@', 1), "
                     "'''@''', SUBSTRING_INDEX(CURRENT_USER(), '@', -1), '''') UNION SELECT "
                     "CONCAT('''', ROLE_NAME, '''') FROM information_schema.ENABLED_ROLES)");
}

/* 1 when the session holds priv on table (NULL: on the database), 0 when
 * not, -1 on a database error (errstr). */
static int dd_grants_decl_held(MYSQL *mysql, const char *priv, const char *table, char *errstr,
                               size_t errstr_size)
{
    dd_buf_t sql = {0};
    MYSQL_RES *res;
    int held = -1;

    dd_buf_puts(&sql, "SELECT 1 FROM information_schema.USER_PRIVILEGES WHERE");
    dd_grants_decl_grantees(&sql);
    dd_buf_puts(&sql, " AND PRIVILEGE_TYPE = ");
    dd_db_quote(&sql, mysql, priv, strlen(priv));
    dd_buf_puts(&sql, " UNION ALL SELECT 1 FROM information_schema.SCHEMA_PRIVILEGES WHERE");
    dd_grants_decl_grantees(&sql);
    dd_buf_puts(&sql, " AND DATABASE() LIKE TABLE_SCHEMA AND PRIVILEGE_TYPE = ");
    dd_db_quote(&sql, mysql, priv, strlen(priv));
    if (table) {
        dd_buf_puts(&sql, " UNION ALL SELECT 1 FROM information_schema.TABLE_PRIVILEGES WHERE");
        dd_grants_decl_grantees(&sql);
        dd_buf_puts(&sql, " AND TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ");
        dd_db_quote(&sql, mysql, table, strlen(table));
        dd_buf_puts(&sql, " AND PRIVILEGE_TYPE = ");
        dd_db_quote(&sql, mysql, priv, strlen(priv));
    }
    dd_buf_puts(&sql, " LIMIT 1");
    if (sql.oom)
        dd_errstr_set(errstr, errstr_size, "out of memory");
    else if (mysql_real_query(mysql, sql.p, (unsigned long)sql.len) != 0 ||
             !(res = mysql_store_result(mysql)))
        dd_errstr_set(errstr, errstr_size, "reading the session's privileges: %u: %s",
                      mysql_errno(mysql), mysql_error(mysql));
    else {
        held = mysql_num_rows(res) > 0;
        mysql_free_result(res);
    }
    dd_buf_release(&sql);
    return held;
}

/* Appends "PRIV on db.table" to what is missing (at most ~700 bytes). */
static void dd_grants_decl_missing(char *miss, size_t size, const char *priv, const char *db,
                                   const char *table)
{
    size_t len = strlen(miss);

    if (len + 100 > size) return;
    snprintf(miss + len, size - len, "%s%s on %s.%s", len ? ", " : "", priv, db,
             table[0] ? table : "*");
}

int dd_grants_check_declared(dd_db_t *db, const char *file, char *errstr, size_t errstr_size)
{
    MYSQL *mysql = dd_db_mysql(db);
    const char *database = dd_db_settings(db)->database;
    char line[DD_GRANTS_DECL_LINE], miss[800] = "", first[300] = "";
    FILE *f = fopen(file, "r");
    dd_grants_decl_t g;
    int rc = DD_OK, lineno = 0;

    if (!f) {
        dd_errstr_set(errstr, errstr_size, "handler.grants %s: %s", file, strerror(errno));
        return DD_ERR_CONFIG;
    }
    while (!rc && fgets(line, sizeof(line), f)) {
        int got = dd_grants_decl_parse(line, &g);
        lineno++;
        if (got < 0) {
            dd_errstr_set(errstr, errstr_size,
                          "%s:%d: cannot read this GRANT (expected GRANT PRIV, ... ON "
                          "`db`.`table` TO ...)",
                          file, lineno);
            rc = DD_ERR_CONFIG;
        }
        for (int i = 0; got > 0 && !rc && i < g.priv_cnt; i++) {
            int held = dd_grants_decl_held(mysql, g.privs[i], g.table[0] ? g.table : NULL, errstr,
                                           errstr_size);
            if (held < 0) rc = DD_ERR_FATAL;
            if (held) continue;
            dd_grants_decl_missing(miss, sizeof(miss), g.privs[i], database, g.table);
            if (!first[0]) snprintf(first, sizeof(first), "%s:%d", file, lineno);
        }
    }
    fclose(f);
    if (!rc && miss[0]) {
        dd_errstr_set(errstr, errstr_size,
                      "the database user %s lacks %s, which the handler needs (declared in "
                      "handler.grants, %s): run that file's GRANT statements",
                      dd_db_settings(db)->user, miss, first);
        rc = DD_ERR_FATAL;
    }
    return rc;
}
