/*
 * write_merger.h — the write merger: submitting, patching, stopping jobs and
 * merging watch events into the database (SPEC §3, §5).
 */
#ifndef PAIDB_WRITE_MERGER_H
#define PAIDB_WRITE_MERGER_H

#include "utils/jsonb.h"

/*
 * Merge one watch event (SPEC §5) and return what was done: "updated",
 * "synced", "deleted", "reset", "orphan" or "stale".  The caller must be in
 * a transaction; SPI is connected and finished inside.
 */
extern const char *paidb_apply_watch_event_internal(const char *event_type, Jsonb *object);

/*
 * A framework watcher's batch of events (inside a transaction, outside
 * SPI).  Begin reads and locks the stored rows of the names in one
 * statement; the events merged until end read those rows and hold their
 * updates back; end writes them in one statement.  A name's second event
 * in the batch writes what is held back and reads its row again.  After an
 * error (the caller rolls back), discard forgets the batch.
 */
extern void paidb_watch_batch_begin(char *const *names, int n);
extern void paidb_watch_batch_end(void);
extern void paidb_watch_batch_discard(void);

/* Import one framework listed from the API server; true if it was new. */
extern bool paidb_import_framework_internal(Jsonb *object);

/*
 * Give a framework that never started the failed status of a permanent
 * refusal by the API server (SPEC §6) and record a Warning framework_event
 * with the server's message.  Only if it still is at `generation` with the
 * pending status and no retries; returns whether it was failed.  Inside a
 * transaction.
 */
extern bool paidb_fail_permanently_internal(const char *name, int64 generation,
											const char *message);

#endif							/* PAIDB_WRITE_MERGER_H */
