/*
 * The parse step shared by `dedupd run` and `dedupd replay`: payload size,
 * strict JSON (dd_json: UTF-8, RFC 8259, no duplicate names, limits), the
 * business key, then the cJSON tree handlers see.
 *
 * Replay must judge a message exactly as the pipeline would, or it would
 * report keys as missing that the pipeline dead-letters (and the other way
 * round). Keeping the rules in one function keeps the two from drifting.
 */
#ifndef DD_PARSE_H
#define DD_PARSE_H

#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "dd_conf.h"
#include "dd_json.h"
#include "dd_key.h"
#include "dd_stats.h"

/* Parses payload into doc (the caller's, reused from message to message by
 * one thread) and renders its business key (tmpl: the message's route's)
 * into key (*key_len bytes); payloads over max_payload_bytes (the route's
 * dedup.max_payload_bytes) are refused.
 * Returns DD_OK with *jsonp set (the caller owns it: cJSON_Delete) and doc
 * holding the payload's document (for dd_hash_doc, a lane key) until the
 * next parse into it; with copyp, *copyp a copy of that document the
 * message keeps for its handler (the host's path_value reads it), which
 * the caller frees with dd_parse_release_doc(NULL, *copyp). Or
 * DD_ERR_PERMANENT with *reason (bad_json, key_missing, key_too_long,
 * payload_too_large), why it failed in errstr, *jsonp and *copyp NULL and
 * *key_len 0. doc and the copy point into payload: keep it. */
int dd_parse_message(dd_json_doc_t *doc, int64_t max_payload_bytes, const dd_key_tmpl_t *tmpl,
                     const void *payload, size_t len, cJSON **jsonp, const dd_json_doc_t **copyp,
                     char key[DD_KEY_MAX + 1], size_t *key_len, dd_reason_t *reason, char *errstr,
                     size_t errstr_size);

/*
 * Parse pool: where the consumer's parsed payloads live.
 *
 * A payload parses into a dozen or more small cJSON allocations, all made
 * and freed by the consumer's thread, tens of thousands of them alive at
 * once. Through malloc they cost the consumer much of its CPU (glibc
 * consolidates its fast bins whenever anything large is allocated). The
 * pool bump-
 * allocates each tree inside one 64 KiB chunk of a fixed reserved region and
 * frees a chunk when its last tree is released: no per-node malloc or free,
 * no tree walk to delete. A tree that does not fit, or a full region, falls
 * back to the heap, so memory stays bounded by the region size.
 *
 * The pool installs process-wide cJSON hooks (plain malloc/free outside a
 * pooled parse, nothing to free for pooled memory), so cJSON_Delete stays
 * safe on any tree in any thread. At most one pool exists at a time; create
 * and destroy it while no other thread uses cJSON. Only the thread that
 * created it may parse into or release to it.
 */
typedef struct dd_parse_pool_s dd_parse_pool_t;

/* The region is sized for about max_trees trees of 4 KiB (at most 256 MiB);
 * pages are only committed as chunks are first used. */
int dd_parse_pool_new(dd_parse_pool_t **poolp, int64_t max_trees, char *errstr, size_t errstr_size);
/* Every tree parsed into the pool must have been released. NULL is fine. */
void dd_parse_pool_destroy(dd_parse_pool_t *pool);

/* dd_parse_message with the tree and the document's copy in pool (NULL: on
 * the heap). The caller releases them with dd_parse_release(pool, json)
 * and dd_parse_release_doc(pool, copy). */
int dd_parse_message_into(dd_parse_pool_t *pool, dd_json_doc_t *doc, int64_t max_payload_bytes,
                          const dd_key_tmpl_t *tmpl, const void *payload, size_t len, cJSON **jsonp,
                          const dd_json_doc_t **copyp, char key[DD_KEY_MAX + 1], size_t *key_len,
                          dd_reason_t *reason, char *errstr, size_t errstr_size);
/* Frees a tree from dd_parse_message_into(pool, ...); json may be NULL. */
void dd_parse_release(dd_parse_pool_t *pool, cJSON *json);
/* Frees a document's copy from dd_parse_message_into(pool, ...); NULL is
 * fine. Without the pool (another thread) a copy in the pool's memory is
 * left to it, as a tree is. */
void dd_parse_release_doc(dd_parse_pool_t *pool, const dd_json_doc_t *doc);

#endif /* DD_PARSE_H */
