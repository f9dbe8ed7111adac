/*
 * sync_signal.c — wake the sync worker when a transaction that needs
 * syncing commits, and not before.
 *
 * A writer only sets a backend-local flag; one transaction callback,
 * registered once at load time, sets the sync worker's latch at commit.
 * Waking at commit (not at the write) means the worker never looks for a
 * row it cannot see yet; an aborted transaction wakes nobody.
 */
#include "postgres.h"

#include "access/xact.h"
#include "fmgr.h"

#include "cluster_config.h"
#include "sync_signal.h"
#include "worker_shmem.h"

/*
 * The clusters whose sync worker the transaction asked for.  A commit
 * wakes only those: with many clusters, waking every sync worker for each
 * submission would make each of them claim for nothing (SPEC §11: no
 * cluster pays for another's work).  Past a few, or for an unknown one,
 * everyone is woken.
 */
#define SYNC_WAKE_NAMES 4
static char sync_wake_names[SYNC_WAKE_NAMES][PAIDB_CLUSTER_NAME_SIZE];
static int	sync_wake_count = 0;
static bool sync_wake_all = false;
static bool workers_needed_at_commit = false;
static bool callback_registered = false;

/*
 * Remember that the current transaction changed a row that the sync worker
 * of `cluster` must act on (NULL: unknown, wake every cluster's).
 */
void
paidb_note_sync_needed(const char *cluster)
{
	int			i;

	if (sync_wake_all)
		return;
	if (cluster == NULL || strlen(cluster) >= PAIDB_CLUSTER_NAME_SIZE)
	{
		sync_wake_all = true;
		return;
	}
	for (i = 0; i < sync_wake_count; i++)
		if (strcmp(sync_wake_names[i], cluster) == 0)
			return;
	if (sync_wake_count == SYNC_WAKE_NAMES)
	{
		sync_wake_all = true;
		return;
	}
	strlcpy(sync_wake_names[sync_wake_count++], cluster, PAIDB_CLUSTER_NAME_SIZE);
}

/* Forget what the transaction asked for. */
static void
reset_sync_wake(void)
{
	sync_wake_count = 0;
	sync_wake_all = false;
}

/* At commit, wake the sync worker if this transaction asked for it. */
static void
paidb_xact_callback(XactEvent event, void *arg)
{
	switch (event)
	{
		case XACT_EVENT_COMMIT:
		case XACT_EVENT_PARALLEL_COMMIT:
			if (sync_wake_all)
				paidb_wake_worker(PAIDB_WORKER_SYNC);
			else
			{
				int			i;

				for (i = 0; i < sync_wake_count; i++)
					paidb_wake_cluster_worker(PAIDB_WORKER_SYNC, sync_wake_names[i]);
			}
			reset_sync_wake();
			if (workers_needed_at_commit)
			{
				int			i;

				workers_needed_at_commit = false;
				for (i = 0; i < PAIDB_NUM_WORKER_KINDS; i++)
					paidb_wake_worker((PaidbWorkerKind) i);
			}
			break;
		case XACT_EVENT_ABORT:
		case XACT_EVENT_PARALLEL_ABORT:
			reset_sync_wake();
			workers_needed_at_commit = false;
			break;
		default:
			break;
	}
}

/* Register the transaction callback once per process. */
void
paidb_sync_signal_init(void)
{
	if (callback_registered)
		return;
	RegisterXactCallback(paidb_xact_callback, NULL);
	callback_registered = true;
}

PG_FUNCTION_INFO_V1(paidb_wakeup);

/*
 * wakeup(): wake the sync worker now, and every worker again at commit.
 * The install script calls it, so that workers waiting for CREATE
 * EXTENSION start as soon as it commits instead of at their next poll.
 */
Datum
paidb_wakeup(PG_FUNCTION_ARGS)
{
	paidb_wake_worker(PAIDB_WORKER_SYNC);
	workers_needed_at_commit = true;
	PG_RETURN_VOID();
}
