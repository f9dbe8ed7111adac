/*
 * worker_shmem.h — the shared state of paidb's background workers: who
 * they are, how to wake them, and the counters paidb.status() shows.
 */
#ifndef PAIDB_WORKER_SHMEM_H
#define PAIDB_WORKER_SHMEM_H

#include "storage/latch.h"

typedef enum PaidbWorkerKind
{
	PAIDB_WORKER_SYNC = 0,
	PAIDB_WORKER_FRAMEWORK_WATCHER,
	PAIDB_WORKER_EVENT_WATCHER,
	PAIDB_WORKER_RETENTION,
	PAIDB_NUM_WORKERS
} PaidbWorkerKind;

extern const char *const paidb_worker_names[PAIDB_NUM_WORKERS];

/* Reserve and attach shared memory; called from _PG_init when preloaded. */
extern void paidb_shmem_init(void);

/* Whether the shared state exists (paidb was preloaded). */
extern bool paidb_shmem_available(void);

/* Called by a worker at start: publish its pid and latch. */
extern void paidb_worker_attach(PaidbWorkerKind kind);

/* Record the database a worker is connected to (it is woken only for it). */
extern void paidb_worker_set_database(PaidbWorkerKind kind, Oid database);

/* Called by a worker at exit (on_shmem_exit): unpublish itself. */
extern void paidb_worker_detach(PaidbWorkerKind kind);

/* Set a worker's latch if it runs. */
extern void paidb_wake_worker(PaidbWorkerKind kind);

/* Update what status() shows for a worker; NULL strings leave fields as they are. */
extern void paidb_worker_report(PaidbWorkerKind kind, const char *state,
								const char *resource_version,
								uint64 add_events, uint64 add_requests,
								uint64 add_errors, const char *last_error);

#endif							/* PAIDB_WORKER_SHMEM_H */
