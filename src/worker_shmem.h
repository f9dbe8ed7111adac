/*
 * worker_shmem.h — the shared state of paidb's background workers: who
 * they are, which cluster each serves and with what configuration, how to
 * wake them, and the counters status() and cluster_status show.
 */
#ifndef PAIDB_WORKER_SHMEM_H
#define PAIDB_WORKER_SHMEM_H

#include "datatype/timestamp.h"
#include "storage/latch.h"

#include "cluster_config.h"

typedef enum PaidbWorkerKind
{
	/* one of each per cluster (SPEC §11) */
	PAIDB_WORKER_SYNC = 0,
	PAIDB_WORKER_FRAMEWORK_WATCHER,
	PAIDB_WORKER_EVENT_WATCHER,
	/* one of each per server */
	PAIDB_WORKER_RETENTION,
	PAIDB_WORKER_LAUNCHER,
	PAIDB_NUM_WORKER_KINDS
} PaidbWorkerKind;

/* The kinds every cluster has one of: the first PAIDB_CLUSTER_WORKERS. */
#define PAIDB_CLUSTER_WORKERS 3
#define PAIDB_KIND_PER_CLUSTER(kind) ((int) (kind) < PAIDB_CLUSTER_WORKERS)

extern const char *const paidb_worker_names[PAIDB_NUM_WORKER_KINDS];

/* Reserve and attach shared memory; called from _PG_init when preloaded. */
extern void paidb_shmem_init(void);

/* Whether the shared state exists (paidb was preloaded). */
extern bool paidb_shmem_available(void);

/*
 * Called by a worker at start: publish its pid and latch.  A cluster's
 * worker gives its cluster slot and the generation it was started for; it
 * gets its cluster's configuration in *conf, or false when the launcher
 * has moved on (the cluster was changed or removed): the worker must then
 * exit with code 0 so that it is not started again.
 */
extern bool paidb_worker_attach(PaidbWorkerKind kind, int cluster_slot,
								uint64 generation, PaidbClusterConfig *conf);

/*
 * For a running cluster worker: whether its slot still has the generation
 * it was started for, refreshing *conf's settings that change without a
 * restart (retain mode).
 */
extern bool paidb_worker_still_current(PaidbClusterConfig *conf);

/* Record the database a worker is connected to (it is woken only for it). */
extern void paidb_worker_set_database(Oid database);

/* Called by a worker at exit (on_shmem_exit): unpublish itself. */
extern void paidb_worker_detach(void);

/* Set the latch of every running worker of a kind (in every cluster). */
extern void paidb_wake_worker(PaidbWorkerKind kind);

/* Set the latch of the worker of a kind that serves the cluster `name`. */
extern void paidb_wake_cluster_worker(PaidbWorkerKind kind, const char *name);

/* Update what status() shows for the calling worker; NULL strings leave fields as they are. */
extern void paidb_worker_report(PaidbWorkerKind kind, const char *state,
								const char *resource_version,
								uint64 add_events, uint64 add_requests,
								uint64 add_errors, const char *last_error);

/* The calling worker had a successful answer from its API server. */
extern void paidb_worker_note_contact(void);

/*
 * The launcher's view of the cluster slots (worker_launcher.c).
 */
extern int	paidb_cluster_slots(void);
/* Slot of a cluster by name, or -1. */
extern int	paidb_cluster_slot_find(const char *name);
/* A free slot, or -1 when paidb.max_clusters are in use. */
extern int	paidb_cluster_slot_claim(const PaidbClusterConfig *conf, uint64 generation);
/* Give a slot up; its workers see their generation gone and exit. */
extern void paidb_cluster_slot_release(int slot);
/* Read a slot (false: not in use). */
extern bool paidb_cluster_slot_get(int slot, PaidbClusterConfig *conf, uint64 *generation);
/* Change a slot's configuration; with a new generation its workers are replaced. */
extern void paidb_cluster_slot_set(int slot, const PaidbClusterConfig *conf, uint64 generation);
/* The pid of a cluster's worker of a kind, or 0. */
extern int	paidb_cluster_worker_pid(int slot, PaidbWorkerKind kind);
/* Why a cluster's workers could not start (NULL: clear). */
extern void paidb_cluster_slot_set_problem(int slot, const char *problem);

#endif							/* PAIDB_WORKER_SHMEM_H */
