/*
 * `dedupd replay` judges each batch of messages against the dedup table:
 * the pipeline's parse, key and hash rules (dd_parse.c), one lookup per
 * batch, and what replay learns about each key kept in session TEMPORARY
 * tables (dd_replay_key, dd_replay_event), so memory is bounded by the
 * batch, not by the range. A key is a route's: the same key in two routes
 * is two keys, each looked up in its route's dedup table. With shards, a
 * key is looked up in the shard its route's routing picks (the pipeline's
 * rule, dd_shard.h), on a connection to that shard; the temporary tables
 * stay in shard 0's session. A key without a row there is then looked for
 * in the other shards: a row left in another shard by a re-shard makes it
 * wrong_shard, as `dedupd run` would dead-letter it, not missing.
 */
#include "dd_replay_int.h"

#include <stdlib.h>
#include <string.h>

#include "dd_claim.h"
#include "dd_common.h"
#include "dd_parse.h"
#include "dd_text.h"

/* The batch's key of a result row among uk[a..b), one route's keys
 * (binary search: they are sorted by key). */
static dd_replay_ukey_t *dd_replay_ukey_find(dd_replay_t *rp, size_t a, size_t b, const char *key,
                                             size_t len)
{
    size_t lo = a, hi = b;

    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        dd_item_t *it = rp->uk[mid].first;
        int c = dd_text_cmp(it->key, it->key_len, key, len);
        if (c == 0) return &rp->uk[mid];
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

/* Which keys of uk[a..b) a statement asks about. */
typedef enum {
    DD_REPLAY_IN_ALL,    /* every one */
    DD_REPLAY_IN_NEW,    /* those met for the first time */
    DD_REPLAY_IN_NO_ROW, /* those met for the first time without a row (yet) */
} dd_replay_in_t;

static int dd_replay_in_wanted(const dd_replay_ukey_t *k, dd_replay_in_t which)
{
    if (which == DD_REPLAY_IN_ALL) return 1;
    if (k->seen) return 0;
    return which == DD_REPLAY_IN_NEW || (!k->has_row && k->row_shard < 0);
}

/* " biz_key IN (...)" of the keys of uk[a..b) that which picks. */
static void dd_replay_in_list(dd_replay_t *rp, size_t a, size_t b, dd_replay_in_t which)
{
    int first = 1;

    dd_buf_puts(&rp->sql, " biz_key IN (");
    for (size_t i = a; i < b; i++) {
        if (!dd_replay_in_wanted(&rp->uk[i], which)) continue;
        if (!first) dd_buf_puts(&rp->sql, ",");
        dd_db_hex(&rp->sql, rp->uk[i].first->key, rp->uk[i].first->key_len);
        first = 0;
    }
    dd_buf_puts(&rp->sql, ")");
}

/* Which of the batch's keys of one route (uk[a..b)) were met earlier in
 * the range, and their first message's hash. */
static int dd_replay_lookup_seen(dd_replay_t *rp, size_t a, size_t b, char *errstr,
                                 size_t errstr_size)
{
    MYSQL_RES *res;
    MYSQL_ROW row;

    dd_buf_reset(&rp->sql);
    dd_buf_printf(&rp->sql,
                  "SELECT biz_key, msg_hash, kpartition, koffset FROM dd_replay_key WHERE route = "
                  "%d AND",
                  rp->uk[a].first->route);
    dd_replay_in_list(rp, a, b, DD_REPLAY_IN_ALL);
    if (!(res = dd_replay_query(rp, 0, errstr, errstr_size))) return DD_ERR_FATAL;
    while ((row = mysql_fetch_row(res))) {
        unsigned long *len = mysql_fetch_lengths(res);
        dd_replay_ukey_t *k = dd_replay_ukey_find(rp, a, b, row[0], len[0]);
        if (k && len[1] == DD_HASH_LEN) {
            k->seen = 1;
            memcpy(k->first_hash, row[1], DD_HASH_LEN);
            k->first_part = (int32_t)atol(row[2]);
            k->first_off = atoll(row[3]);
        }
    }
    mysql_free_result(res);
    return DD_OK;
}

/* The dedup rows of one route's keys of one shard (uk[a..b)) met for the
 * first time, from the route's table in that shard. */
static int dd_replay_lookup_rows(dd_replay_t *rp, size_t a, size_t b, char *errstr,
                                 size_t errstr_size)
{
    MYSQL_RES *res;
    MYSQL_ROW row;
    size_t fresh = 0;

    for (size_t i = a; i < b; i++)
        fresh += !rp->uk[i].seen;
    if (fresh == 0) return DD_OK;
    dd_buf_reset(&rp->sql);
    dd_buf_printf(&rp->sql, "SELECT biz_key, request_hash, status, error FROM `%s` WHERE",
                  rp->conf->routes[rp->uk[a].first->route].dedup.table);
    dd_replay_in_list(rp, a, b, DD_REPLAY_IN_NEW);
    if (!(res = dd_replay_shard_query(rp, rp->uk[a].first->shard, 0, errstr, errstr_size)))
        return DD_ERR_FATAL;
    while ((row = mysql_fetch_row(res))) {
        unsigned long *len = mysql_fetch_lengths(res);
        dd_replay_ukey_t *k = dd_replay_ukey_find(rp, a, b, row[0], len[0]);
        if (!k || k->seen) continue;
        k->has_row = 1;
        if (len[1] == DD_HASH_LEN) memcpy(k->row_hash, row[1], DD_HASH_LEN);
        k->row_status = atoi(row[2]);
        snprintf(k->row_error, sizeof(k->row_error), "%s", row[3] ? row[3] : "");
    }
    mysql_free_result(res);
    return DD_OK;
}

/* The keys of uk[a..b) (one route's, one shard's) met for the first time
 * without a row in their shard, looked for in every other shard: a row
 * there is one a re-shard did not move (docs/SHARDS.md), which `dedupd run`
 * would dead-letter wrong_shard and --apply must not claim anew. One
 * statement per other shard, only when such keys exist: most keys have
 * their row. */
static int dd_replay_lookup_elsewhere(dd_replay_t *rp, size_t a, size_t b, char *errstr,
                                      size_t errstr_size)
{
    int shard = rp->uk[a].first->shard;

    for (int s = 0; s < rp->conf->shard_cnt; s++) {
        MYSQL_RES *res;
        MYSQL_ROW row;
        size_t left = 0;
        if (s == shard) continue;
        for (size_t i = a; i < b; i++)
            left += dd_replay_in_wanted(&rp->uk[i], DD_REPLAY_IN_NO_ROW);
        if (left == 0) break;
        dd_buf_reset(&rp->sql);
        dd_buf_printf(&rp->sql, "SELECT biz_key FROM `%s` WHERE",
                      rp->conf->routes[rp->uk[a].first->route].dedup.table);
        dd_replay_in_list(rp, a, b, DD_REPLAY_IN_NO_ROW);
        if (!(res = dd_replay_shard_query(rp, s, 0, errstr, errstr_size))) return DD_ERR_FATAL;
        while ((row = mysql_fetch_row(res))) {
            unsigned long *len = mysql_fetch_lengths(res);
            dd_replay_ukey_t *k = dd_replay_ukey_find(rp, a, b, row[0], len[0]);
            if (k && dd_replay_in_wanted(k, DD_REPLAY_IN_NO_ROW)) k->row_shard = s;
        }
        mysql_free_result(res);
    }
    return DD_OK;
}

/* ---- judging a batch ---- */

/* Route, then shard, then key, then the order consumed (a key has one
 * shard: its copies stay together). */
static int dd_replay_item_cmp(const void *a, const void *b)
{
    const dd_item_t *x = *(dd_item_t *const *)a, *y = *(dd_item_t *const *)b;
    int c = x->route != y->route   ? (x->route < y->route ? -1 : 1)
            : x->shard != y->shard ? (x->shard < y->shard ? -1 : 1)
                                   : dd_text_cmp(x->key, x->key_len, y->key, y->key_len);

    return c ? c : (x->seq < y->seq ? -1 : x->seq > y->seq);
}

/* Groups the batch's good messages by route and key; uk[] gets one entry
 * per key, sorted, leading with the key's first message in the batch. */
static size_t dd_replay_group(dd_replay_t *rp)
{
    size_t g = 0, u = 0;

    for (size_t i = 0; i < rp->n; i++)
        if (rp->batch[i]->outcome != DD_OUT_DLQ) rp->sorted[g++] = rp->batch[i];
    qsort(rp->sorted, g, sizeof(*rp->sorted), dd_replay_item_cmp);
    for (size_t i = 0; i < g; i++) {
        dd_item_t *it = rp->sorted[i];
        if (u == 0 || rp->uk[u - 1].first->route != it->route ||
            dd_text_cmp(rp->uk[u - 1].first->key, rp->uk[u - 1].first->key_len, it->key,
                        it->key_len) != 0) {
            memset(&rp->uk[u], 0, sizeof(rp->uk[u]));
            rp->uk[u].first = it;
            rp->uk[u].row_shard = -1;
            memcpy(rp->uk[u].first_hash, it->hash, DD_HASH_LEN);
            u++;
        }
        rp->ukidx[it->seq] = u - 1;
    }
    return u;
}

/* 1 when the live group has not committed past the key's first message:
 * a missing row may just mean it has not got there yet. */
static int dd_replay_not_consumed(dd_replay_t *rp, const dd_item_t *it)
{
    const dd_replay_part_t *pt =
        dd_replay_part_find(rp, rd_kafka_topic_name(it->rkm->rkt), it->rkm->partition);

    if (rp->args->all_consumed) return 0;
    return pt && (pt->group_committed < 0 || it->rkm->offset >= pt->group_committed);
}

dd_replay_status_t dd_replay_verdict(dd_replay_t *rp, const dd_replay_ukey_t *k,
                                     const char **reason)
{
    *reason = NULL;
    if (!k->has_row && k->row_shard >= 0) {
        *reason = "row_in_other_shard";
        return DD_RS_WRONG_SHARD;
    }
    if (!k->has_row && dd_replay_not_consumed(rp, k->first)) {
        *reason = "not_consumed_yet";
        return DD_RS_PENDING;
    }
    if (!k->has_row) {
        *reason = "no_row";
        return DD_RS_MISSING;
    }
    if (memcmp(k->row_hash, k->first_hash, DD_HASH_LEN) != 0) {
        *reason = "hash_differs";
        return DD_RS_CONFLICT;
    }
    if (k->row_status == DD_ROW_APPLIED) return DD_RS_APPLIED;
    if (k->row_status == DD_ROW_FAILED) {
        *reason = "rejected";
        return DD_RS_FAILED;
    }
    *reason = "lease";
    return DD_RS_PROCESSING;
}

/* topic, kpartition, koffset, kafka_key, */
static void dd_replay_put_pos(dd_replay_t *rp, const dd_item_t *it)
{
    const char *topic = rd_kafka_topic_name(it->rkm->rkt);

    dd_db_quote(&rp->sql, dd_db_mysql(rp->db), topic, strlen(topic));
    dd_buf_printf(&rp->sql, ",%d,%lld,", (int)it->rkm->partition, (long long)it->rkm->offset);
    if (it->rkm->key)
        dd_db_hex(&rp->sql, it->rkm->key, it->rkm->key_len);
    else
        dd_buf_puts(&rp->sql, "NULL");
    dd_buf_puts(&rp->sql, ",");
}

/* Records the keys met for the first time; the verdict is final for them. */
static int dd_replay_record_keys(dd_replay_t *rp, size_t u, char *errstr, size_t errstr_size)
{
    int any = 0;

    dd_buf_reset(&rp->sql);
    dd_buf_puts(&rp->sql,
                "INSERT INTO dd_replay_key (route, shard, biz_key, msg_hash, topic, kpartition, "
                "koffset, kafka_key, status, reason, stored_hash, detail, row_shard, outcome, "
                "outcome_error) VALUES ");
    for (size_t i = 0; i < u; i++) {
        dd_replay_ukey_t *k = &rp->uk[i];
        const char *reason;
        dd_replay_status_t st;
        char detail[700] = "", there[300], here[300];
        int left; /* --apply leaves it, and says so */
        if (k->seen) continue;
        st = dd_replay_verdict(rp, k, &reason);
        rp->sum.keys++;
        rp->sum.status[st]++;
        dd_buf_puts(&rp->sql, any++ ? ",(" : "(");
        dd_buf_printf(&rp->sql, "%d,%d,", k->first->route, k->first->shard);
        dd_db_hex(&rp->sql, k->first->key, k->first->key_len);
        dd_buf_puts(&rp->sql, ",");
        dd_db_hex(&rp->sql, k->first_hash, DD_HASH_LEN);
        dd_buf_puts(&rp->sql, ",");
        dd_replay_put_pos(rp, k->first);
        dd_buf_printf(&rp->sql, "%d,", (int)st);
        dd_replay_put_text(rp, reason);
        dd_buf_puts(&rp->sql, ",");
        if (k->has_row)
            dd_db_hex(&rp->sql, k->row_hash, DD_HASH_LEN);
        else
            dd_buf_puts(&rp->sql, "NULL");
        dd_buf_puts(&rp->sql, ",");
        if (st == DD_RS_WRONG_SHARD)
            snprintf(detail, sizeof(detail),
                     "its row is in %s but its route names %s: its rows were not moved when the "
                     "layout changed; see docs/SHARDS.md, \"Changing the shard count\"",
                     dd_conf_shard_name(rp->conf, k->row_shard, there, sizeof(there)),
                     dd_conf_shard_name(rp->conf, k->first->shard, here, sizeof(here)));
        dd_replay_put_text(rp, st == DD_RS_FAILED ? k->row_error : detail);
        left = st == DD_RS_WRONG_SHARD && rp->args->apply &&
               !dd_replay_apply_external(rp, k->first->route);
        if (st == DD_RS_WRONG_SHARD)
            dd_buf_printf(&rp->sql, ",%d,%d,", k->row_shard,
                          left ? DD_RA_NOT_REPAIRED : DD_RA_NONE);
        else
            dd_buf_puts(&rp->sql, ",NULL,0,");
        dd_replay_put_text(rp, left ? "wrong_shard: a claim in its route's shard would apply it "
                                      "a second time; move its rows there"
                                    : NULL);
        dd_buf_puts(&rp->sql, ")");
    }
    return any ? dd_replay_exec(rp, rp->sql.p, rp->sql.len, errstr, errstr_size) : DD_OK;
}

/* A bad message, or a copy whose hash differs from its key's first message. */
static void dd_replay_put_event(dd_replay_t *rp, const dd_item_t *it, int *any,
                                const unsigned char *first_hash)
{
    dd_buf_puts(&rp->sql, (*any)++ ? ",(" : "(");
    if (first_hash)
        dd_buf_printf(&rp->sql, "%d,%d,", it->route, it->shard);
    else
        dd_buf_printf(&rp->sql, "%d,NULL,", it->route); /* a bad message has no shard */
    if (first_hash) {
        dd_db_hex(&rp->sql, it->key, it->key_len);
        dd_buf_puts(&rp->sql, ",");
        dd_db_hex(&rp->sql, it->hash, DD_HASH_LEN);
    } else {
        dd_buf_puts(&rp->sql, "NULL,NULL");
    }
    dd_buf_puts(&rp->sql, ",");
    dd_replay_put_pos(rp, it);
    dd_buf_printf(&rp->sql, "%d,'%s',", first_hash ? DD_RS_CONFLICT : DD_RS_BAD,
                  first_hash ? "copy_differs" : dd_reason2str(it->reason));
    if (first_hash)
        dd_db_hex(&rp->sql, first_hash, DD_HASH_LEN);
    else
        dd_buf_puts(&rp->sql, "NULL");
    dd_buf_puts(&rp->sql, ",");
    dd_replay_put_text(rp, first_hash ? "hash differs from the first message of this key in the "
                                        "range"
                                      : it->error);
    dd_buf_puts(&rp->sql, ")");
}

static int dd_replay_record_events(dd_replay_t *rp, char *errstr, size_t errstr_size)
{
    int any = 0;

    dd_buf_reset(&rp->sql);
    dd_buf_puts(&rp->sql, "INSERT INTO dd_replay_event (route, shard, biz_key, msg_hash, topic, "
                          "kpartition, koffset, kafka_key, status, reason, stored_hash, detail) "
                          "VALUES ");
    for (size_t i = 0; i < rp->n; i++) {
        dd_item_t *it = rp->batch[i];
        const dd_replay_ukey_t *k;
        if (it->outcome == DD_OUT_DLQ) {
            rp->sum.status[DD_RS_BAD]++;
            rp->sum.bad[it->reason]++;
            dd_replay_put_event(rp, it, &any, NULL);
            continue;
        }
        k = &rp->uk[rp->ukidx[i]];
        if ((k->seen || k->first != it) && memcmp(it->hash, k->first_hash, DD_HASH_LEN) != 0) {
            rp->sum.copy_conflicts++;
            dd_replay_put_event(rp, it, &any, k->first_hash);
        }
    }
    return any ? dd_replay_exec(rp, rp->sql.p, rp->sql.len, errstr, errstr_size) : DD_OK;
}

int dd_replay_to_apply(const dd_replay_t *rp, const dd_replay_ukey_t *k, dd_replay_status_t st)
{
    if (!rp->args->apply || k->seen || dd_replay_apply_external(rp, k->first->route)) return 0;
    return st == DD_RS_MISSING ||
           (st == DD_RS_FAILED && rp->conf->routes[k->first->route].dedup.retry_failed);
}

/* Hands the first message of each key that needs repair to the lane (not
 * those of a route in external mode); frees the rest of the batch. */
static int dd_replay_dispatch(dd_replay_t *rp, size_t u, char *errstr, size_t errstr_size)
{
    int rc = DD_OK;

    for (size_t i = 0; rp->args->apply && i < u; i++) {
        dd_replay_ukey_t *k = &rp->uk[i];
        const char *reason;
        dd_replay_status_t st;
        if (k->seen) continue;
        st = dd_replay_verdict(rp, k, &reason);
        if (dd_replay_to_apply(rp, k, st)) { /* (a route in external mode: reported only) */
            rp->batch[k->first->seq] = NULL;
            if (!rc) {
                rc = dd_replay_apply_push(rp, k->first, errstr, errstr_size);
            } else {
                if (rp->hooks) rp->hooks->finished(rp, k->first, 0); /* never ran */
                dd_item_destroy(k->first, NULL);
            }
        }
    }
    for (size_t i = 0; i < rp->n; i++)
        dd_item_destroy(rp->batch[i], NULL);
    rp->n = 0;
    return rc;
}

int dd_replay_flush(dd_replay_t *rp, char *errstr, size_t errstr_size)
{
    size_t u;
    int rc = DD_OK;

    if (rp->n == 0) return DD_OK;
    u = dd_replay_group(rp);
    for (size_t a = 0, b; !rc && a < u; a = b) { /* route by route, shard by shard */
        for (b = a + 1; b < u && rp->uk[b].first->route == rp->uk[a].first->route &&
                        rp->uk[b].first->shard == rp->uk[a].first->shard;
             b++)
            ;
        rc = dd_replay_lookup_seen(rp, a, b, errstr, errstr_size);
        if (!rc) rc = dd_replay_lookup_rows(rp, a, b, errstr, errstr_size);
        if (!rc && rp->conf->shard_cnt > 1)
            rc = dd_replay_lookup_elsewhere(rp, a, b, errstr, errstr_size);
    }
    if (!rc && u > 0) rc = dd_replay_record_keys(rp, u, errstr, errstr_size);
    if (!rc) rc = dd_replay_record_events(rp, errstr, errstr_size);
    if (!rc && rp->hooks) rp->hooks->judged(rp, u);
    if (rc && rp->hooks) return rc; /* the command keeps the batch (redrive: to read it again) */
    if (rc) {
        u = 0; /* nothing goes to the lane after a failed lookup */
        rp->args->apply = 0;
    }
    int drc = dd_replay_dispatch(rp, u, errstr, errstr_size);
    return rc ? rc : drc;
}

/* Tries the registry this many times (with the retry backoff) before the
 * replay gives up on a message whose schema it cannot get. */
#define DD_REPLAY_REGISTRY_TRIES 8

/* Decodes the item's payload (dedup.format) as the pipeline does. 0:
 * decoded; 1: a bad message (item->reason); or a negative dd_err_t with
 * errstr (the registry did not answer, out of memory). */
static int dd_replay_decode(dd_replay_t *rp, const dd_route_t *rt, dd_item_t *item, char *errstr,
                            size_t errstr_size)
{
    const dd_conf_t *conf = rp->conf;
    int64_t backoff = conf->retry.backoff_initial_ms;
    rd_kafka_message_t *rkm = item->rkm;
    dd_registry_text_t out;
    int rc;

    for (int tries = 1;; tries++) {
        rc = dd_registry_decode(rp->registry, rt->conf->dedup.format, rkm->payload, rkm->len,
                                rt->conf->dedup.max_payload_bytes, &out, &item->reason, item->error,
                                sizeof(item->error));
        if (rc != DD_ERR_RETRIABLE || tries >= DD_REPLAY_REGISTRY_TRIES) break;
        dd_sleep_ms(backoff, NULL);
        if ((backoff *= 2) > conf->retry.backoff_max_ms) backoff = conf->retry.backoff_max_ms;
    }
    if (rc == DD_ERR_PERMANENT) return 1;
    if (rc) {
        dd_errstr_set(errstr, errstr_size, "%s [%d] at offset %lld: %s",
                      rd_kafka_topic_name(rkm->rkt), (int)rkm->partition, (long long)rkm->offset,
                      item->error);
        return rc;
    }
    item->text = out.text;
    item->text_len = out.len;
    item->text_owned = out.owned;
    return 0;
}

/* Parses one message into the batch (bad ones marked DD_OUT_DLQ), by
 * route. */
int dd_replay_message(dd_replay_t *rp, int route, rd_kafka_message_t *rkm, char *errstr,
                      size_t errstr_size)
{
    const dd_route_t *rt = &rp->routes->route[route];
    dd_item_t *item;
    const char *text;
    size_t text_len;
    int reason = 0, rc;

    if (!rkm->payload && rp->conf->kafka.tombstones == DD_CONF_TOMBSTONES_SKIP) {
        rp->sum.tombstones_skipped++; /* run skips it: nothing to judge */
        rd_kafka_message_destroy(rkm);
        return DD_OK;
    }
    if (!(item = dd_item_new())) {
        rd_kafka_message_destroy(rkm);
        dd_errstr_set(errstr, errstr_size, "out of memory");
        return DD_ERR_NOMEM;
    }
    item->rkm = rkm;
    item->seq = rp->n;
    item->route = route;
    rp->sum.messages++;
    if (!rkm->payload) { /* a tombstone, dead-lettered by run (kafka.tombstones) */
        item->reason = DD_REASON_TOMBSTONE;
        snprintf(item->error, sizeof(item->error), "a tombstone (null value)");
        item->outcome = DD_OUT_DLQ;
        rp->batch[rp->n++] = item;
        return rp->n == DD_REPLAY_BATCH ? dd_replay_flush(rp, errstr, errstr_size) : DD_OK;
    }
    if ((rc = dd_replay_decode(rp, rt, item, errstr, errstr_size)) < 0) {
        rp->batch[rp->n++] = item; /* freed with the batch */
        return rc;
    }
    text = dd_item_text(item, &text_len);
    if (rc > 0) {
        item->outcome = DD_OUT_DLQ;
    } else if (dd_parse_message(rp->doc, INT64_MAX, rt->tmpl, text, text_len, &item->json,
                                &item->doc, item->key, &item->key_len, &item->reason, item->error,
                                sizeof(item->error)) != DD_OK) {
        dd_registry_parse_failed(rt->conf->dedup.format, &item->reason, item->error,
                                 sizeof(item->error));
        item->outcome = DD_OUT_DLQ;
    } else if ((item->shard = dd_routes_shard(rt, rp->doc, item->key, item->key_len, &reason,
                                              item->error, sizeof(item->error))) < 0) {
        /* No shard: the pipeline dead-letters it, so it is a bad message. */
        item->reason = (dd_reason_t)reason;
        item->outcome = DD_OUT_DLQ;
    } else if (dd_hash_doc(rt->hspec, rp->doc, item->hash) != DD_OK) {
        rp->batch[rp->n++] = item; /* freed with the batch */
        dd_errstr_set(errstr, errstr_size,
                      "cannot compute the request hash of %s [%d] at "
                      "offset %lld (out of memory or a libcrypto error)",
                      rd_kafka_topic_name(rkm->rkt), (int)rkm->partition, (long long)rkm->offset);
        return DD_ERR_NOMEM;
    } else {
        item->hashed = 1;
    }
    if (rp->hooks && rp->hooks->parsed(rp, item)) {
        rp->sum.messages--;
        dd_item_destroy(item, NULL);
        return DD_OK;
    }
    rp->batch[rp->n++] = item;
    return rp->n == DD_REPLAY_BATCH ? dd_replay_flush(rp, errstr, errstr_size) : DD_OK;
}
