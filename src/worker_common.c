/*
 * worker_common.c — start-up, signals, reload and transactions shared by
 * paidb's background workers.
 *
 * Workers start only on a primary (BgWorkerStart_RecoveryFinished: a standby
 * starts them at promotion), restart after a crash (bgw_restart_time), and
 * exit non-zero on error: exit code 0 would unregister a worker for good.
 */
#include "postgres.h"

#include "access/xact.h"
#include "commands/extension.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/pmsignal.h"
#include "storage/proc.h"
#include "tcop/tcopprot.h"
#include "utils/guc.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"

#include "common/pg_prng.h"
#include "guc.h"
#include "worker_common.h"

MemoryContext paidb_worker_context = NULL;

static PaidbWorkerKind my_kind;

extern void paidb_sync_main(void);
extern void paidb_framework_watcher_main(void);
extern void paidb_event_watcher_main(void);

/* Register the three workers; called from _PG_init when preloaded. */
void
paidb_register_workers(void)
{
	int			i;

	for (i = 0; i < PAIDB_NUM_WORKERS; i++)
	{
		BackgroundWorker worker;

		memset(&worker, 0, sizeof(worker));
		worker.bgw_flags = BGWORKER_SHMEM_ACCESS | BGWORKER_BACKEND_DATABASE_CONNECTION;
		worker.bgw_start_time = BgWorkerStart_RecoveryFinished;
		worker.bgw_restart_time = 1;
		snprintf(worker.bgw_library_name, BGW_MAXLEN, "paidb");
		snprintf(worker.bgw_function_name, BGW_MAXLEN, "paidb_worker_main");
		snprintf(worker.bgw_name, BGW_MAXLEN, "paidb %s", paidb_worker_names[i]);
		snprintf(worker.bgw_type, BGW_MAXLEN, "paidb %s", paidb_worker_names[i]);
		worker.bgw_main_arg = Int32GetDatum(i);
		RegisterBackgroundWorker(&worker);
	}
}

/* Entry point of every paidb background worker. */
void
paidb_worker_main(Datum main_arg)
{
	PaidbWorkerKind kind = (PaidbWorkerKind) DatumGetInt32(main_arg);

	paidb_worker_startup(kind);
	switch (kind)
	{
		case PAIDB_WORKER_SYNC:
			paidb_sync_main();
			break;
		case PAIDB_WORKER_FRAMEWORK_WATCHER:
			paidb_framework_watcher_main();
			break;
		case PAIDB_WORKER_EVENT_WATCHER:
			paidb_event_watcher_main();
			break;
		default:
			elog(ERROR, "unknown paidb worker %d", (int) kind);
	}
	/* the main loops never return; if one does, restart it */
	proc_exit(1);
}

/* on_shmem_exit callback: unpublish the worker. */
static void
worker_exit(int code, Datum arg)
{
	paidb_worker_detach((PaidbWorkerKind) DatumGetInt32(arg));
}

/* Whether the paidb extension exists in the connected database. */
static bool
extension_installed(void)
{
	bool		found;

	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	found = OidIsValid(get_extension_oid("paidb", true));
	CommitTransactionCommand();
	return found;
}

/*
 * Set up a worker process, then wait until CREATE EXTENSION paidb has run
 * in paidb.database.
 */
void
paidb_worker_startup(PaidbWorkerKind kind)
{
	bool		told = false;

	my_kind = kind;
	pqsignal(SIGHUP, SignalHandlerForConfigReload);
	pqsignal(SIGTERM, die);
	BackgroundWorkerUnblockSignals();

	paidb_worker_context = AllocSetContextCreate(TopMemoryContext,
												 "paidb worker",
												 ALLOCSET_DEFAULT_SIZES);
	paidb_worker_attach(kind);
	on_shmem_exit(worker_exit, Int32GetDatum(kind));

	BackgroundWorkerInitializeConnection(paidb_database, NULL, 0);
	paidb_worker_set_database(kind, MyDatabaseId);
	pgstat_report_appname(psprintf("paidb %s", paidb_worker_names[kind]));

	while (!extension_installed())
	{
		if (!told)
		{
			ereport(LOG,
					(errmsg("paidb %s is waiting for CREATE EXTENSION paidb in database \"%s\"",
							paidb_worker_names[kind], paidb_database)));
			told = true;
		}
		paidb_worker_report(kind, "waiting for CREATE EXTENSION paidb", NULL, 0, 0, 0, NULL);
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 5000L, PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
		CHECK_FOR_INTERRUPTS();
		paidb_worker_reload_if_needed();
	}
	ereport(LOG, (errmsg("paidb %s started", paidb_worker_names[kind])));
	paidb_worker_report(kind, "running", NULL, 0, 0, 0, NULL);
}

/* Reload the configuration if SIGHUP arrived; true if it did. */
bool
paidb_worker_reload_if_needed(void)
{
	if (!ConfigReloadPending)
		return false;
	ConfigReloadPending = false;
	ProcessConfigFile(PGC_SIGHUP);
	return true;
}

/* Begin a short worker transaction with a snapshot and SPI. */
void
paidb_worker_begin(const char *activity)
{
	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	SPI_connect();
	PushActiveSnapshot(GetTransactionSnapshot());
	pgstat_report_activity(STATE_RUNNING, activity);
}

/* End the worker now if the postmaster is gone (nothing is committed). */
void
paidb_exit_if_postmaster_died(void)
{
	if (!PostmasterIsAlive())
		ereport(FATAL,
				(errcode(ERRCODE_ADMIN_SHUTDOWN),
				 errmsg("terminating paidb worker because the postmaster died")));
}

/* Commit a short worker transaction and go idle. */
void
paidb_worker_commit(void)
{
	/* a server that is gone must not see more commits from us */
	paidb_exit_if_postmaster_died();
	SPI_finish();
	PopActiveSnapshot();
	CommitTransactionCommand();
	pgstat_report_stat(false);
	pgstat_report_activity(STATE_IDLE, NULL);
	MemoryContextSwitchTo(paidb_worker_context);
}

/* Exponential backoff with jitter for the n-th consecutive failure. */
long
paidb_backoff_ms(int failures, long min_ms)
{
	double		ms = 800.0;
	int			i;

	for (i = 1; i < failures && ms < 30000.0; i++)
		ms *= 2.0;
	if (ms > 30000.0)
		ms = 30000.0;
	/* +-20% so that many failing jobs do not retry in lockstep */
	ms *= 0.8 + 0.4 * pg_prng_double(&pg_global_prng_state);
	if (ms < min_ms)
		ms = min_ms;
	return (long) ms;
}
