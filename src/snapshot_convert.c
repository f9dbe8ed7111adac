/*
 * snapshot_convert.c — packs the snapshots a 0.2 database stored as jsonb,
 * after ALTER EXTENSION paidb UPDATE (issue 19; docs/operations.md,
 * "From 0.2 to 0.3").
 *
 * The update only renames 0.2's column to snapshot_0_2: packing a million
 * snapshots in its transaction held paidb.framework's exclusive lock for
 * minutes, and every submission waited; so did its index builds, a scan of
 * every job each.  Here the indexes are built first, CONCURRENTLY, and
 * then each batch is one short transaction through
 * paidb._convert_snapshot_batch (rows in key order, rows held by a writer
 * skipped: the write packs them itself), with a pause as long as the batch
 * took, so that the conversion takes at most half a core beside the
 * cluster's own work.  paidb._finish_snapshot_conversion
 * then ends it in a few short steps, the last of which drops 0.2's columns.
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"

#include "snapshot_convert.h"
#include "worker_common.h"

/* Rows per batch: ~0.1 s of work, the longest a writer waits on a row. */
#define CONVERT_BATCH_ROWS 500
/* Shortest pause between batches, and the pause per millisecond of batch. */
#define CONVERT_PAUSE_MIN_MS 10
#define CONVERT_PAUSE_FACTOR 1
/* A progress line at most this often. */
#define CONVERT_LOG_INTERVAL_MS 30000
/* Tries of the end's lock before waiting for the next round. */
#define CONVERT_FINISH_TRIES 10
/* Other views still read snapshot_0_2: look again this much later. */
#define CONVERT_KEPT_RETRY_MS (10 * 60 * 1000)

static const char *const convert_tables[] = {"framework", "framework_history"};

/* Not before this time (after a failure, or while the column is kept). */
static TimestampTz convert_not_before = 0;
static int	convert_failures = 0;

/* Run one step of the conversion; false on error (logged, counted). */
static bool
convert_step(const char *sql, int nargs, Oid *types, Datum *args, char **out, int nout)
{
	return paidb_worker_run_step(PAIDB_WORKER_RETENTION,
								 "paidb retention: converting 0.2's snapshots",
								 sql, nargs, types, args, NULL, out, nout);
}

/* Remember a failure: try again after a backoff. */
static void
convert_failed(void)
{
	convert_failures++;
	convert_not_before = TimestampTzPlusMilliseconds(GetCurrentTimestamp(),
													 paidb_backoff_ms(convert_failures, 0));
}

/* See snapshot_convert.h. */
bool
paidb_snapshot_conversion_due(void)
{
	char	   *n = NULL;

	if (GetCurrentTimestamp() < convert_not_before)
		return false;
	/* to_regclass: the extension may be at 0.2, or being created */
	if (!convert_step("SELECT pg_catalog.count(*) FROM pg_catalog.pg_attribute "
					  "WHERE attrelid IN (pg_catalog.to_regclass('paidb.framework'), "
					  "                   pg_catalog.to_regclass('paidb.framework_history')) "
					  "  AND attname = 'snapshot_0_2' AND NOT attisdropped",
					  0, NULL, NULL, &n, 1))
	{
		convert_failed();
		return false;
	}
	return n != NULL && strcmp(n, "0") != 0;
}

/*
 * Build the indexes the update left to build (paidb._deferred_index_statements),
 * each CONCURRENTLY at the top level of its own transactions, as the owner of
 * the extension (who owns the tables); false on error.
 */
static bool
build_deferred_indexes(void)
{
	char	   *out[2] = {NULL, NULL};
	char	   *next;
	Oid			owner;

	if (!convert_step("SELECT (SELECT extowner FROM pg_catalog.pg_extension WHERE extname = 'paidb'), "
					  "(SELECT pg_catalog.string_agg(s, E'\\n' ORDER BY n) "
					  "   FROM paidb._deferred_index_statements(true) WITH ORDINALITY AS d(s, n))",
					  0, NULL, NULL, out, 2))
		return false;
	if (out[0] == NULL || out[1] == NULL)
		return true;
	owner = atooid(out[0]);
	for (next = out[1]; next != NULL && *next != '\0';)
	{
		char	   *stmt = next;
		char	   *nl = strchr(next, '\n');
		TimestampTz started = GetCurrentTimestamp();

		if (nl != NULL)
			*nl = '\0';
		next = nl ? nl + 1 : NULL;
		CHECK_FOR_INTERRUPTS();
		if (!paidb_worker_run_toplevel(PAIDB_WORKER_RETENTION,
									   "paidb retention: building the indexes of 0.3",
									   stmt, owner))
			return false;
		ereport(LOG,
				(errmsg("paidb ran \"%s\" in %.1f s", stmt,
						TimestampDifferenceMilliseconds(started, GetCurrentTimestamp()) / 1000.0)));
	}
	return true;
}

/* One pass over a table in key order; false on error.  Adds to *converted. */
static bool
convert_table(const char *table, PaidbPauseFn pause, int64 *converted,
			  TimestampTz *logged_at)
{
	Oid			types[3] = {TEXTOID, TEXTOID, INT4OID};
	char	   *after = NULL;

	for (;;)
	{
		Datum		args[3];
		char	   *out[2];
		const char	nulls[3] = {' ', after ? ' ' : 'n', ' '};
		TimestampTz started = GetCurrentTimestamp();
		long		took_ms;
		int64		n;

		args[0] = CStringGetTextDatum(table);
		args[1] = after ? CStringGetTextDatum(after) : (Datum) 0;
		args[2] = Int32GetDatum(CONVERT_BATCH_ROWS);
		if (!paidb_worker_run_step(PAIDB_WORKER_RETENTION,
								   "paidb retention: converting 0.2's snapshots",
								   "SELECT converted, last_key FROM "
								   "paidb._convert_snapshot_batch($1, $2, $3)",
								   3, types, args, nulls, out, 2))
			return false;
		n = out[0] ? strtoll(out[0], NULL, 10) : 0;
		*converted += n;
		if (out[1] == NULL)
			return true;		/* the end of the table */
		after = out[1];
		if (TimestampDifferenceExceeds(*logged_at, GetCurrentTimestamp(), CONVERT_LOG_INTERVAL_MS))
		{
			*logged_at = GetCurrentTimestamp();
			ereport(LOG,
					(errmsg("paidb converted %lld snapshots stored by paidb 0.2 so far (paidb.%s, up to key \"%s\")",
							(long long) *converted, table, after)));
			paidb_worker_report(PAIDB_WORKER_RETENTION,
								psprintf("converting 0.2's snapshots: %lld so far",
										 (long long) *converted),
								NULL, 0, 0, 0, NULL);
		}
		/* a batch that packed nothing cost little: no pause */
		if (n > 0)
		{
			took_ms = TimestampDifferenceMilliseconds(started, GetCurrentTimestamp());
			pause(Max(CONVERT_PAUSE_MIN_MS, CONVERT_PAUSE_FACTOR * took_ms));
		}
		else
			CHECK_FOR_INTERRUPTS();
	}
}

/* See snapshot_convert.h. */
void
paidb_convert_snapshots(PaidbPauseFn pause)
{
	TimestampTz started = GetCurrentTimestamp();
	TimestampTz logged_at = started;
	int64		converted = 0;
	int			tries = 0;

	ereport(LOG,
			(errmsg("paidb is converting the snapshots stored by paidb 0.2, in batches of %d rows",
					CONVERT_BATCH_ROWS),
			 errdetail("Until it is done, paidb.snapshot(row) reads them where they are.")));
	for (;;)
	{
		char	   *state = NULL;
		int64		before = converted;
		size_t		i;

		/* first the indexes: the sync worker's work list reads the new one */
		if (!build_deferred_indexes())
		{
			convert_failed();
			return;
		}
		for (i = 0; i < lengthof(convert_tables); i++)
			if (!convert_table(convert_tables[i], pause, &converted, &logged_at))
			{
				convert_failed();
				return;
			}
		/* the end, step by step; 'rows left' sends us round again */
		for (;;)
		{
			if (!convert_step("SELECT paidb._finish_snapshot_conversion()",
							  0, NULL, NULL, &state, 1))
			{
				convert_failed();
				return;
			}
			if (strcmp(state, "busy") == 0)
			{
				if (++tries >= CONVERT_FINISH_TRIES)
				{
					ereport(LOG,
							(errmsg("paidb could not end the conversion of 0.2's snapshots: paidb.framework stayed locked by others"),
							 errhint("It tries again within a minute.")));
					convert_failed();
					return;
				}
				pause(1000);
				continue;
			}
			if (strcmp(state, "checking") != 0 && strcmp(state, "validated") != 0)
				break;
		}
		if (strcmp(state, "done") == 0)
		{
			convert_failures = 0;
			ereport(LOG,
					(errmsg("paidb converted the %lld snapshots stored by paidb 0.2 in %.1f s",
							(long long) converted,
							TimestampDifferenceMilliseconds(started, GetCurrentTimestamp()) / 1000.0),
					 errdetail("The columns snapshot_0_2 of paidb.framework and paidb.framework_history are dropped.")));
			paidb_worker_report(PAIDB_WORKER_RETENTION, "converted 0.2's snapshots",
								NULL, 0, 0, 0, NULL);
			return;
		}
		if (strcmp(state, "kept") == 0)
		{
			/* the NOTICE said why; look again later */
			convert_not_before = TimestampTzPlusMilliseconds(GetCurrentTimestamp(),
															 CONVERT_KEPT_RETRY_MS);
			return;
		}
		/* 'indexes left': one was dropped meanwhile; build it next round */
		if (strcmp(state, "indexes left") == 0)
			continue;
		/* 'rows left': rows a writer held during the pass */
		if (converted == before)
		{
			/* held all along (a long transaction): not in a busy loop */
			convert_not_before = TimestampTzPlusMilliseconds(GetCurrentTimestamp(),
															 paidb_backoff_ms(1, 10000));
			return;
		}
		CHECK_FOR_INTERRUPTS();
	}
}
