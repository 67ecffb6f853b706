/*
 * `dedupd redrive`'s report: one entry per dead letter read, saying what
 * became of it and why, with its reason and source position as its
 * headers say and its own position in the dead-letter topic.
 *
 * The entries live apart from the database on purpose: replay's verdicts
 * are in temporary tables of its session, which a lost connection takes
 * with it, and a redrive that gives up must still say what it did. So each
 * entry is formatted when the letter's fate is final, kept in memory until
 * the next checkpoint, then sorted by partition and offset and written to
 * a temporary file, which becomes the report's entries when redrive ends.
 * The summary counts the entries by outcome.
 */
#include "dd_replay_int.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "dd_common.h"
#include "dd_text.h"

static const char *const dd_redrive_outcome_names[DD_RO_CNT] = {
    "applied",  "duplicate", "copy",    "conflict", "apply_failed", "left",
    "to_apply", "bad",       "refused", "filtered", "not_done"};

#define DD_REDRIVE_CSV_COLUMNS                                                                     \
    "outcome,reason,topic,partition,offset,letter_reason,source_topic,source_partition,"           \
    "source_offset,key,key_hex,kafka_key,kafka_key_hex,hash,stored_hash,detail"

static void dd_redrive_hex(char *out, const unsigned char *h)
{
    dd_text_hex(out, h, DD_HASH_LEN, 0);
    out[2 * DD_HASH_LEN] = '\0';
}

/* The text fields of an entry, in the CSV columns' order from reason on;
 * NULL: empty. */
enum {
    DD_COL_REASON,
    DD_COL_LREASON,
    DD_COL_STOPIC,
    DD_COL_SPART,
    DD_COL_SOFF,
    DD_COL_HASH,
    DD_COL_STORED,
    DD_COL_DETAIL,
    DD_COL_ROUTE,
    DD_COL_SHARD,
    DD_COL_CNT
};

typedef struct {
    const char *v[DD_COL_CNT];
} dd_redrive_cols_t;

static void dd_redrive_cols(const dd_replay_t *rp, const dd_redrive_note_t *n,
                            const dd_redrive_letter_t *l, char nums[3][24], char hex[2][65],
                            dd_redrive_cols_t *c)
{
    memset(c, 0, sizeof(*c));
    c->v[DD_COL_REASON] = n->reason;
    if (l->have & DD_LETTER_REASON) c->v[DD_COL_LREASON] = dd_reason2str((dd_reason_t)l->reason);
    if (l->have & DD_LETTER_TOPIC) c->v[DD_COL_STOPIC] = l->topic;
    if (l->have & DD_LETTER_PARTITION) {
        snprintf(nums[0], 24, "%d", (int)l->partition);
        c->v[DD_COL_SPART] = nums[0];
    }
    if (l->have & DD_LETTER_OFFSET) {
        snprintf(nums[1], 24, "%lld", (long long)l->offset);
        c->v[DD_COL_SOFF] = nums[1];
    }
    if (n->hash) dd_redrive_hex(hex[0], n->hash);
    if (n->stored_hash) dd_redrive_hex(hex[1], n->stored_hash);
    c->v[DD_COL_HASH] = n->hash ? hex[0] : NULL;
    c->v[DD_COL_STORED] = n->stored_hash ? hex[1] : NULL;
    c->v[DD_COL_DETAIL] = n->detail && n->detail[0] ? n->detail : NULL;
    if (rp->conf->has_routes && n->route >= 0) c->v[DD_COL_ROUTE] = rp->conf->routes[n->route].name;
    if (n->shard >= 0) {
        snprintf(nums[2], 24, "%d", n->shard);
        c->v[DD_COL_SHARD] = nums[2];
    }
}

static void dd_redrive_json_str(FILE *f, const char *name, const char *v)
{
    if (!v) return;
    fprintf(f, ",\"%s\":", name);
    dd_text_json_fputs(f, v, strlen(v), 0);
}

static void dd_redrive_json(FILE *f, const dd_redrive_note_t *n, const dd_redrive_cols_t *c)
{
    const rd_kafka_message_t *rkm = n->rkm;

    fputs("{\"outcome\":", f);
    dd_text_json_fputs(f, dd_redrive_outcome_names[n->outcome],
                       strlen(dd_redrive_outcome_names[n->outcome]), 0);
    dd_redrive_json_str(f, "reason", c->v[DD_COL_REASON]);
    dd_redrive_json_str(f, "topic", rd_kafka_topic_name(rkm->rkt));
    fprintf(f, ",\"partition\":%d,\"offset\":%lld", (int)rkm->partition, (long long)rkm->offset);
    dd_redrive_json_str(f, "letter_reason", c->v[DD_COL_LREASON]);
    dd_redrive_json_str(f, "source_topic", c->v[DD_COL_STOPIC]);
    if (c->v[DD_COL_SPART]) fprintf(f, ",\"source_partition\":%s", c->v[DD_COL_SPART]);
    if (c->v[DD_COL_SOFF]) fprintf(f, ",\"source_offset\":%s", c->v[DD_COL_SOFF]);
    dd_redrive_json_str(f, "route", c->v[DD_COL_ROUTE]);
    if (c->v[DD_COL_SHARD]) fprintf(f, ",\"shard\":%s", c->v[DD_COL_SHARD]);
    dd_replay_json_key(f, "key", n->key, n->key_len, 0);
    dd_replay_json_key(f, "kafka_key", rkm->key, rkm->key_len, 0);
    dd_redrive_json_str(f, "hash", c->v[DD_COL_HASH]);
    dd_redrive_json_str(f, "stored_hash", c->v[DD_COL_STORED]);
    dd_redrive_json_str(f, "detail", c->v[DD_COL_DETAIL]);
    fputc('}', f);
}

static void dd_redrive_csv_put(FILE *f, const char *v, int last)
{
    dd_replay_csv_field(f, v, v ? strlen(v) : 0, last);
}

static void dd_redrive_csv(const dd_replay_t *rp, FILE *f, const dd_redrive_note_t *n,
                           const dd_redrive_cols_t *c)
{
    const rd_kafka_message_t *rkm = n->rkm;
    char pos[2][24];
    int routes = rp->conf->has_routes, shards = rp->conf->shard_cnt > 1;

    snprintf(pos[0], sizeof(pos[0]), "%d", (int)rkm->partition);
    snprintf(pos[1], sizeof(pos[1]), "%lld", (long long)rkm->offset);
    dd_redrive_csv_put(f, dd_redrive_outcome_names[n->outcome], 0);
    dd_redrive_csv_put(f, c->v[DD_COL_REASON], 0);
    dd_redrive_csv_put(f, rd_kafka_topic_name(rkm->rkt), 0);
    dd_redrive_csv_put(f, pos[0], 0);
    dd_redrive_csv_put(f, pos[1], 0);
    for (int i = DD_COL_LREASON; i <= DD_COL_SOFF; i++)
        dd_redrive_csv_put(f, c->v[i], 0);
    dd_replay_csv_key(f, n->key, n->key_len);
    dd_replay_csv_key(f, rkm->key, rkm->key_len);
    dd_redrive_csv_put(f, c->v[DD_COL_HASH], 0);
    dd_redrive_csv_put(f, c->v[DD_COL_STORED], 0);
    dd_redrive_csv_put(f, c->v[DD_COL_DETAIL], !routes && !shards);
    if (routes) dd_redrive_csv_put(f, c->v[DD_COL_ROUTE], !shards);
    if (shards) dd_redrive_csv_put(f, c->v[DD_COL_SHARD], 1);
}

void dd_redrive_entry_add(dd_replay_t *rp, const dd_redrive_note_t *note)
{
    dd_redrive_entries_t *ent = &rp->rs->ent;
    dd_redrive_letter_t own;
    const dd_redrive_letter_t *l = note->l;
    dd_redrive_cols_t cols;
    char nums[3][24], hex[2][65], why[8];
    dd_redrive_entry_t *e;
    FILE *f;

    ent->cnt[note->outcome]++;
    if (!l) {
        rd_kafka_headers_t *hdrs = NULL;
        rd_kafka_message_headers(note->rkm, &hdrs);
        dd_redrive_letter_read(hdrs, &own, why, sizeof(why)); /* what it says, whatever it is */
        l = &own;
    }
    if (ent->n == ent->cap) {
        size_t cap = ent->cap ? ent->cap * 2 : 256;
        dd_redrive_entry_t *v = realloc(ent->v, cap * sizeof(*v));
        if (!v) {
            ent->nomem = 1;
            return;
        }
        ent->v = v;
        ent->cap = cap;
    }
    e = &ent->v[ent->n];
    memset(e, 0, sizeof(*e));
    e->partition = note->rkm->partition;
    e->offset = note->rkm->offset;
    if (!(f = open_memstream(&e->text, &e->len))) {
        ent->nomem = 1;
        return;
    }
    dd_redrive_cols(rp, note, l, nums, hex, &cols);
    if (rp->args->csv)
        dd_redrive_csv(rp, f, note, &cols);
    else
        dd_redrive_json(f, note, &cols);
    if (fclose(f) != 0 || !e->text) {
        free(e->text);
        ent->nomem = 1;
        return;
    }
    ent->n++;
}

static int dd_redrive_entry_cmp(const void *a, const void *b)
{
    const dd_redrive_entry_t *x = a, *y = b;

    if (x->partition != y->partition) return x->partition < y->partition ? -1 : 1;
    return x->offset < y->offset ? -1 : x->offset > y->offset;
}

int dd_redrive_entry_has(const dd_redrive_entries_t *ent, int32_t partition, int64_t offset)
{
    dd_redrive_entry_t key = {.partition = partition, .offset = offset};

    return ent->sorted &&
           bsearch(&key, ent->v, ent->sorted, sizeof(*ent->v), dd_redrive_entry_cmp) != NULL;
}

void dd_redrive_entries_sort(dd_redrive_entries_t *ent)
{
    if (ent->n) qsort(ent->v, ent->n, sizeof(*ent->v), dd_redrive_entry_cmp);
    ent->sorted = ent->n;
}

int dd_redrive_entries_spill(dd_replay_t *rp, char *errstr, size_t errstr_size)
{
    dd_redrive_entries_t *ent = &rp->rs->ent;
    int rc = DD_OK;

    if (ent->nomem) {
        dd_errstr_set(errstr, errstr_size, "out of memory keeping the report's entries");
        return DD_ERR_NOMEM;
    }
    dd_redrive_entries_sort(ent);
    for (size_t i = 0; i < ent->n; i++) {
        if (!rp->args->csv) fputs(ent->any++ ? ",\n    " : "\n    ", ent->spill);
        fwrite(ent->v[i].text, 1, ent->v[i].len, ent->spill);
        free(ent->v[i].text);
    }
    if (ent->n && (fflush(ent->spill) != 0 || ferror(ent->spill))) {
        dd_errstr_set(errstr, errstr_size, "writing the report's entries to a temporary file: %s",
                      strerror(errno));
        rc = DD_ERR_IO;
    }
    ent->n = ent->sorted = 0;
    return rc;
}

void dd_redrive_entries_release(dd_redrive_entries_t *ent)
{
    for (size_t i = 0; i < ent->n; i++)
        free(ent->v[i].text);
    free(ent->v);
    if (ent->spill) fclose(ent->spill);
    memset(ent, 0, sizeof(*ent));
}

uint64_t dd_redrive_findings(const dd_replay_t *rp)
{
    const uint64_t *c = rp->rs->ent.cnt;

    return c[DD_RO_CONFLICT] + c[DD_RO_APPLY_FAILED] + c[DD_RO_LEFT] + c[DD_RO_TO_APPLY] +
           c[DD_RO_REFUSED];
}

/* ---- the report ---- */

static uint64_t dd_redrive_letters(const dd_replay_t *rp)
{
    uint64_t n = 0;

    for (int i = 0; i < DD_RO_CNT; i++)
        n += rp->rs->ent.cnt[i];
    return n;
}

static void dd_redrive_offset(FILE *out, const char *name, int64_t v)
{
    if (v >= 0)
        fprintf(out, ",\"%s\":%lld", name, (long long)v);
    else
        fprintf(out, ",\"%s\":null", name);
}

/* "summary": {...}, "ranges": [...] (without the braces around them). */
static void dd_redrive_write_summary(dd_replay_t *rp, FILE *out, int complete)
{
    const dd_redrive_run_t *rs = rp->rs;

    fprintf(out, "  \"summary\": {\"mode\":\"%s\",\"complete\":%s,\"letters\":%llu",
            rp->rd->dry_run ? "dry_run" : "apply", complete ? "true" : "false",
            (unsigned long long)dd_redrive_letters(rp));
    for (int i = 0; i < DD_RO_CNT; i++)
        fprintf(out, ",\"%s\":%llu", dd_redrive_outcome_names[i],
                (unsigned long long)rs->ent.cnt[i]);
    fprintf(out, ",\"findings\":%llu", (unsigned long long)dd_redrive_findings(rp));
    if (rs->error[0]) {
        fputs(",\"error\":", out);
        dd_text_json_fputs(out, rs->error, strlen(rs->error), 0);
    }
    fputs("},\n  \"ranges\": [", out);
    for (int i = 0; i < rp->part_cnt; i++) {
        const dd_replay_part_t *pt = &rp->parts[i];
        dd_replay_json_range(out, pt, i == 0);
        dd_redrive_offset(out, "group_committed", rs->start ? rs->start[i] : -1);
        dd_redrive_offset(out, "committed", pt->group_committed);
        fputc('}', out);
    }
    fputs("\n  ]", out);
}

static int dd_redrive_copy_spill(dd_replay_t *rp, FILE *out, char *errstr, size_t errstr_size)
{
    FILE *spill = rp->rs->ent.spill;
    char buf[65536];
    size_t got;

    if (fseek(spill, 0, SEEK_SET) != 0) {
        dd_errstr_set(errstr, errstr_size, "reading the report's entries back: %s",
                      strerror(errno));
        return DD_ERR_IO;
    }
    while ((got = fread(buf, 1, sizeof(buf), spill)) > 0)
        fwrite(buf, 1, got, out);
    if (ferror(spill)) {
        dd_errstr_set(errstr, errstr_size, "reading the report's entries back: %s",
                      strerror(errno));
        return DD_ERR_IO;
    }
    return DD_OK;
}

static int dd_redrive_write(dd_replay_t *rp, FILE *out, int complete, char *errstr,
                            size_t errstr_size)
{
    int rc;

    if (rp->args->csv) {
        dd_replay_csv_head(rp, out, DD_REDRIVE_CSV_COLUMNS);
        return dd_redrive_copy_spill(rp, out, errstr, errstr_size);
    }
    fputs("{\n", out);
    dd_redrive_write_summary(rp, out, complete);
    fputs(",\n  \"entries\": [", out);
    rc = dd_redrive_copy_spill(rp, out, errstr, errstr_size);
    fputs("\n  ]\n}\n", out);
    return rc;
}

/* Flushes out and closes it (not stdout): DD_ERR_IO on any write error. */
static int dd_redrive_close(FILE *out, const char *path, int rc, char *errstr, size_t errstr_size)
{
    if ((fflush(out) != 0 || ferror(out)) && !rc) {
        dd_errstr_set(errstr, errstr_size, "writing %s: %s", path ? path : "stdout",
                      strerror(errno));
        rc = DD_ERR_IO;
    }
    if (path && fclose(out) != 0 && !rc) {
        dd_errstr_set(errstr, errstr_size, "writing %s: %s", path, strerror(errno));
        rc = DD_ERR_IO;
    }
    return rc;
}

int dd_redrive_report(dd_replay_t *rp, FILE *out, int complete, char *errstr, size_t errstr_size)
{
    const char *path = rp->args->report;
    int rc = dd_redrive_entries_spill(rp, errstr, errstr_size);
    FILE *sum;

    if (!rc) rc = dd_redrive_write(rp, out, complete, errstr, errstr_size);
    rc = dd_redrive_close(out, path, rc, errstr, errstr_size);
    if (rc || !rp->args->summary) return rc;
    if (!(sum = fopen(rp->args->summary, "w"))) {
        dd_errstr_set(errstr, errstr_size, "cannot write %s: %s", rp->args->summary,
                      strerror(errno));
        return DD_ERR_IO;
    }
    fputs("{\n", sum);
    dd_redrive_write_summary(rp, sum, complete);
    fputs("\n}\n", sum);
    return dd_redrive_close(sum, rp->args->summary, DD_OK, errstr, errstr_size);
}

void dd_redrive_print_summary(dd_replay_t *rp, int complete)
{
    int64_t t0 = rp->progress_line.t0_ms;
    double secs = t0 ? (double)(dd_now_ms() - t0) / 1000.0 : 0.0;

    fprintf(stderr, "dedupd redrive (%s%s): %d partition(s) in %.1f s\n",
            rp->rd->dry_run ? "dry run" : "apply", complete ? "" : ", INCOMPLETE", rp->part_cnt,
            secs);
    fprintf(stderr, "  %-18s %12llu\n", "letters", (unsigned long long)dd_redrive_letters(rp));
    for (int i = 0; i < DD_RO_CNT; i++)
        fprintf(stderr, "    %-16s %12llu\n", dd_redrive_outcome_names[i],
                (unsigned long long)rp->rs->ent.cnt[i]);
    fprintf(stderr, "  %-18s %12llu\n", "findings", (unsigned long long)dd_redrive_findings(rp));
}
