/*
 * worker_shmem.c — the shared state of paidb's background workers.
 *
 * Only plain data lives here (pids, latches, counters); curl handles and
 * buffers always stay private to the worker process.
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

const char *const paidb_worker_names[PAIDB_NUM_WORKERS] = {
	"sync", "framework watcher", "event watcher", "retention"
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

typedef struct PaidbShared
{
	slock_t		mutex;
	PaidbWorkerSlot slots[PAIDB_NUM_WORKERS];
} PaidbShared;

static PaidbShared *paidb_shared = NULL;
static shmem_request_hook_type prev_shmem_request_hook = NULL;
static shmem_startup_hook_type prev_shmem_startup_hook = NULL;

/* Ask the postmaster for our shared memory. */
static void
paidb_shmem_request(void)
{
	if (prev_shmem_request_hook)
		prev_shmem_request_hook();
	RequestAddinShmemSpace(MAXALIGN(sizeof(PaidbShared)));
}

/* Create or attach the shared state. */
static void
paidb_shmem_startup(void)
{
	bool		found;

	if (prev_shmem_startup_hook)
		prev_shmem_startup_hook();
	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
	paidb_shared = ShmemInitStruct("paidb", sizeof(PaidbShared), &found);
	if (!found)
	{
		memset(paidb_shared, 0, sizeof(PaidbShared));
		SpinLockInit(&paidb_shared->mutex);
	}
	LWLockRelease(AddinShmemInitLock);
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

/* Publish a worker's pid and latch at start. */
void
paidb_worker_attach(PaidbWorkerKind kind)
{
	PaidbWorkerSlot *slot;

	if (paidb_shared == NULL)
	{
		/*
		 * Only when this copy of the library is not the one the postmaster
		 * preloaded (paidb.so was replaced while the server ran): find the
		 * shared state by name; a different layout fails cleanly.
		 */
		bool		found;

		LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
		paidb_shared = ShmemInitStruct("paidb", sizeof(PaidbShared), &found);
		LWLockRelease(AddinShmemInitLock);
		if (!found)
			ereport(ERROR,
					(errmsg("paidb shared memory is missing"),
					 errhint("Restart the server after installing a new paidb.")));
	}
	slot = &paidb_shared->slots[kind];

	SpinLockAcquire(&paidb_shared->mutex);
	slot->pid = MyProcPid;
	slot->latch = MyLatch;
	slot->database = InvalidOid;
	slot->started_at = GetCurrentTimestamp();
	slot->last_activity = slot->started_at;
	strlcpy(slot->state, "starting", sizeof(slot->state));
	SpinLockRelease(&paidb_shared->mutex);
}

/* Record the database a worker is connected to (it is woken only for it). */
void
paidb_worker_set_database(PaidbWorkerKind kind, Oid database)
{
	SpinLockAcquire(&paidb_shared->mutex);
	paidb_shared->slots[kind].database = database;
	SpinLockRelease(&paidb_shared->mutex);
}

/* Unpublish a worker at exit; counters stay for status(). */
void
paidb_worker_detach(PaidbWorkerKind kind)
{
	PaidbWorkerSlot *slot;

	if (paidb_shared == NULL)
		return;
	slot = &paidb_shared->slots[kind];
	SpinLockAcquire(&paidb_shared->mutex);
	if (slot->pid == MyProcPid)
	{
		slot->pid = 0;
		slot->latch = NULL;
		strlcpy(slot->state, "stopped", sizeof(slot->state));
	}
	SpinLockRelease(&paidb_shared->mutex);
}

/* Set a worker's latch if it runs. */
void
paidb_wake_worker(PaidbWorkerKind kind)
{
	Latch	   *latch = NULL;

	if (paidb_shared == NULL)
		return;
	SpinLockAcquire(&paidb_shared->mutex);
	/* a commit in another database has nothing for this worker */
	if (paidb_shared->slots[kind].pid != 0 &&
		(MyDatabaseId == InvalidOid || paidb_shared->slots[kind].database == MyDatabaseId))
		latch = paidb_shared->slots[kind].latch;
	SpinLockRelease(&paidb_shared->mutex);
	/* a latch in PGPROC stays valid memory even if the worker just exited */
	if (latch)
		SetLatch(latch);
}

/* Update what status() shows for a worker. */
void
paidb_worker_report(PaidbWorkerKind kind, const char *state,
					const char *resource_version, uint64 add_events,
					uint64 add_requests, uint64 add_errors, const char *last_error)
{
	PaidbWorkerSlot *slot;

	if (paidb_shared == NULL)
		return;
	slot = &paidb_shared->slots[kind];
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

PG_FUNCTION_INFO_V1(paidb_status);

/* status(): one row per background worker; never a credential. */
Datum
paidb_status(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	int			i;

	InitMaterializedSRF(fcinfo, 0);
	for (i = 0; i < PAIDB_NUM_WORKERS; i++)
	{
		Datum		values[10];
		bool		nulls[10];
		PaidbWorkerSlot slot;

		memset(nulls, 0, sizeof(nulls));
		values[0] = CStringGetTextDatum(paidb_worker_names[i]);
		if (paidb_shared == NULL)
		{
			/* loaded without shared_preload_libraries: say so plainly */
			nulls[1] = nulls[3] = nulls[4] = nulls[5] = true;
			nulls[6] = nulls[7] = nulls[8] = nulls[9] = true;
			values[2] = CStringGetTextDatum("not running: paidb is not in shared_preload_libraries");
			tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
			continue;
		}
		SpinLockAcquire(&paidb_shared->mutex);
		slot = paidb_shared->slots[i];
		SpinLockRelease(&paidb_shared->mutex);

		values[1] = Int32GetDatum(slot.pid);
		nulls[1] = (slot.pid == 0);
		values[2] = CStringGetTextDatum(slot.state[0] ? slot.state :
										paidb_enabled ? "not started" : "disabled: paidb.enabled is off");
		values[3] = TimestampTzGetDatum(slot.started_at);
		nulls[3] = (slot.started_at == 0);
		values[4] = TimestampTzGetDatum(slot.last_activity);
		nulls[4] = (slot.last_activity == 0);
		values[5] = CStringGetTextDatum(slot.resource_version);
		nulls[5] = (slot.resource_version[0] == '\0');
		values[6] = Int64GetDatum((int64) slot.events_applied);
		values[7] = Int64GetDatum((int64) slot.requests_sent);
		values[8] = Int64GetDatum((int64) slot.errors);
		values[9] = CStringGetTextDatum(slot.last_error);
		nulls[9] = (slot.last_error[0] == '\0');
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	return (Datum) 0;
}
