/*
 * worker_retention.c — the retention worker (SPEC §10, docs/queries.md).
 *
 * Every paidb.retention_interval it folds the job-count deltas into
 * paidb.job_count, then deletes expired jobs (paidb.retention) and events
 * (paidb.event_retention) in batches of paidb.retention_batch_size, one
 * short transaction per batch, through paidb.retention_batch().  Rows
 * locked by anyone else are skipped, never waited for; a submission or a
 * watch event never waits on this worker for longer than one batch of
 * deletes of rows it does not touch.
 */
#include "postgres.h"

#include "access/xact.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "storage/latch.h"
#include "utils/builtins.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "guc.h"
#include "snapshot_convert.h"
#include "worker_common.h"
#include "worker_retention.h"

/*
 * Pause between two batches, so that the batches never form one long burst:
 * at least RETENTION_PAUSE_MS, and RETENTION_PAUSE_FACTOR times as long as
 * the batch took, so that the worker keeps at most a quarter of a core.
 * Deleting 100,000 expired jobs beside submissions on two cores slowed them
 * by 15-26% with only the fixed pause, and by 11-25% pausing as long as
 * the batch, and by 16% at three times (docs/queries.md); a quarter of a
 * core still deleted ~350 jobs a second.
 */
#define RETENTION_PAUSE_MS 20
#define RETENTION_PAUSE_FACTOR 3

/* A cycle stops after this many batches and goes on at the next one. */
#define RETENTION_MAX_BATCHES 1000

typedef struct RetentionRun
{
	int64		folded;			/* job-count delta rows compacted */
	int64		jobs;			/* jobs deleted */
	int64		events;			/* events deleted */
} RetentionRun;

/*
 * How often the worker looks for snapshots of 0.2 to convert: an ALTER
 * EXTENSION paidb UPDATE on a running server starts the conversion within
 * this time, not a retention interval later.
 */
#define CONVERSION_CHECK_MS 2000

/*
 * Sleep on the latch for ms, then handle signals and settings reloads;
 * true if the latch woke it (a reload or a wake-up).
 */
static bool
retention_wait(long ms)
{
	int			rc;

	rc = WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
				   ms, PG_WAIT_EXTENSION);
	if (rc & WL_LATCH_SET)
		ResetLatch(MyLatch);
	CHECK_FOR_INTERRUPTS();
	paidb_worker_reload_if_needed();
	return (rc & WL_LATCH_SET) != 0;
}

/* retention_wait, as a pause between batches */
static void
retention_sleep(long ms)
{
	(void) retention_wait(ms);
}

/* An interval literal of `seconds`, or NULL for 0 (keep forever). */
static char *
age_literal(int seconds)
{
	return seconds > 0 ? psprintf("%d seconds", seconds) : NULL;
}

/*
 * Run one statement in its own transaction; false (logged and counted in
 * status()) on error.  The statement returns one row of int8 columns,
 * stored in out[0..nout-1] (NULL as 0).
 */
static bool
run_step(const char *activity, const char *sql, int nargs, Oid *types,
		 Datum *args, const char *nulls, int64 *out, int nout)
{
	char	   *text[4];
	int			i;

	Assert(nout <= lengthof(text));
	if (!paidb_worker_run_step(PAIDB_WORKER_RETENTION, activity, sql, nargs, types,
							   args, nulls, text, nout))
		return false;
	for (i = 0; i < nout; i++)
		out[i] = text[i] ? strtoll(text[i], NULL, 10) : 0;
	return true;
}

/*
 * Note a reload that changed a retention setting in the middle of a cycle:
 * log what it stops (turned off) or limits (raised), and take the new ages.
 */
static void
retention_settings_changed(int *job_s, int *event_s, char **job_age, char **event_age)
{
	if (paidb_retention_s != *job_s)
	{
		if (paidb_retention_s <= 0)
			ereport(LOG,
					(errmsg("paidb retention stopped deleting jobs: paidb.retention was turned off by a reload")));
		else if (*job_s > 0 && paidb_retention_s > *job_s)
			ereport(LOG,
					(errmsg("paidb retention stopped deleting jobs completed less than %d seconds ago: paidb.retention was raised from %d seconds by a reload",
							paidb_retention_s, *job_s)));
		*job_s = paidb_retention_s;
		*job_age = age_literal(*job_s);
	}
	if (paidb_event_retention_s != *event_s)
	{
		if (paidb_event_retention_s <= 0)
			ereport(LOG,
					(errmsg("paidb retention stopped deleting events: paidb.event_retention was turned off by a reload")));
		else if (*event_s > 0 && paidb_event_retention_s > *event_s)
			ereport(LOG,
					(errmsg("paidb retention stopped deleting events younger than %d seconds: paidb.event_retention was raised from %d seconds by a reload",
							paidb_event_retention_s, *event_s)));
		*event_s = paidb_event_retention_s;
		*event_age = age_literal(*event_s);
	}
}

/*
 * One cycle: compact the counts, then delete expired rows batch by batch.
 *
 * The settings are read again before every batch, not once per cycle: a
 * reload that turns retention off or raises it takes effect before the
 * next batch (SPEC §10), so at most the batch running when the reload
 * arrives still deletes by the old setting.
 */
static bool
retention_cycle(RetentionRun *run)
{
	int			job_s = paidb_retention_s;
	int			event_s = paidb_event_retention_s;
	char	   *job_age = age_literal(job_s);
	char	   *event_age = age_literal(event_s);
	Oid			types[3] = {TEXTOID, TEXTOID, INT4OID};
	int			batches;

	memset(run, 0, sizeof(*run));
	if (!run_step("paidb retention: compacting job counts",
				  "SELECT paidb.compact_job_counts()", 0, NULL, NULL, NULL,
				  &run->folded, 1))
		return false;

	for (batches = 0; batches < RETENTION_MAX_BATCHES; batches++)
	{
		Datum		args[3];
		char		nulls[3] = {' ', ' ', ' '};
		int64		got[2];
		int			batch;
		TimestampTz started;
		long		took_ms;

		CHECK_FOR_INTERRUPTS();
		/* a reload since the last batch (or the compaction) counts for this one */
		paidb_worker_reload_if_needed();
		if (paidb_retention_s != job_s || paidb_event_retention_s != event_s)
			retention_settings_changed(&job_s, &event_s, &job_age, &event_age);
		if (job_age == NULL && event_age == NULL)
			break;

		batch = paidb_retention_batch_size;
		args[0] = job_age ? CStringGetTextDatum(job_age) : (Datum) 0;
		args[1] = event_age ? CStringGetTextDatum(event_age) : (Datum) 0;
		args[2] = Int32GetDatum(batch);
		if (job_age == NULL)
			nulls[0] = 'n';
		if (event_age == NULL)
			nulls[1] = 'n';
		started = GetCurrentTimestamp();
		if (!run_step("paidb retention: deleting expired jobs and events",
					  "SELECT jobs_deleted, events_deleted FROM "
					  "paidb.retention_batch($1::interval, $2::interval, $3)",
					  3, types, args, nulls, got, 2))
			return false;
		run->jobs += got[0];
		run->events += got[1];
		paidb_worker_report(PAIDB_WORKER_RETENTION, NULL, NULL,
							(uint64) (got[0] + got[1]), 0, 0, NULL);
		/* fewer than a full batch of each kind: nothing left to do */
		if (got[0] < batch && got[1] < batch)
			break;
		took_ms = TimestampDifferenceMilliseconds(started, GetCurrentTimestamp());
		retention_sleep(Max(RETENTION_PAUSE_MS, RETENTION_PAUSE_FACTOR * took_ms));
	}
	return true;
}

/* The retention worker's entry point and main loop. */
void
paidb_retention_main(Datum main_arg)
{
	int			failures = 0;
	MemoryContext loop_cxt;

	paidb_worker_startup(PAIDB_WORKER_RETENTION);
	loop_cxt = AllocSetContextCreate(paidb_worker_context,
									 "paidb retention loop",
									 ALLOCSET_DEFAULT_SIZES);

	for (;;)
	{
		RetentionRun run;
		long		delay = paidb_retention_interval_ms;
		TimestampTz due;

		CHECK_FOR_INTERRUPTS();
		paidb_worker_reload_if_needed();
		MemoryContextSwitchTo(loop_cxt);
		if (paidb_snapshot_conversion_due())
			paidb_convert_snapshots(retention_sleep);
		if (retention_cycle(&run))
		{
			char		state[64];

			failures = 0;
			snprintf(state, sizeof(state), "idle; last run deleted %lld jobs, %lld events",
					 (long long) run.jobs, (long long) run.events);
			paidb_worker_report(PAIDB_WORKER_RETENTION, state, NULL, 0, 0, 0, NULL);
			if (run.jobs > 0 || run.events > 0)
				ereport(LOG,
						(errmsg("paidb retention deleted %lld jobs and %lld events",
								(long long) run.jobs, (long long) run.events)));
		}
		else
		{
			failures++;
			paidb_worker_report(PAIDB_WORKER_RETENTION, "retrying after an error", NULL, 0, 0, 0, NULL);
			delay = Min(delay, paidb_backoff_ms(failures, 0));
		}
		MemoryContextSwitchTo(paidb_worker_context);
		MemoryContextReset(loop_cxt);

		/*
		 * Until the next cycle, look for a conversion to do every
		 * CONVERSION_CHECK_MS; a latch wake-up (a reload) starts the next
		 * cycle at once, as it always did.
		 */
		due = TimestampTzPlusMilliseconds(GetCurrentTimestamp(), delay);
		for (;;)
		{
			long		left = TimestampDifferenceMilliseconds(GetCurrentTimestamp(), due);

			if (left <= 0 || retention_wait(Min(left, CONVERSION_CHECK_MS)))
				break;
			if (paidb_snapshot_conversion_due())
			{
				paidb_convert_snapshots(retention_sleep);
				MemoryContextReset(loop_cxt);
			}
		}
	}
}
