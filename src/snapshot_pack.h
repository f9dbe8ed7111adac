/*
 * snapshot_pack.h — how a snapshot is stored: packed snapshot format 1
 * (docs/design.md, "Stored snapshots").
 *
 * A packed snapshot is a bytea: a format byte, a flags byte, then the
 * snapshot's JSON text (as jsonb prints it) compressed by zstd against a
 * preset dictionary of what every OpenPAI framework carries
 * (src/snapshot_dict.h).  When the job config is given and equals the
 * snapshot's metadata.annotations.config, that annotation is left out (the
 * row holds it once, in job_config) and put back on unpacking.
 */
#ifndef PAIDB_SNAPSHOT_PACK_H
#define PAIDB_SNAPSHOT_PACK_H

#include "utils/jsonb.h"

/* Pack a snapshot; job_config (may be NULL) is the row's job_config. */
extern bytea *paidb_pack_snapshot(Jsonb *snapshot, text *job_config);

/* Unpack what paidb_pack_snapshot made, with the same row's job_config. */
extern Jsonb *paidb_unpack_snapshot(bytea *packed, text *job_config);

/*
 * Remember up to budget bytes of packed snapshots and what they unpack to,
 * in this process (the framework watcher: its next update of a job unpacks
 * what it packed).  Off (0) unless a worker turns it on.
 */
extern void paidb_snapshot_cache_enable(Size budget);

#endif							/* PAIDB_SNAPSHOT_PACK_H */
