/*
 * snapshot_pack.h — how a snapshot is stored: packed snapshot formats 1
 * and 2 (docs/design.md, "Stored snapshots").
 *
 * A packed snapshot is a bytea: a format byte, a flags byte, then the
 * snapshot's JSON text (as jsonb prints it) compressed against a preset
 * dictionary of what every OpenPAI framework carries (src/snapshot_dict.h):
 * by zstd (format 1, compact), or by lz4 after its length (format 2, four
 * times cheaper to compress, a third larger).  When the job config is
 * given and equals the snapshot's metadata.annotations.config, that
 * annotation is left out (the row holds it once, in job_config) and put
 * back on unpacking.
 */
#ifndef PAIDB_SNAPSHOT_PACK_H
#define PAIDB_SNAPSHOT_PACK_H

#include "utils/jsonb.h"

/*
 * Pack a snapshot; job_config (may be NULL) is the row's job_config.
 * as_job_row: as a job row stores it (format 2 until the framework has
 * completed, its row then rewritten at nearly every status change, unless
 * its text is over 16 kB); otherwise format 1 (history rows, written once).
 */
extern bytea *paidb_pack_snapshot(Jsonb *snapshot, text *job_config, bool as_job_row);

/* Unpack what paidb_pack_snapshot made, with the same row's job_config. */
extern Jsonb *paidb_unpack_snapshot(bytea *packed, text *job_config);

/*
 * The same, for the row of job `name` in this process: the process
 * remembers each job's last packed snapshot and what it unpacks to (within
 * paidb.snapshot_cache_size, or the budget a worker set), so its next
 * update of the job does not parse it again.
 */
extern bytea *paidb_pack_job_snapshot(const char *name, Jsonb *snapshot, text *job_config);
extern Jsonb *paidb_unpack_job_snapshot(const char *name, bytea *packed, text *job_config);

/* Give this process's cache its own budget in bytes, whatever the setting says. */
extern void paidb_snapshot_cache_enable(Size budget);

#endif							/* PAIDB_SNAPSHOT_PACK_H */
