/*
 * task_history.c — task attempt history (paidb.task_history, SPEC §9)
 *
 * OpenPAI's fluentd wrote a task_history row whenever frameworkcontroller
 * logged a task retry.  paidb sees the same thing in the framework watch
 * stream: a task status (same instanceUID) whose attemptStatus.id went up.
 * The earlier attempt's task status, as last seen, is recorded once under
 * OpenPAI's uid md5(taskUid + '+' + taskAttemptIndex + '+' + historyType).
 *
 * A framework of 1,000 tasks is compared in one pass over each snapshot:
 * tasks normally keep their position, so the old task at the same position
 * is tried first and a hash table of the old tasks by instanceUID is built
 * only when positions do not line up.
 *
 * The same upsert serves paidb.record_task_history() (fluentd's inserts
 * through openpai.task_history): a snapshot with a completionStatus
 * replaces one without, anything else keeps the first row.
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "common/md5.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/hsearch.h"
#include "utils/jsonb.h"
#include "utils/memutils.h"
#include "utils/numeric.h"

#include "jsonb_util.h"
#include "spi_plan.h"
#include "task_history.h"

PG_FUNCTION_INFO_V1(paidb_record_task_history);

/* Longest instanceUID looked up by hash (real ones are ~40 characters). */
#define TASK_UID_KEY_LEN 256

/* One task status of a snapshot. */
typedef struct TaskRef
{
	const char *role;			/* task role name (not terminated) */
	int			rolelen;
	int32		index;
	const char *uid;			/* instanceUID, NUL-terminated */
	int32		attempt_id;		/* attemptStatus.id */
	JsonbContainer *status;		/* the task status object */
	uint32		statuslen;		/* its length in bytes */
} TaskRef;

/* A hash entry: instanceUID -> position in the old task list. */
typedef struct TaskUidEntry
{
	char		uid[TASK_UID_KEY_LEN];
	int			pos;
} TaskUidEntry;

static SPIPlanPtr record_plan = NULL;

/*
 * $1 uid, $2 framework, $3 attempt, $4 role, $5 task name, $6 task index,
 * $7 task uid, $8 task attempt, $9 pod uid, $10 type, $11 snapshot, $12
 * task status (the snapshot is built from it when $11 is NULL).
 */
static const char *const record_sql =
"INSERT INTO paidb.task_history AS t"
"    (uid, framework_name, attempt_index, taskrole_name, task_name, task_index,"
"     task_uid, task_attempt_index, pod_uid, history_type, snapshot)"
" VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10,"
"    COALESCE($11, pg_catalog.jsonb_build_object("
"        'kind', 'Task'::pg_catalog.text,"
"        'metadata', pg_catalog.jsonb_build_object("
"            'name', $5, 'uid', $7,"
"            'annotations', pg_catalog.jsonb_build_object("
"                'FC_FRAMEWORK_NAME', $2,"
"                'FC_FRAMEWORK_ATTEMPT_ID', $3::pg_catalog.text,"
"                'FC_TASKROLE_NAME', $4,"
"                'FC_TASK_INDEX', $6::pg_catalog.text)),"
"        'status', $12)))"
" ON CONFLICT (uid) DO UPDATE"
"    SET snapshot = EXCLUDED.snapshot, updated_at = pg_catalog.now()"
"    WHERE COALESCE(pg_catalog.jsonb_typeof(t.snapshot"
"              OPERATOR(pg_catalog.#>) '{status,attemptStatus,completionStatus}'::pg_catalog.text[]),"
"              'null') OPERATOR(pg_catalog.=) 'null'"
"      AND COALESCE(pg_catalog.jsonb_typeof(EXCLUDED.snapshot"
"              OPERATOR(pg_catalog.#>) '{status,attemptStatus,completionStatus}'::pg_catalog.text[]),"
"              'null') OPERATOR(pg_catalog.<>) 'null'";

/* Lower-case hex md5 of "<task_uid>+<attempt>+<type>" (see task_history.h). */
char *
paidb_task_history_uid(const char *task_uid, bool has_attempt, int32 task_attempt_index,
					   const char *history_type)
{
	StringInfoData buf;
	char	   *hexsum = palloc(MD5_PASSWD_LEN + 1);
	const char *errstr = NULL;

	initStringInfo(&buf);
	appendStringInfoString(&buf, task_uid);
	appendStringInfoChar(&buf, '+');
	if (has_attempt)
		appendStringInfo(&buf, "%d", task_attempt_index);
	appendStringInfoChar(&buf, '+');
	appendStringInfoString(&buf, history_type);
	if (!pg_md5_hash(buf.data, buf.len, hexsum, &errstr))
		ereport(ERROR,
				(errcode(ERRCODE_OUT_OF_MEMORY),
				 errmsg("could not compute %s hash: %s", "MD5", errstr)));
	pfree(buf.data);
	return hexsum;
}

/* An integral JSON number that fits an int32; false otherwise. */
static bool
value_int32(JsonbValue *v, int32 *out)
{
	bool		error = false;
	int32		r;

	if (v->type != jbvNumeric)
		return false;
	r = numeric_int4_opt_error(v->val.numeric, &error);
	if (error)
		return false;
	*out = r;
	return true;
}

/* The member `key` of an object container; false when absent. */
static bool
member(JsonbContainer *jc, const char *key, JsonbValue *out)
{
	return jc != NULL && JsonContainerIsObject(jc) &&
		getKeyJsonValueFromContainer(jc, key, strlen(key), out) != NULL;
}

/* The array container of a member, or NULL. */
static JsonbContainer *
member_array(JsonbContainer *jc, const char *key)
{
	JsonbValue	v;

	if (!member(jc, key, &v) || v.type != jbvBinary || !JsonContainerIsArray(v.val.binary.data))
		return NULL;
	return v.val.binary.data;
}

/*
 * The task statuses of a snapshot that have an instanceUID and an attempt
 * id, in order; *attempt gets the framework attempt id (-1 if none).
 */
static TaskRef *
collect_tasks(Jsonb *snapshot, int *ntasks, int32 *attempt)
{
	JsonbContainer *att = jb_get_object(&snapshot->root, 2,
										(const char *[]) {"status", "attemptStatus"});
	JsonbContainer *roles;
	JsonbValue	v;
	TaskRef    *tasks = NULL;
	int			n = 0,
				cap = 0;
	uint32		r,
				nroles;

	*ntasks = 0;
	*attempt = -1;
	if (att == NULL)
		return NULL;
	if (!member(att, "id", &v) || !value_int32(&v, attempt))
		*attempt = -1;
	roles = member_array(att, "taskRoleStatuses");
	if (roles == NULL)
		return NULL;
	nroles = JsonContainerSize(roles);
	for (r = 0; r < nroles; r++)
	{
		JsonbValue *role = getIthJsonbValueFromContainer(roles, r);
		JsonbContainer *rc;
		JsonbContainer *ts;
		JsonbValue	name;
		uint32		i,
					nt;

		if (role == NULL || role->type != jbvBinary)
			continue;
		rc = role->val.binary.data;
		if (!member(rc, "name", &name) || name.type != jbvString)
			continue;
		ts = member_array(rc, "taskStatuses");
		if (ts == NULL)
			continue;
		nt = JsonContainerSize(ts);
		if (cap < n + (int) nt)
		{
			cap = n + (int) nt + 16;
			tasks = tasks ? repalloc(tasks, cap * sizeof(TaskRef)) : palloc(cap * sizeof(TaskRef));
		}
		for (i = 0; i < nt; i++)
		{
			JsonbValue *task = getIthJsonbValueFromContainer(ts, i);
			JsonbContainer *tc;
			JsonbContainer *ta;
			JsonbValue	x;
			TaskRef    *t = &tasks[n];

			CHECK_FOR_INTERRUPTS();
			if (task == NULL || task->type != jbvBinary ||
				!JsonContainerIsObject(task->val.binary.data))
				continue;
			tc = task->val.binary.data;
			if (!member(tc, "index", &x) || !value_int32(&x, &t->index))
				continue;
			if (!member(tc, "instanceUID", &x) || x.type != jbvString || x.val.string.len == 0)
				continue;
			t->uid = pnstrdup(x.val.string.val, x.val.string.len);
			ta = jb_get_object(tc, 1, (const char *[]) {"attemptStatus"});
			if (ta == NULL || !member(ta, "id", &x) || !value_int32(&x, &t->attempt_id))
				continue;
			t->role = name.val.string.val;
			t->rolelen = name.val.string.len;
			t->status = tc;
			t->statuslen = task->val.binary.len;
			n++;
		}
	}
	*ntasks = n;
	return tasks;
}

/* Insert (or complete) one task history row through the shared upsert; returns its uid. */
static char *
record_one(const char *uid, const char *framework_name, bool has_attempt, int32 attempt_index,
		   const char *role, const char *task_name, bool has_index, int32 task_index,
		   const char *task_uid, bool has_task_attempt, int32 task_attempt_index,
		   const char *pod_uid, const char *history_type, Jsonb *snapshot, Jsonb *status)
{
	Oid			types[12] = {TEXTOID, TEXTOID, INT4OID, TEXTOID, TEXTOID, INT4OID,
	TEXTOID, INT4OID, TEXTOID, TEXTOID, JSONBOID, JSONBOID};
	Datum		values[12];
	char		nulls[12];

	if (record_plan == NULL)
		record_plan = paidb_prepare_kept(record_sql, 12, types);
	memset(nulls, ' ', sizeof(nulls));
	values[0] = CStringGetTextDatum(uid);
	values[1] = CStringGetTextDatum(framework_name);
	values[2] = Int32GetDatum(attempt_index);
	nulls[2] = has_attempt ? ' ' : 'n';
	values[3] = role ? CStringGetTextDatum(role) : (Datum) 0;
	nulls[3] = role ? ' ' : 'n';
	values[4] = task_name ? CStringGetTextDatum(task_name) : (Datum) 0;
	nulls[4] = task_name ? ' ' : 'n';
	values[5] = Int32GetDatum(task_index);
	nulls[5] = has_index ? ' ' : 'n';
	values[6] = CStringGetTextDatum(task_uid);
	values[7] = Int32GetDatum(task_attempt_index);
	nulls[7] = has_task_attempt ? ' ' : 'n';
	values[8] = pod_uid ? CStringGetTextDatum(pod_uid) : (Datum) 0;
	nulls[8] = pod_uid ? ' ' : 'n';
	values[9] = CStringGetTextDatum(history_type);
	values[10] = snapshot ? JsonbPGetDatum(snapshot) : (Datum) 0;
	nulls[10] = snapshot ? ' ' : 'n';
	values[11] = status ? JsonbPGetDatum(status) : (Datum) 0;
	nulls[11] = status ? ' ' : 'n';
	if (SPI_execute_plan(record_plan, values, nulls, false, 0) != SPI_OK_INSERT)
		elog(ERROR, "could not record task history \"%s\"", uid);
	return (char *) uid;
}

/* Record the earlier attempt of one task (the old status as last seen). */
static void
record_old_attempt(const char *framework_name, int32 framework_attempt, TaskRef *old)
{
	JsonbValue	v;
	Jsonb	   *status;
	char	   *role = pnstrdup(old->role, old->rolelen);
	char	   *task_name = psprintf("%s-%s-%d", framework_name, role, old->index);
	char	   *pod_uid = jb_get_cstring(old->status, 2, (const char *[]) {"attemptStatus", "podUID"});
	char	   *uid = paidb_task_history_uid(old->uid, true, old->attempt_id, "retry");

	v.type = jbvBinary;
	v.val.binary.data = old->status;
	v.val.binary.len = old->statuslen;
	status = JsonbValueToJsonb(&v);
	record_one(uid, framework_name, framework_attempt >= 0, framework_attempt, role, task_name,
			   true, old->index, old->uid, true, old->attempt_id, pod_uid, "retry", NULL, status);
}

/* Record the task attempts that ended between two snapshots (see task_history.h). */
int
paidb_record_task_attempts(const char *framework_name, Jsonb *old_snapshot, Jsonb *new_snapshot)
{
	MemoryContext cxt,
				old_cxt;
	TaskRef    *olds,
			   *news;
	int			nold,
				nnew,
				i;
	int32		old_attempt,
				new_attempt;
	HTAB	   *by_uid = NULL;
	int			recorded = 0;

	if (old_snapshot == NULL || new_snapshot == NULL)
		return 0;
	cxt = AllocSetContextCreate(CurrentMemoryContext, "paidb task history", ALLOCSET_DEFAULT_SIZES);
	old_cxt = MemoryContextSwitchTo(cxt);

	olds = collect_tasks(old_snapshot, &nold, &old_attempt);
	news = NULL;
	nnew = 0;
	/* a new framework attempt has new task instances: nothing to compare */
	if (nold > 0)
		news = collect_tasks(new_snapshot, &nnew, &new_attempt);
	if (nold > 0 && nnew > 0 && old_attempt == new_attempt)
	{
		SPI_connect();
		for (i = 0; i < nnew; i++)
		{
			TaskRef    *nt = &news[i];
			TaskRef    *ot = NULL;

			CHECK_FOR_INTERRUPTS();
			if (i < nold && strcmp(olds[i].uid, nt->uid) == 0)
				ot = &olds[i];
			else if (strlen(nt->uid) < TASK_UID_KEY_LEN)
			{
				TaskUidEntry *e;

				if (by_uid == NULL)
				{
					HASHCTL		ctl;
					int			j;

					ctl.keysize = TASK_UID_KEY_LEN;
					ctl.entrysize = sizeof(TaskUidEntry);
					ctl.hcxt = cxt;
					by_uid = hash_create("paidb old tasks", nold, &ctl,
										 HASH_ELEM | HASH_STRINGS | HASH_CONTEXT);
					for (j = 0; j < nold; j++)
					{
						bool		found;

						if (strlen(olds[j].uid) >= TASK_UID_KEY_LEN)
							continue;
						e = hash_search(by_uid, olds[j].uid, HASH_ENTER, &found);
						if (!found)
							e->pos = j;
					}
				}
				e = hash_search(by_uid, nt->uid, HASH_FIND, NULL);
				if (e != NULL)
					ot = &olds[e->pos];
			}
			if (ot != NULL && nt->attempt_id > ot->attempt_id)
			{
				record_old_attempt(framework_name, old_attempt, ot);
				recorded++;
			}
		}
		SPI_finish();
	}
	MemoryContextSwitchTo(old_cxt);
	MemoryContextDelete(cxt);
	return recorded;
}

/*
 * record_task_history(snapshot, framework_name, attempt_index, taskrole_name,
 * task_name, task_index, task_uid, task_attempt_index, pod_uid, history_type):
 * idempotent insert into task_history (fluentd's writes); returns the uid.
 */
Datum
paidb_record_task_history(PG_FUNCTION_ARGS)
{
	Jsonb	   *snapshot;
	char	   *framework_name;
	char	   *task_uid;
	char	   *history_type;
	char	   *uid;
	text	   *result;

	if (PG_ARGISNULL(0) || PG_ARGISNULL(1) || PG_ARGISNULL(6) || PG_ARGISNULL(9))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("snapshot, framework_name, task_uid and history_type must not be NULL")));
	snapshot = PG_GETARG_JSONB_P(0);
	if (!JB_ROOT_IS_OBJECT(snapshot))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("a task history snapshot must be a JSON object")));
	framework_name = text_to_cstring(PG_GETARG_TEXT_PP(1));
	task_uid = text_to_cstring(PG_GETARG_TEXT_PP(6));
	history_type = text_to_cstring(PG_GETARG_TEXT_PP(9));
	if (task_uid[0] == '\0')
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("task_uid must not be empty")));
	uid = paidb_task_history_uid(task_uid, !PG_ARGISNULL(7),
								 PG_ARGISNULL(7) ? 0 : PG_GETARG_INT32(7), history_type);
	SPI_connect();
	record_one(uid, framework_name, !PG_ARGISNULL(2), PG_ARGISNULL(2) ? 0 : PG_GETARG_INT32(2),
			   PG_ARGISNULL(3) ? NULL : text_to_cstring(PG_GETARG_TEXT_PP(3)),
			   PG_ARGISNULL(4) ? NULL : text_to_cstring(PG_GETARG_TEXT_PP(4)),
			   !PG_ARGISNULL(5), PG_ARGISNULL(5) ? 0 : PG_GETARG_INT32(5),
			   task_uid, !PG_ARGISNULL(7), PG_ARGISNULL(7) ? 0 : PG_GETARG_INT32(7),
			   PG_ARGISNULL(8) ? NULL : text_to_cstring(PG_GETARG_TEXT_PP(8)),
			   history_type, snapshot, NULL);
	SPI_finish();
	result = cstring_to_text(uid);
	PG_RETURN_TEXT_P(result);
}
