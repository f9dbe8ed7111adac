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
#include "k8s_client.h"
#include "worker_common.h"

MemoryContext paidb_worker_context = NULL;

static PaidbWorkerKind my_kind;

/* bgw_function_name of each worker, by PaidbWorkerKind */
static const char *const worker_functions[PAIDB_NUM_WORKERS] = {
	"paidb_sync_main", "paidb_framework_watcher_main", "paidb_event_watcher_main"
};

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
		snprintf(worker.bgw_function_name, BGW_MAXLEN, "%s", worker_functions[i]);
		snprintf(worker.bgw_name, BGW_MAXLEN, "paidb %s", paidb_worker_names[i]);
		snprintf(worker.bgw_type, BGW_MAXLEN, "paidb %s", paidb_worker_names[i]);
		worker.bgw_main_arg = Int32GetDatum(i);
		RegisterBackgroundWorker(&worker);
	}
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

	BackgroundWorkerInitializeConnection(paidb_database,
										 paidb_worker_role && paidb_worker_role[0] ? paidb_worker_role : NULL,
										 0);
	/*
	 * Every statement of the workers resolves names in pg_catalog, then
	 * paidb, whatever the role's or database's search_path: no object a
	 * user can create changes what they execute (SPEC §8).  PGC_S_OVERRIDE
	 * outranks ALTER ROLE/DATABASE SET and a reloaded configuration file.
	 */
	SetConfigOption("search_path", "pg_catalog, paidb", PGC_SUSET, PGC_S_OVERRIDE);
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

/* Run fn(arg) in an internal subtransaction; the error, if any, is returned. */
ErrorData *
paidb_run_in_subxact(PaidbSubxactFn fn, void *arg, MemoryContext errcxt)
{
	MemoryContext oldcxt = CurrentMemoryContext;
	ResourceOwner oldowner = CurrentResourceOwner;
	ErrorData  *volatile edata = NULL;

	BeginInternalSubTransaction(NULL);
	MemoryContextSwitchTo(oldcxt);
	PG_TRY();
	{
		fn(arg);
		ReleaseCurrentSubTransaction();
		MemoryContextSwitchTo(oldcxt);
		CurrentResourceOwner = oldowner;
	}
	PG_CATCH();
	{
		MemoryContextSwitchTo(errcxt);
		edata = CopyErrorData();
		FlushErrorState();
		RollbackAndReleaseCurrentSubTransaction();
		MemoryContextSwitchTo(oldcxt);
		CurrentResourceOwner = oldowner;
	}
	PG_END_TRY();
	return edata;
}

/* Wait on the client until done() or the timeout, keeping a latch wake-up. */
bool
paidb_wait_keeping_latch(K8sClient *client, long timeout_ms, uint32 wait_event_info,
						 PaidbWaitDoneFn done, void *arg)
{
	TimestampTz deadline = timeout_ms >= 0 ?
		TimestampTzPlusMilliseconds(GetCurrentTimestamp(), timeout_ms) : 0;
	volatile bool latch_seen = false;
	volatile bool finished = false;

	PG_TRY();
	{
		int			rc = 0;

		while (!(finished = done(arg, rc)))
		{
			long		left = -1;

			if (timeout_ms >= 0)
			{
				left = TimestampDifferenceMilliseconds(GetCurrentTimestamp(), deadline);
				if (left <= 0)
					break;
			}
			rc = k8s_client_wait(client, left, wait_event_info);
			if (rc & WL_LATCH_SET)
			{
				ResetLatch(MyLatch);
				latch_seen = true;
			}
		}
	}
	PG_FINALLY();
	{
		if (latch_seen)
			SetLatch(MyLatch);
	}
	PG_END_TRY();
	return finished;
}
