/*
 * history.c — framework attempt history (paidb.framework_history)
 *
 * When a framework is retried, the snapshot of the attempt that ended is kept
 * in framework_history under a uid derived from the framework name, the
 * attempt index and the history type, exactly as OpenPAI derived it, so rows
 * written by OpenPAI keep their keys.
 *
 * Recording is idempotent and safe under concurrency: one
 * INSERT ... ON CONFLICT (uid) DO UPDATE ... WHERE <the new snapshot is more
 * complete>, so two callers offering the same attempt never fail with a
 * unique violation, and the row ends up with the most complete snapshot
 * whatever the order.  "More complete" ranks (has a completionStatus,
 * status.transitionTime) lexicographically; an absent transitionTime ranks
 * lowest, and a tie changes nothing.
 */
#include "postgres.h"

#include "catalog/namespace.h"
#include "catalog/pg_type.h"
#include "common/md5.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "history.h"
#include "lib/stringinfo.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/jsonb.h"
#include "utils/numeric.h"
#include "utils/timestamp.h"

#include "snapshot_pack.h"
#include "spi_plan.h"

PG_FUNCTION_INFO_V1(paidb_history_uid);
PG_FUNCTION_INFO_V1(paidb_record_history);

/* What record_history needs to know about a snapshot. */
typedef struct HistoryKey
{
	char	   *framework_name;
	int			attempt_index;
	bool		completed;		/* status.attemptStatus.completionStatus set */
	bool		has_transition_time;
	TimestampTz transition_time;	/* status.transitionTime */
} HistoryKey;

/* The upsert, prepared once per backend; and whether it stores packed (0.3 on). */
static SPIPlanPtr record_plan = NULL;
static bool record_plan_packed = false;

/*
 * $6/$7 are the new snapshot's rank, computed in C; the stored one's is
 * computed from its snapshot (%2$s: the stored snapshot as jsonb).  Every
 * name is schema-qualified (operators too) so the statement means the same
 * under any search_path.  %1$s is the column the snapshot is stored in.
 */
static const char *const record_sql =
"INSERT INTO paidb.framework_history AS h"
"    (uid, framework_name, attempt_index, history_type, %1$s)"
" VALUES ($1, $2, $3, $4, $5)"
" ON CONFLICT (uid) DO UPDATE"
"    SET %1$s = EXCLUDED.%1$s,"
"        updated_at = pg_catalog.now()"
"    WHERE ROW($6, COALESCE($7, '-infinity'::pg_catalog.timestamptz))"
"      OPERATOR(pg_catalog.>)"
"      ROW(COALESCE(pg_catalog.jsonb_typeof(%2$s"
"              OPERATOR(pg_catalog.#>) '{status,attemptStatus,completionStatus}'::pg_catalog.text[])"
"              OPERATOR(pg_catalog.<>) 'null', false),"
"          COALESCE((%2$s"
"              OPERATOR(pg_catalog.#>>) '{status,transitionTime}'::pg_catalog.text[])::pg_catalog.timestamptz,"
"              '-infinity'::pg_catalog.timestamptz))";

/* Lower-case hex md5 of "<name>+<attempt>+<type>" (see history.h). */
char *
paidb_history_uid_internal(const char *framework_name, int attempt_index,
						   const char *history_type)
{
	StringInfoData buf;
	char	   *hexsum = palloc(MD5_PASSWD_LEN + 1);
	const char *errstr = NULL;

	initStringInfo(&buf);
	appendStringInfo(&buf, "%s+%d+%s", framework_name, attempt_index,
					 history_type);

	if (!pg_md5_hash(buf.data, buf.len, hexsum, &errstr))
		ereport(ERROR,
				(errcode(ERRCODE_OUT_OF_MEMORY),
				 errmsg("could not compute %s hash: %s", "MD5", errstr)));

	return hexsum;
}

/* The member `key` of an object container into *out; false when absent. */
static bool
get_member(JsonbContainer *jc, const char *key, JsonbValue *out)
{
	if (jc == NULL || !JsonContainerIsObject(jc))
		return false;
	return getKeyJsonValueFromContainer(jc, key, strlen(key), out) != NULL;
}

/* The member `key` of an object container if it is an object, else NULL. */
static JsonbContainer *
get_object(JsonbContainer *jc, const char *key)
{
	JsonbValue	v;

	if (!get_member(jc, key, &v) || v.type != jbvBinary ||
		!JsonContainerIsObject(v.val.binary.data))
		return NULL;
	return v.val.binary.data;
}

/* The JSON type name of a JsonbValue, for error details. */
static const char *
json_type_name(JsonbValue *v)
{
	if (v->type == jbvBinary)
		return JsonContainerIsObject(v->val.binary.data) ? "object" : "array";
	return JsonbTypeName(v);
}

/* Parse a numeric attempt index: a non-negative integer that fits an int. */
static bool
parse_attempt_index(Numeric num, int *out)
{
	char	   *text = DatumGetCString(DirectFunctionCall1(numeric_out,
														   NumericGetDatum(num)));
	const char *p = text;
	int64		value = 0;

	if (*p < '0' || *p > '9')
		return false;
	for (; *p >= '0' && *p <= '9'; p++)
	{
		value = value * 10 + (*p - '0');
		if (value > PG_INT32_MAX)
			return false;
	}
	/* 3.0 is as good as 3 */
	if (*p == '.')
		for (p++; *p == '0'; p++)
			;
	if (*p != '\0')
		return false;

	*out = (int) value;
	return true;
}

/* Parse status.transitionTime as a timestamptz, refusing garbage with 22023. */
static TimestampTz
parse_transition_time(const char *framework_name, const char *text)
{
	MemoryContext oldcxt = CurrentMemoryContext;
	TimestampTz result = 0;

	PG_TRY();
	{
		result = DatumGetTimestampTz(DirectFunctionCall3(timestamptz_in,
														 CStringGetDatum(text),
														 ObjectIdGetDatum(InvalidOid),
														 Int32GetDatum(-1)));
	}
	PG_CATCH();
	{
		/* replaced by our own error at once, so no subtransaction is needed */
		MemoryContextSwitchTo(oldcxt);
		FlushErrorState();
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("status.transitionTime of framework \"%s\" is not a valid timestamp",
						framework_name),
				 errdetail("The value is \"%s\".", text),
				 errhint("Kubernetes writes times in RFC 3339 format, such as \"2020-07-01T08:00:00Z\".")));
	}
	PG_END_TRY();

	return result;
}

/* Read and check the name, attempt and rank of a snapshot (22023 if bad). */
static void
read_history_key(Jsonb *snapshot, HistoryKey *key)
{
	JsonbContainer *root = &snapshot->root;
	JsonbContainer *metadata;
	JsonbContainer *status;
	JsonbContainer *attempt_status;
	JsonbValue	v;

	memset(key, 0, sizeof(HistoryKey));

	if (!JB_ROOT_IS_OBJECT(snapshot))
	{
		JsonbValue	scalar;
		const char *type = "array";

		if (JB_ROOT_IS_SCALAR(snapshot) && JsonbExtractScalar(root, &scalar))
			type = JsonbTypeName(&scalar);
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("framework snapshot must be a JSON object"),
				 errdetail("The snapshot given is a JSON %s.", type),
				 errhint("Pass the whole framework object, with its metadata and status.")));
	}

	metadata = get_object(root, "metadata");
	if (!get_member(metadata, "name", &v))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("framework snapshot has no metadata.name"),
				 errhint("A framework snapshot names its framework in metadata.name.")));
	if (v.type != jbvString || v.val.string.len == 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("metadata.name of the framework snapshot must be a non-empty string"),
				 v.type == jbvString ?
				 errdetail("metadata.name is an empty string.") :
				 errdetail("metadata.name is a JSON %s.", json_type_name(&v))));
	key->framework_name = pnstrdup(v.val.string.val, v.val.string.len);

	status = get_object(root, "status");
	attempt_status = get_object(status, "attemptStatus");
	if (!get_member(attempt_status, "id", &v) || v.type == jbvNull)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("framework snapshot of \"%s\" has no status.attemptStatus.id",
						key->framework_name),
				 errhint("Only a framework that has started an attempt has a history to record.")));
	if (v.type != jbvNumeric ||
		!parse_attempt_index(v.val.numeric, &key->attempt_index))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("status.attemptStatus.id of framework \"%s\" is not a valid attempt index",
						key->framework_name),
				 v.type == jbvNumeric ?
				 errdetail("The attempt index is %s; it must be a non-negative integer.",
						   DatumGetCString(DirectFunctionCall1(numeric_out,
															   NumericGetDatum(v.val.numeric)))) :
				 errdetail("The attempt index is a JSON %s; it must be a non-negative integer.",
						   json_type_name(&v))));

	key->completed = get_member(attempt_status, "completionStatus", &v) &&
		v.type != jbvNull;

	if (get_member(status, "transitionTime", &v) && v.type != jbvNull)
	{
		if (v.type != jbvString)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("status.transitionTime of framework \"%s\" is not a valid timestamp",
							key->framework_name),
					 errdetail("status.transitionTime is a JSON %s, not a string.",
							   json_type_name(&v))));
		key->has_transition_time = true;
		key->transition_time =
			parse_transition_time(key->framework_name,
								  pnstrdup(v.val.string.val, v.val.string.len));
	}
}

/* The prepared upsert; prepare it on first use (inside an SPI session). */
static SPIPlanPtr
get_record_plan(void)
{
	Oid			rel = paidb_lock_table_for_write("framework_history");
	bool		packed = OidIsValid(rel) && get_attnum(rel, "snapshot_packed") != InvalidAttrNumber;

	if (record_plan != NULL && record_plan_packed != packed)
	{
		/* ALTER EXTENSION paidb UPDATE ran since */
		SPI_freeplan(record_plan);
		record_plan = NULL;
	}
	if (record_plan == NULL)
	{
		Oid			argtypes[7] = {TEXTOID, TEXTOID, INT4OID, TEXTOID, packed ? BYTEAOID : JSONBOID,
		BOOLOID, TIMESTAMPTZOID};

		record_plan = paidb_prepare_kept(psprintf(record_sql, packed ? "snapshot_packed" : "snapshot",
												  packed ? "paidb.snapshot(h)" :
												  "h.snapshot"),
										 7, argtypes);
		record_plan_packed = packed;
	}
	return record_plan;
}

/* Record a snapshot as the history of its attempt (see history.h). */
char *
paidb_record_history_internal(Jsonb *snapshot, const char *history_type)
{
	HistoryKey	key;
	char	   *uid;
	Datum		values[7];
	char		nulls[7] = {' ', ' ', ' ', ' ', ' ', ' ', ' '};
	int			ret;

	if (history_type == NULL || history_type[0] == '\0')
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("history type must not be empty"),
				 errhint("OpenPAI records retried attempts with history type \"retry\".")));

	read_history_key(snapshot, &key);

	/* allocated before SPI_connect, so it outlives SPI_finish */
	uid = paidb_history_uid_internal(key.framework_name, key.attempt_index,
									 history_type);

	values[0] = CStringGetTextDatum(uid);
	values[1] = CStringGetTextDatum(key.framework_name);
	values[2] = Int32GetDatum(key.attempt_index);
	values[3] = CStringGetTextDatum(history_type);
	values[5] = BoolGetDatum(key.completed);
	values[6] = TimestampTzGetDatum(key.transition_time);
	if (!key.has_transition_time)
		nulls[6] = 'n';

	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");

	{
		SPIPlanPtr	plan = get_record_plan();

		/* history rows have no job_config column: the config stays in */
		values[4] = record_plan_packed ? PointerGetDatum(paidb_pack_snapshot(snapshot, NULL, false)) :
			JsonbPGetDatum(snapshot);
		ret = SPI_execute_plan(plan, values, nulls, false, 0);
	}
	if (ret != SPI_OK_INSERT)
		elog(ERROR, "framework history upsert failed: %s",
			 SPI_result_code_string(ret));

	SPI_finish();

	return uid;
}

/* SQL: paidb.history_uid(framework_name text, attempt_index int, history_type text) */
Datum
paidb_history_uid(PG_FUNCTION_ARGS)
{
	char	   *framework_name = text_to_cstring(PG_GETARG_TEXT_PP(0));
	int32		attempt_index = PG_GETARG_INT32(1);
	char	   *history_type = text_to_cstring(PG_GETARG_TEXT_PP(2));

	PG_RETURN_TEXT_P(cstring_to_text(paidb_history_uid_internal(framework_name,
																attempt_index,
																history_type)));
}

/* SQL: paidb.record_history(snapshot jsonb, history_type text) returns text */
Datum
paidb_record_history(PG_FUNCTION_ARGS)
{
	Jsonb	   *snapshot = PG_GETARG_JSONB_P(0);
	char	   *history_type = text_to_cstring(PG_GETARG_TEXT_PP(1));

	PG_RETURN_TEXT_P(cstring_to_text(paidb_record_history_internal(snapshot,
																   history_type)));
}
