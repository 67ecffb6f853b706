/*
 * Inside the registry module (see dd_registry.h), shared by its files
 * only. They call one way:
 *   dd_registry.c        the cache of schemas, the fetch thread, decoding
 *   dd_registry_fetch.c  one id's fetch: HTTP, the answer, its references
 */
#ifndef DD_REGISTRY_INT_H
#define DD_REGISTRY_INT_H

#include <pthread.h>
#include <stdatomic.h>

#include "dd_registry.h"

/* The longest answer read: far above real schemas, a bound on a hostile
 * or broken registry's. */
#define DD_REGISTRY_MAX_BODY (8 * 1024 * 1024)
/* References: how deep they nest, how many one schema uses in all. */
#define DD_REGISTRY_MAX_REF_DEPTH 32
#define DD_REGISTRY_MAX_REFS 256

typedef enum {
    DD_REG_FETCHING, /* queued for the fetch thread, or fetched now */
    DD_REG_OK,
    DD_REG_UNKNOWN, /* 404 40403: a dead letter schema_unknown */
    DD_REG_BAD,     /* no valid Avro schema: a dead letter bad_avro */
    DD_REG_FAILED,  /* a fault: fetched again after due_ms */
} dd_reg_state_t;

/* What one fetch came to, set on the fetch thread. */
typedef struct {
    dd_reg_state_t state;
    dd_registry_fault_t fault; /* DD_REG_FAILED */
    dd_avro_schema_t *schema;  /* DD_REG_OK */
    char why[400];             /* UNKNOWN, BAD: the dead letters' error; FAILED: the fault */
} dd_reg_result_t;

/* A referenced schema (subject and version), fetched once: the fetch
 * thread's alone. */
typedef struct dd_reg_subject_s {
    char *subject;
    int version;
    char *text; /* its JSON text */
    size_t len;
    struct dd_reg_ref_s *refs; /* its own references */
    size_t ref_cnt;
    struct dd_reg_subject_s *next;
} dd_reg_subject_t;

typedef struct dd_reg_ref_s {
    char *subject;
    int version;
} dd_reg_ref_t;

typedef struct dd_reg_entry_s {
    uint32_t id;
    dd_reg_state_t state;
    dd_avro_schema_t *schema; /* DD_REG_OK */
    char why[400];            /* UNKNOWN, BAD, FAILED: what the caller is told */
    int attempt;              /* failed fetches in a row */
    int64_t due_ms;           /* FAILED: not fetched again before (nowait) */
    struct dd_reg_entry_s *next, *qnext;
} dd_reg_entry_t;

#define DD_REGISTRY_BUCKETS 256

struct dd_registry_s {
    const dd_conf_registry_t *conf;
    dd_registry_opts_t opts;
    char base[1024]; /* the URL without a trailing '/' */
    pthread_mutex_t mu;
    pthread_cond_t settled_cv; /* an entry left FETCHING */
    pthread_cond_t work_cv;    /* an entry was queued, or stop */
    dd_reg_entry_t *bucket[DD_REGISTRY_BUCKETS];
    dd_reg_entry_t *queue, *queue_tail; /* FETCHING entries not taken yet */
    pthread_t thread;
    int thread_started;
    atomic_int stop;
    uint64_t fetches, settled;
    uint64_t faults[DD_REGISTRY_FAULT_CNT];
    dd_reg_subject_t *subjects; /* the fetch thread's cache of references */
};

/* dd_registry_fetch.c: fetches, parses and verifies id's schema into res,
 * on the fetch thread; counts reg->fetches. */
void dd_registry_fetch(dd_registry_t *reg, uint32_t id, dd_reg_result_t *res);
/* Frees the cache of referenced schemas. */
void dd_registry_subjects_release(dd_registry_t *reg);

#endif /* DD_REGISTRY_INT_H */
