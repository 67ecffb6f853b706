/*
 * The references generated from the tables of the dead-letter reasons
 * (dd_reasons.h) and of the metrics (dd_metrics_def.h): `dedupd
 * --help-reasons` and `dedupd --help-metrics`, as text or as the markdown
 * tables of docs/OPERATIONS.md and docs/SIDECAR.md (scripts/regen-docs).
 */
#ifndef DD_ENUMS_DOC_H
#define DD_ENUMS_DOC_H

#include <stdio.h>

void dd_enums_print_reasons(FILE *out);
void dd_enums_print_reasons_md(FILE *out);
void dd_enums_print_metrics(FILE *out);
void dd_enums_print_metrics_md(FILE *out);

/* Prints the reference arg asks for (--help-reasons[=markdown],
 * --help-metrics[=markdown]) to out: 1, or 0 when arg is none of them. */
int dd_enums_doc_option(const char *arg, FILE *out);

#endif /* DD_ENUMS_DOC_H */
