/*
 * The messages of `dedupd handler-test` (see dd_htest_int.h): the file,
 * read as it will be produced (a payload per line, or envelopes with the
 * Kafka key and headers), and the order each pass delivers them in. Pass 2
 * shuffles them as dedupd could see them in production: messages with the
 * same lane key stay in file order, a copy never comes before its original.
 */
#include "dd_htest_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "dd_cmd.h"
#include "dd_common.h"
#include "dd_json.h"
#include "dd_key.h"
#include "dd_text.h"

/* ---- the file ---- */

void dd_htest_msgs_free(dd_htest_msg_t *msgs, size_t n)
{
    for (size_t i = 0; msgs && i < n; i++) {
        for (size_t h = 0; h < msgs[i].hdr_cnt; h++) {
            free(msgs[i].hdrs[h].name);
            free(msgs[i].hdrs[h].value);
        }
        free(msgs[i].hdrs);
        free(msgs[i].payload);
        free(msgs[i].key);
    }
    free(msgs);
}

/* The end of the JSON value text[at..] (dd_json accepted the text). */
static size_t dd_htest_value_end(const char *text, size_t len, size_t at)
{
    size_t p = at;
    int depth = 0;

    do {
        if (text[p] == '"') {
            for (p++; p < len && text[p] != '"'; p++)
                if (text[p] == '\\') p++;
            p++;
        } else if (text[p] == '{' || text[p] == '[') {
            depth++, p++;
        } else if (text[p] == '}' || text[p] == ']') {
            depth--, p++;
        } else if (depth) {
            p++;
        } else {
            p += strcspn(text + p, ",}] \t\r\n");
        }
    } while (depth > 0 && p < len);
    return p;
}

/* The envelope's payload as the producer will send it: a string's decoded
 * bytes, any other value's text exactly as written (cJSON would print
 * numbers from doubles and cut strings at a NUL: another message than the
 * file's). doc holds the envelope. */
static int dd_htest_payload(const dd_json_doc_t *doc, const char *line, size_t len,
                            dd_htest_msg_t *m)
{
    const dd_json_node_t *pl = dd_json_member(doc, dd_json_root(doc), "payload", 7);
    size_t at, end;

    if (pl->type == DD_JSON_STRING) {
        at = 0;
        end = pl->len;
        line = pl->str;
    } else {
        at = dd_htest_value_end(line, len, pl->at); /* past the member's name */
        at += strspn(line + at, " \t\r\n:");
        end = dd_htest_value_end(line, len, at);
    }
    if (!(m->payload = malloc(end - at + 1))) return -1;
    memcpy(m->payload, line + at, end - at);
    m->payload[end - at] = '\0';
    m->len = end - at;
    return 0;
}

/* An envelope line: {"payload": ..., "key": "...", "headers": {...}}. */
static int dd_htest_envelope(const char *line, size_t len, dd_htest_msg_t *m, char *errstr,
                             size_t errstr_size)
{
    cJSON *j = cJSON_Parse(line), *it;
    dd_json_doc_t *doc = dd_json_doc_new();
    char why[200];
    const cJSON *pl = cJSON_GetObjectItemCaseSensitive(j, "payload");
    const cJSON *key = cJSON_GetObjectItemCaseSensitive(j, "key");
    const cJSON *hdrs = cJSON_GetObjectItemCaseSensitive(j, "headers");
    int rc = -1;

    if (!doc) goto nomem;
    if (dd_json_parse(doc, line, len, why, sizeof(why)) != DD_OK) {
        dd_errstr_set(errstr, errstr_size, "not JSON: %s", why);
        goto out;
    }
    if (!cJSON_IsObject(j) || !pl || (key && !cJSON_IsString(key)) ||
        (hdrs && !cJSON_IsObject(hdrs))) {
        dd_errstr_set(errstr, errstr_size,
                      "not an envelope {\"payload\": ..., \"key\": \"...\", \"headers\": {...}}");
        goto out;
    }
    cJSON_ArrayForEach(it, j) if (strcmp(it->string, "payload") && strcmp(it->string, "key") &&
                                  strcmp(it->string, "headers"))
    {
        dd_errstr_set(errstr, errstr_size, "unknown envelope member \"%s\"", it->string);
        goto out;
    }
    if (dd_htest_payload(doc, line, len, m)) goto nomem;
    if (key && (m->key = strdup(key->valuestring))) m->key_len = strlen(m->key);
    m->hdr_cnt = (size_t)cJSON_GetArraySize(hdrs);
    m->hdrs = m->hdr_cnt ? calloc(m->hdr_cnt, sizeof(*m->hdrs)) : NULL;
    if (!m->payload || (key && !m->key) || (m->hdr_cnt && !m->hdrs)) goto nomem;
    for (size_t h = 0; h < m->hdr_cnt; h++) {
        it = cJSON_GetArrayItem(hdrs, (int)h);
        if (!cJSON_IsString(it) && !cJSON_IsNull(it)) {
            dd_errstr_set(errstr, errstr_size, "header \"%s\": a string or null, please",
                          it->string);
            goto out;
        }
        if (!(m->hdrs[h].name = strdup(it->string))) goto nomem;
        if (cJSON_IsString(it)) {
            if (!(m->hdrs[h].value = strdup(it->valuestring))) goto nomem;
            m->hdrs[h].value_len = strlen(it->valuestring);
        }
    }
    rc = 0;
    goto out;
nomem:
    dd_errstr_set(errstr, errstr_size, "out of memory");
out:
    dd_json_doc_destroy(doc);
    cJSON_Delete(j);
    return rc;
}

int dd_htest_msgs_read(const char *path, int envelope, dd_htest_msg_t **msgsp, size_t *np,
                       char *errstr, size_t errstr_size)
{
    FILE *f = strcmp(path, "-") ? fopen(path, "r") : stdin;
    dd_htest_msg_t *msgs = NULL;
    size_t n = 0;
    char *line = NULL, err[300];
    size_t cap = 0, alloc = 0;
    ssize_t len;
    int lineno = 0, rc = DD_EXIT_FAIL;

    *msgsp = NULL;
    *np = 0;
    if (!f) {
        dd_errstr_set(errstr, errstr_size, "%s: %s", path, strerror(errno));
        return DD_EXIT_USAGE;
    }
    while ((len = getline(&line, &cap, f)) >= 0) {
        dd_htest_msg_t *m;
        lineno++;
        while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r'))
            line[--len] = '\0';
        if (strspn(line, " \t") == (size_t)len) continue;
        if (n == alloc) {
            dd_htest_msg_t *p = realloc(msgs, (alloc = alloc ? 2 * alloc : 64) * sizeof(*p));
            if (!p) goto nomem;
            msgs = p;
        }
        m = memset(&msgs[n++], 0, sizeof(*m));
        m->line = lineno;
        if (envelope) {
            if (dd_htest_envelope(line, (size_t)len, m, err, sizeof(err))) {
                dd_errstr_set(errstr, errstr_size, "%s:%d: %s", path, lineno, err);
                rc = DD_EXIT_USAGE;
                goto out;
            }
        } else if (!(m->payload = malloc((size_t)len + 1))) {
            goto nomem;
        } else {
            memcpy(m->payload, line, (size_t)len + 1);
            m->len = (size_t)len;
        }
    }
    if (ferror(f)) {
        dd_errstr_set(errstr, errstr_size, "%s: %s", path, strerror(errno));
        goto out;
    }
    if (n == 0) {
        dd_errstr_set(errstr, errstr_size, "%s: no messages", path);
        rc = DD_EXIT_USAGE;
        goto out;
    }
    rc = DD_EXIT_OK;
    goto out;
nomem:
    dd_errstr_set(errstr, errstr_size, "out of memory");
out:
    free(line);
    if (f != stdin) fclose(f);
    if (rc) {
        dd_htest_msgs_free(msgs, n);
    } else {
        *msgsp = msgs;
        *np = n;
    }
    return rc;
}

/* ---- the order of pass 2 ---- */

typedef struct {
    char key[DD_KEY_MAX + 1];
    size_t len, msg;
} dd_htest_lk_t;

static int dd_htest_lk_cmp(const void *a, const void *b)
{
    const dd_htest_lk_t *x = a, *y = b;
    int c = dd_text_cmp(x->key, x->len, y->key, y->len);

    return c ? c : (x->msg > y->msg) - (x->msg < y->msg);
}

int dd_htest_msgs_group(dd_htest_msg_t *msgs, size_t n, const char *tmpl_text, char *errstr,
                        size_t errstr_size)
{
    dd_htest_lk_t *lk = calloc(n, sizeof(*lk));
    dd_json_doc_t *doc = dd_json_doc_new();
    dd_key_tmpl_t *tmpl = NULL;
    size_t k = 0;
    long g = -1;
    char why[200];
    int rc = DD_ERR_NOMEM;

    if (!lk || !doc) goto out;
    if ((rc = dd_key_tmpl_new(&tmpl, tmpl_text, errstr, errstr_size))) goto out;
    for (size_t i = 0; i < n; i++) {
        msgs[i].group = -1;
        if (dd_json_parse(doc, msgs[i].payload, msgs[i].len, why, sizeof(why)) ||
            dd_key_render(tmpl, doc, lk[k].key, &lk[k].len, why, sizeof(why)) != DD_KEY_OK)
            continue;
        lk[k++].msg = i;
    }
    qsort(lk, k, sizeof(*lk), dd_htest_lk_cmp);
    for (size_t i = 0; i < k; i++) {
        if (i == 0 || dd_text_cmp(lk[i - 1].key, lk[i - 1].len, lk[i].key, lk[i].len)) g++;
        msgs[lk[i].msg].group = g;
    }
    for (size_t i = 0; i < n; i++)
        if (msgs[i].group < 0) msgs[i].group = ++g;
    rc = DD_OK;
out:
    if (rc == DD_ERR_NOMEM) dd_errstr_set(errstr, errstr_size, "out of memory");
    dd_key_tmpl_destroy(tmpl);
    dd_json_doc_destroy(doc);
    free(lk);
    return rc;
}

/* The slots are shuffled, then each lane key group fills its own slots in
 * an order dedupd could see: its first copies in file order, each second
 * copy after its first (a random merge of the two sequences). */
int dd_htest_msgs_orders(const dd_htest_msg_t *msgs, size_t n, unsigned int seed, size_t *order[2],
                         size_t order_cnt[2])
{
    size_t *o1 = malloc(n * sizeof(*o1)), *o2 = malloc(2 * n * sizeof(*o2));
    size_t *members = malloc(n * sizeof(*members)), *start = calloc(n + 1, sizeof(*start));
    size_t *first = calloc(n, sizeof(*first)), *second = calloc(n, sizeof(*second));
    int rc = -1;

    if (!o1 || !o2 || !members || !start || !first || !second) goto out;
    for (size_t i = 0; i < n; i++) {
        o1[i] = i;
        o2[2 * i] = o2[2 * i + 1] = i;
        start[msgs[i].group + 1]++; /* groups are 0..n-1 at most */
    }
    for (size_t g = 0; g < n; g++)
        start[g + 1] += start[g];
    for (size_t i = 0, *fill = first; i < n; i++) /* members of group g: start[g].. */
        members[start[msgs[i].group] + fill[msgs[i].group]++] = i;
    memset(first, 0, n * sizeof(*first));
    for (size_t i = 2 * n; i > 1; i--) { /* Fisher-Yates over the slots */
        size_t j = (size_t)rand_r(&seed) % i, t = o2[i - 1];
        o2[i - 1] = o2[j];
        o2[j] = t;
    }
    for (size_t s = 0; s < 2 * n; s++) {
        size_t g = (size_t)msgs[o2[s]].group, k = start[g + 1] - start[g];
        int take_first = first[g] < k && (second[g] == first[g] || rand_r(&seed) % 2);
        o2[s] = members[start[g] + (take_first ? first[g]++ : second[g]++)];
    }
    order[0] = o1, order_cnt[0] = n;
    order[1] = o2, order_cnt[1] = 2 * n;
    o1 = o2 = NULL;
    rc = 0;
out:
    free(o1), free(o2), free(members), free(start), free(first), free(second);
    return rc;
}
