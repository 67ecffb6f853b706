/*
 * The fingerprints of the Avro writer schemas this database's keys were
 * decoded with (table dedupd_avro_schema, in every database shard).
 *
 * A schema registry names a schema by an id, and a key and its request
 * hash are computed from the JSON text a record decodes into under the
 * schema of its id. A registry rebuilt without its ids (a new cluster, a
 * restored backup of another one) can serve another schema under an id
 * whose records are already applied; decoded under it, a redelivered
 * record gets another key or hash, and a payment would be booked twice.
 * So the first schema seen for each id is recorded next to the keys, and a
 * schema whose fingerprint differs from the record is never used. The
 * record is made once and never changed by dedupd.
 */
#ifndef DD_SCHEMAFP_H
#define DD_SCHEMAFP_H

#include <stddef.h>
#include <stdint.h>

#include <mysql.h>

#include "dd_conf.h"
#include "dd_db.h"

#define DD_SCHEMAFP_TABLE "dedupd_avro_schema"

/* The table's DDL, run by `dedupd migrate` in every shard. */
int dd_schemafp_migrate(MYSQL *db, char *errstr, size_t errstr_size);

/* At start, on one shard's connection, when a route reads Avro: the table
 * must be there (DD_ERR_FATAL naming `dedupd migrate` otherwise) and the
 * runtime user must be granted SELECT, and INSERT when record is set
 * (DD_ERR_FATAL naming the GRANT). */
int dd_schemafp_check(dd_db_t *db, const dd_conf_t *conf, int record, char *errstr,
                      size_t errstr_size);

/* What dd_schemafp_verify reads: the configuration (its shards), and
 * whether a fingerprint not yet recorded is recorded (run, replay
 * --apply) or only compared with (a replay that changes nothing). */
typedef struct {
    const dd_conf_t *conf;
    int record;
} dd_schemafp_t;

/* The registry's verify function (dd_registry_verify_fn; opaque: a
 * dd_schemafp_t): fingerprint (DD_AVRO_FINGERPRINT_LEN bytes) against
 * every shard's record of id, through a connection of its own to each.
 * Returns 0 (the same everywhere, or recorded now), DD_ERR_PERMANENT
 * (another one is recorded: errstr names the shard and both
 * fingerprints), or the class of a database error (errstr). */
int dd_schemafp_verify(void *opaque, uint32_t id, const unsigned char *fingerprint, char *errstr,
                       size_t errstr_size);

#endif /* DD_SCHEMAFP_H */
