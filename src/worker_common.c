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
#include "parser/analyze.h"
#include "tcop/pquery.h"
#include "tcop/tcopprot.h"
#include "tcop/utility.h"
#include "utils/guc.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"

#include "common/pg_prng.h"
#include "cluster_config.h"
#include "guc.h"
#include "k8s_client.h"
#include "worker_common.h"

MemoryContext paidb_worker_context = NULL;

static PaidbWorkerKind my_kind;
static PaidbClusterConfig my_cluster_config;

/* bgw_function_name of each worker, by PaidbWorkerKind */
static const char *const worker_functions[PAIDB_NUM_WORKER_KINDS] = {
	"paidb_sync_main", "paidb_framework_watcher_main", "paidb_event_watcher_main",
	"paidb_retention_main", "paidb_launcher_main"
};

/* What a cluster's worker is started with (bgw_extra). */
typedef struct ClusterWorkerArg
{
	int			slot;
	uint64		generation;
} ClusterWorkerArg;

/* A worker's BackgroundWorker entry, common fields filled. */
static void
init_worker_entry(BackgroundWorker *worker, PaidbWorkerKind kind)
{
	memset(worker, 0, sizeof(*worker));
	worker->bgw_flags = BGWORKER_SHMEM_ACCESS | BGWORKER_BACKEND_DATABASE_CONNECTION;
	worker->bgw_start_time = BgWorkerStart_RecoveryFinished;
	worker->bgw_restart_time = 1;
	snprintf(worker->bgw_library_name, BGW_MAXLEN, "paidb");
	snprintf(worker->bgw_function_name, BGW_MAXLEN, "%s", worker_functions[kind]);
	snprintf(worker->bgw_type, BGW_MAXLEN, "paidb %s", paidb_worker_names[kind]);
	worker->bgw_main_arg = Int32GetDatum(kind);
}

/*
 * Register the server's own workers (retention and the launcher, which
 * starts every cluster's); called from _PG_init when preloaded.
 */
void
paidb_register_workers(void)
{
	int			i;

	for (i = PAIDB_CLUSTER_WORKERS; i < PAIDB_NUM_WORKER_KINDS; i++)
	{
		BackgroundWorker worker;

		init_worker_entry(&worker, (PaidbWorkerKind) i);
		snprintf(worker.bgw_name, BGW_MAXLEN, "paidb %s", paidb_worker_names[i]);
		RegisterBackgroundWorker(&worker);
	}
}

/*
 * Start one of a cluster's workers for the slot's current generation.  The
 * postmaster restarts it after a crash; when the launcher has moved the
 * slot to another generation, the restarted worker exits with code 0 and
 * is gone for good.  False when no background worker slot is free.
 */
bool
paidb_start_cluster_worker(PaidbWorkerKind kind, int slot, uint64 generation,
						   const char *cluster, BackgroundWorkerHandle **handle)
{
	BackgroundWorker worker;
	ClusterWorkerArg arg;

	Assert(PAIDB_KIND_PER_CLUSTER(kind));
	init_worker_entry(&worker, kind);
	if (strcmp(cluster, PAIDB_DEFAULT_CLUSTER) == 0)
		snprintf(worker.bgw_name, BGW_MAXLEN, "paidb %s", paidb_worker_names[kind]);
	else
		snprintf(worker.bgw_name, BGW_MAXLEN, "paidb %s of cluster %s",
				 paidb_worker_names[kind], cluster);
	worker.bgw_notify_pid = MyProcPid;
	arg.slot = slot;
	arg.generation = generation;
	StaticAssertStmt(sizeof(arg) <= BGW_EXTRALEN, "bgw_extra too small");
	memcpy(worker.bgw_extra, &arg, sizeof(arg));
	return RegisterDynamicBackgroundWorker(&worker, handle);
}

/* on_shmem_exit callback: unpublish the worker. */
static void
worker_exit(int code, Datum arg)
{
	paidb_worker_detach();
}

/* Leave for good: the launcher has replaced or removed this worker's cluster. */
static void
exit_not_current(void)
{
	ereport(LOG,
			(errmsg("paidb %s stops: its cluster was changed or removed",
					paidb_worker_label(paidb_worker_names[my_kind]))));
	/* exit code 0: the postmaster does not start it again */
	proc_exit(0);
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
	if (PAIDB_KIND_PER_CLUSTER(kind))
	{
		ClusterWorkerArg arg;

		memcpy(&arg, MyBgworkerEntry->bgw_extra, sizeof(arg));
		if (!paidb_worker_attach(kind, arg.slot, arg.generation, &my_cluster_config))
			proc_exit(0);		/* replaced before it started: quietly */
		paidb_my_cluster = &my_cluster_config;
	}
	else
		(void) paidb_worker_attach(kind, -1, 0, NULL);
	on_shmem_exit(worker_exit, (Datum) 0);

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
	paidb_worker_set_database(MyDatabaseId);
	pgstat_report_appname(psprintf("paidb %s", paidb_worker_label(paidb_worker_names[kind])));

	while (!extension_installed())
	{
		if (!told)
		{
			ereport(LOG,
					(errmsg("paidb %s is waiting for CREATE EXTENSION paidb in database \"%s\"",
							paidb_worker_label(paidb_worker_names[kind]), paidb_database)));
			told = true;
		}
		paidb_worker_report(kind, "waiting for CREATE EXTENSION paidb", NULL, 0, 0, 0, NULL);
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 5000L, PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
		CHECK_FOR_INTERRUPTS();
		paidb_worker_reload_if_needed();
	}
	ereport(LOG, (errmsg("paidb %s started", paidb_worker_label(paidb_worker_names[kind]))));
	paidb_worker_report(kind, "running", NULL, 0, 0, 0, NULL);
}

/* Reload the configuration if SIGHUP arrived; true if it did. */
bool
paidb_worker_reload_if_needed(void)
{
	if (!paidb_worker_still_current(paidb_my_cluster))
		exit_not_current();
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

/*
 * In a step's PG_CATCH: roll its transaction back, log the error as a
 * WARNING "<activity> failed: <message>" and count it in status().
 */
static void
step_failed(PaidbWorkerKind kind, const char *activity, MemoryContext cxt)
{
	ErrorData  *edata;

	MemoryContextSwitchTo(cxt);
	edata = CopyErrorData();
	FlushErrorState();
	AbortCurrentTransaction();
	pgstat_report_activity(STATE_IDLE, NULL);
	MemoryContextSwitchTo(cxt);
	ereport(WARNING,
			(errmsg("%s failed: %s", activity, edata->message)));
	paidb_worker_report(kind, NULL, NULL, 0, 0, 1, edata->message);
	FreeErrorData(edata);
}

/* Run one statement in its own transaction (see worker_common.h). */
bool
paidb_worker_run_step(PaidbWorkerKind kind, const char *activity,
					  const char *sql, int nargs, Oid *types,
					  Datum *args, const char *nulls, char **out, int nout)
{
	MemoryContext oldcxt = CurrentMemoryContext;
	volatile bool ok = true;

	paidb_worker_begin(activity);
	PG_TRY();
	{
		int			i;

		if (SPI_execute_with_args(sql, nargs, types, args, nulls, false, 0) != SPI_OK_SELECT ||
			SPI_processed != 1)
			elog(ERROR, "unexpected result from \"%s\"", sql);
		for (i = 0; i < nout; i++)
		{
			char	   *v = SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, i + 1);

			out[i] = v ? MemoryContextStrdup(oldcxt, v) : NULL;
		}
		paidb_worker_commit();
		/* paidb_worker_commit leaves the worker's long-lived context current */
		MemoryContextSwitchTo(oldcxt);
	}
	PG_CATCH();
	{
		step_failed(kind, activity, oldcxt);
		ok = false;
	}
	PG_END_TRY();
	return ok;
}

/* See worker_common.h. */
bool
paidb_worker_run_toplevel(PaidbWorkerKind kind, const char *activity,
						  const char *sql, Oid as_role)
{
	MemoryContext oldcxt = CurrentMemoryContext;

	/*
	 * The statement's parse tree and plan live outside the transaction's
	 * memory (as a client's in MessageContext): a statement that commits
	 * inside (CREATE INDEX CONCURRENTLY) frees that memory under them.
	 */
	MemoryContext stmt_cxt = AllocSetContextCreate(oldcxt, "paidb top-level statement",
												   ALLOCSET_DEFAULT_SIZES);
	Oid			save_userid;
	int			save_sec_context;
	volatile bool ok = true;

	GetUserIdAndSecContext(&save_userid, &save_sec_context);
	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	pgstat_report_activity(STATE_RUNNING, sql);
	PG_TRY();
	{
		List	   *raws;
		RawStmt    *raw;
		List	   *plans;
		Portal		portal;
		QueryCompletion qc;
		bool		snapshot;

		SetUserIdAndSecContext(as_role, save_sec_context | SECURITY_LOCAL_USERID_CHANGE);
		MemoryContextSwitchTo(stmt_cxt);
		raws = pg_parse_query(sql);
		if (list_length(raws) != 1)
			elog(ERROR, "expected one statement, not %d, in \"%s\"", list_length(raws), sql);
		raw = linitial_node(RawStmt, raws);
		snapshot = analyze_requires_snapshot(raw);
		if (snapshot)
			PushActiveSnapshot(GetTransactionSnapshot());
		plans = pg_plan_queries(pg_analyze_and_rewrite_fixedparams(raw, sql, NULL, 0, NULL),
								sql, CURSOR_OPT_PARALLEL_OK, NULL);
		if (snapshot)
			PopActiveSnapshot();
		/* as exec_simple_query: an active portal outlives the commits inside */
		portal = CreatePortal("", true, true);
		portal->visible = false;
		PortalDefineQuery(portal, NULL, sql, CreateCommandTag(raw->stmt), plans, NULL);
		PortalStart(portal, NULL, 0, InvalidSnapshot);
		(void) PortalRun(portal, FETCH_ALL, true, true, None_Receiver, None_Receiver, &qc);
		PortalDrop(portal, false);
		SetUserIdAndSecContext(save_userid, save_sec_context);
		paidb_exit_if_postmaster_died();
		CommitTransactionCommand();
		pgstat_report_stat(false);
		pgstat_report_activity(STATE_IDLE, NULL);
		MemoryContextSwitchTo(oldcxt);
	}
	PG_CATCH();
	{
		/* after the abort: the statement's own commits moved its restore point */
		step_failed(kind, activity, oldcxt);
		SetUserIdAndSecContext(save_userid, save_sec_context);
		ok = false;
	}
	PG_END_TRY();
	MemoryContextDelete(stmt_cxt);
	return ok;
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
