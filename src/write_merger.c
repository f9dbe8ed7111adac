/*
 * write_merger.c — the write merger inside PostgreSQL (SPEC §3, §5).
 *
 * OpenPAI's rest-server called a "write merger" over HTTP; here the same
 * decisions are SQL functions.  Every read-modify-write of a framework row
 * happens under its row lock (SELECT ... FOR UPDATE) in the caller's
 * transaction, so concurrent submissions, patches and watch events for one
 * job serialise on that row and no update is lost.
 */
#include "postgres.h"

#include "access/xact.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "funcapi.h"
#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "catalog/namespace.h"
#include "utils/builtins.h"
#include "utils/datum.h"
#include "utils/hsearch.h"
#include "access/htup_details.h"
#include "utils/snapmgr.h"
#include "utils/array.h"
#include "utils/lsyscache.h"
#include "utils/jsonb.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "cluster_config.h"
#include "guc.h"
#include "history.h"
#include "job_list.h"
#include "jsonb_util.h"
#include "k8s_objects.h"
#include "merge_patch.h"
#include "pkey_lookup.h"
#include "placement.h"
#include "snapshot.h"
#include "snapshot_pack.h"
#include "spi_plan.h"
#include "sync_signal.h"
#include "task_history.h"
#include "write_merger.h"

PG_FUNCTION_INFO_V1(paidb_put_framework_request);
PG_FUNCTION_INFO_V1(paidb_patch_framework_request);
PG_FUNCTION_INFO_V1(paidb_stop_framework);
PG_FUNCTION_INFO_V1(paidb_apply_watch_event);
PG_FUNCTION_INFO_V1(paidb_import_frameworks);

#define NUM_ADDONS PAIDB_NUM_ADDONS

/* What the row lock returned about a stored framework. */
typedef struct StoredFramework
{
	bool		found;
	int64		generation;
	Jsonb	   *snapshot;
	bool		has_rv;
	int64		resource_version;
	bool		request_synced;
	bool		api_server_deleted;
	char	   *cluster;		/* paidb.framework.cluster (SPEC §11) */
	int			placement;
} StoredFramework;

/* Plans prepared once per backend and kept (SPI_keepplan). */
static SPIPlanPtr plan_lock = NULL;
static SPIPlanPtr plan_insert = NULL;
static SPIPlanPtr plan_update = NULL;
static SPIPlanPtr plan_clear_addons = NULL;
static SPIPlanPtr plan_queue_orphan = NULL;
static SPIPlanPtr plan_forget_orphan = NULL;
static SPIPlanPtr plan_lock_many = NULL;
static SPIPlanPtr plan_update_many = NULL;

/* The parameters of plan_update (and, as arrays, of plan_update_many). */
#define UPDATE_NPARAMS (PAIDB_NUM_DERIVED + 8)
static Oid	update_types[UPDATE_NPARAMS];
static int16 update_typlen[UPDATE_NPARAMS];
static bool update_typbyval[UPDATE_NPARAMS];
static char update_typalign[UPDATE_NPARAMS];
/* the paidb.framework column each parameter sets (NULL: a flag of FLAG_*) */
static const char *update_columns[UPDATE_NPARAMS];
static Oid	framework_rowtype = InvalidOid;

/* plan_update_many's flags, one int4 of bits a row: its two flag parameters */
#define FLAG_RESET_SENT	1
#define FLAG_RESET_DUE	2

/*
 * Whether the plans were made for a schema with clusters (0.3 on).  A 0.2
 * database served by this library (after the new library is installed,
 * before ALTER EXTENSION paidb UPDATE) keeps working as 0.2 did: every job
 * is the default cluster's.
 */
static bool plans_have_clusters = false;

/*
 * Whether they store snapshots packed (snapshot_packed, 0.3 on) or as the
 * jsonb column snapshot of 0.2.
 */
static bool plans_packed = false;

/* paidb.framework as prepare_plans last found it (locked by then) */
static Oid	plans_framework = InvalidOid;

/* Whether table rel has a column (a syscache look-up). */
static bool
table_has_column(Oid rel, const char *column)
{
	return OidIsValid(rel) && get_attnum(rel, column) != InvalidAttrNumber;
}

/* Drop a kept plan. */
static void
free_plan(SPIPlanPtr *plan)
{
	if (*plan != NULL)
		SPI_freeplan(*plan);
	*plan = NULL;
}

/* Prepare every plan of this module (inside an SPI connection). */
static void
prepare_plans(void)
{
	StringInfoData sql;
	Oid			types[PAIDB_NUM_DERIVED + 16];
	int			i,
				n;
	Oid			framework = paidb_lock_table_for_write("framework");
	bool		clusters = table_has_column(framework, "cluster");
	bool		packed = table_has_column(framework, "snapshot_packed");

	plans_framework = framework;
	if (plan_lock != NULL && clusters == plans_have_clusters && packed == plans_packed)
		return;
	/* first use, or the schema was updated since: (re)make them all */
	free_plan(&plan_lock);
	free_plan(&plan_insert);
	free_plan(&plan_update);
	free_plan(&plan_clear_addons);
	free_plan(&plan_queue_orphan);
	free_plan(&plan_forget_orphan);
	free_plan(&plan_lock_many);
	free_plan(&plan_update_many);
	plans_have_clusters = clusters;
	plans_packed = packed;

	types[0] = TEXTOID;
	initStringInfo(&sql);
	/*
	 * Packed: the packed bytes (the per-job cache compares them), and a row
	 * a 0.2 database has not had converted yet read through paidb.snapshot(f)
	 * (which names 0.2's column while there is one; no plan here does).
	 */
	appendStringInfo(&sql, "SELECT request_generation, %s, resource_version, request_synced, "
					 "api_server_deleted, %s, %s",
					 packed ? "snapshot_packed, job_config" : "snapshot, NULL::pg_catalog.text",
					 clusters ? "cluster, placement" : "'default'::pg_catalog.text, 1",
					 packed ? "CASE WHEN snapshot_packed IS NULL THEN paidb.snapshot(f) END" :
					 "NULL::pg_catalog.jsonb");
	{
		int			len = sql.len;

		appendStringInfoString(&sql, " FROM paidb.framework f WHERE name = $1 FOR UPDATE");
		plan_lock = paidb_prepare_kept(sql.data, 1, types);
		/*
		 * A watcher's batch: every row at once, locked in the order the
		 * items are applied (bytewise by name, see worker_watch.c).
		 */
		sql.len = len;
		sql.data[len] = '\0';
		appendStringInfoString(&sql, ", name FROM paidb.framework f WHERE name = ANY ($1) "
							   "ORDER BY name COLLATE pg_catalog.\"C\" FOR UPDATE");
		types[0] = TEXTARRAYOID;
		plan_lock_many = paidb_prepare_kept(sql.data, 1, types);
		types[0] = TEXTOID;
	}

	/* INSERT: name, derived..., submission_time, snapshot, generation, synced, rv, add-ons */
	resetStringInfo(&sql);
	appendStringInfoString(&sql, "INSERT INTO paidb.framework (name");
	for (i = 0; i < PAIDB_NUM_DERIVED; i++)
		appendStringInfo(&sql, ", %s", paidb_derived_column_names[i]);
	appendStringInfo(&sql, ", submission_time, %s, request_generation, "
					 "request_synced, resource_version, config_secret_def, "
					 "user_extension_secret_def, priority_class_def, "
					 "docker_secret_def, token_secret_def%s) VALUES ($1",
					 packed ? "snapshot_packed" : "snapshot", clusters ? ", cluster" : "");
	n = 1;
	types[0] = TEXTOID;
	for (i = 0; i < PAIDB_NUM_DERIVED; i++)
	{
		types[n] = paidb_derived_column_types[i];
		appendStringInfo(&sql, ", $%d", ++n);
	}
	types[n] = TIMESTAMPTZOID;
	types[n + 1] = packed ? BYTEAOID : JSONBOID;
	types[n + 2] = INT8OID;
	types[n + 3] = BOOLOID;
	types[n + 4] = INT8OID;
	for (i = 0; i < NUM_ADDONS; i++)
		types[n + 5 + i] = JSONBOID;
	types[n + 5 + NUM_ADDONS] = TEXTOID;
	for (i = 0; i < 5 + NUM_ADDONS + (clusters ? 1 : 0); i++)
		appendStringInfo(&sql, ", $%d", ++n);
	appendStringInfoString(&sql, ") ON CONFLICT (name) DO NOTHING RETURNING name");
	plan_insert = paidb_prepare_kept(sql.data, n, types);

	/* UPDATE: derived..., snapshot, generation, synced, deleted, rv, reset_sent, name */
	resetStringInfo(&sql);
	appendStringInfoString(&sql, "UPDATE paidb.framework SET ");
	n = 0;
	for (i = 0; i < PAIDB_NUM_DERIVED; i++)
	{
		types[n] = paidb_derived_column_types[i];
		appendStringInfo(&sql, "%s = $%d, ", paidb_derived_column_names[i], ++n);
	}
	types[n] = packed ? BYTEAOID : JSONBOID;
	types[n + 1] = INT8OID;
	types[n + 2] = BOOLOID;
	types[n + 3] = BOOLOID;
	types[n + 4] = INT8OID;
	types[n + 5] = BOOLOID;
	types[n + 6] = BOOLOID;
	types[n + 7] = TEXTOID;
	/* reset_sent: a new request to send; reset_due: send (or delete) now */
	appendStringInfo(&sql,
					 "%s = $%d, request_generation = $%d, request_synced = $%d, "
					 "api_server_deleted = $%d, resource_version = $%d, "
					 "sent_generation = CASE WHEN $%d THEN NULL ELSE sent_generation END, "
					 "sync_failures = CASE WHEN $%d THEN 0 ELSE sync_failures END, "
					 "next_sync_at = CASE WHEN $%d THEN NULL ELSE next_sync_at END, "
					 "updated_at = pg_catalog.now() WHERE name = $%d",
					 packed ? "snapshot_packed" : "snapshot", n + 1, n + 2, n + 3, n + 4, n + 5, n + 6, n + 6, n + 7, n + 8);
	plan_update = paidb_prepare_kept(sql.data, n + 8, types);

	/*
	 * The same for a watcher's batch: the rows as one array of
	 * paidb.framework's row type (the columns set above, the rest NULL)
	 * and the two flags as one array of bits.  One unnest per parameter
	 * stored every value of the batch as a tuple of its own before the join.
	 */
	Assert(n + 8 == UPDATE_NPARAMS);
	memcpy(update_types, types, sizeof(update_types));
	for (i = 0; i < PAIDB_NUM_DERIVED; i++)
		update_columns[i] = paidb_derived_column_names[i];
	update_columns[n] = packed ? "snapshot_packed" : "snapshot";
	update_columns[n + 1] = "request_generation";
	update_columns[n + 2] = "request_synced";
	update_columns[n + 3] = "api_server_deleted";
	update_columns[n + 4] = "resource_version";
	update_columns[n + 5] = NULL;	/* reset_sent: FLAG_RESET_SENT */
	update_columns[n + 6] = NULL;	/* reset_due: FLAG_RESET_DUE */
	update_columns[n + 7] = "name";
	for (i = 0; i < UPDATE_NPARAMS; i++)
		get_typlenbyvalalign(update_types[i], &update_typlen[i], &update_typbyval[i], &update_typalign[i]);
	resetStringInfo(&sql);
	appendStringInfoString(&sql, "UPDATE paidb.framework f SET ");
	for (i = 0; i < n + 5; i++)
		appendStringInfo(&sql, "%s = u.%s, ", update_columns[i], update_columns[i]);
	appendStringInfo(&sql,
					 "sent_generation = CASE WHEN (u.unnest OPERATOR(pg_catalog.&) %d) OPERATOR(pg_catalog.<>) 0 "
					 "THEN NULL ELSE f.sent_generation END, "
					 "sync_failures = CASE WHEN (u.unnest OPERATOR(pg_catalog.&) %d) OPERATOR(pg_catalog.<>) 0 "
					 "THEN 0 ELSE f.sync_failures END, "
					 "next_sync_at = CASE WHEN (u.unnest OPERATOR(pg_catalog.&) %d) OPERATOR(pg_catalog.<>) 0 "
					 "THEN NULL ELSE f.next_sync_at END, "
					 "updated_at = pg_catalog.now() "
					 "FROM ROWS FROM (pg_catalog.unnest($1), pg_catalog.unnest($2)) AS u "
					 "WHERE f.name OPERATOR(pg_catalog.=) u.name",
					 FLAG_RESET_SENT, FLAG_RESET_SENT, FLAG_RESET_DUE);
	framework_rowtype = get_rel_type_id(framework);
	types[0] = get_array_type(framework_rowtype);
	types[1] = INT4ARRAYOID;
	if (!OidIsValid(types[0]))
		elog(ERROR, "paidb.framework has no array type");
	plan_update_many = paidb_prepare_kept(sql.data, 2, types);

	types[0] = TEXTOID;
	plan_clear_addons = paidb_prepare_kept(
									 "UPDATE paidb.framework SET config_secret_def = NULL, "
									 "user_extension_secret_def = NULL, priority_class_def = NULL, "
									 "docker_secret_def = NULL, token_secret_def = NULL WHERE name = $1",
									 1, types);

	types[0] = TEXTOID;
	types[1] = TEXTOID;
	types[2] = TEXTOID;
	types[3] = INT8OID;
	types[4] = TEXTOID;
	plan_queue_orphan = paidb_prepare_kept(clusters ?
									 "INSERT INTO paidb.orphan (name, namespace, uid, resource_version, cluster) "
									 "VALUES ($1, $2, $3, $4, $5) ON CONFLICT (cluster, name) DO UPDATE SET "
									 "namespace = EXCLUDED.namespace, uid = EXCLUDED.uid, "
									 "resource_version = EXCLUDED.resource_version" :
									 "INSERT INTO paidb.orphan (name, namespace, uid, resource_version) "
									 "VALUES ($1, $2, $3, $4) ON CONFLICT (name) DO UPDATE SET "
									 "namespace = EXCLUDED.namespace, uid = EXCLUDED.uid, "
									 "resource_version = EXCLUDED.resource_version",
									 clusters ? 5 : 4, types);
	types[1] = TEXTOID;
	plan_forget_orphan = paidb_prepare_kept(clusters ?
											"DELETE FROM paidb.orphan WHERE name = $1 AND cluster = $2" :
											"DELETE FROM paidb.orphan WHERE name = $1",
											clusters ? 2 : 1, types);
	pfree(sql.data);
}

/* Refuse a request that is not a well-formed framework request. */
static char *
validate_request(Jsonb *request)
{
	JsonbValue	v;
	char	   *name;
	static const char *const objects[][2] = {
		{"metadata", NULL}, {"metadata", "labels"}, {"metadata", "annotations"}, {"spec", NULL}
	};
	int			i;

	if (VARSIZE(request) > (Size) paidb_max_request_bytes)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("framework request is too large"),
				 errdetail("The request takes %zu bytes; paidb.max_request_bytes is %d.",
						   (Size) VARSIZE(request), paidb_max_request_bytes),
				 errhint("Make the request smaller or raise paidb.max_request_bytes.")));
	if (!JB_ROOT_IS_OBJECT(request))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("framework request must be a JSON object")));
	for (i = 0; i < (int) lengthof(objects); i++)
	{
		int			n = objects[i][1] ? 2 : 1;

		if (jb_get_path(&request->root, &v, n, objects[i]) &&
			!(v.type == jbvBinary && JsonContainerIsObject(v.val.binary.data)))
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("%s%s%s of a framework request must be a JSON object",
							objects[i][0], n == 2 ? "." : "", n == 2 ? objects[i][1] : "")));
	}
	if (!jb_get_path(&request->root, &v, 2, (const char *[]) {"metadata", "name"}))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("framework request has no metadata.name"),
				 errhint("Every framework request must name its framework.")));
	if (v.type != jbvString)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("metadata.name of a framework request must be a string")));
	name = pnstrdup(v.val.string.val, v.val.string.len);
	if (!paidb_valid_framework_name(name))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid framework name \"%s\"", name),
				 errdetail("Framework names must match %s: 1 to %d lower-case letters or digits.",
						   PAIDB_FRAMEWORK_NAME_RULE, PAIDB_FRAMEWORK_NAME_MAX),
				 errhint("The API server refuses other names, so paidb does too.")));
	return name;
}

/* The columns plan_lock reads (plan_lock_many adds the name). */
#define LOCK_NCOLS 9

/* A stored row from the columns plan_lock read. */
static void
read_row(const char *name, const Datum *v, const bool *isnull, StoredFramework *row)
{
	row->found = true;
	row->generation = DatumGetInt64(v[0]);
	/* copied out of SPI memory: the caller uses it after further SPI calls */
	if (isnull[1] && plans_packed)
	{
		/* not converted from 0.2 yet (or no snapshot at all) */
		row->snapshot = isnull[8] ? NULL : DatumGetJsonbPCopy(v[8]);
	}
	else if (isnull[1])
		row->snapshot = NULL;
	else if (plans_packed)
		row->snapshot = paidb_unpack_job_snapshot(name, DatumGetByteaPP(v[1]),
												  isnull[2] ? NULL : DatumGetTextPP(v[2]));
	else
		row->snapshot = DatumGetJsonbPCopy(v[1]);
	row->has_rv = !isnull[3];
	row->resource_version = isnull[3] ? 0 : DatumGetInt64(v[3]);
	row->request_synced = DatumGetBool(v[4]);
	row->api_server_deleted = DatumGetBool(v[5]);
	row->cluster = TextDatumGetCString(v[6]);
	row->placement = DatumGetInt32(v[7]);
}

/*
 * A framework watcher's batch (paidb_watch_batch_begin): its rows read and
 * locked by one statement, its updates held back and written by one.  Each
 * statement costs the executor's start and end (~20 us each for these two)
 * whatever its number of rows.
 */
typedef struct BatchRow
{
	char		name[PAIDB_FRAMEWORK_NAME_SIZE];	/* hash key */
	bool		found;
	bool		taken;			/* an item read it: read the table from now on */
	Datum		values[LOCK_NCOLS];
	bool		nulls[LOCK_NCOLS];
} BatchRow;

typedef struct WatchBatch
{
	HTAB	   *rows;
	int			npending;
	int			cap;
	Datum	   *values[UPDATE_NPARAMS];	/* the held-back updates, by parameter */
	bool	   *nulls[UPDATE_NPARAMS];
} WatchBatch;

static MemoryContext watch_batch_cxt = NULL;
static WatchBatch *watch_batch = NULL;

/*
 * plan_update_many's arguments for the held-back updates: the rows as an
 * array of paidb.framework's row type (columns matched by name), and the
 * flags as an int4 array.
 */
static void
batch_row_arrays(WatchBatch *b, Datum *args)
{
	Datum	   *flags = palloc(sizeof(Datum) * Max(b->npending, 1));
	int			n = PAIDB_NUM_DERIVED;
	int			r;

	args[0] = paidb_row_array(framework_rowtype, UPDATE_NPARAMS, update_columns, update_types,
							  b->values, b->nulls, b->npending);
	for (r = 0; r < b->npending; r++)
	{
		int32		bits = 0;

		/* a NULL flag is false, as CASE WHEN NULL is */
		if (!b->nulls[n + 5][r] && DatumGetBool(b->values[n + 5][r]))
			bits |= FLAG_RESET_SENT;
		if (!b->nulls[n + 6][r] && DatumGetBool(b->values[n + 6][r]))
			bits |= FLAG_RESET_DUE;
		flags[r] = Int32GetDatum(bits);
	}
	args[1] = PointerGetDatum(construct_array(flags, b->npending, INT4OID, sizeof(int32), true, TYPALIGN_INT));
}

/* Write the held-back updates of the batch (inside SPI). */
static void
batch_flush(void)
{
	WatchBatch *b = watch_batch;
	Datum		args[2];
	volatile int rc = 0;
	volatile uint64 processed = 0;

	if (b == NULL || b->npending == 0)
		return;
	batch_row_arrays(b, args);
	/*
	 * The job list's changes too are written with one statement each for
	 * the batch, not one per row (job_list.h): the per-row statements'
	 * executor set-up and scans were ~12% of the watcher's CPU on a stream
	 * of state changes, the batch's two statements are ~5%.
	 */
	paidb_job_list_defer_begin();
	PG_TRY();
	{
		rc = SPI_execute_plan(plan_update_many, args, NULL, false, 0);
		processed = SPI_processed;
		paidb_job_list_flush();
	}
	PG_FINALLY();
	{
		paidb_job_list_defer_end();
	}
	PG_END_TRY();
	if (rc != SPI_OK_UPDATE || processed != (uint64) b->npending)
		elog(ERROR, "could not update %d frameworks (%llu updated)", b->npending,
			 (unsigned long long) processed);
	b->npending = 0;
}

/* Hold an update (plan_update's parameters) back until the batch is written. */
static void
batch_defer_update(const Datum *values, const char *nulls)
{
	WatchBatch *b = watch_batch;
	MemoryContext old;
	int			i;

	if (b->npending == b->cap)
		batch_flush();
	old = MemoryContextSwitchTo(watch_batch_cxt);
	for (i = 0; i < UPDATE_NPARAMS; i++)
	{
		b->nulls[i][b->npending] = nulls[i] == 'n';
		b->values[i][b->npending] = nulls[i] == 'n' ? (Datum) 0 :
			datumCopy(values[i], update_typbyval[i], update_typlen[i]);
	}
	MemoryContextSwitchTo(old);
	b->npending++;
}

/* See write_merger.h. */
void
paidb_watch_batch_discard(void)
{
	watch_batch = NULL;
	if (watch_batch_cxt != NULL)
		MemoryContextReset(watch_batch_cxt);
}

/* See write_merger.h. */
void
paidb_watch_batch_begin(char *const *names, int n)
{
	WatchBatch *b;
	HASHCTL		ctl;
	MemoryContext old,
				spicxt;
	Datum	   *texts;
	Datum		arg;
	int			i,
				k;
	uint64		r;

	paidb_watch_batch_discard();
	if (watch_batch_cxt == NULL)
		watch_batch_cxt = AllocSetContextCreate(TopMemoryContext, "paidb watch batch",
												ALLOCSET_DEFAULT_SIZES);
	old = MemoryContextSwitchTo(watch_batch_cxt);
	b = palloc0(sizeof(WatchBatch));
	memset(&ctl, 0, sizeof(ctl));
	ctl.keysize = PAIDB_FRAMEWORK_NAME_SIZE;
	ctl.entrysize = sizeof(BatchRow);
	ctl.hcxt = watch_batch_cxt;
	b->rows = hash_create("paidb watch batch", Max(n, 16), &ctl, HASH_ELEM | HASH_STRINGS | HASH_CONTEXT);
	b->cap = Max(n, 1);
	for (i = 0; i < UPDATE_NPARAMS; i++)
	{
		b->values[i] = palloc(sizeof(Datum) * b->cap);
		b->nulls[i] = palloc(sizeof(bool) * b->cap);
	}
	/* every name, known to be absent unless the statement finds it */
	texts = palloc(sizeof(Datum) * Max(n, 1));
	for (i = 0, k = 0; i < n; i++)
	{
		BatchRow   *e;

		if (names[i] == NULL || strlen(names[i]) >= PAIDB_FRAMEWORK_NAME_SIZE)
			continue;
		e = hash_search(b->rows, names[i], HASH_ENTER, NULL);
		e->found = false;
		e->taken = false;
		texts[k++] = CStringGetTextDatum(names[i]);
	}
	arg = PointerGetDatum(construct_array(texts, k, TEXTOID, -1, false, TYPALIGN_INT));
	MemoryContextSwitchTo(old);

	SPI_connect();
	prepare_plans();
	if (SPI_execute_plan(plan_lock_many, &arg, NULL, false, 0) != SPI_OK_SELECT)
		elog(ERROR, "could not lock a batch of frameworks");
	for (r = 0; r < SPI_processed; r++)
	{
		Datum		v[LOCK_NCOLS + 1];
		bool		isnull[LOCK_NCOLS + 1];
		char	   *name;
		BatchRow   *e;

		heap_deform_tuple(SPI_tuptable->vals[r], SPI_tuptable->tupdesc, v, isnull);
		name = TextDatumGetCString(v[LOCK_NCOLS]);
		e = hash_search(b->rows, name, HASH_FIND, NULL);
		if (e == NULL)
			continue;
		e->found = true;
		/* kept until the batch ends, past this statement: detoasted copies */
		spicxt = MemoryContextSwitchTo(watch_batch_cxt);
		for (i = 0; i < LOCK_NCOLS; i++)
		{
			Form_pg_attribute att = TupleDescAttr(SPI_tuptable->tupdesc, i);

			e->nulls[i] = isnull[i];
			if (isnull[i])
				e->values[i] = (Datum) 0;
			else if (att->attlen == -1)
				e->values[i] = PointerGetDatum(PG_DETOAST_DATUM_COPY(v[i]));
			else
				e->values[i] = datumCopy(v[i], att->attbyval, att->attlen);
		}
		MemoryContextSwitchTo(spicxt);
	}
	SPI_freetuptable(SPI_tuptable);
	SPI_finish();
	watch_batch = b;
}

/* See write_merger.h. */
void
paidb_watch_batch_end(void)
{
	if (watch_batch == NULL)
		return;
	SPI_connect();
	prepare_plans();
	batch_flush();
	SPI_finish();
	paidb_watch_batch_discard();
}

/* Lock and read the stored row of a framework, if any. */
static void
lock_framework(const char *name, StoredFramework *row)
{
	Datum		arg = CStringGetTextDatum(name);
	Datum		v[LOCK_NCOLS];
	bool		isnull[LOCK_NCOLS];

	memset(row, 0, sizeof(*row));
	if (watch_batch != NULL && strlen(name) < PAIDB_FRAMEWORK_NAME_SIZE)
	{
		BatchRow   *e = hash_search(watch_batch->rows, name, HASH_FIND, NULL);

		if (e != NULL && !e->taken)
		{
			/* read and locked with the batch, unchanged since */
			e->taken = true;
			if (e->found)
				read_row(name, e->values, e->nulls, row);
			return;
		}
		/* read again, with what the batch changed written first */
		if (e != NULL)
			batch_flush();
	}
	if (plans_packed && plans_have_clusters)
	{
		/*
		 * By its key, without a statement: the SELECT ... FOR UPDATE's
		 * executor set-up was ~35k instructions of a status update's ~650k.
		 * Like a statement, it sees this transaction's writes so far (a
		 * second event of a job in one statement).
		 */
		static const char *const columns[] = {"request_generation", "snapshot_packed", "job_config",
			"resource_version", "request_synced", "api_server_deleted", "cluster", "placement"};

		StaticAssertStmt(lengthof(columns) == LOCK_NCOLS - 1, "the columns plan_lock reads");
		CommandCounterIncrement();
		if (!paidb_pkey_lock_datums(plans_framework, name, LockTupleExclusive,
									lengthof(columns), columns, v, isnull))
			return;
		/* a row 0.2 stored, not converted yet: its snapshot as plan_lock reads it */
		if (!isnull[1])
		{
			isnull[LOCK_NCOLS - 1] = true;
			read_row(name, v, isnull, row);
			return;
		}
	}
	if (SPI_execute_plan(plan_lock, &arg, NULL, false, 1) != SPI_OK_SELECT)
		elog(ERROR, "could not lock framework \"%s\"", name);
	if (SPI_processed == 0)
		return;
	heap_deform_tuple(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, v, isnull);
	read_row(name, v, isnull, row);
}

/*
 * Whether a row of paidb.framework named `name` is visible now, read from
 * the primary key without a statement.  A new job's submission asks this
 * first: a SELECT ... FOR UPDATE that finds no row is mostly the
 * executor's set-up (4.5% of a submission's CPU, this look 1.3%).  Only a
 * hint: a row another session inserts meanwhile makes the insert's ON
 * CONFLICT skip, and the caller then locks the row, as before.
 */
static bool
framework_row_visible(const char *name)
{
	bool		found;

	/*
	 * Seen as the locking statement saw it: with this transaction's writes
	 * so far, those of the calling statement too (a second submission of a
	 * name in one statement is not new).
	 */
	CommandCounterIncrement();
	PushActiveSnapshot(GetTransactionSnapshot());
	UpdateActiveSnapshotCommandId();
	found = paidb_pkey_lookup(plans_framework, name, GetActiveSnapshot(), NULL, NULL);
	PopActiveSnapshot();
	return found;
}

/* The snapshot as the row stores it: packed (0.3 on) with the row's job config, or jsonb. */
static Datum
stored_snapshot(const char *name, Jsonb *snapshot, DerivedColumns *cols)
{
	if (!plans_packed)
		return JsonbPGetDatum(snapshot);
	return PointerGetDatum(paidb_pack_job_snapshot(name, snapshot, cols->nulls[PAIDB_COL_JOB_CONFIG] ? NULL :
												   DatumGetTextPP(cols->values[PAIDB_COL_JOB_CONFIG])));
}

/* Insert a new framework row; false if another transaction inserted it first. */
static bool
insert_framework(const char *name, Jsonb *snapshot, TimestampTz submission_time,
				 int64 generation, bool synced, bool has_rv, int64 rv,
				 Jsonb *const *addons, const char *cluster)
{
	DerivedColumns d;
	Datum		values[PAIDB_NUM_DERIVED + 16];
	char		nulls[PAIDB_NUM_DERIVED + 16];
	int			i,
				n = 0;

	paidb_derive_columns(snapshot, &d);
	values[n] = CStringGetTextDatum(name);
	nulls[n++] = ' ';
	for (i = 0; i < PAIDB_NUM_DERIVED; i++)
	{
		values[n] = d.values[i];
		nulls[n++] = d.nulls[i] ? 'n' : ' ';
	}
	values[n] = TimestampTzGetDatum(submission_time);
	nulls[n++] = ' ';
	values[n] = stored_snapshot(name, snapshot, &d);
	nulls[n++] = ' ';
	values[n] = Int64GetDatum(generation);
	nulls[n++] = ' ';
	values[n] = BoolGetDatum(synced);
	nulls[n++] = ' ';
	values[n] = Int64GetDatum(rv);
	nulls[n++] = has_rv ? ' ' : 'n';
	for (i = 0; i < NUM_ADDONS; i++)
	{
		values[n] = addons && addons[i] ? JsonbPGetDatum(addons[i]) : (Datum) 0;
		nulls[n++] = addons && addons[i] ? ' ' : 'n';
	}
	if (plans_have_clusters)
	{
		values[n] = CStringGetTextDatum(cluster);
		nulls[n++] = ' ';
	}
	if (SPI_execute_plan(plan_insert, values, nulls, false, 0) != SPI_OK_INSERT_RETURNING)
		elog(ERROR, "could not insert framework \"%s\"", name);
	return SPI_processed == 1;
}

/* Rewrite a framework row from a new snapshot (and its columns, if derived) and sync flags. */
static void
update_framework(const char *name, Jsonb *snapshot, DerivedColumns *cols, int64 generation,
				 bool synced, bool deleted, bool has_rv, int64 rv, bool reset_sent,
				 bool reset_due)
{
	DerivedColumns own;
	Datum		values[PAIDB_NUM_DERIVED + 9];
	char		nulls[PAIDB_NUM_DERIVED + 9];
	int			i,
				n = 0;

	/* the caller may have derived them already from this very snapshot */
	if (cols == NULL)
	{
		paidb_derive_columns(snapshot, &own);
		cols = &own;
	}
	for (i = 0; i < PAIDB_NUM_DERIVED; i++)
	{
		values[n] = cols->values[i];
		nulls[n++] = cols->nulls[i] ? 'n' : ' ';
	}
	values[n] = stored_snapshot(name, snapshot, cols);
	nulls[n++] = ' ';
	values[n] = Int64GetDatum(generation);
	nulls[n++] = ' ';
	values[n] = BoolGetDatum(synced);
	nulls[n++] = ' ';
	values[n] = BoolGetDatum(deleted);
	nulls[n++] = ' ';
	values[n] = Int64GetDatum(rv);
	nulls[n++] = has_rv ? ' ' : 'n';
	values[n] = BoolGetDatum(reset_sent);
	nulls[n++] = ' ';
	values[n] = BoolGetDatum(reset_sent || reset_due);
	nulls[n++] = ' ';
	values[n] = CStringGetTextDatum(name);
	nulls[n++] = ' ';
	if (watch_batch != NULL)
		batch_defer_update(values, nulls);
	else if (SPI_execute_plan(plan_update, values, nulls, false, 0) != SPI_OK_UPDATE)
		elog(ERROR, "could not update framework \"%s\"", name);
}

/* The status member of a snapshot as a value, or NULL for the pending status. */
static JsonbValue *
snapshot_status(Jsonb *snapshot)
{
	JsonbValue *v = palloc(sizeof(JsonbValue));

	if (snapshot == NULL ||
		!jb_get_path(&snapshot->root, v, 1, (const char *[]) {"status"}) ||
		v->type == jbvNull)
		return NULL;
	return v;
}

/* Whether a stored snapshot's status says the framework has completed. */
static bool
snapshot_completed(Jsonb *snapshot)
{
	int			attempt = 0;
	bool		completed = false;

	paidb_snapshot_progress(snapshot, &attempt, &completed);
	return completed;
}

/* A request part with spec.executionType removed (spec kept otherwise). */
static Jsonb *
without_execution_type(Jsonb *request)
{
	JsonbValue	spec;

	if (jb_get_path(&request->root, &spec, 1, (const char *[]) {"spec"}) &&
		spec.type == jbvBinary && JsonContainerIsObject(spec.val.binary.data))
	{
		JsonbValue *none[1] = {NULL};
		Jsonb	   *newspec;
		JsonbValue	specval;

		newspec = JsonbValueToJsonb(jb_object_replace(spec.val.binary.data, 1,
													  (const char *[]) {"executionType"}, none));
		jb_container_value(&specval, &newspec->root);
		return JsonbValueToJsonb(jb_object_replace(&request->root, 1,
												   (const char *[]) {"spec"},
												   (JsonbValue *const[]) {&specval}));
	}
	return request;
}

/*
 * Whether two request parts are equal but for spec.executionType: a Stop or
 * a Start and nothing else.  On a completed framework already gone from the
 * API server such a change would never be sent (the work list skips deleted
 * rows), so storing it would leave request_synced false for good and the
 * job shown with an execution type it never had; it is a no-op instead
 * (docs/design.md).
 */
static bool
only_execution_type_differs(Jsonb *newreq, Jsonb *oldreq)
{
	return jb_container_equal(&without_execution_type(newreq)->root,
							  &without_execution_type(oldreq)->root);
}

/* Result of storing a request for an existing or new framework. */
typedef struct RequestOutcome
{
	int64		generation;
	bool		created;
	bool		changed;
} RequestOutcome;

/*
 * Store `request` (already validated) for `name`, holding the row lock of an
 * existing row `row`: no change when equal ignoring requestGeneration,
 * otherwise generation + 1 and request_synced = false.
 */
static void
store_changed_request(const char *name, Jsonb *request, StoredFramework *row,
					  RequestOutcome *out)
{
	Jsonb	   *newreq = paidb_request_part(&request->root, 0);
	Jsonb	   *oldreq = paidb_request_part(&row->snapshot->root, 0);
	Jsonb	   *stored;
	Jsonb	   *snapshot;

	out->created = false;
	if (jb_container_equal(&newreq->root, &oldreq->root) ||
		(row->api_server_deleted && only_execution_type_differs(newreq, oldreq) &&
		 snapshot_completed(row->snapshot)))
	{
		out->generation = row->generation;
		out->changed = false;
		return;
	}
	out->generation = row->generation + 1;
	out->changed = true;
	stored = paidb_request_part(&request->root, out->generation);
	snapshot = paidb_compose_snapshot(&stored->root, &row->snapshot->root,
									  snapshot_status(row->snapshot));
	update_framework(name, snapshot, NULL, out->generation, false, row->api_server_deleted,
					 row->has_rv, row->resource_version, true, true);
	if (!row->api_server_deleted)
		paidb_note_sync_needed(row->cluster);
}

/* Refuse an add-on definition its slot does not allow (SPEC §8). */
static void
check_addon(const PaidbAddonSlot *slot, Jsonb *def)
{
	const char *ns = paidb_cluster_namespace();
	char	   *problem = paidb_addon_problem(slot, &def->root, ns);

	if (problem != NULL)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid add-on %s", slot->key),
				 errdetail_internal("%s", problem),
				 errhint("%s takes a %s %s named by a DNS-1123 subdomain, in its cluster's namespace \"%s\" if namespaced.",
						 slot->key, slot->api_version, slot->kind, ns)));
}

/* Validate the add_ons argument and pick out the five definitions. */
static void
read_addons(Jsonb *add_ons, Jsonb **defs)
{
	JsonbIterator *it;
	JsonbValue	v;
	JsonbIteratorToken tok;
	int			i;

	for (i = 0; i < NUM_ADDONS; i++)
		defs[i] = NULL;
	if (add_ons == NULL)
		return;
	if (!JB_ROOT_IS_OBJECT(add_ons))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("add_ons must be a JSON object"),
				 errhint("Pass an object with keys such as configSecretDef and dockerSecretDef.")));
	it = JsonbIteratorInit(&add_ons->root);
	while ((tok = JsonbIteratorNext(&it, &v, true)) != WJB_DONE)
	{
		char	   *key;
		JsonbValue	val;

		if (tok != WJB_KEY)
			continue;
		key = pnstrdup(v.val.string.val, v.val.string.len);
		for (i = 0; i < NUM_ADDONS; i++)
			if (strcmp(key, paidb_addon_slots[i].key) == 0)
				break;
		if (i == NUM_ADDONS)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("unknown add-on \"%s\"", key),
					 errdetail("Add-ons are configSecretDef, userExtensionSecretDef, priorityClassDef, dockerSecretDef and tokenSecretDef.")));
		tok = JsonbIteratorNext(&it, &val, true);
		Assert(tok == WJB_VALUE);
		if (val.type == jbvNull)
			continue;
		if (val.type != jbvBinary || !JsonContainerIsObject(val.val.binary.data))
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("add-on definition \"%s\" must be a JSON object", key),
					 errdetail("An add-on definition is the Kubernetes object to create, e.g. a Secret.")));
		defs[i] = JsonbValueToJsonb(&val);
		check_addon(&paidb_addon_slots[i], defs[i]);
	}
}

/*
 * Set up the materialised-SRF result before anything can wait: it reads the
 * function's row type by its OID, and an ALTER EXTENSION paidb UPDATE that
 * a call waited for may have replaced the function (0.3's
 * put_framework_request); read afterwards, the call failed with "cache
 * lookup failed for function".
 */
static void
begin_one_row(FunctionCallInfo fcinfo)
{
	InitMaterializedSRF(fcinfo, 0);
}

/* Return the one row set up by begin_one_row. */
static void
return_one_row(FunctionCallInfo fcinfo, Datum *values, bool *nulls)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;

	tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
}

/*
 * put_framework_request(request, submission_time, add_ons, cluster): create
 * or replace a job's request (the write merger's PUT); a new job is placed
 * in a cluster in this transaction (SPEC §11).
 */
Datum
paidb_put_framework_request(PG_FUNCTION_ARGS)
{
	Jsonb	   *request;
	Jsonb	   *add_ons;
	TimestampTz submission_time;
	Jsonb	   *defs[NUM_ADDONS];
	char	   *name;
	char	   *volatile cluster_arg = NULL;
	StoredFramework row;
	RequestOutcome out;
	PaidbClusterConfig conf;
	PaidbClusterConfig *saved_cluster = paidb_my_cluster;
	Datum		values[4];
	bool		nulls[4] = {false, false, false, false};

	begin_one_row(fcinfo);
	if (PG_ARGISNULL(0))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("framework request must be a JSON object"),
				 errdetail("The request is NULL.")));
	request = PG_GETARG_JSONB_P(0);
	submission_time = PG_ARGISNULL(1) ? GetCurrentTransactionStartTimestamp() : PG_GETARG_TIMESTAMPTZ(1);
	name = validate_request(request);
	add_ons = PG_ARGISNULL(2) ? NULL : PG_GETARG_JSONB_P(2);
	if (PG_NARGS() > 3 && !PG_ARGISNULL(3))
		cluster_arg = text_to_cstring(PG_GETARG_TEXT_PP(3));

	SPI_connect();
	prepare_plans();
	PG_TRY();
	{
		bool		probe = true;

		for (;;)
		{
			/* a new name (the usual submission) needs no row lock to learn so */
			if (probe && !framework_row_visible(name))
				memset(&row, 0, sizeof(row));
			else
				lock_framework(name, &row);
			probe = false;
			if (row.found)
			{
				/* changing a job's request never moves it (SPEC §11) */
				if (cluster_arg != NULL && strcmp(cluster_arg, row.cluster) != 0)
					ereport(ERROR,
							(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
							 errmsg("job \"%s\" belongs to cluster \"%s\", not \"%s\"",
									name, row.cluster, cluster_arg),
							 errhint("paidb.move_job moves a waiting job to another cluster.")));
				if (plans_have_clusters)
				{
					if (!paidb_read_cluster(row.cluster, &conf, NULL))
						elog(ERROR, "cluster \"%s\" of job \"%s\" is missing", row.cluster, name);
					paidb_my_cluster = &conf;
				}
				/* add-ons given for an existing job are checked, then ignored (SPEC §3) */
				read_addons(add_ons, defs);
				store_changed_request(name, request, &row, &out);
				break;
			}
			else
			{
				Jsonb	   *stored = paidb_request_part(&request->root, 1);
				Jsonb	   *snapshot = paidb_compose_snapshot(&stored->root, NULL, NULL);
				char	   *vc = jb_get_cstring(&request->root, 3,
												(const char *[]) {"metadata", "labels", "virtualCluster"});

				if (plans_have_clusters)
				{
					paidb_place_new_job(cluster_arg, vc, &conf);
					/* the namespace of its add-ons and row is its cluster's */
					paidb_my_cluster = &conf;
				}
				else
				{
					/* a 0.2 schema: the one API server of the settings */
					if (cluster_arg != NULL && strcmp(cluster_arg, PAIDB_DEFAULT_CLUSTER) != 0)
						ereport(ERROR,
								(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
								 errmsg("cluster \"%s\" does not exist", cluster_arg),
								 errhint("Run ALTER EXTENSION paidb UPDATE to use more than one cluster.")));
					strlcpy(conf.name, PAIDB_DEFAULT_CLUSTER, sizeof(conf.name));
				}
				read_addons(add_ons, defs);
				if (insert_framework(name, snapshot, submission_time, 1, false,
									 false, 0, defs, conf.name))
				{
					out.generation = 1;
					out.created = true;
					out.changed = true;
					paidb_note_sync_needed(conf.name);
					break;
				}
				/* a concurrent put inserted it first: lock that row and compare */
				CHECK_FOR_INTERRUPTS();
			}
		}
	}
	PG_FINALLY();
	{
		paidb_my_cluster = saved_cluster;
	}
	PG_END_TRY();
	SPI_finish();

	values[0] = CStringGetTextDatum(name);
	values[1] = Int64GetDatum(out.generation);
	values[2] = BoolGetDatum(out.created);
	values[3] = BoolGetDatum(out.changed);
	return_one_row(fcinfo, values, nulls);
	return (Datum) 0;
}

/* Apply a merge patch to a stored request (shared by patch and stop). */
static void
patch_request(FunctionCallInfo fcinfo, const char *name, Jsonb *patch)
{
	StoredFramework row;
	RequestOutcome out;
	Jsonb	   *current;
	Jsonb	   *patched;
	char	   *patched_name;
	JsonbValue	v;
	Datum		values[2];
	bool		nulls[2] = {false, false};

	begin_one_row(fcinfo);
	if (!JB_ROOT_IS_OBJECT(patch))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("a framework patch must be a JSON object"),
				 errhint("Send a JSON merge patch (RFC 7396) such as {\"spec\": {\"executionType\": \"Stop\"}}.")));
	if (jb_get_path(&patch->root, &v, 2, (const char *[]) {"metadata", "name"}) &&
		!(v.type == jbvString && v.val.string.len == (int) strlen(name) &&
		  memcmp(v.val.string.val, name, v.val.string.len) == 0))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("a patch cannot rename framework \"%s\"", name),
				 errdetail("The patch sets metadata.name to a different value.")));
	/* the status belongs to the API server: a patch never touches it */
	if (jb_get_path(&patch->root, &v, 1, (const char *[]) {"status"}))
	{
		JsonbValue *vals[1] = {NULL};

		patch = JsonbValueToJsonb(jb_object_replace(&patch->root, 1, (const char *[]) {"status"}, vals));
	}

	SPI_connect();
	prepare_plans();
	lock_framework(name, &row);
	if (!row.found)
		ereport(ERROR,
				(errcode(ERRCODE_NO_DATA_FOUND),
				 errmsg("framework \"%s\" does not exist", name)));
	current = paidb_request_part(&row.snapshot->root, row.generation);
	patched = paidb_merge_patch(current, patch);
	patched_name = validate_request(patched);
	if (strcmp(patched_name, name) != 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("a patch cannot rename framework \"%s\"", name)));
	store_changed_request(name, patched, &row, &out);
	SPI_finish();

	values[0] = Int64GetDatum(out.generation);
	values[1] = BoolGetDatum(out.changed);
	return_one_row(fcinfo, values, nulls);
}

/* patch_framework_request(name, patch): the write merger's PATCH. */
Datum
paidb_patch_framework_request(PG_FUNCTION_ARGS)
{
	if (PG_ARGISNULL(0) || PG_ARGISNULL(1))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("framework name and patch must not be NULL")));
	patch_request(fcinfo, text_to_cstring(PG_GETARG_TEXT_PP(0)), PG_GETARG_JSONB_P(1));
	return (Datum) 0;
}

/* stop_framework(name): set spec.executionType to Stop. */
Datum
paidb_stop_framework(PG_FUNCTION_ARGS)
{
	static const char stop[] = "{\"spec\": {\"executionType\": \"Stop\"}}";

	if (PG_ARGISNULL(0))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("framework name must not be NULL")));
	patch_request(fcinfo, text_to_cstring(PG_GETARG_TEXT_PP(0)),
				  jb_from_text(stop, sizeof(stop) - 1));
	return (Datum) 0;
}

/*
 * The snapshot a watched framework makes with the stored request: composed
 * first, while the object's task role statuses are still compressed and
 * small, then decompressed, so the large statuses are built only once.
 */
static Jsonb *
watched_snapshot(Jsonb *request, Jsonb *object, const char *name)
{
	char	   *error = NULL;
	Jsonb	   *snapshot = paidb_compose_snapshot(&request->root, &object->root, snapshot_status(object));
	Jsonb	   *decompressed = paidb_decompress_snapshot_internal(snapshot, &error);

	if (decompressed == NULL)
	{
		/* keep the compressed form rather than lose the event */
		ereport(WARNING,
				(errcode(ERRCODE_DATA_EXCEPTION),
				 errmsg("cannot decompress task role statuses of framework \"%s\"", name),
				 errdetail("%s.", error),
				 errhint("The status is stored with taskRoleStatusesCompressed as received.")));
		return snapshot;
	}
	return decompressed;
}

/* Normalise a watch event type; ERROR for anything that is not one. */
static const char *
normalise_event_type(const char *type)
{
	if (strcmp(type, "ADDED") == 0)
		return "ADDED";
	if (strcmp(type, "MODIFIED") == 0 || strcmp(type, "MODIFED") == 0)
		return "MODIFIED";
	if (strcmp(type, "DELETED") == 0)
		return "DELETED";
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("unknown watch event type \"%s\"", type),
			 errhint("Event types are ADDED, MODIFIED and DELETED.")));
	return NULL;				/* keep compiler quiet */
}

/*
 * Queue (or forget) a framework unknown to the database (SPEC §5.1), or a
 * stray copy of a job (another cluster's or another placement's, SPEC §11):
 * retain mode keeps the first kind only.
 */
static void
handle_orphan(const char *type, const char *name, Jsonb *object, bool stray)
{
	Datum		values[5];
	char		nulls[5] = {' ', ' ', ' ', ' ', ' '};
	char	   *ns = jb_get_cstring(&object->root, 2, (const char *[]) {"metadata", "namespace"});
	char	   *uid = jb_get_cstring(&object->root, 2, (const char *[]) {"metadata", "uid"});
	int64		rv = 0;

	values[0] = CStringGetTextDatum(name);
	if (strcmp(type, "DELETED") == 0)
	{
		/* it is gone already: nothing left to delete */
		values[1] = CStringGetTextDatum(paidb_cluster_name());
		SPI_execute_plan(plan_forget_orphan, values, nulls, false, 0);	/* $2 unused before 0.3 */
		return;
	}
	if (paidb_cluster_retain_mode() && !stray)
		return;
	/* already being deleted (by us, most likely): nothing to queue */
	if (jb_get_cstring(&object->root, 2, (const char *[]) {"metadata", "deletionTimestamp"}) != NULL)
		return;
	values[1] = ns ? CStringGetTextDatum(ns) : (Datum) 0;
	nulls[1] = ns ? ' ' : 'n';
	values[2] = uid ? CStringGetTextDatum(uid) : (Datum) 0;
	nulls[2] = uid ? ' ' : 'n';
	nulls[3] = paidb_object_resource_version(&object->root, &rv) ? ' ' : 'n';
	values[3] = Int64GetDatum(rv);
	values[4] = CStringGetTextDatum(paidb_cluster_name());
	if (SPI_execute_plan(plan_queue_orphan, values, nulls, false, 0) != SPI_OK_INSERT)
		elog(ERROR, "could not queue orphan framework \"%s\"", name);
	paidb_note_sync_needed(paidb_cluster_name());
}

/*
 * The placement an object's label paidb.io/placement names; 1 without the
 * label (objects made before 0.3, or imported), -1 if it is not a number.
 */
static int
object_placement(Jsonb *object)
{
	char	   *label = jb_get_cstring(&object->root, 3,
									   (const char *[]) {"metadata", "labels", PAIDB_PLACEMENT_LABEL});
	char	   *end;
	long		n;

	if (label == NULL)
		return 1;
	errno = 0;
	n = strtol(label, &end, 10);
	if (errno != 0 || end == label || *end != '\0' || n < 1 || n > PG_INT32_MAX)
		return -1;
	return (int) n;
}

/* Whether a snapshot holds paidb's permanent-failure status (SPEC §6). */
static bool
is_permanent_failure(Jsonb *snapshot)
{
	char	   *phrase = jb_get_cstring(&snapshot->root, 4,
										(const char *[]) {"status", "attemptStatus", "completionStatus", "phrase"});

	return phrase != NULL && strcmp(phrase, "CreateFrameworkPermanentFailed") == 0;
}

/* Merge one watch event into the database (SPEC §5), inside SPI. */
static const char *
apply_event(const char *type, Jsonb *object)
{
	char	   *name;
	StoredFramework row;
	int64		rv = 0;
	bool		has_rv;
	Jsonb	   *request;
	Jsonb	   *snapshot;
	DerivedColumns newcols;
	int			old_attempt;
	bool		old_completed;
	int64		object_generation;
	bool		synced;

	type = normalise_event_type(type);
	if (!JB_ROOT_IS_OBJECT(object))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("a watched framework must be a JSON object")));
	name = jb_get_cstring(&object->root, 2, (const char *[]) {"metadata", "name"});
	if (name == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("a watched framework has no metadata.name")));
	/* no stored framework has such a name: never queue it as an orphan */
	if (!paidb_valid_framework_name(name))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid framework name \"%.*s%s\" in a watched framework",
						PAIDB_FRAMEWORK_NAME_SIZE, name,
						strlen(name) > PAIDB_FRAMEWORK_NAME_SIZE ? "..." : ""),
				 errdetail("Framework names must match %s; paidb neither stores nor deletes other frameworks.",
						   PAIDB_FRAMEWORK_NAME_RULE)));

	prepare_plans();
	lock_framework(name, &row);
	if (!row.found)
	{
		handle_orphan(type, name, object, false);
		return "orphan";
	}
	/*
	 * SPEC §11: a framework found in another cluster than the job's (seen by
	 * that cluster's watcher), or labelled with an older placement, is not
	 * the job's: it never changes the job, and it is deleted where it was
	 * found, like any framework the database does not know.
	 */
	if ((paidb_my_cluster != NULL && strcmp(row.cluster, paidb_my_cluster->name) != 0) ||
		object_placement(object) != row.placement)
	{
		handle_orphan(type, name, object, true);
		return "other placement";
	}
	/*
	 * A job paidb failed before creating its framework has no framework: a
	 * framework of that name is somebody else's (SPEC §8), its events are
	 * not the job's.  The job's own mock DELETED carries its failed status.
	 */
	if (is_permanent_failure(row.snapshot) && !is_permanent_failure(object))
		return "foreign";

	/* 2. stale: compare only when both are decimal (etcd's always are) */
	has_rv = paidb_object_resource_version(&object->root, &rv);
	if (has_rv && row.has_rv && rv < row.resource_version)
		return "stale";
	if (!has_rv)
	{
		/* keep the stored version when the object has no usable one */
		has_rv = row.has_rv;
		rv = row.resource_version;
	}

	/*
	 * 3. the request is ours; the status is the API server's.  The stored
	 * snapshot's request part is the stored request (with its
	 * requestGeneration), and composing takes only those members from it.
	 */
	request = row.snapshot;
	paidb_snapshot_progress(row.snapshot, &old_attempt, &old_completed);

	if (strcmp(type, "DELETED") == 0)
	{
		Jsonb	   *deleted = watched_snapshot(request, object, name);

		paidb_derive_columns(deleted, &newcols);
		if (!newcols.completed)
		{
			/* deleted behind our back before it completed: create it again */
			snapshot = paidb_compose_snapshot(&request->root, NULL, NULL);
			update_framework(name, snapshot, NULL, row.generation, false, false, has_rv, rv, true, true);
			paidb_note_sync_needed(row.cluster);
			return "reset";
		}
		if (newcols.attempt_index > old_attempt && old_attempt >= 0)
			paidb_record_history_internal(row.snapshot, "retry");
		paidb_record_task_attempts(name, row.snapshot, deleted);
		update_framework(name, deleted, &newcols, row.generation, row.request_synced, true,
						 has_rv, rv, false, false);
		/* the add-on definitions hold secrets: drop them with the job */
		{
			Datum		arg = CStringGetTextDatum(name);

			batch_flush();		/* the update above first */
			SPI_execute_plan(plan_clear_addons, &arg, NULL, false, 0);
		}
		return "deleted";
	}

	snapshot = watched_snapshot(request, object, name);
	object_generation = paidb_request_generation(&object->root);
	synced = (object_generation == row.generation);

	/* 5. a new attempt: the previous one goes to the history first */
	paidb_derive_columns(snapshot, &newcols);
	if (newcols.attempt_index > old_attempt && old_attempt >= 0)
		paidb_record_history_internal(row.snapshot, "retry");
	/* SPEC §9: a task's earlier attempt goes to task_history */
	paidb_record_task_attempts(name, row.snapshot, snapshot);

	/* newly completed, or out of step again: the sync worker acts now */
	update_framework(name, snapshot, &newcols, row.generation, synced, false, has_rv, rv, false,
					 (newcols.completed && !old_completed) || (!synced && row.request_synced));
	if (!synced || newcols.completed)
		paidb_note_sync_needed(row.cluster);
	return (synced && !row.request_synced) ? "synced" : "updated";
}

/* Merge one watch event (C entry point for the watcher). */
const char *
paidb_apply_watch_event_internal(const char *event_type, Jsonb *object)
{
	const char *result;

	SPI_connect();
	result = apply_event(event_type, object);
	SPI_finish();
	return result;
}

/* apply_watch_event(event_type, object): merge one watch event (SPEC §5). */
Datum
paidb_apply_watch_event(PG_FUNCTION_ARGS)
{
	if (PG_ARGISNULL(0) || PG_ARGISNULL(1))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("event type and object must not be NULL")));
	PG_RETURN_TEXT_P(cstring_to_text(
									 paidb_apply_watch_event_internal(text_to_cstring(PG_GETARG_TEXT_PP(0)),
																	  PG_GETARG_JSONB_P(1))));
}

/* Import one listed framework as an already-synced job; true if new. */
static bool
import_one(Jsonb *object)
{
	char	   *name;
	StoredFramework row;
	int64		generation;
	Jsonb	   *request;
	Jsonb	   *snapshot;
	char	   *created;
	TimestampTz submission_time = GetCurrentTransactionStartTimestamp();
	int64		rv = 0;
	bool		has_rv;

	if (!JB_ROOT_IS_OBJECT(object))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("every framework to import must be a JSON object")));
	name = jb_get_cstring(&object->root, 2, (const char *[]) {"metadata", "name"});
	if (name == NULL || !paidb_valid_framework_name(name))
	{
		/* a real API server cannot hold such a framework; skip, don't fail */
		ereport(WARNING,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("skipping framework with invalid name \"%s\"", name ? name : "(none)")));
		return false;
	}
	lock_framework(name, &row);
	if (row.found)
		return false;

	generation = paidb_request_generation(&object->root);
	if (generation <= 0)
		generation = 1;
	request = paidb_request_part(&object->root, generation);
	snapshot = watched_snapshot(request, object, name);
	created = jb_get_cstring(&object->root, 2, (const char *[]) {"metadata", "creationTimestamp"});
	if (created)
		submission_time = DatumGetTimestampTz(DirectFunctionCall3(timestamptz_in,
																  CStringGetDatum(created),
																  ObjectIdGetDatum(InvalidOid),
																  Int32GetDatum(-1)));
	has_rv = paidb_object_resource_version(&object->root, &rv);
	if (!insert_framework(name, snapshot, submission_time, generation, true, has_rv, rv, NULL,
						  paidb_cluster_name()))
		return false;
	{
		DerivedColumns d;

		paidb_derive_columns(snapshot, &d);
		if (d.completed)
			paidb_note_sync_needed(paidb_cluster_name());
	}
	return true;
}

/* Import one framework listed from the API server; true if it was new. */
bool
paidb_import_framework_internal(Jsonb *object)
{
	bool		result;

	SPI_connect();
	prepare_plans();
	result = import_one(object);
	SPI_finish();
	return result;
}

/* import_frameworks(objects): adopt frameworks listed from an API server. */
Datum
paidb_import_frameworks(PG_FUNCTION_ARGS)
{
	Jsonb	   *objects;
	JsonbContainer *items;
	JsonbValue	v;
	int			count = 0;
	int			n,
				i;

	if (PG_ARGISNULL(0))
		PG_RETURN_INT32(0);
	objects = PG_GETARG_JSONB_P(0);
	if (JB_ROOT_IS_ARRAY(objects) && !JB_ROOT_IS_SCALAR(objects))
		items = &objects->root;
	else if (JB_ROOT_IS_OBJECT(objects) &&
			 jb_get_path(&objects->root, &v, 1, (const char *[]) {"items"}) &&
			 v.type == jbvBinary && JsonContainerIsArray(v.val.binary.data))
		items = v.val.binary.data;
	else
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("frameworks to import must be a JSON array or a List object with items")));

	SPI_connect();
	prepare_plans();
	n = JsonContainerSize(items);
	for (i = 0; i < n; i++)
	{
		JsonbValue *item = getIthJsonbValueFromContainer(items, i);

		CHECK_FOR_INTERRUPTS();
		if (item->type != jbvBinary || !JsonContainerIsObject(item->val.binary.data))
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("item %d of the frameworks to import is not a JSON object", i)));
		if (import_one(JsonbValueToJsonb(item)))
			count++;
	}
	SPI_finish();
	PG_RETURN_INT32(count);
}

/*
 * Fail a framework that never started after a permanent refusal by the API
 * server: Completed with code -1100, plus a Warning framework_event.
 */
bool
paidb_fail_permanently_internal(const char *name, int64 generation, const char *message)
{
	StoredFramework row;
	DerivedColumns cols;
	Jsonb	   *request;
	Jsonb	   *snapshot;
	bool		failed = false;

	SPI_connect();
	prepare_plans();
	lock_framework(name, &row);
	if (row.found && row.generation == generation && !row.api_server_deleted)
	{
		paidb_derive_columns(row.snapshot, &cols);
		/* only a framework that never started: pending status, no retries */
		if (!cols.nulls[PAIDB_COL_SUB_STATE] &&
			strcmp(TextDatumGetCString(cols.values[PAIDB_COL_SUB_STATE]), "AttemptCreationPending") == 0 &&
			(cols.nulls[PAIDB_COL_RETRIES] || DatumGetInt32(cols.values[PAIDB_COL_RETRIES]) == 0))
		{
			Datum		args[3];
			Oid			types[3] = {TEXTOID, TEXTOID, TEXTOID};

			request = paidb_request_part(&row.snapshot->root, row.generation);
			snapshot = paidb_compose_snapshot(&request->root, &row.snapshot->root,
											  paidb_permanent_failure_status(message));
			/* the request is what it is: nothing more to send for it */
			update_framework(name, snapshot, NULL, row.generation, false, false,
							 row.has_rv, row.resource_version, false, true);
			args[0] = CStringGetTextDatum(name);
			args[1] = CStringGetTextDatum(message ? message : "");
			args[2] = CStringGetTextDatum(psprintf(INT64_FORMAT, generation));
			if (SPI_execute_with_args(
									  "INSERT INTO paidb.framework_event (uid, framework_name, type, reason, message, "
									  "first_timestamp, last_timestamp, count, source_component, event) "
									  "VALUES (pg_catalog.md5($1 || '+' || $3 || '+CreateFrameworkPermanentFailed'), $1, "
									  "'Warning', 'CreateFrameworkPermanentFailed', $2, pg_catalog.now(), pg_catalog.now(), 1, "
									  "'paidb', pg_catalog.jsonb_build_object('reason', 'CreateFrameworkPermanentFailed', "
									  "'message', $2, 'type', 'Warning', 'requestGeneration', $3)) "
									  "ON CONFLICT (uid) DO UPDATE SET count = framework_event.count + 1, "
									  "last_timestamp = EXCLUDED.last_timestamp, message = EXCLUDED.message, "
									  "updated_at = pg_catalog.now()",
									  3, types, args, NULL, false, 0) != SPI_OK_INSERT)
				elog(ERROR, "could not record the permanent failure of framework \"%s\"", name);
			paidb_note_sync_needed(row.cluster);
			failed = true;
		}
	}
	SPI_finish();
	return failed;
}

PG_FUNCTION_INFO_V1(paidb_move_job);

/*
 * move_job(name, cluster, force): move a waiting job to another active
 * cluster (SPEC §11), returning at once.  The job's row takes the new
 * cluster and the next placement, with the pending status and nothing
 * sent; moving_from keeps the old cluster until its sync worker has
 * confirmed the old framework absent, and the new cluster's sync worker
 * creates nothing before that.  With force the create is not held back:
 * the old framework is queued for deletion in the old cluster and a
 * MovedUnconfirmed event says the job may run in both meanwhile.  Returns
 * whether the job moved (false: it is in that cluster already).
 */
Datum
paidb_move_job(PG_FUNCTION_ARGS)
{
	char	   *name;
	char	   *target;
	bool		force;
	StoredFramework row;
	PaidbClusterConfig conf;
	char	   *state;
	char	   *moving_from;
	Jsonb	   *request;
	Jsonb	   *snapshot;
	Datum		args[4];
	Oid			types[4] = {TEXTOID, TEXTOID, BOOLOID, TEXTOID};
	HeapTuple	tup;
	TupleDesc	desc;
	int			i;

	if (PG_ARGISNULL(0) || PG_ARGISNULL(1) || PG_ARGISNULL(2))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("name, cluster and force must not be null")));
	name = text_to_cstring(PG_GETARG_TEXT_PP(0));
	target = text_to_cstring(PG_GETARG_TEXT_PP(1));
	force = PG_GETARG_BOOL(2);

	SPI_connect();
	prepare_plans();
	lock_framework(name, &row);
	if (!row.found)
		ereport(ERROR,
				(errcode(ERRCODE_NO_DATA_FOUND),
				 errmsg("job \"%s\" does not exist", name)));
	args[0] = CStringGetTextDatum(name);
	if (SPI_execute_with_args("SELECT state, moving_from, config_secret_def, user_extension_secret_def, "
							  "priority_class_def, docker_secret_def, token_secret_def "
							  "FROM paidb.framework WHERE name = $1",
							  1, types, args, NULL, false, 1) != SPI_OK_SELECT || SPI_processed != 1)
		elog(ERROR, "could not read job \"%s\"", name);
	tup = SPI_tuptable->vals[0];
	desc = SPI_tuptable->tupdesc;
	state = SPI_getvalue(tup, desc, 1);
	moving_from = SPI_getvalue(tup, desc, 2);
	/* a job that may have started runs where it is; force does not lift this */
	if (state == NULL || strcmp(state, "WAITING") != 0)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("job \"%s\" is %s: only a waiting job can move", name,
						state ? state : "without a state"),
				 errhint("Stop it and submit it again in the other cluster.")));
	if (strcmp(target, row.cluster) == 0)
	{
		SPI_finish();
		PG_RETURN_BOOL(false);
	}
	if (moving_from != NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("job \"%s\" is still moving from cluster \"%s\"", name, moving_from),
				 errdetail("Cluster \"%s\" has not confirmed yet that the job's framework is gone.",
						   moving_from),
				 errhint("Move it again once paidb.framework.moving_from is NULL.")));
	/* the same checks as a new job's placement: exists, active, locked */
	paidb_place_new_job(target, NULL, &conf);

	/* add-ons live in the job's cluster's namespace (SPEC §8, §11) */
	for (i = 0; i < NUM_ADDONS; i++)
	{
		bool		isnull;
		Datum		d = SPI_getbinval(tup, desc, 3 + i, &isnull);
		char	   *problem;
		const char *ns = conf.namespace[0] ? conf.namespace : paidb_k8s_namespace;

		if (isnull)
			continue;
		problem = paidb_addon_problem(&paidb_addon_slots[i], &DatumGetJsonbP(d)->root, ns);
		if (problem != NULL)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("job \"%s\" cannot move to cluster \"%s\": its add-on %s does not fit there",
							name, target, paidb_addon_slots[i].key),
					 errdetail_internal("%s", problem)));
	}

	/* nothing of the old cluster's framework applies to the new one */
	request = paidb_request_part(&row.snapshot->root, row.generation);
	snapshot = paidb_compose_snapshot(&request->root, NULL, NULL);
	{
		PaidbClusterConfig *saved = paidb_my_cluster;

		/* its namespace column is the new cluster's */
		paidb_my_cluster = &conf;
		PG_TRY();
		{
			update_framework(name, snapshot, NULL, row.generation, false, false,
							 false, 0, true, true);
		}
		PG_FINALLY();
		{
			paidb_my_cluster = saved;
		}
		PG_END_TRY();
	}
	args[1] = CStringGetTextDatum(target);
	args[2] = BoolGetDatum(force);
	args[3] = CStringGetTextDatum(row.cluster);
	if (SPI_execute_with_args("UPDATE paidb.framework SET cluster = $2, placement = placement + 1, "
							  "moving_from = CASE WHEN $3 THEN NULL ELSE $4 END, sent_at = NULL "
							  "WHERE name = $1",
							  4, types, args, NULL, false, 0) != SPI_OK_UPDATE)
		elog(ERROR, "could not move job \"%s\"", name);
	if (force)
	{
		/* the old framework goes when its cluster answers, retained or not */
		if (SPI_execute_with_args("INSERT INTO paidb.orphan (cluster, name, namespace) "
								  "SELECT $4, $1, c.namespace FROM paidb.cluster c WHERE c.name = $4 "
								  "ON CONFLICT (cluster, name) DO NOTHING",
								  4, types, args, NULL, false, 0) != SPI_OK_INSERT)
			elog(ERROR, "could not queue the old framework of job \"%s\"", name);
		if (SPI_execute_with_args(
								  "INSERT INTO paidb.framework_event (uid, framework_name, type, reason, message, "
								  "first_timestamp, last_timestamp, count, source_component, event) "
								  "SELECT pg_catalog.md5($1 || '+' || f.placement || '+MovedUnconfirmed'), $1, "
								  "'Warning', 'MovedUnconfirmed', m.message, pg_catalog.now(), pg_catalog.now(), 1, "
								  "'paidb', pg_catalog.jsonb_build_object('reason', 'MovedUnconfirmed', "
								  "'message', m.message, 'type', 'Warning', 'fromCluster', $4, 'toCluster', $2, "
								  "'placement', f.placement) "
								  "FROM paidb.framework f, LATERAL (SELECT pg_catalog.format("
								  "'moved from cluster %s to %s without confirming that its framework is gone "
								  "from %s: it may run in both until %s deletes it', $4, $2, $4, $4) AS message) m "
								  "WHERE f.name = $1 "
								  "ON CONFLICT (uid) DO NOTHING",
								  4, types, args, NULL, false, 0) != SPI_OK_INSERT)
			elog(ERROR, "could not record the move of job \"%s\"", name);
	}
	/* the old cluster's sync deletes, the new one's creates (at once when forced) */
	paidb_note_sync_needed(row.cluster);
	paidb_note_sync_needed(target);
	SPI_finish();
	PG_RETURN_BOOL(true);
}
