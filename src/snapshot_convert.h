/*
 * snapshot_convert.h — packing the snapshots a 0.2 database stored as jsonb,
 * after ALTER EXTENSION paidb UPDATE, in short batches (docs/operations.md,
 * "From 0.2 to 0.3").  Run by the retention worker.
 */
#ifndef PAIDB_SNAPSHOT_CONVERT_H
#define PAIDB_SNAPSHOT_CONVERT_H

/* Sleep for ms on the caller's latch, handling signals and reloads. */
typedef void (*PaidbPauseFn) (long ms);

/*
 * Whether this database has snapshots of 0.2 left to convert and is due to
 * try (it is not after a failure, within its backoff, or while other views
 * keep 0.2's column).  Runs a short transaction.
 */
extern bool paidb_snapshot_conversion_due(void);

/*
 * Convert every row left, batch by batch with pause() between them, then
 * drop 0.2's columns.  Returns when done, on an error (logged; tried again
 * later with backoff) or when the end could not take its lock.
 */
extern void paidb_convert_snapshots(PaidbPauseFn pause);

#endif							/* PAIDB_SNAPSHOT_CONVERT_H */
