/*
 * snapshot.c — a framework snapshot: its request part, its status, and the
 * table columns derived from it.
 *
 * This file is the one place that turns a snapshot into column values
 * (SPEC §2): every writer — put/patch, watch events, import — goes through
 * paidb_derive_columns, so the columns can never disagree with the
 * snapshot they were computed from.
 */
#include "postgres.h"

#include <zlib.h>

#include "catalog/pg_type.h"
#include "common/base64.h"
#include "common/jsonapi.h"
#include "fmgr.h"
#include "funcapi.h"
#include "lib/stringinfo.h"
#include "mb/pg_wchar.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/datetime.h"
#include "utils/json.h"
#include "utils/jsonb.h"
#include "utils/memutils.h"
#include "utils/numeric.h"
#include "utils/timestamp.h"

#include "cluster_config.h"
#include "guc.h"
#include "job_config.h"
#include "job_state.h"
#include "jsonb_util.h"
#include "snapshot.h"

const char *const paidb_derived_column_names[PAIDB_NUM_DERIVED] = {
	"namespace", "job_name", "user_name", "job_config", "execution_type",
	"virtual_cluster", "job_priority", "total_gpu_number", "total_task_number",
	"total_task_role_number", "log_path_infix", "creation_time", "launch_time",
	"completion_time", "retries", "retry_delay_time", "platform_retries",
	"resource_retries", "user_retries", "app_exit_code", "sub_state", "state",
	"notification_at_running", "notification_at_succeeded",
	"notification_at_failed", "notification_at_stopped",
	"notification_at_retried"
};

const Oid	paidb_derived_column_types[PAIDB_NUM_DERIVED] = {
	TEXTOID, TEXTOID, TEXTOID, TEXTOID, TEXTOID,
	TEXTOID, TEXTOID, INT4OID, INT4OID,
	INT4OID, TEXTOID, TIMESTAMPTZOID, TIMESTAMPTZOID,
	TIMESTAMPTZOID, INT4OID, INT4OID, INT4OID,
	INT4OID, INT4OID, INT4OID, TEXTOID, TEXTOID,
	BOOLOID, BOOLOID,
	BOOLOID, BOOLOID,
	BOOLOID
};

enum
{
	COL_NAMESPACE, COL_JOB_NAME, COL_USER_NAME, COL_JOB_CONFIG,
	COL_EXECUTION_TYPE, COL_VIRTUAL_CLUSTER, COL_JOB_PRIORITY,
	COL_TOTAL_GPU_NUMBER, COL_TOTAL_TASK_NUMBER, COL_TOTAL_TASK_ROLE_NUMBER,
	COL_LOG_PATH_INFIX, COL_CREATION_TIME, COL_LAUNCH_TIME,
	COL_COMPLETION_TIME, COL_RETRIES, COL_RETRY_DELAY_TIME,
	COL_PLATFORM_RETRIES, COL_RESOURCE_RETRIES, COL_USER_RETRIES,
	COL_APP_EXIT_CODE, COL_SUB_STATE, COL_STATE,
	COL_NOTIFY_RUNNING, COL_NOTIFY_SUCCEEDED, COL_NOTIFY_FAILED,
	COL_NOTIFY_STOPPED, COL_NOTIFY_RETRIED
};

StaticAssertDecl(COL_JOB_CONFIG == PAIDB_COL_JOB_CONFIG, "PAIDB_COL_JOB_CONFIG is out of date");
StaticAssertDecl(COL_RETRIES == PAIDB_COL_RETRIES, "PAIDB_COL_RETRIES is out of date");
StaticAssertDecl(COL_SUB_STATE == PAIDB_COL_SUB_STATE, "PAIDB_COL_SUB_STATE is out of date");

/* Parse an RFC 3339 / ISO 8601 time without raising on bad input. */
static bool
parse_timestamptz(const char *s, TimestampTz *out)
{
	char		workbuf[MAXDATELEN + MAXDATEFIELDS];
	char	   *field[MAXDATEFIELDS];
	int			ftype[MAXDATEFIELDS];
	int			nf;
	int			dtype;
	int			tz;
	struct pg_tm tt;
	fsec_t		fsec;

	if (s == NULL || strlen(s) > MAXDATELEN)
		return false;
	if (ParseDateTime(s, workbuf, sizeof(workbuf), field, ftype,
					  MAXDATEFIELDS, &nf) != 0)
		return false;
	if (DecodeDateTime(field, ftype, nf, &dtype, &tt, &fsec, &tz) != 0)
		return false;
	if (dtype != DTK_DATE)
		return false;
	return tm2timestamp(&tt, fsec, &tz, out) == 0;
}

/* A JSON number (or a decimal string) as int32; false if absent or out of range. */
static bool
value_as_int32(JsonbValue *v, int32 *out)
{
	if (v->type == jbvNumeric)
	{
		bool		err = false;
		int32		r = numeric_int4_opt_error(v->val.numeric, &err);

		if (err)
			return false;
		*out = r;
		return true;
	}
	if (v->type == jbvString && v->val.string.len > 0 && v->val.string.len < 20)
	{
		char		buf[24];
		char	   *end;
		long		r;

		memcpy(buf, v->val.string.val, v->val.string.len);
		buf[v->val.string.len] = '\0';
		errno = 0;
		r = strtol(buf, &end, 10);
		if (errno != 0 || *end != '\0' || r < PG_INT32_MIN || r > PG_INT32_MAX)
			return false;
		*out = (int32) r;
		return true;
	}
	return false;
}

/* Set an int column from a path, leaving it NULL when absent or not a number. */
static bool
set_int(DerivedColumns *d, int col, JsonbContainer *root, int n, const char *const *path, int32 *val)
{
	JsonbValue	v;
	int32		r;

	if (root == NULL || !jb_get_path(root, &v, n, path) || !value_as_int32(&v, &r))
		return false;
	d->values[col] = Int32GetDatum(r);
	d->nulls[col] = false;
	if (val)
		*val = r;
	return true;
}

/* Set a text column from a string at a path. */
static void
set_text(DerivedColumns *d, int col, JsonbContainer *root, int n, const char *const *path)
{
	JsonbValue	v;

	if (root == NULL || !jb_get_path(root, &v, n, path) || v.type != jbvString)
		return;
	d->values[col] = PointerGetDatum(cstring_to_text_with_len(v.val.string.val, v.val.string.len));
	d->nulls[col] = false;
}

/* Set a timestamptz column from a string at a path. */
static bool
set_time(DerivedColumns *d, int col, JsonbContainer *root, int n, const char *const *path)
{
	char	   *s = root ? jb_get_cstring(root, n, path) : NULL;
	TimestampTz ts;

	if (s == NULL || !parse_timestamptz(s, &ts))
		return false;
	d->values[col] = TimestampTzGetDatum(ts);
	d->nulls[col] = false;
	return true;
}

/*
 * Compute every derived column of a snapshot (the single place that does).
 */
void
paidb_derive_columns(Jsonb *snapshot, DerivedColumns *d)
{
	JsonbContainer *root = &snapshot->root;
	JsonbContainer *status;
	JsonbValue	v;
	int			i;
	int32		total = 0,
				accountable = 0;
	bool		have_total,
				have_accountable;
	char	   *sub_state;
	int32		exit_code = 0;
	bool		have_exit;
	JobConfigKeys cfg;

	for (i = 0; i < PAIDB_NUM_DERIVED; i++)
	{
		d->values[i] = (Datum) 0;
		d->nulls[i] = true;
	}
	d->attempt_index = -1;
	d->completed = false;

	/* request part */
	set_text(d, COL_NAMESPACE, root, 2, (const char *[]) {"metadata", "namespace"});
	if (d->nulls[COL_NAMESPACE] && paidb_cluster_namespace() && paidb_cluster_namespace()[0])
	{
		/* the namespace its cluster creates it in (SPEC §11) */
		d->values[COL_NAMESPACE] = CStringGetTextDatum(paidb_cluster_namespace());
		d->nulls[COL_NAMESPACE] = false;
	}
	set_text(d, COL_JOB_NAME, root, 3, (const char *[]) {"metadata", "annotations", "jobName"});
	set_text(d, COL_USER_NAME, root, 3, (const char *[]) {"metadata", "labels", "userName"});
	set_text(d, COL_JOB_CONFIG, root, 3, (const char *[]) {"metadata", "annotations", "config"});
	set_text(d, COL_EXECUTION_TYPE, root, 2, (const char *[]) {"spec", "executionType"});
	set_text(d, COL_VIRTUAL_CLUSTER, root, 3, (const char *[]) {"metadata", "labels", "virtualCluster"});
	set_int(d, COL_TOTAL_GPU_NUMBER, root, 3, (const char *[]) {"metadata", "annotations", "totalGpuNumber"}, NULL);
	set_text(d, COL_LOG_PATH_INFIX, root, 3, (const char *[]) {"metadata", "annotations", "logPathInfix"});

	/* task counts from spec.taskRoles */
	if (jb_get_path(root, &v, 2, (const char *[]) {"spec", "taskRoles"}) &&
		v.type == jbvBinary && JsonContainerIsArray(v.val.binary.data))
	{
		JsonbContainer *roles = v.val.binary.data;
		int			nroles = JsonContainerSize(roles);
		int64		tasks = 0;
		bool		tasks_ok = true;

		for (i = 0; i < nroles; i++)
		{
			JsonbValue *role = getIthJsonbValueFromContainer(roles, i);
			JsonbValue	num;
			int32		n;

			if (role == NULL || role->type != jbvBinary ||
				!jb_get_path(role->val.binary.data, &num, 1, (const char *[]) {"taskNumber"}) ||
				!value_as_int32(&num, &n))
			{
				tasks_ok = false;
				continue;
			}
			tasks += n;
		}
		d->values[COL_TOTAL_TASK_ROLE_NUMBER] = Int32GetDatum(nroles);
		d->nulls[COL_TOTAL_TASK_ROLE_NUMBER] = false;
		if (tasks_ok && tasks <= PG_INT32_MAX && tasks >= PG_INT32_MIN)
		{
			d->values[COL_TOTAL_TASK_NUMBER] = Int32GetDatum((int32) tasks);
			d->nulls[COL_TOTAL_TASK_NUMBER] = false;
		}
	}

	/* the YAML config: priority class and notification flags */
	paidb_read_job_config(d->nulls[COL_JOB_CONFIG] ? NULL : TextDatumGetCString(d->values[COL_JOB_CONFIG]),
						  d->nulls[COL_JOB_CONFIG] ? 0 : VARSIZE_ANY_EXHDR(DatumGetPointer(d->values[COL_JOB_CONFIG])),
						  &cfg);
	if (cfg.job_priority)
	{
		d->values[COL_JOB_PRIORITY] = CStringGetTextDatum(cfg.job_priority);
		d->nulls[COL_JOB_PRIORITY] = false;
	}
	d->values[COL_NOTIFY_RUNNING] = BoolGetDatum(cfg.notify_running);
	d->values[COL_NOTIFY_SUCCEEDED] = BoolGetDatum(cfg.notify_succeeded);
	d->values[COL_NOTIFY_FAILED] = BoolGetDatum(cfg.notify_failed);
	d->values[COL_NOTIFY_STOPPED] = BoolGetDatum(cfg.notify_stopped);
	d->values[COL_NOTIFY_RETRIED] = BoolGetDatum(cfg.notify_retried);
	for (i = COL_NOTIFY_RUNNING; i <= COL_NOTIFY_RETRIED; i++)
		d->nulls[i] = false;

	/* status part */
	set_time(d, COL_CREATION_TIME, root, 2, (const char *[]) {"metadata", "creationTimestamp"});
	status = jb_get_object(root, 1, (const char *[]) {"status"});

	if (!set_time(d, COL_LAUNCH_TIME, status, 1, (const char *[]) {"runTime"}))
		set_time(d, COL_LAUNCH_TIME, status, 1, (const char *[]) {"completionTime"});
	set_time(d, COL_COMPLETION_TIME, status, 1, (const char *[]) {"completionTime"});

	have_total = set_int(d, COL_RETRIES, status, 2, (const char *[]) {"retryPolicyStatus", "totalRetriedCount"}, &total);
	set_int(d, COL_RETRY_DELAY_TIME, status, 2, (const char *[]) {"retryPolicyStatus", "retryDelaySec"}, NULL);
	have_accountable = set_int(d, COL_USER_RETRIES, status, 2, (const char *[]) {"retryPolicyStatus", "accountableRetriedCount"}, &accountable);
	if (have_total && have_accountable)
	{
		d->values[COL_PLATFORM_RETRIES] = Int32GetDatum(total - accountable);
		d->nulls[COL_PLATFORM_RETRIES] = false;
	}
	if (status != NULL)
	{
		/* OpenPAI never distinguished resource retries; it stored 0 */
		d->values[COL_RESOURCE_RETRIES] = Int32GetDatum(0);
		d->nulls[COL_RESOURCE_RETRIES] = false;
	}
	have_exit = set_int(d, COL_APP_EXIT_CODE, status, 3,
						(const char *[]) {"attemptStatus", "completionStatus", "code"}, &exit_code);

	sub_state = status ? jb_get_cstring(status, 1, (const char *[]) {"state"}) : NULL;
	if (sub_state)
	{
		d->values[COL_SUB_STATE] = CStringGetTextDatum(sub_state);
		d->nulls[COL_SUB_STATE] = false;
		d->completed = (strcmp(sub_state, "Completed") == 0);
	}
	d->values[COL_STATE] = CStringGetTextDatum(paidb_framework_state_name(sub_state, !have_exit, exit_code));
	d->nulls[COL_STATE] = false;

	if (status != NULL &&
		jb_get_path(status, &v, 2, (const char *[]) {"attemptStatus", "id"}))
	{
		int32		id;

		if (value_as_int32(&v, &id))
			d->attempt_index = id;
	}
}

/*
 * Attempt index (-1 if none) and whether the snapshot is Completed: the two
 * facts of a stored snapshot the write merger compares with a new one.
 */
void
paidb_snapshot_progress(Jsonb *snapshot, int *attempt_index, bool *completed)
{
	JsonbContainer *status = jb_get_object(&snapshot->root, 1, (const char *[]) {"status"});
	JsonbValue	v;
	int32		id;

	*attempt_index = -1;
	*completed = false;
	if (status == NULL)
		return;
	if (jb_get_path(status, &v, 2, (const char *[]) {"attemptStatus", "id"}) &&
		value_as_int32(&v, &id))
		*attempt_index = id;
	*completed = jb_get_path(status, &v, 1, (const char *[]) {"state"}) &&
		v.type == jbvString && v.val.string.len == 9 &&
		memcmp(v.val.string.val, "Completed", 9) == 0;
}

/* Inflate gzip (or zlib) data into a StringInfo; false with *error on bad data. */
static bool
gunzip(const char *in, int inlen, StringInfo out, char **error)
{
	z_stream	zs;
	int			rc;
	volatile bool ok = false;
	char		buf[65536];

	memset(&zs, 0, sizeof(zs));
	/* 15 window bits + 32: accept both gzip and zlib headers */
	if (inflateInit2(&zs, 15 + 32) != Z_OK)
	{
		*error = "cannot initialise zlib";
		return false;
	}
	PG_TRY();
	{
		zs.next_in = (Bytef *) in;
		zs.avail_in = inlen;
		for (;;)
		{
			zs.next_out = (Bytef *) buf;
			zs.avail_out = sizeof(buf);
			rc = inflate(&zs, Z_NO_FLUSH);
			if (rc != Z_OK && rc != Z_STREAM_END)
			{
				*error = psprintf("taskRoleStatusesCompressed is not valid gzip data: %s",
								  zs.msg ? zs.msg : "unknown zlib error");
				break;
			}
			/* a zip bomb is refused like any object over the limit (SPEC §8) */
			if ((Size) out->len + (sizeof(buf) - zs.avail_out) > (Size) paidb_max_object_bytes)
				ereport(ERROR,
						(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
						 errmsg("taskRoleStatusesCompressed decompresses to more than paidb.max_object_bytes (%d bytes)",
								paidb_max_object_bytes)));
			appendBinaryStringInfo(out, buf, sizeof(buf) - zs.avail_out);
			if (rc == Z_STREAM_END)
			{
				ok = true;
				break;
			}
			if (zs.avail_in == 0 && zs.avail_out != 0)
			{
				*error = "taskRoleStatusesCompressed is truncated gzip data";
				break;
			}
			CHECK_FOR_INTERRUPTS();
		}
	}
	PG_FINALLY();
	{
		inflateEnd(&zs);
	}
	PG_END_TRY();
	return ok;
}

/*
 * The snapshot with taskRoleStatusesCompressed decompressed into
 * taskRoleStatuses; the input itself when there is nothing to do.
 */
Jsonb *
paidb_decompress_snapshot_internal(Jsonb *snapshot, char **error)
{
	JsonbContainer *status;
	JsonbContainer *attempt;
	JsonbValue	compressed;
	JsonbValue	current;
	char	   *raw;
	int			rawlen;
	StringInfoData json;
	int			i;
	JsonbValue *edited;
	JbMemberEdit edit = {1, (const char *[]) {"taskRoleStatusesCompressed"},
		(JsonbValue *[]) {NULL}, "taskRoleStatuses", NULL, 0};

	*error = NULL;
	status = jb_get_object(&snapshot->root, 1, (const char *[]) {"status"});
	attempt = status ? jb_get_object(status, 1, (const char *[]) {"attemptStatus"}) : NULL;
	if (attempt == NULL ||
		!jb_get_path(attempt, &compressed, 1, (const char *[]) {"taskRoleStatusesCompressed"}) ||
		compressed.type != jbvString)
		return snapshot;
	/* an explicit taskRoleStatuses array wins, as in OpenPAI */
	if (jb_get_path(attempt, &current, 1, (const char *[]) {"taskRoleStatuses"}) &&
		current.type != jbvNull)
		return snapshot;

	raw = palloc(pg_b64_dec_len(compressed.val.string.len) + 1);
	rawlen = pg_b64_decode(compressed.val.string.val, compressed.val.string.len,
						   raw, pg_b64_dec_len(compressed.val.string.len));
	if (rawlen < 0)
	{
		*error = "taskRoleStatusesCompressed is not valid base64";
		return NULL;
	}
	initStringInfo(&json);
	if (!gunzip(raw, rawlen, &json, error))
		return NULL;

	/*
	 * Parsed straight into the copy of the snapshot (one pass, errors
	 * returned rather than raised, so bad data cannot stall a watcher).
	 */
	for (i = 0; i < json.len && strchr(" \t\n\r", json.data[i]) != NULL; i++)
		;
	if (i == json.len || json.data[i] != '[')
	{
		JsonLexContext *lex = makeJsonLexContextCstringLen(json.data, json.len, GetDatabaseEncoding(), true);

		*error = pg_parse_json(lex, &nullSemAction) == JSON_SUCCESS ?
			"taskRoleStatusesCompressed does not hold a JSON array" :
			"taskRoleStatusesCompressed does not hold valid JSON";
		return NULL;
	}
	edit.json = json.data;
	edit.json_len = json.len;
	edited = jb_object_edit(&snapshot->root, 2, (const char *[]) {"status", "attemptStatus"}, &edit);
	if (edited == NULL)
	{
		*error = "taskRoleStatusesCompressed does not hold valid JSON";
		return NULL;
	}
	return JsonbValueToJsonb(edited);
}

/* The requestGeneration of an object's annotations; 1 when absent, -1 if malformed. */
int64
paidb_request_generation(JsonbContainer *object)
{
	JsonbValue	v;
	char		buf[32];
	char	   *end;
	long long	r;

	if (!jb_get_path(object, &v, 3, (const char *[]) {"metadata", "annotations", "requestGeneration"}))
		return 1;
	if (v.type == jbvNumeric)
	{
		bool		err = false;
		int32		n = numeric_int4_opt_error(v.val.numeric, &err);

		return err ? -1 : n;
	}
	if (v.type != jbvString || v.val.string.len == 0 || v.val.string.len >= (int) sizeof(buf))
		return -1;
	memcpy(buf, v.val.string.val, v.val.string.len);
	buf[v.val.string.len] = '\0';
	errno = 0;
	r = strtoll(buf, &end, 10);
	if (errno != 0 || *end != '\0' || r < 0)
		return -1;
	return r;
}

/*
 * The request part of a framework object: apiVersion, kind, metadata.name,
 * metadata.labels, metadata.annotations, spec — with requestGeneration set
 * to `generation`, or removed when generation is 0.
 */
Jsonb *
paidb_request_part(JsonbContainer *object, int64 generation)
{
	static const char *const top[] = {"apiVersion", "kind", "spec", "metadata"};
	static const char *const meta[] = {"name", "labels", "annotations"};
	JsonbContainer *metadata = jb_get_object(object, 1, (const char *[]) {"metadata"});
	JsonbContainer *ann = metadata ? jb_get_object(metadata, 1, &meta[2]) : NULL;
	JsonbValue	annval,
				metaval;
	JsonbValue *metavals[3] = {NULL, NULL, NULL};
	JsonbValue *topvals[4] = {NULL, NULL, NULL, &metaval};
	int			nmeta = 3;

	/*
	 * Members are copied as bytes (jb_object_selected): building the part
	 * with pushJsonbValue unpacked the whole spec and encoded it again, ~10
	 * us of a submission.
	 */
	if (ann != NULL || generation != 0)
	{
		JsonbValue	genval;
		JsonbValue *vals[1] = {NULL};
		Jsonb	   *replaced;

		if (generation > 0)
		{
			jb_string_value(&genval, psprintf(INT64_FORMAT, generation));
			vals[0] = &genval;
		}
		replaced = jb_object_replaced(ann, 1, (const char *[]) {"requestGeneration"}, vals);

		/*
		 * For comparison, annotations holding only requestGeneration count
		 * as none: the stored request always has the annotation, a
		 * resubmitted one may have no annotations at all.
		 */
		if (generation == 0 && JsonContainerSize(&replaced->root) == 0)
			nmeta = 2;
		else
		{
			jb_container_value(&annval, &replaced->root);
			metavals[2] = &annval;
		}
	}
	/* else a non-object annotations value is kept as it was, for comparison */
	jb_container_value(&metaval, &jb_object_selected(metadata, nmeta, meta, metavals)->root);
	return jb_object_selected(object, 4, top, topvals);
}

/*
 * A snapshot made of a request part and a status; other members of
 * `object` (uid, resourceVersion, ...) are kept when object is not NULL.
 */
Jsonb *
paidb_compose_snapshot(JsonbContainer *request, JsonbContainer *object, JsonbValue *status)
{
	static const char *const top[] = {"apiVersion", "kind", "spec", "metadata", "status"};
	static const char *const meta[] = {"name", "labels", "annotations"};
	JsonbValue	vals_store[5];
	JsonbValue *vals[5];
	JsonbValue	metaval;
	JsonbValue	mvals_store[3];
	JsonbValue *mvals[3];
	JsonbContainer *objmeta = object ? jb_get_object(object, 1, (const char *[]) {"metadata"}) : NULL;
	int			i;

	for (i = 0; i < 3; i++)
		vals[i] = jb_get_path(request, &vals_store[i], 1, &top[i]) ? &vals_store[i] : NULL;
	for (i = 0; i < 3; i++)
		mvals[i] = jb_get_path(request, &mvals_store[i], 2, (const char *[]) {"metadata", meta[i]}) ? &mvals_store[i] : NULL;
	jb_container_value(&metaval, &jb_object_replaced(objmeta, 3, meta, mvals)->root);
	vals[3] = &metaval;
	if (status == NULL)
		status = paidb_pending_status();
	if (status->type == jbvObject || status->type == jbvArray)
		jb_container_value(&vals_store[4], &JsonbValueToJsonb(status)->root);
	else
		vals_store[4] = *status;
	vals[4] = &vals_store[4];
	return jb_object_replaced(object, 5, top, vals);
}

/* The pending status of SPEC §5 as a jsonb value. */
JsonbValue *
paidb_pending_status(void)
{
	static const char pending[] =
		"{\"state\": \"AttemptCreationPending\", "
		"\"attemptStatus\": {\"completionStatus\": null, \"taskRoleStatuses\": []}, "
		"\"retryPolicyStatus\": {\"retryDelaySec\": null, \"totalRetriedCount\": 0, "
		"\"accountableRetriedCount\": 0}}";
	JsonbValue *v = palloc(sizeof(JsonbValue));

	jb_container_value(v, &jb_from_text(pending, sizeof(pending) - 1)->root);
	return v;
}

/* The failed status given to a framework the API server refused for good. */
JsonbValue *
paidb_permanent_failure_status(const char *diagnostics)
{
	StringInfoData s;
	char	   *now = DatumGetCString(DirectFunctionCall1(timestamptz_out,
														  TimestampTzGetDatum(GetCurrentTimestamp())));
	StringInfoData ts;
	JsonbValue *v = palloc(sizeof(JsonbValue));

	/* RFC 3339 in UTC, as the API server writes times */
	initStringInfo(&ts);
	{
		struct pg_tm tm;
		fsec_t		fsec;

		if (timestamp2tm(GetCurrentTimestamp(), NULL, &tm, &fsec, NULL, NULL) == 0)
			appendStringInfo(&ts, "%04d-%02d-%02dT%02d:%02d:%02dZ",
							 tm.tm_year, tm.tm_mon, tm.tm_mday,
							 tm.tm_hour, tm.tm_min, tm.tm_sec);
		else
			appendStringInfoString(&ts, now);
	}
	initStringInfo(&s);
	appendStringInfo(&s,
					 "{\"state\": \"Completed\", \"startTime\": \"%s\", \"runTime\": \"%s\", "
					 "\"transitionTime\": \"%s\", \"completionTime\": \"%s\", "
					 "\"attemptStatus\": {\"id\": 0, \"startTime\": \"%s\", \"runTime\": \"%s\", "
					 "\"completionTime\": \"%s\", \"completionStatus\": {\"code\": -1100, "
					 "\"phrase\": \"CreateFrameworkPermanentFailed\", "
					 "\"type\": {\"name\": \"Failed\", \"attributes\": [\"Permanent\"]}, "
					 "\"diagnostics\": ",
					 ts.data, ts.data, ts.data, ts.data, ts.data, ts.data, ts.data);
	escape_json(&s, diagnostics ? diagnostics : "");
	appendStringInfoString(&s,
						   ", \"trigger\": null}, \"taskRoleStatuses\": []}, "
						   "\"retryPolicyStatus\": {\"retryDelaySec\": null, "
						   "\"totalRetriedCount\": 0, \"accountableRetriedCount\": 0}}");
	jb_container_value(v, &jb_from_text(s.data, s.len)->root);
	return v;
}

/*
 * The resourceVersion of an object as an integer; false if absent, not
 * decimal or beyond int64 (the watchers' rule too, k8s_rv_parse: at most
 * 19 digits).
 */
bool
paidb_object_resource_version(JsonbContainer *object, int64 *rv)
{
	JsonbValue	v;
	char		buf[32];
	char	   *end;
	int			i;

	if (!jb_get_path(object, &v, 2, (const char *[]) {"metadata", "resourceVersion"}) ||
		v.type != jbvString || v.val.string.len == 0 ||
		v.val.string.len > 19)
		return false;
	for (i = 0; i < v.val.string.len; i++)
		if (!isdigit((unsigned char) v.val.string.val[i]))
			return false;
	memcpy(buf, v.val.string.val, v.val.string.len);
	buf[v.val.string.len] = '\0';
	errno = 0;
	*rv = strtoll(buf, &end, 10);
	return errno == 0;
}

PG_FUNCTION_INFO_V1(paidb_snapshot_columns);
PG_FUNCTION_INFO_V1(paidb_decompress_snapshot);

/* SQL: the derived columns of a snapshot, plus its attempt index. */
Datum
paidb_snapshot_columns(PG_FUNCTION_ARGS)
{
	Jsonb	   *snapshot = PG_GETARG_JSONB_P(0);
	TupleDesc	tupdesc;
	DerivedColumns d;
	Datum		values[PAIDB_NUM_DERIVED + 3];
	bool		nulls[PAIDB_NUM_DERIVED + 3];
	char	   *name;
	int			i,
				o = 0;

	if (get_call_result_type(fcinfo, NULL, &tupdesc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "return type must be a row type");
	if (!JB_ROOT_IS_OBJECT(snapshot))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("a framework snapshot must be a JSON object")));
	paidb_derive_columns(snapshot, &d);

	name = jb_get_cstring(&snapshot->root, 2, (const char *[]) {"metadata", "name"});
	values[o] = name ? CStringGetTextDatum(name) : (Datum) 0;
	nulls[o++] = (name == NULL);
	/* columns as declared: name, derived 0..21 (through state), attempt_index, notifications */
	for (i = 0; i <= 21; i++)
	{
		values[o] = d.values[i];
		nulls[o++] = d.nulls[i];
	}
	values[o] = Int32GetDatum(d.attempt_index);
	nulls[o++] = (d.attempt_index < 0);
	for (i = 22; i < PAIDB_NUM_DERIVED; i++)
	{
		values[o] = d.values[i];
		nulls[o++] = d.nulls[i];
	}
	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(BlessTupleDesc(tupdesc), values, nulls)));
}

/* SQL: a snapshot with its task role statuses decompressed. */
Datum
paidb_decompress_snapshot(PG_FUNCTION_ARGS)
{
	Jsonb	   *snapshot = PG_GETARG_JSONB_P(0);
	char	   *error = NULL;
	Jsonb	   *result;

	result = paidb_decompress_snapshot_internal(snapshot, &error);
	if (result == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("cannot decompress task role statuses"),
				 errdetail("%s.", error)));
	PG_RETURN_JSONB_P(result);
}
