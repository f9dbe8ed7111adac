/*
 * worker_common.h — what every paidb background worker shares: start-up,
 * signals, settings reload, and short transactions.
 */
#ifndef PAIDB_WORKER_COMMON_H
#define PAIDB_WORKER_COMMON_H

#include "worker_shmem.h"

/* Register the three workers; called from _PG_init when preloaded. */
extern void paidb_register_workers(void);

/* Entry point of every paidb background worker (bgw_function_name). */
extern PGDLLEXPORT void paidb_worker_main(Datum main_arg);

/*
 * Set up the current worker process: signal handlers, the database
 * connection, shared state; then wait until the extension exists in
 * paidb.database.  Returns only when the worker may run.
 */
extern void paidb_worker_startup(PaidbWorkerKind kind);

/* Reload the configuration if SIGHUP arrived; true if it did. */
extern bool paidb_worker_reload_if_needed(void);

/*
 * Short transactions for workers: begin (with a snapshot and SPI) and
 * commit (reporting stats and going idle).  `activity` is shown in
 * pg_stat_activity while the transaction runs.
 */
extern void paidb_worker_begin(const char *activity);
extern void paidb_worker_commit(void);

/*
 * End the worker at once if the postmaster died, without committing: for
 * loops that do not wait on a latch (WL_EXIT_ON_PM_DEATH covers those).
 */
extern void paidb_exit_if_postmaster_died(void);

/* Milliseconds of exponential backoff for the n-th consecutive failure
 * (0.8 s doubling to 30 s, with +-20% jitter), at least min_ms. */
extern long paidb_backoff_ms(int failures, long min_ms);

/* The worker's own long-lived memory context. */
extern MemoryContext paidb_worker_context;

#endif							/* PAIDB_WORKER_COMMON_H */
