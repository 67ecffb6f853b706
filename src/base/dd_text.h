/*
 * Text encodings every module shares: hex digits, JSON string escaping and
 * the bytewise order of keys.
 *
 * Each has exactly one implementation here, because the copies drift: a key
 * in a report, a log line and a SQL literal must read the same bytes the
 * same way, and canonical JSON (dd_canon.h), logs and reports must agree on
 * what a JSON string looks like.
 *
 * JSON strings are escaped as RFC 8259 requires and no more: '"' and '\' as
 * \" and \\, the controls below 0x20 as \b \f \n \r \t where JSON has a short
 * form and \u00XX (lower-case hex) otherwise, every other byte as it is. That
 * is the canonical form the request hash covers, so it must not change.
 * DD_TEXT_JSON_ASCII also writes bytes from 0x80 up as \u00XX, for text that
 * is not UTF-8 (a binary business key in a log line): the line stays valid
 * JSON, at the price of reading those bytes as Latin-1.
 */
#ifndef DD_TEXT_H
#define DD_TEXT_H

#include <stddef.h>
#include <stdio.h>

/* Writes the 2 * n hex digits of data[0..n) to out, no NUL; upper selects
 * 'A'-'F' instead of 'a'-'f'. */
void dd_text_hex(char *out, const void *data, size_t n, int upper);

/* 1 for a byte a JSON string holds as it is, 0 for one that needs an
 * escape ('"', '\' and the controls below 0x20). A table, because the
 * canonical writer scans every string byte of every message with it. */
extern const unsigned char dd_text_json_plain[256];

/* Writes the escape of c (a byte dd_text_json_plain says needs one, or any
 * byte from 0x80 up) to esc; returns its length, 2 or 6. */
size_t dd_text_json_escape(unsigned char c, char esc[6]);

#define DD_TEXT_JSON_ASCII 1 /* bytes >= 0x80 as \u00XX as well */

/* Writes s[0..n) as a JSON string, quotes included. */
void dd_text_json_fputs(FILE *out, const char *s, size_t n, int flags);

/* Appends s as a JSON string, quotes included, to out at pos, never
 * writing at or past out[size - 1]: what does not fit is cut at an escape
 * boundary (the closing quote is kept when there is room for it). out stays
 * NUL-terminated; returns the new pos. */
size_t dd_text_json_quote(char *out, size_t pos, size_t size, const char *s, int flags);

/* Bytewise order: memcmp over the shorter, then the shorter first. The
 * order of a VARBINARY primary key, so every worker claims keys in the
 * order the database locks them, and of names in canonical JSON. */
/* s for a terminal: control bytes (C0, DEL, and C1 in UTF-8, which a
 * terminal may take for escape sequences) as \xHH or \u00HH, a backslash
 * as \\, the rest as it is; cut to fit out_size (an escape never cut in
 * two), always terminated. */
void dd_text_visible(char *out, size_t out_size, const char *s);

int dd_text_cmp(const void *a, size_t a_len, const void *b, size_t b_len);

#endif /* DD_TEXT_H */
