/*
 * A strict RFC 8259 JSON parser into a compact read-only document.
 *
 * Business keys and request hashes are computed from the exact text of the
 * payload, so they need a parser that keeps what a general-purpose one
 * throws away or bends: every digit of a number (its text, never a double),
 * every code point of a string (with a length, never a C string), and a
 * refusal of anything two parsers could read two ways. cJSON still builds
 * the tree handlers see, but only after this parser accepted the text.
 * docs/KEYS.md states the rules for reimplementers.
 *
 * Accepted: exactly RFC 8259 (one value, optional whitespace around it),
 * in valid UTF-8, within these limits:
 *   - nesting at most DD_JSON_MAX_DEPTH arrays/objects deep;
 *   - a number's exponent part has at most DD_JSON_MAX_EXP_DIGITS digits
 *     after its leading zeros, and its value, written +-D x 10^e with D an
 *     integer without trailing zeros, has |e| <= DD_JSON_MAX_EXP;
 *   - the text is shorter than DD_JSON_MAX_LEN bytes.
 * Refused as well, although some parsers take them: a byte-order mark,
 * duplicate member names in an object (which one would a key use?), a
 * \u escape of a lone surrogate (keys and hashes are over code points),
 * and a NUL (\u0000) in a string or a member name (cJSON, which builds
 * the tree handlers read, ends its strings there).
 *
 * The document lives in memory owned by its dd_json_doc_t and is reused by
 * the next parse into the same doc: one thread per doc, no per-node malloc.
 * Nodes of strings without escapes point into the parsed text, so the text
 * must outlive the use of the document.
 */
#ifndef DD_JSON_H
#define DD_JSON_H

#include <stddef.h>
#include <stdint.h>

#define DD_JSON_MAX_DEPTH 512
#define DD_JSON_MAX_EXP_DIGITS 9
#define DD_JSON_MAX_EXP 999999999
#define DD_JSON_MAX_LEN 0x7fffffff

typedef enum {
    DD_JSON_NULL = 0,
    DD_JSON_FALSE,
    DD_JSON_TRUE,
    DD_JSON_NUMBER,
    DD_JSON_STRING,
    DD_JSON_ARRAY,
    DD_JSON_OBJECT,
} dd_json_type_t;

/* One value. Nodes are stored in document order, a container's children
 * right after it: its first child is node + 1, a node's next sibling is
 * node + node->skip. */
typedef struct dd_json_node_s {
    const char *str;  /* STRING: the decoded bytes (never a NUL); NUMBER: its text */
    const char *name; /* a member of an object: its decoded name; else NULL */
    uint32_t len;     /* bytes of str; ARRAY, OBJECT: number of children */
    uint32_t name_len;
    uint32_t skip;  /* nodes in this value's subtree, itself included */
    uint32_t order; /* OBJECT: where its members in name order start (internal) */
    uint32_t at;    /* byte offset of the value in the text (a member: of its name) */
    uint8_t type;   /* dd_json_type_t */
} dd_json_node_t;

typedef struct dd_json_doc_s dd_json_doc_t;

/* NULL when out of memory. */
dd_json_doc_t *dd_json_doc_new(void);
void dd_json_doc_destroy(dd_json_doc_t *doc);

/* Parses text[0..len) into doc, replacing what it held. Returns 0,
 * DD_ERR_PERMANENT when the text is not accepted (errstr says what and at
 * which byte, e.g. "leading zero in a number at byte 7") or DD_ERR_NOMEM.
 * On failure the document is empty. */
int dd_json_parse(dd_json_doc_t *doc, const void *text, size_t len, char *errstr,
                  size_t errstr_size);

/* The top-level value of the last successful parse; NULL after a failure. */
const dd_json_node_t *dd_json_root(const dd_json_doc_t *doc);

static inline const dd_json_node_t *dd_json_next(const dd_json_node_t *node)
{
    return node + node->skip;
}

/* The i-th element of an array (NULL past its end): walks the siblings. */
const dd_json_node_t *dd_json_index(const dd_json_node_t *arr, uint32_t i);

/* The i-th member of an object in bytewise order of names (i < obj->len). */
const dd_json_node_t *dd_json_member_sorted(const dd_json_doc_t *doc, const dd_json_node_t *obj,
                                            uint32_t i);

/* The member of obj called name[0..name_len), or NULL (binary search). */
const dd_json_node_t *dd_json_member(const dd_json_doc_t *doc, const dd_json_node_t *obj,
                                     const char *name, size_t name_len);

/* A read-only copy of doc's last successful parse, for a document that
 * must outlive the next parse into doc (a message's, which handlers read
 * through the host's path_value while the consumer parses the next ones).
 * The copy is one block of dd_json_doc_copy_size(doc) bytes at mem,
 * aligned as malloc's: it owns nothing else, so freeing mem frees it (never
 * dd_json_doc_destroy). It reads as doc did (root, member, index, the text
 * of values) and points into the parsed text as doc does. Size 0 and NULL
 * when doc holds no successful parse. */
size_t dd_json_doc_copy_size(const dd_json_doc_t *doc);
const dd_json_doc_t *dd_json_doc_copy(const dd_json_doc_t *doc, void *mem);

/* The text of node's value as written in the parsed text (a string with
 * its quotes and escapes, an array or object with all it holds), into
 * *text and *len. The text must still be alive. */
void dd_json_value_text(const dd_json_doc_t *doc, const dd_json_node_t *node, const char **text,
                        size_t *len);

/* A number's exact value: +-D x 10^exp, where the digits of D are
 * d1[0..n1) followed by d2[0..n2) (spans of the text: the digits before and
 * after its '.'), without leading or trailing zeros. Zero (any spelling) has
 * n1 = n2 = 0, neg = 0 and exp = 0. */
typedef struct {
    int neg;
    const char *d1, *d2;
    size_t n1, n2;
    int64_t exp;
} dd_json_num_t;

/* Splits an accepted number's text (a NUMBER node's str, len). */
void dd_json_num_parts(const char *text, size_t len, dd_json_num_t *num);

#endif /* DD_JSON_H */
