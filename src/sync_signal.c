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

#include "sync_signal.h"
#include "worker_shmem.h"

static bool sync_needed_at_commit = false;
static bool workers_needed_at_commit = false;
static bool callback_registered = false;

/* Remember that the current transaction changed a row that needs syncing. */
void
paidb_note_sync_needed(void)
{
	sync_needed_at_commit = true;
}

/* At commit, wake the sync worker if this transaction asked for it. */
static void
paidb_xact_callback(XactEvent event, void *arg)
{
	switch (event)
	{
		case XACT_EVENT_COMMIT:
		case XACT_EVENT_PARALLEL_COMMIT:
			if (sync_needed_at_commit)
			{
				sync_needed_at_commit = false;
				paidb_wake_worker(PAIDB_WORKER_SYNC);
			}
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
			sync_needed_at_commit = false;
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
