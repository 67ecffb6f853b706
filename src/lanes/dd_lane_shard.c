/*
 * The wrong-shard check (see dd_lane_shard.h). The layout dedupd migrate
 * records catches a changed shard count at start; rows an operator did not
 * move (or moved wrongly) when re-sharding are caught here, key by key: a
 * redelivered message whose key's row sits in shard A while its route now
 * names shard B would be claimed anew in B and applied a second time. So,
 * before a batch's transaction, the lane asks every other shard which of
 * the batch's keys it holds, one statement per shard and route, on a read
 * connection of its own to each (opened on first use, outside the
 * transaction: nothing there is locked or written). A key found elsewhere
 * is not claimed anywhere; its messages are dead-lettered wrong_shard. A
 * key the lane's own shard holds too is left to its own row (read only when
 * another shard answered with a key, which is rare): that row decides, as
 * it does without shards.
 *
 * Every batch's keys are asked, not just the keys the own shard lacks:
 * knowing those would cost a statement on the own shard per batch too,
 * and most keys are new.
 */
#include "dd_lane_shard.h"

#include <stdlib.h>

#include <stdio.h>
#include <string.h>

#include "dd_common.h"
#include "dd_log.h"

/* Keys per statement: with keys of at most DD_KEY_MAX bytes, far below any
 * max_allowed_packet. */
#define DD_LANE_SHARD_KEYS 256

/* Sets found[i] = shard for the items of route r among items[0..n) (only
 * those already found elsewhere when again) whose key db's dedup table
 * holds. */
static int dd_lane_shard_read(dd_lane_peers_t *peers, dd_db_t *db, int shard, int r,
                              dd_item_t **items, size_t n, int again, char *errstr,
                              size_t errstr_size)
{
    dd_buf_t *sql = &peers->conn->sql;
    MYSQL *mysql = dd_db_mysql(db);
    MYSQL_RES *res;
    MYSQL_ROW row;

    for (size_t a = 0, b; a < n; a = b) {
        size_t cnt = 0;
        dd_buf_reset(sql);
        dd_buf_printf(sql, "SELECT biz_key FROM `%s` WHERE biz_key IN (",
                      peers->conn->env->route[r].copts.table);
        for (b = a; b < n && cnt < DD_LANE_SHARD_KEYS; b++) {
            if (items[b]->route != r || (again && peers->found[b] < 0)) continue;
            dd_buf_puts(sql, cnt++ ? "," : "");
            dd_db_hex(sql, items[b]->key, items[b]->key_len);
        }
        dd_buf_puts(sql, ")");
        if (cnt == 0) continue;
        if (sql->oom) {
            dd_errstr_set(errstr, errstr_size, "out of memory building the shard check");
            return DD_ERR_NOMEM;
        }
        if (mysql_real_query(mysql, sql->p, (unsigned long)sql->len) != 0 ||
            !(res = mysql_store_result(mysql))) {
            dd_errstr_set(errstr, errstr_size, "%u: %s", mysql_errno(mysql), mysql_error(mysql));
            return dd_db_classify(mysql_errno(mysql));
        }
        while ((row = mysql_fetch_row(res))) {
            unsigned long *len = mysql_fetch_lengths(res);
            for (size_t i = a; i < b; i++)
                if (items[i]->route == r && (!again || peers->found[i] >= 0) &&
                    items[i]->key_len == len[0] && memcmp(items[i]->key, row[0], len[0]) == 0)
                    peers->found[i] = shard;
        }
        mysql_free_result(res);
    }
    return DD_OK;
}

/* Asks shard s about every route of items[0..n). After a failure the
 * shard is not asked again before a backoff (retry.*): a host that is down
 * would cost every batch a connect timeout. */
static int dd_lane_shard_ask_one(dd_lane_peers_t *peers, int s, dd_item_t **items, size_t n,
                                 char *errstr, size_t errstr_size)
{
    const dd_conf_t *conf = peers->conn->env->conf;
    int rc = DD_OK;

    if (!peers->peer[s].db && dd_now_ms() < peers->peer[s].next_ms) {
        dd_errstr_set(errstr, errstr_size, "%s", peers->peer[s].err);
        return DD_ERR_RETRIABLE;
    }
    if (!peers->peer[s].db) rc = dd_db_new_shard(&peers->peer[s].db, conf, s, errstr, errstr_size);
    for (int r = 0; !rc && r < peers->conn->env->routes->cnt; r++)
        rc = dd_lane_shard_read(peers, peers->peer[s].db, s, r, items, n, 0, errstr, errstr_size);
    if (!rc) {
        peers->peer[s].fails = 0;
        return DD_OK;
    }
    dd_db_destroy(peers->peer[s].db); /* connected from scratch next time */
    peers->peer[s].db = NULL;
    peers->peer[s].next_ms =
        dd_now_ms() + dd_lane_conn_backoff_ms(peers->conn, ++peers->peer[s].fails);
    snprintf(peers->peer[s].err, sizeof(peers->peer[s].err), "%.255s", errstr);
    return rc;
}

/* Shard s did not answer (why: err) or answered again (err NULL): one
 * line per outage, whichever lane sees it first. */
static void dd_lane_shard_outage(dd_lane_peers_t *peers, int s, const char *err)
{
    const dd_conf_t *conf = peers->conn->env->conf;
    char name[300];

    dd_conf_shard_name(conf, s, name, sizeof(name));
    if (!err) {
        if (atomic_exchange(&peers->conn->env->check_down[s], 0))
            dd_log(DD_LOG_INFO, "The wrong-shard check reaches %s again.", name);
        return;
    }
    if (atomic_exchange(&peers->conn->env->check_down[s], 1)) return;
    if (conf->shard_check == DD_SHARD_CHECK_WAIT)
        dd_log(DD_LOG_WARN,
               "The wrong-shard check cannot ask %s: the other shards' new keys wait until it "
               "answers (mysql.shard_check = wait): %s",
               name, err);
    else
        dd_log(DD_LOG_WARN,
               "The wrong-shard check cannot ask %s: going on without it until it answers "
               "(mysql.shard_check = skip or auto; dedupd_shard_check_skipped_total counts the "
               "batches): %s",
               name, err);
}

/* Every other shard, then the own one for the keys found elsewhere:
 * found[i] ends as the shard holding item i's key elsewhere, or -1.
 * Returns 0, or (mysql.shard_check = wait) DD_ERR_RETRIABLE when a shard
 * did not answer. */
static int dd_lane_shard_ask(dd_lane_peers_t *peers, dd_item_t **items, size_t n, dd_stats_t *d)
{
    const dd_conf_t *conf = peers->conn->env->conf;
    char err[512];
    int rc, any = 0;

    for (size_t i = 0; i < n; i++)
        peers->found[i] = -1;
    for (int s = 0; s < conf->shard_cnt; s++) {
        if (s == peers->conn->shard) continue;
        rc = dd_lane_shard_ask_one(peers, s, items, n, err, sizeof(err));
        dd_lane_shard_outage(peers, s, rc ? err : NULL);
        if (rc && conf->shard_check == DD_SHARD_CHECK_WAIT) return DD_ERR_RETRIABLE;
        if (rc) d->shard[s].check_skipped++;
    }
    for (size_t i = 0; i < n; i++)
        any |= peers->found[i] >= 0;
    if (!any) return DD_OK;
    /* The own shard's rows decide for its keys (found[i] becomes its index). */
    for (int r = 0; r < peers->conn->env->routes->cnt; r++) {
        rc = dd_lane_shard_read(peers, peers->conn->db, peers->conn->shard, r, items, n, 1, err,
                                sizeof(err));
        if (rc) {
            dd_log(DD_LOG_WARN, "Lane %d: the wrong-shard check cannot read its own shard: %s",
                   peers->conn->idx, err);
            return DD_ERR_RETRIABLE;
        }
    }
    for (size_t i = 0; i < n; i++)
        if (peers->found[i] == peers->conn->shard) peers->found[i] = -1;
    return DD_OK;
}

/* Dead-letters the items found elsewhere and hands them to the group; the
 * others stay at the head of items, in order. */
static void dd_lane_shard_dlq(dd_lane_peers_t *peers, dd_item_t **items, size_t *n,
                              const dd_stats_t *d)
{
    const dd_conf_t *conf = peers->conn->env->conf;
    char there[300], here[300];
    size_t kept = 0, wrong = 0;
    int skipped = 0;

    for (size_t i = 0; i < *n; i++) {
        dd_item_t *item = items[i];
        if (peers->found[i] < 0) {
            items[kept++] = item;
            continue;
        }
        item->outcome = DD_OUT_DLQ;
        item->reason = DD_REASON_WRONG_SHARD;
        snprintf(item->error, sizeof(item->error),
                 "key %.*s has a row in %s but its route names %s: its rows were not moved "
                 "when the layout changed; see docs/SHARDS.md, \"Changing the shard count\"",
                 (int)(item->key_len < 64 ? item->key_len : 64), item->key,
                 dd_conf_shard_name(conf, peers->found[i], there, sizeof(there)),
                 dd_conf_shard_name(conf, peers->conn->shard, here, sizeof(here)));
        peers->misplaced[wrong++] = item;
    }
    for (int s = 0; s < conf->shard_cnt && s < DD_STATS_SHARD_MAX; s++)
        skipped |= d->shard[s].check_skipped != 0;
    /* The dead letters go after the kept items; items past *n are not the
     * lane's any more once posted. */
    memcpy(items + kept, peers->misplaced, wrong * sizeof(*items));
    if (wrong || skipped) dd_lane_conn_post(peers->conn, items + kept, wrong, d);
    *n = kept;
}

int dd_lane_peers_check(dd_lane_peers_t *peers, dd_item_t **items, size_t *n)
{
    const dd_conf_t *conf = peers->conn->env->conf;
    char err[512];
    int64_t t0_us;
    dd_stats_t d;

    if (conf->shard_cnt <= 1 || conf->shard_check == DD_SHARD_CHECK_OFF || *n == 0) return DD_OK;
    if (conf->shard_check == DD_SHARD_CHECK_AUTO && dd_now_us() >= peers->conn->env->check_until_us)
        return DD_OK;
    t0_us = dd_now_us();
    for (int attempt = 1;; attempt++) {
        memset(&d, 0, sizeof(d));
        if (dd_lane_shard_ask(peers, items, *n, &d) == DD_OK) break;
        dd_lane_conn_set_state(peers->conn, DD_LANE_DB_BACKOFF);
        if (dd_sleep_ms(dd_lane_conn_backoff_ms(peers->conn, attempt),
                        &peers->conn->env->stop_hard) ||
            atomic_load(&peers->conn->env->stop_hard))
            return DD_ERR_RETRIABLE;
        if (dd_lane_conn_reconnect(peers->conn, err, sizeof(err)) !=
            DD_OK) /* the own shard's reads */
            dd_log(DD_LOG_WARN, "Lane %d: %s", peers->conn->idx, err);
    }
    dd_lane_conn_set_state(peers->conn, DD_LANE_IN_DB);
    if (dd_log_enabled(DD_LOG_DEBUG))
        dd_log(DD_LOG_DEBUG,
               "Lane %d: wrong-shard check of %zu message(s) in %d other shard(s): %.1f ms.",
               peers->conn->idx, *n, conf->shard_cnt - 1, (double)(dd_now_us() - t0_us) / 1000.0);
    dd_lane_shard_dlq(peers, items, n, &d);
    return DD_OK;
}

int dd_lane_peers_init(dd_lane_peers_t *peers, dd_lane_conn_t *conn, size_t cap, char *errstr,
                       size_t errstr_size)
{
    memset(peers, 0, sizeof(*peers));
    peers->conn = conn;
    peers->found = calloc(cap, sizeof(*peers->found));
    peers->misplaced = calloc(cap, sizeof(*peers->misplaced));
    if (peers->found && peers->misplaced) return DD_OK;
    dd_lane_peers_release(peers);
    dd_errstr_set(errstr, errstr_size, "out of memory");
    return DD_ERR_NOMEM;
}

void dd_lane_peers_release(dd_lane_peers_t *peers)
{
    for (int s = 0; s < DD_CONF_SHARD_MAX; s++)
        dd_db_destroy(peers->peer[s].db);
    free(peers->found);
    free(peers->misplaced);
    memset(peers, 0, sizeof(*peers));
}
