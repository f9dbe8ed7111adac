/*
 * worker_shmem.c — the shared state of paidb's background workers.
 *
 * Only plain data lives here (pids, latches, counters, each cluster's
 * configuration); curl handles and buffers always stay private to the
 * worker process.  A cluster slot belongs to the launcher, which fills it
 * from paidb.cluster; its workers read their configuration from it.
 */
#include "postgres.h"

#include "fmgr.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/lwlock.h"
#include "storage/proc.h"
#include "storage/shmem.h"
#include "storage/spin.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"

#include "guc.h"
#include "worker_shmem.h"

const char *const paidb_worker_names[PAIDB_NUM_WORKER_KINDS] = {
	"sync", "framework watcher", "event watcher", "retention", "launcher"
};

typedef struct PaidbWorkerSlot
{
	pid_t		pid;
	Latch	   *latch;
	Oid			database;		/* set once connected; InvalidOid before */
	TimestampTz started_at;
	TimestampTz last_activity;
	char		state[64];
	char		resource_version[64];
	uint64		events_applied;
	uint64		requests_sent;
	uint64		errors;
	char		last_error[512];
} PaidbWorkerSlot;

typedef struct PaidbClusterSlot
{
	bool		in_use;
	uint64		generation;		/* of the workers that should run */
	PaidbClusterConfig conf;
	TimestampTz last_contact;	/* last successful answer of its API server */
	char		problem[256];	/* why its workers could not start */
	PaidbWorkerSlot workers[PAIDB_CLUSTER_WORKERS];
} PaidbClusterSlot;

typedef struct PaidbShared
{
	slock_t		mutex;
	int			nclusters;		/* paidb.max_clusters at start */
	PaidbWorkerSlot server_workers[PAIDB_NUM_WORKER_KINDS - PAIDB_CLUSTER_WORKERS];
	PaidbClusterSlot clusters[FLEXIBLE_ARRAY_MEMBER];
} PaidbShared;

static PaidbShared *paidb_shared = NULL;
static shmem_request_hook_type prev_shmem_request_hook = NULL;
static shmem_startup_hook_type prev_shmem_startup_hook = NULL;

/* The calling worker's own slot, cluster slot and generation. */
static PaidbWorkerSlot *my_slot = NULL;
static int	my_cluster_slot = -1;
static uint64 my_generation = 0;

static Size
shared_size(int nclusters)
{
	return add_size(offsetof(PaidbShared, clusters),
					mul_size(sizeof(PaidbClusterSlot), nclusters));
}

/* Ask the postmaster for our shared memory. */
static void
paidb_shmem_request(void)
{
	if (prev_shmem_request_hook)
		prev_shmem_request_hook();
	RequestAddinShmemSpace(MAXALIGN(shared_size(paidb_max_clusters)));
}

/* Find (or, in the postmaster, create) the shared state. */
static bool
attach_shared(void)
{
	bool		found;

	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
	paidb_shared = ShmemInitStruct("paidb", shared_size(paidb_max_clusters), &found);
	if (!found)
	{
		memset(paidb_shared, 0, shared_size(paidb_max_clusters));
		SpinLockInit(&paidb_shared->mutex);
		paidb_shared->nclusters = paidb_max_clusters;
	}
	LWLockRelease(AddinShmemInitLock);
	return found;
}

/* Create or attach the shared state. */
static void
paidb_shmem_startup(void)
{
	if (prev_shmem_startup_hook)
		prev_shmem_startup_hook();
	(void) attach_shared();
}

/* Reserve and attach shared memory; called from _PG_init when preloaded. */
void
paidb_shmem_init(void)
{
	prev_shmem_request_hook = shmem_request_hook;
	shmem_request_hook = paidb_shmem_request;
	prev_shmem_startup_hook = shmem_startup_hook;
	shmem_startup_hook = paidb_shmem_startup;
}

/* Whether the shared state exists (paidb was preloaded). */
bool
paidb_shmem_available(void)
{
	return paidb_shared != NULL;
}

/* The slot of a worker kind in a cluster slot (or of a server worker). */
static PaidbWorkerSlot *
worker_slot(PaidbWorkerKind kind, int cluster_slot)
{
	if (PAIDB_KIND_PER_CLUSTER(kind))
		return &paidb_shared->clusters[cluster_slot].workers[kind];
	return &paidb_shared->server_workers[kind - PAIDB_CLUSTER_WORKERS];
}

/* Publish a worker's pid and latch at start; false if it is not wanted. */
bool
paidb_worker_attach(PaidbWorkerKind kind, int cluster_slot, uint64 generation,
					PaidbClusterConfig *conf)
{
	PaidbWorkerSlot *slot;

	if (paidb_shared == NULL)
	{
		/*
		 * Only when this copy of the library is not the one the postmaster
		 * preloaded (paidb.so was replaced while the server ran): find the
		 * shared state by name; a different layout fails cleanly.
		 */
		if (!attach_shared())
			ereport(ERROR,
					(errmsg("paidb shared memory is missing"),
					 errhint("Restart the server after installing a new paidb.")));
	}
	if (PAIDB_KIND_PER_CLUSTER(kind) &&
		(cluster_slot < 0 || cluster_slot >= paidb_shared->nclusters))
		return false;

	SpinLockAcquire(&paidb_shared->mutex);
	if (PAIDB_KIND_PER_CLUSTER(kind))
	{
		PaidbClusterSlot *cs = &paidb_shared->clusters[cluster_slot];

		/* started for a configuration the launcher has replaced since */
		if (!cs->in_use || cs->generation != generation)
		{
			SpinLockRelease(&paidb_shared->mutex);
			return false;
		}
		*conf = cs->conf;
	}
	slot = worker_slot(kind, cluster_slot);
	slot->pid = MyProcPid;
	slot->latch = MyLatch;
	slot->database = InvalidOid;
	slot->started_at = GetCurrentTimestamp();
	slot->last_activity = slot->started_at;
	strlcpy(slot->state, "starting", sizeof(slot->state));
	SpinLockRelease(&paidb_shared->mutex);

	my_slot = slot;
	my_cluster_slot = PAIDB_KIND_PER_CLUSTER(kind) ? cluster_slot : -1;
	my_generation = generation;
	return true;
}

/* Whether the calling cluster worker is still wanted; refresh retain mode. */
bool
paidb_worker_still_current(PaidbClusterConfig *conf)
{
	PaidbClusterSlot *cs;
	bool		current;

	if (paidb_shared == NULL || my_cluster_slot < 0)
		return true;
	cs = &paidb_shared->clusters[my_cluster_slot];
	SpinLockAcquire(&paidb_shared->mutex);
	current = cs->in_use && cs->generation == my_generation;
	if (current && conf)
		conf->retain_mode = cs->conf.retain_mode;
	SpinLockRelease(&paidb_shared->mutex);
	return current;
}

/* Record the database a worker is connected to (it is woken only for it). */
void
paidb_worker_set_database(Oid database)
{
	if (my_slot == NULL)
		return;
	SpinLockAcquire(&paidb_shared->mutex);
	my_slot->database = database;
	SpinLockRelease(&paidb_shared->mutex);
}

/* Unpublish a worker at exit; counters stay for status(). */
void
paidb_worker_detach(void)
{
	if (paidb_shared == NULL || my_slot == NULL)
		return;
	SpinLockAcquire(&paidb_shared->mutex);
	if (my_slot->pid == MyProcPid)
	{
		my_slot->pid = 0;
		my_slot->latch = NULL;
		strlcpy(my_slot->state, "stopped", sizeof(my_slot->state));
	}
	SpinLockRelease(&paidb_shared->mutex);
}

/* The latch of a worker slot if it runs in our database (under the mutex). */
static Latch *
latch_to_wake(PaidbWorkerSlot *slot)
{
	/* a commit in another database has nothing for this worker */
	if (slot->pid != 0 &&
		(MyDatabaseId == InvalidOid || slot->database == MyDatabaseId))
		return slot->latch;
	return NULL;
}

/* Set the latch of every running worker of a kind. */
void
paidb_wake_worker(PaidbWorkerKind kind)
{
	Latch	   *latches[1024];	/* paidb.max_clusters is at most 1000 */
	int			n = 0;
	int			i;

	if (paidb_shared == NULL)
		return;
	SpinLockAcquire(&paidb_shared->mutex);
	if (!PAIDB_KIND_PER_CLUSTER(kind))
	{
		Latch	   *l = latch_to_wake(worker_slot(kind, -1));

		if (l)
			latches[n++] = l;
	}
	else
	{
		for (i = 0; i < paidb_shared->nclusters && n < (int) lengthof(latches); i++)
		{
			Latch	   *l;

			if (!paidb_shared->clusters[i].in_use)
				continue;
			l = latch_to_wake(&paidb_shared->clusters[i].workers[kind]);
			if (l)
				latches[n++] = l;
		}
	}
	SpinLockRelease(&paidb_shared->mutex);
	/* a latch in PGPROC stays valid memory even if the worker just exited */
	for (i = 0; i < n; i++)
		SetLatch(latches[i]);
}

/* Set the latch of the worker of a kind that serves the cluster `name`. */
void
paidb_wake_cluster_worker(PaidbWorkerKind kind, const char *name)
{
	Latch	   *latch = NULL;
	int			i;

	Assert(PAIDB_KIND_PER_CLUSTER(kind));
	if (paidb_shared == NULL)
		return;
	SpinLockAcquire(&paidb_shared->mutex);
	for (i = 0; i < paidb_shared->nclusters; i++)
		if (paidb_shared->clusters[i].in_use &&
			strcmp(paidb_shared->clusters[i].conf.name, name) == 0)
		{
			latch = latch_to_wake(&paidb_shared->clusters[i].workers[kind]);
			break;
		}
	SpinLockRelease(&paidb_shared->mutex);
	if (latch)
		SetLatch(latch);
}

/* Update what status() shows for the calling worker. */
void
paidb_worker_report(PaidbWorkerKind kind, const char *state,
					const char *resource_version, uint64 add_events,
					uint64 add_requests, uint64 add_errors, const char *last_error)
{
	PaidbWorkerSlot *slot = my_slot;

	(void) kind;				/* a process reports only for itself */
	if (paidb_shared == NULL || slot == NULL)
		return;
	SpinLockAcquire(&paidb_shared->mutex);
	slot->last_activity = GetCurrentTimestamp();
	if (state)
		strlcpy(slot->state, state, sizeof(slot->state));
	if (resource_version)
		strlcpy(slot->resource_version, resource_version, sizeof(slot->resource_version));
	slot->events_applied += add_events;
	slot->requests_sent += add_requests;
	slot->errors += add_errors;
	if (last_error)
		strlcpy(slot->last_error, last_error, sizeof(slot->last_error));
	SpinLockRelease(&paidb_shared->mutex);
}

/* The calling worker had a successful answer from its API server. */
void
paidb_worker_note_contact(void)
{
	TimestampTz now;

	if (paidb_shared == NULL || my_cluster_slot < 0)
		return;
	now = GetCurrentTimestamp();
	SpinLockAcquire(&paidb_shared->mutex);
	if (paidb_shared->clusters[my_cluster_slot].generation == my_generation)
		paidb_shared->clusters[my_cluster_slot].last_contact = now;
	SpinLockRelease(&paidb_shared->mutex);
}

/* --- the launcher's side ------------------------------------------------ */

int
paidb_cluster_slots(void)
{
	return paidb_shared ? paidb_shared->nclusters : 0;
}

/* Slot of a cluster by name, or -1. */
int
paidb_cluster_slot_find(const char *name)
{
	int			i,
				found = -1;

	SpinLockAcquire(&paidb_shared->mutex);
	for (i = 0; i < paidb_shared->nclusters; i++)
		if (paidb_shared->clusters[i].in_use &&
			strcmp(paidb_shared->clusters[i].conf.name, name) == 0)
		{
			found = i;
			break;
		}
	SpinLockRelease(&paidb_shared->mutex);
	return found;
}

/* Take a free slot for a cluster, or -1. */
int
paidb_cluster_slot_claim(const PaidbClusterConfig *conf, uint64 generation)
{
	int			i,
				found = -1;

	SpinLockAcquire(&paidb_shared->mutex);
	for (i = 0; i < paidb_shared->nclusters; i++)
	{
		PaidbClusterSlot *cs = &paidb_shared->clusters[i];

		if (cs->in_use)
			continue;
		memset(cs, 0, sizeof(*cs));
		cs->in_use = true;
		cs->generation = generation;
		cs->conf = *conf;
		found = i;
		break;
	}
	SpinLockRelease(&paidb_shared->mutex);
	return found;
}

/* Give a slot up: its workers find their generation gone and exit. */
void
paidb_cluster_slot_release(int slot)
{
	SpinLockAcquire(&paidb_shared->mutex);
	paidb_shared->clusters[slot].in_use = false;
	paidb_shared->clusters[slot].generation = 0;
	SpinLockRelease(&paidb_shared->mutex);
}

/* Read a slot; false when it is not in use. */
bool
paidb_cluster_slot_get(int slot, PaidbClusterConfig *conf, uint64 *generation)
{
	bool		in_use;

	SpinLockAcquire(&paidb_shared->mutex);
	in_use = paidb_shared->clusters[slot].in_use;
	if (in_use)
	{
		*conf = paidb_shared->clusters[slot].conf;
		*generation = paidb_shared->clusters[slot].generation;
	}
	SpinLockRelease(&paidb_shared->mutex);
	return in_use;
}

/* Change a slot's configuration (and generation). */
void
paidb_cluster_slot_set(int slot, const PaidbClusterConfig *conf, uint64 generation)
{
	PaidbClusterSlot *cs = &paidb_shared->clusters[slot];

	SpinLockAcquire(&paidb_shared->mutex);
	if (cs->generation != generation)
	{
		/* new workers: nothing of the old connection's state applies */
		cs->last_contact = 0;
		cs->problem[0] = '\0';
	}
	cs->conf = *conf;
	cs->generation = generation;
	SpinLockRelease(&paidb_shared->mutex);
}

/* The pid of a cluster's worker, or 0. */
int
paidb_cluster_worker_pid(int slot, PaidbWorkerKind kind)
{
	int			pid;

	SpinLockAcquire(&paidb_shared->mutex);
	pid = paidb_shared->clusters[slot].workers[kind].pid;
	SpinLockRelease(&paidb_shared->mutex);
	return pid;
}

/* Why a cluster's workers could not start (NULL: clear). */
void
paidb_cluster_slot_set_problem(int slot, const char *problem)
{
	SpinLockAcquire(&paidb_shared->mutex);
	strlcpy(paidb_shared->clusters[slot].problem, problem ? problem : "",
			sizeof(paidb_shared->clusters[slot].problem));
	SpinLockRelease(&paidb_shared->mutex);
}

/* --- SQL ------------------------------------------------------------------ */

#define STATUS_COLUMNS 11

/* One status() row from a copy of a worker slot. */
static void
put_status_row(ReturnSetInfo *rsinfo, PaidbWorkerKind kind, const char *cluster,
			   const PaidbWorkerSlot *slot)
{
	Datum		values[STATUS_COLUMNS];
	bool		nulls[STATUS_COLUMNS];

	memset(nulls, 0, sizeof(nulls));
	values[0] = CStringGetTextDatum(paidb_worker_names[kind]);
	values[10] = cluster ? CStringGetTextDatum(cluster) : (Datum) 0;
	nulls[10] = (cluster == NULL);
	if (slot == NULL)
	{
		/* loaded without shared_preload_libraries: say so plainly */
		nulls[1] = nulls[3] = nulls[4] = nulls[5] = true;
		nulls[6] = nulls[7] = nulls[8] = nulls[9] = true;
		values[2] = CStringGetTextDatum("not running: paidb is not in shared_preload_libraries");
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
		return;
	}
	values[1] = Int32GetDatum(slot->pid);
	nulls[1] = (slot->pid == 0);
	values[2] = CStringGetTextDatum(slot->state[0] ? slot->state :
									paidb_enabled ? "not started" : "disabled: paidb.enabled is off");
	values[3] = TimestampTzGetDatum(slot->started_at);
	nulls[3] = (slot->started_at == 0);
	values[4] = TimestampTzGetDatum(slot->last_activity);
	nulls[4] = (slot->last_activity == 0);
	values[5] = CStringGetTextDatum(slot->resource_version);
	nulls[5] = (slot->resource_version[0] == '\0');
	values[6] = Int64GetDatum((int64) slot->events_applied);
	values[7] = Int64GetDatum((int64) slot->requests_sent);
	values[8] = Int64GetDatum((int64) slot->errors);
	values[9] = CStringGetTextDatum(slot->last_error);
	nulls[9] = (slot->last_error[0] == '\0');
	tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
}

PG_FUNCTION_INFO_V1(paidb_status);

/*
 * status(): one row per background worker, each cluster's workers with
 * their cluster; never a credential.
 */
Datum
paidb_status(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	int			i,
				k;
	bool		any_cluster = false;

	InitMaterializedSRF(fcinfo, 0);
	if (paidb_shared == NULL)
	{
		for (k = 0; k < PAIDB_WORKER_LAUNCHER; k++)
			put_status_row(rsinfo, (PaidbWorkerKind) k,
						   PAIDB_KIND_PER_CLUSTER(k) ? PAIDB_DEFAULT_CLUSTER : NULL, NULL);
		return (Datum) 0;
	}
	for (i = 0; i < paidb_shared->nclusters; i++)
	{
		PaidbClusterSlot cs;

		SpinLockAcquire(&paidb_shared->mutex);
		cs = paidb_shared->clusters[i];
		SpinLockRelease(&paidb_shared->mutex);
		if (!cs.in_use)
			continue;
		any_cluster = true;
		for (k = 0; k < PAIDB_CLUSTER_WORKERS; k++)
			put_status_row(rsinfo, (PaidbWorkerKind) k, cs.conf.name, &cs.workers[k]);
	}
	if (!any_cluster)
	{
		/* before the launcher has started anything: the default cluster's */
		PaidbWorkerSlot empty;

		memset(&empty, 0, sizeof(empty));
		for (k = 0; k < PAIDB_CLUSTER_WORKERS; k++)
			put_status_row(rsinfo, (PaidbWorkerKind) k, PAIDB_DEFAULT_CLUSTER, &empty);
	}
	for (k = PAIDB_CLUSTER_WORKERS; k < PAIDB_NUM_WORKER_KINDS; k++)
	{
		PaidbWorkerSlot slot;

		SpinLockAcquire(&paidb_shared->mutex);
		slot = *worker_slot((PaidbWorkerKind) k, -1);
		SpinLockRelease(&paidb_shared->mutex);
		put_status_row(rsinfo, (PaidbWorkerKind) k, NULL, &slot);
	}
	return (Datum) 0;
}

PG_FUNCTION_INFO_V1(paidb_cluster_workers);

/*
 * _cluster_workers(): per cluster with workers, what cluster_status shows
 * of them: running workers, last contact, the framework watch's
 * resourceVersion, the newest error.
 */
Datum
paidb_cluster_workers(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	int			i,
				k;

	InitMaterializedSRF(fcinfo, 0);
	if (paidb_shared == NULL)
		return (Datum) 0;
	for (i = 0; i < paidb_shared->nclusters; i++)
	{
		PaidbClusterSlot cs;
		Datum		values[5];
		bool		nulls[5] = {false, false, false, false, false};
		int			running = 0;
		const char *error = NULL;
		TimestampTz error_at = 0;

		SpinLockAcquire(&paidb_shared->mutex);
		cs = paidb_shared->clusters[i];
		SpinLockRelease(&paidb_shared->mutex);
		if (!cs.in_use)
			continue;
		for (k = 0; k < PAIDB_CLUSTER_WORKERS; k++)
		{
			if (cs.workers[k].pid != 0)
				running++;
			if (cs.workers[k].last_error[0] && cs.workers[k].last_activity >= error_at)
			{
				error = cs.workers[k].last_error;
				error_at = cs.workers[k].last_activity;
			}
		}
		/* workers that cannot start say nothing themselves */
		if (cs.problem[0])
			error = cs.problem;
		values[0] = CStringGetTextDatum(cs.conf.name);
		values[1] = Int32GetDatum(running);
		values[2] = TimestampTzGetDatum(cs.last_contact);
		nulls[2] = (cs.last_contact == 0);
		values[3] = CStringGetTextDatum(cs.workers[PAIDB_WORKER_FRAMEWORK_WATCHER].resource_version);
		nulls[3] = (cs.workers[PAIDB_WORKER_FRAMEWORK_WATCHER].resource_version[0] == '\0');
		values[4] = error ? CStringGetTextDatum(error) : (Datum) 0;
		nulls[4] = (error == NULL);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	return (Datum) 0;
}
