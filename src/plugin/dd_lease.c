/*
 * The lease renewer (see dd_lease.h): a list of holds ordered by nothing
 * (a worker holds at most a few claims at a time: one per lane in act(),
 * plus those waiting to retry). Each hold names its dedup table (the
 * options of its route) and its database shard, so one renewer serves
 * every route in external mode and every shard.
 *
 * One thread and one connection per shard (connected when it first has a
 * hold to renew), not one thread going over the shards: a renewal waits
 * for its server, up to the connect timeout or the 60 s read timeout when
 * the server is unreachable, and in one thread a shard that is down would
 * hold up the renewals of every other shard's claims that long, long
 * enough for their leases to run out and their keys to be taken over. A
 * shard's thread waits only for its own server, so a shard that is down
 * costs only its own claims, which are lost anyway.
 *
 * A hold being renewed is marked; releasing it then leaves the freeing to
 * the renewer, so a lane never waits for a renewal's round trip.
 */
#include "dd_lease.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "dd_common.h"
#include "dd_db.h"
#include "dd_key.h"
#include "dd_log.h"

/* A renewal that failed (the database unreachable) is tried again this
 * soon, or at a tenth of the lease when that is sooner. */
#define DD_LEASE_RETRY_MS 1000

struct dd_lease_hold_s {
    struct dd_lease_hold_s *next;
    const dd_external_opts_t *opts; /* its dedup table's (its route's) */
    int shard;                      /* the database shard its row is in */
    char key[DD_KEY_MAX + 1];
    size_t key_len;
    int64_t fence;
    int64_t valid_until_ms; /* monotonic: when the last renewal sent + the lease runs out */
    int64_t next_ms;        /* when to renew */
    int lost;               /* a renewal found another token, or no processing row */
    int failing;            /* the last renewal failed (the database did not answer) */
    int renewing;           /* the renewer works on it without the mutex */
    int orphan;             /* released while being renewed: the renewer frees it */
};

/* The renewer of one shard's holds. */
typedef struct {
    dd_lease_t *lease;
    int shard;
    dd_db_t *db; /* its thread's, to the shard */
    dd_buf_t sql;
    pthread_t thread;
    int started;
} dd_lease_shard_t;

struct dd_lease_s {
    const dd_conf_t *conf;
    int64_t lease_ms;         /* external.lease */
    dd_lease_shard_t *shards; /* one per shard of conf */
    int shard_cnt;
    pthread_mutex_t mu;
    pthread_cond_t cv; /* a hold was added, or stop */
    dd_lease_hold_t *holds;
    atomic_int stop;
    int fault_no_renew; /* DEDUPD_TEST_FAULTS=lease_no_renew: renewals are never sent */
    int fault_blind;    /* DEDUPD_TEST_FAULTS=lease_blind: ... and held() trusts old leases */
};

/* ---- the renewer thread ---- */

/* Renews one hold's claim; 0 (held set) or the class of the error. */
static int dd_lease_renew(dd_lease_shard_t *ls, const dd_external_opts_t *opts, const char *key,
                          size_t key_len, int64_t fence, int *held, char *errstr,
                          size_t errstr_size)
{
    int rc = DD_OK;

    if (!ls->db)
        rc = dd_db_new_shard(&ls->db, ls->lease->conf, ls->shard, errstr, errstr_size);
    else if (!dd_db_mysql(ls->db))
        rc = dd_db_reconnect(ls->db, errstr, errstr_size);
    if (!rc) {
        rc = dd_external_renew(ls->db, opts, key, key_len, fence, held, &ls->sql, errstr,
                               errstr_size);
        if (rc && ls->lease->shard_cnt > 1 && errstr) { /* connect errors name it already */
            char msg[400], who[340];
            snprintf(msg, sizeof(msg), "%.390s", errstr);
            dd_errstr_set(errstr, errstr_size, "%s: %s",
                          dd_conf_shard_name(ls->lease->conf, ls->shard, who, sizeof(who)), msg);
        }
    }
    if (rc && ls->db && dd_db_mysql(ls->db) && mysql_ping(dd_db_mysql(ls->db)) != 0) {
        dd_db_destroy(ls->db); /* the next try connects afresh (not now: it would wait again) */
        ls->db = NULL;
    }
    return rc;
}

/* shard's first hold due for renewal at now, or NULL with *wake_ms set to
 * when the next one is. Called with mu held. */
static dd_lease_hold_t *dd_lease_due(dd_lease_t *lease, int shard, int64_t now, int64_t *wake_ms)
{
    *wake_ms = now + DD_LEASE_RETRY_MS;
    for (dd_lease_hold_t *h = lease->holds; h; h = h->next) {
        if (h->shard != shard || h->lost || h->renewing) continue;
        if (h->next_ms <= now) return h;
        if (h->next_ms < *wake_ms) *wake_ms = h->next_ms;
    }
    return NULL;
}

static void dd_lease_wait(dd_lease_t *lease, int64_t wake_ms)
{
    int64_t ms = wake_ms - dd_now_ms();
    struct timespec ts;

    if (ms <= 0) return;
    dd_cond_deadline(&ts, ms);
    pthread_cond_timedwait(&lease->cv, &lease->mu, &ts);
}

/* Records a renewal sent at t0 that ended with rc and held. mu held. */
static void dd_lease_record(dd_lease_t *lease, dd_lease_hold_t *h, int64_t t0, int rc, int held,
                            const char *err)
{
    int64_t retry =
        lease->lease_ms / 10 < DD_LEASE_RETRY_MS ? lease->lease_ms / 10 : DD_LEASE_RETRY_MS;

    h->failing = rc != 0;
    if (rc) {
        h->next_ms = dd_now_ms() + retry;
        /* with several shards, err names the shard when it could not connect */
        dd_log(DD_LOG_WARN, "Cannot renew the lease of key %s (token %lld), trying again: %s",
               h->key, (long long)h->fence, err);
    } else if (!held) {
        h->lost = 1;
        dd_log(DD_LOG_WARN,
               "The claim of key %s (token %lld) was taken over: its worker calls nothing "
               "more for it and finishes nothing.",
               h->key, (long long)h->fence);
    } else {
        h->valid_until_ms = t0 + lease->lease_ms;
        h->next_ms = t0 + lease->lease_ms / 3;
    }
}

static void *dd_lease_main(void *arg)
{
    dd_lease_shard_t *ls = arg;
    dd_lease_t *lease = ls->lease;
    char key[DD_KEY_MAX + 1], err[512];
    const dd_external_opts_t *opts;
    size_t key_len;
    int64_t fence, t0, wake;
    dd_lease_hold_t *h;
    int rc, held;

    pthread_mutex_lock(&lease->mu);
    while (!atomic_load(&lease->stop)) {
        h = lease->fault_no_renew ? NULL : dd_lease_due(lease, ls->shard, dd_now_ms(), &wake);
        if (!h) {
            dd_lease_wait(lease, lease->fault_no_renew ? dd_now_ms() + DD_LEASE_RETRY_MS : wake);
            continue;
        }
        h->renewing = 1;
        memcpy(key, h->key, h->key_len + 1);
        key_len = h->key_len;
        fence = h->fence;
        opts = h->opts;
        pthread_mutex_unlock(&lease->mu);
        t0 = dd_now_ms();
        held = 0;
        rc = dd_lease_renew(ls, opts, key, key_len, fence, &held, err, sizeof(err));
        pthread_mutex_lock(&lease->mu);
        h->renewing = 0;
        if (h->orphan)
            free(h);
        else
            dd_lease_record(lease, h, t0, rc, held, err);
    }
    pthread_mutex_unlock(&lease->mu);
    return NULL;
}

/* ---- holds ---- */

dd_lease_hold_t *dd_lease_hold(dd_lease_t *lease, const dd_external_opts_t *opts, int shard,
                               const char *key, size_t key_len, int64_t fence, int64_t t0_ms)
{
    dd_lease_hold_t *h = calloc(1, sizeof(*h));

    if (!h) return NULL;
    h->opts = opts;
    h->shard = shard >= 0 && shard < lease->shard_cnt ? shard : 0;
    if (key_len > DD_KEY_MAX) key_len = DD_KEY_MAX;
    memcpy(h->key, key, key_len);
    h->key_len = key_len;
    h->fence = fence;
    h->valid_until_ms = t0_ms + lease->lease_ms;
    h->next_ms = t0_ms + lease->lease_ms / 3;
    pthread_mutex_lock(&lease->mu);
    h->next = lease->holds;
    lease->holds = h;
    pthread_cond_broadcast(&lease->cv); /* the threads share cv: wake the hold's shard's */
    pthread_mutex_unlock(&lease->mu);
    return h;
}

int dd_lease_held(dd_lease_t *lease, const dd_lease_hold_t *hold)
{
    int held;

    if (!hold) return 0;
    pthread_mutex_lock(&lease->mu);
    held = !hold->lost && (lease->fault_blind || dd_now_ms() < hold->valid_until_ms);
    pthread_mutex_unlock(&lease->mu);
    return held;
}

const char *dd_lease_why(dd_lease_t *lease, const dd_lease_hold_t *hold)
{
    int lost, failing;

    if (!hold) return "out of memory registering the lease";
    pthread_mutex_lock(&lease->mu);
    lost = hold->lost;
    failing = hold->failing;
    pthread_mutex_unlock(&lease->mu);
    if (lost) return "another consumer took the claim over";
    if (failing) return "the lease was not renewed in time (the database did not answer)";
    return "the lease ran out before its renewal was due or done, with no renewal failing (was "
           "the process paused, or short of CPU?)";
}

void dd_lease_release(dd_lease_t *lease, dd_lease_hold_t *hold)
{
    if (!hold) return;
    pthread_mutex_lock(&lease->mu);
    for (dd_lease_hold_t **pp = &lease->holds; *pp; pp = &(*pp)->next) {
        if (*pp != hold) continue;
        *pp = hold->next;
        break;
    }
    if (hold->renewing)
        hold->orphan = 1;
    else
        free(hold);
    pthread_mutex_unlock(&lease->mu);
}

/* ---- life cycle ---- */

int dd_lease_new(dd_lease_t **leasep, const dd_conf_t *conf, char *errstr, size_t errstr_size)
{
    dd_lease_t *lease = calloc(1, sizeof(*lease));

    *leasep = NULL;
    if (!lease || !(lease->shards = calloc((size_t)conf->shard_cnt, sizeof(*lease->shards)))) {
        free(lease);
        dd_errstr_set(errstr, errstr_size, "out of memory");
        return DD_ERR_NOMEM;
    }
    lease->conf = conf;
    lease->shard_cnt = conf->shard_cnt;
    for (int s = 0; s < lease->shard_cnt; s++) {
        lease->shards[s].lease = lease;
        lease->shards[s].shard = s;
    }
    lease->lease_ms = conf->external.lease_ms;
    pthread_mutex_init(&lease->mu, NULL);
    dd_cond_init(&lease->cv);
    lease->fault_blind = dd_test_fault("lease_blind") != 0;
    lease->fault_no_renew = lease->fault_blind || dd_test_fault("lease_no_renew") != 0;
    if (lease->fault_no_renew)
        dd_log(DD_LOG_WARN,
               "DEDUPD_TEST_FAULTS: leases are never renewed%s (test fault "
               "injection).",
               lease->fault_blind ? ", and a claim counts as held however old its lease" : "");
    *leasep = lease;
    return DD_OK;
}

int dd_lease_start(dd_lease_t *lease, char *errstr, size_t errstr_size)
{
    atomic_store(&lease->stop, 0);
    for (int s = 0; s < lease->shard_cnt; s++) {
        if (pthread_create(&lease->shards[s].thread, NULL, dd_lease_main, &lease->shards[s]) != 0) {
            dd_lease_stop(lease);
            dd_errstr_set(errstr, errstr_size, "cannot start the lease renewal thread");
            return DD_ERR_FATAL;
        }
        lease->shards[s].started = 1;
    }
    return DD_OK;
}

void dd_lease_stop(dd_lease_t *lease)
{
    if (!lease) return;
    pthread_mutex_lock(&lease->mu);
    atomic_store(&lease->stop, 1);
    pthread_cond_broadcast(&lease->cv);
    pthread_mutex_unlock(&lease->mu);
    for (int s = 0; s < lease->shard_cnt; s++) {
        if (!lease->shards[s].started) continue;
        pthread_join(lease->shards[s].thread, NULL);
        lease->shards[s].started = 0;
    }
}

void dd_lease_destroy(dd_lease_t *lease)
{
    dd_lease_hold_t *next;

    if (!lease) return;
    dd_lease_stop(lease);
    for (; lease->holds; lease->holds = next) {
        next = lease->holds->next;
        free(lease->holds);
    }
    for (int s = 0; s < lease->shard_cnt; s++) {
        dd_db_destroy(lease->shards[s].db);
        dd_buf_release(&lease->shards[s].sql);
    }
    free(lease->shards);
    pthread_mutex_destroy(&lease->mu);
    pthread_cond_destroy(&lease->cv);
    free(lease);
}
