/*
 * worker_common.h — what every paidb background worker shares: start-up,
 * signals, settings reload, and short transactions.
 */
#ifndef PAIDB_WORKER_COMMON_H
#define PAIDB_WORKER_COMMON_H

#include "worker_shmem.h"

/* Register the server's workers; called from _PG_init when preloaded. */
extern void paidb_register_workers(void);

/* Start one of a cluster's workers (the launcher does); false: no free slot. */
struct BackgroundWorkerHandle;
extern bool paidb_start_cluster_worker(PaidbWorkerKind kind, int slot, uint64 generation,
									   const char *cluster,
									   struct BackgroundWorkerHandle **handle);

/*
 * Each worker has its own entry point (bgw_function_name), declared in its
 * module's header, which starts with paidb_worker_startup().
 */

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
 * Run one statement that returns one row in its own transaction.  The
 * row's first nout columns are stored in out[] as text (NULL for SQL NULL),
 * allocated in the caller's memory context.  On error: log a WARNING
 * "<activity> failed: <message>", count it in status() for `kind`, and
 * return false with nothing committed.
 */
extern bool paidb_worker_run_step(PaidbWorkerKind kind, const char *activity,
								  const char *sql, int nargs, Oid *types,
								  Datum *args, const char *nulls,
								  char **out, int nout);

/*
 * Run one SQL statement at the top level of its own transaction, as a
 * client's simple query runs, with the privileges of role `as_role` (the
 * owner of what it changes): also the statements no function may run,
 * like CREATE INDEX CONCURRENTLY (which commits on its own).  Its result,
 * if any, is discarded.  On error: a WARNING "<activity> failed: <message>",
 * counted in status() for `kind`, and false.
 */
extern bool paidb_worker_run_toplevel(PaidbWorkerKind kind, const char *activity,
									  const char *sql, Oid as_role);

/*
 * End the worker at once if the postmaster died, without committing: for
 * loops that do not wait on a latch (WL_EXIT_ON_PM_DEATH covers those).
 */
extern void paidb_exit_if_postmaster_died(void);

/* Milliseconds of exponential backoff for the n-th consecutive failure
 * (0.8 s doubling to 30 s, with +-20% jitter), at least min_ms. */
extern long paidb_backoff_ms(int failures, long min_ms);

/*
 * Run fn(arg) inside an internal subtransaction of the current transaction.
 * Returns NULL when it committed; on ERROR the subtransaction is rolled back,
 * the error state flushed, and a copy of the error (allocated in errcxt, the
 * caller frees it) returned.  CurrentMemoryContext and CurrentResourceOwner
 * are the caller's again on return either way.
 */
typedef void (*PaidbSubxactFn) (void *arg);
extern ErrorData *paidb_run_in_subxact(PaidbSubxactFn fn, void *arg,
									   MemoryContext errcxt);

/*
 * Wait on a K8sClient until done(arg, rc) is true (rc: the last
 * k8s_client_wait() result, 0 before the first wait) or timeout_ms passes
 * (-1: no limit).  Interrupts are honoured.  A latch wake-up that arrives
 * meanwhile is reset while waiting and set again on return, also when an
 * ERROR leaves, so the caller's own loop still sees it.  Returns whether
 * done() said so (false: timed out).
 */
struct K8sClient;
typedef bool (*PaidbWaitDoneFn) (void *arg, int wait_rc);
extern bool paidb_wait_keeping_latch(struct K8sClient *client, long timeout_ms,
									 uint32 wait_event_info,
									 PaidbWaitDoneFn done, void *arg);

/* The worker's own long-lived memory context. */
extern MemoryContext paidb_worker_context;

#endif							/* PAIDB_WORKER_COMMON_H */
