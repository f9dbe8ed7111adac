/*
 * worker_launcher.c — one process that keeps every cluster's workers
 * running (SPEC §11), the way pg_cron's launcher keeps its schedule: it
 * reads paidb.cluster every second and makes the workers match it.
 *
 * - A row that is not removed gets a shared-memory slot (its configuration)
 *   and three dynamic background workers started for the slot's
 *   generation.
 * - A change of api_server, namespace, token_file or ca_file gives the slot
 *   a new generation: the old workers are terminated and new ones started.
 *   A change of state between active and cordoned, or of retain_mode,
 *   restarts nothing (the workers read retain mode from the slot).
 * - A removed or deleted row releases its slot and terminates its workers.
 *
 * The postmaster restarts a cluster worker that fails; one that finds its
 * slot at another generation exits with code 0 and is gone for good, so a
 * worker the launcher lost track of can never serve a stale configuration.
 * No other cluster's workers are touched by any of this.
 */
#include "postgres.h"

#include <signal.h>

#include "access/xact.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "storage/latch.h"
#include "utils/builtins.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "cluster_config.h"
#include "worker_common.h"
#include "worker_launcher.h"
#include "worker_shmem.h"

/* How often paidb.cluster is read; a change takes effect within this. */
#define LAUNCHER_INTERVAL_MS 1000
/* How long to wait before trying again to start workers that could not start. */
#define LAUNCHER_RETRY_MS 10000

/* What this launcher process knows of each slot's workers. */
typedef struct LaunchedCluster
{
	uint64		started[PAIDB_CLUSTER_WORKERS];	/* generation started, 0: none */
	BackgroundWorkerHandle *handle[PAIDB_CLUSTER_WORKERS];
	TimestampTz retry_at;		/* after a failed start */
	bool		warned_slot;	/* the log said it has no slot */
} LaunchedCluster;

static LaunchedCluster *launched = NULL;
static int	nslots = 0;
static uint64 last_generation = 0;
/* clusters whose rows exist but that got no slot (logged once each) */
static List *slotless = NIL;

/* A generation no slot has had: time-based, so it differs after a restart. */
static uint64
new_generation(void)
{
	uint64		g = (uint64) GetCurrentTimestamp();

	if (g <= last_generation)
		g = last_generation + 1;
	last_generation = g;
	return g;
}

/* Terminate a slot's workers (the slot's generation has already moved on). */
static void
terminate_workers(int slot)
{
	int			k;

	for (k = 0; k < PAIDB_CLUSTER_WORKERS; k++)
	{
		LaunchedCluster *lc = &launched[slot];

		if (lc->handle[k] != NULL)
		{
			/* also ends a worker waiting to be restarted, and unregisters it */
			TerminateBackgroundWorker(lc->handle[k]);
			pfree(lc->handle[k]);
			lc->handle[k] = NULL;
		}
		else
		{
			/* started by an earlier launcher: it exits 0 once restarted */
			int			pid = paidb_cluster_worker_pid(slot, (PaidbWorkerKind) k);

			if (pid != 0)
				(void) kill(pid, SIGTERM);
		}
		lc->started[k] = 0;
	}
}

/* Start whichever of a slot's workers are not running for its generation. */
static void
start_workers(int slot, uint64 generation, const char *name)
{
	LaunchedCluster *lc = &launched[slot];
	int			k;

	if (lc->retry_at != 0 && GetCurrentTimestamp() < lc->retry_at)
		return;
	for (k = 0; k < PAIDB_CLUSTER_WORKERS; k++)
	{
		BackgroundWorkerHandle *h = NULL;

		if (lc->started[k] == generation)
			continue;
		if (!paidb_start_cluster_worker((PaidbWorkerKind) k, slot, generation, name, &h))
		{
			char		problem[256];

			snprintf(problem, sizeof(problem),
					 "cannot start its %s: no free background worker slot "
					 "(max_worker_processes = %d); retrying every %d s",
					 paidb_worker_names[k], max_worker_processes, LAUNCHER_RETRY_MS / 1000);
			if (lc->retry_at == 0)
				ereport(WARNING,
						(errmsg("paidb launcher: cluster \"%s\" %s", name, problem),
						 errhint("Each cluster needs %d background worker processes besides "
								 "paidb's launcher and retention worker: raise max_worker_processes "
								 "(a server restart) or remove a cluster.",
								 PAIDB_CLUSTER_WORKERS)));
			paidb_cluster_slot_set_problem(slot, problem);
			lc->retry_at = TimestampTzPlusMilliseconds(GetCurrentTimestamp(), LAUNCHER_RETRY_MS);
			return;
		}
		lc->handle[k] = h;
		lc->started[k] = generation;
	}
	if (lc->retry_at != 0)
	{
		ereport(LOG, (errmsg("paidb launcher: cluster \"%s\" has its workers now", name)));
		paidb_cluster_slot_set_problem(slot, NULL);
		lc->retry_at = 0;
	}
}

/* Copy a text column ("" for NULL) into a fixed buffer. */
static void
copy_column(HeapTuple tup, TupleDesc desc, int col, char *buf, size_t size)
{
	char	   *v = SPI_getvalue(tup, desc, col);

	strlcpy(buf, v ? v : "", size);
}

/*
 * The clusters that should have workers, read in one short transaction;
 * NULL (and *n = -1) while paidb.cluster does not exist yet (a database
 * still at 0.2, before ALTER EXTENSION paidb UPDATE).
 */
static PaidbClusterConfig *
read_clusters(int *n)
{
	PaidbClusterConfig *rows = NULL;
	uint64		i;

	paidb_worker_begin("paidb launcher: reading paidb.cluster");
	if (SPI_execute("SELECT pg_catalog.to_regclass('paidb.cluster') IS NOT NULL", true, 1) != SPI_OK_SELECT)
		elog(ERROR, "could not look for paidb.cluster");
	if (!DatumGetBool(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &(bool) {false})))
	{
		paidb_worker_commit();
		*n = -1;
		return NULL;
	}
	if (SPI_execute("SELECT name, api_server, namespace, token_file, ca_file, retain_mode "
					"FROM paidb.cluster WHERE state OPERATOR(pg_catalog.<>) 'removed' "
					"ORDER BY name", true, 0) != SPI_OK_SELECT)
		elog(ERROR, "could not read paidb.cluster");
	*n = (int) SPI_processed;
	rows = MemoryContextAllocZero(paidb_worker_context,
								  sizeof(PaidbClusterConfig) * Max(*n, 1));
	for (i = 0; i < SPI_processed; i++)
	{
		HeapTuple	tup = SPI_tuptable->vals[i];
		TupleDesc	desc = SPI_tuptable->tupdesc;
		bool		isnull;
		Datum		d;

		copy_column(tup, desc, 1, rows[i].name, sizeof(rows[i].name));
		copy_column(tup, desc, 2, rows[i].api_server, sizeof(rows[i].api_server));
		copy_column(tup, desc, 3, rows[i].namespace, sizeof(rows[i].namespace));
		copy_column(tup, desc, 4, rows[i].token_file, sizeof(rows[i].token_file));
		copy_column(tup, desc, 5, rows[i].ca_file, sizeof(rows[i].ca_file));
		d = SPI_getbinval(tup, desc, 6, &isnull);
		rows[i].retain_mode = isnull ? -1 : (DatumGetBool(d) ? 1 : 0);
	}
	paidb_worker_commit();
	return rows;
}

/* Whether a name is among the rows. */
static bool
name_listed(const PaidbClusterConfig *rows, int n, const char *name)
{
	int			i;

	for (i = 0; i < n; i++)
		if (strcmp(rows[i].name, name) == 0)
			return true;
	return false;
}

/* Make the running workers match paidb.cluster. */
static void
launcher_cycle(void)
{
	int			n;
	PaidbClusterConfig *rows = read_clusters(&n);
	int			s,
				i;

	if (n < 0)
	{
		paidb_worker_report(PAIDB_WORKER_LAUNCHER,
							"waiting for ALTER EXTENSION paidb UPDATE (no paidb.cluster)",
							NULL, 0, 0, 0, NULL);
		return;
	}

	/* removed or deleted rows: their workers go */
	for (s = 0; s < nslots; s++)
	{
		PaidbClusterConfig cur;
		uint64		gen;

		if (!paidb_cluster_slot_get(s, &cur, &gen) || name_listed(rows, n, cur.name))
			continue;
		ereport(LOG,
				(errmsg("paidb launcher: stopping the workers of cluster \"%s\": it was removed",
						cur.name)));
		paidb_cluster_slot_release(s);
		terminate_workers(s);
		launched[s].retry_at = 0;
	}

	for (i = 0; i < n; i++)
	{
		PaidbClusterConfig cur;
		uint64		gen;

		s = paidb_cluster_slot_find(rows[i].name);
		if (s < 0)
		{
			gen = new_generation();
			s = paidb_cluster_slot_claim(&rows[i], gen);
			if (s < 0)
			{
				MemoryContext old;

				if (list_member(slotless, makeString(rows[i].name)))
					continue;
				ereport(WARNING,
						(errmsg("paidb launcher: cluster \"%s\" gets no workers: all %d cluster slots are in use",
								rows[i].name, nslots),
						 errhint("Raise paidb.max_clusters (a server restart) or remove a cluster.")));
				old = MemoryContextSwitchTo(paidb_worker_context);
				slotless = lappend(slotless, makeString(pstrdup(rows[i].name)));
				MemoryContextSwitchTo(old);
				continue;
			}
			memset(&launched[s], 0, sizeof(LaunchedCluster));
			ereport(LOG,
					(errmsg("paidb launcher: starting the workers of cluster \"%s\"", rows[i].name)));
		}
		else
		{
			(void) paidb_cluster_slot_get(s, &cur, &gen);
			if (paidb_cluster_connection_differs(&cur, &rows[i]))
			{
				ereport(LOG,
						(errmsg("paidb launcher: restarting the workers of cluster \"%s\": "
								"its API server, namespace or credential files changed",
								rows[i].name)));
				gen = new_generation();
				paidb_cluster_slot_set(s, &rows[i], gen);
				terminate_workers(s);
				launched[s].retry_at = 0;
			}
			else if (cur.retain_mode != rows[i].retain_mode)
				paidb_cluster_slot_set(s, &rows[i], gen);
		}
		start_workers(s, gen, rows[i].name);
	}
	pfree(rows);
	paidb_worker_report(PAIDB_WORKER_LAUNCHER, "running", NULL, 0, 0, 0, NULL);
}

/* The launcher's entry point and loop. */
void
paidb_launcher_main(Datum main_arg)
{
	int			s;
	volatile int failures = 0;

	paidb_worker_startup(PAIDB_WORKER_LAUNCHER);
	nslots = paidb_cluster_slots();
	launched = MemoryContextAllocZero(paidb_worker_context, sizeof(LaunchedCluster) * nslots);

	/*
	 * A launcher that restarts has lost its handles: give every slot up, so
	 * that workers started before exit for good, and start anew.
	 */
	for (s = 0; s < nslots; s++)
	{
		PaidbClusterConfig cur;
		uint64		gen;

		if (!paidb_cluster_slot_get(s, &cur, &gen))
			continue;
		paidb_cluster_slot_release(s);
		terminate_workers(s);
	}

	for (;;)
	{
		long		delay = LAUNCHER_INTERVAL_MS;

		CHECK_FOR_INTERRUPTS();
		paidb_worker_reload_if_needed();
		PG_TRY();
		{
			launcher_cycle();
			failures = 0;
		}
		PG_CATCH();
		{
			ErrorData  *edata;

			MemoryContextSwitchTo(paidb_worker_context);
			edata = CopyErrorData();
			FlushErrorState();
			AbortCurrentTransaction();
			failures++;
			ereport(LOG,
					(errmsg("paidb launcher could not read paidb.cluster: %s", edata->message)));
			paidb_worker_report(PAIDB_WORKER_LAUNCHER, "retrying after an error", NULL, 0, 0, 1,
								edata->message);
			FreeErrorData(edata);
			delay = paidb_backoff_ms(failures, LAUNCHER_INTERVAL_MS);
		}
		PG_END_TRY();
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 delay, PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
	}
}
