/*
 * worker_sync.c — the sync worker: pushes unsynced requests to the API
 * server, deletes completed frameworks and orphans (SPEC §6).
 *
 * The loop never talks HTTP inside a transaction.  It claims due rows in a
 * short transaction that also marks them as sent (sent_generation and a
 * next_sync_at one resync interval ahead), commits, then drives the API
 * requests asynchronously; only failures and a few outcomes are written
 * back, in another short transaction.  Marking before sending means a crash
 * can delay a request by one resync interval but never send it twice; the
 * framework watcher's confirmation (request_synced) takes the row out of
 * the work list.  One framework has at most one request in flight, so its
 * requests are sent in order.
 */
#include "postgres.h"

#include "access/xact.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "storage/latch.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/hsearch.h"
#include "utils/json.h"
#include "utils/jsonb.h"
#include "utils/memutils.h"
#include "utils/resowner.h"
#include "utils/timestamp.h"

#include "guc.h"
#include "jsonb_util.h"
#include "k8s_client.h"
#include "snapshot.h"
#include "spi_plan.h"
#include "worker_common.h"
#include "worker_shmem.h"
#include "write_merger.h"

void		paidb_sync_main(void);

#define NUM_ADDONS 5
#define ADDON_PRIORITY_CLASS 2	/* index of priorityClassDef below */
static const char *const addon_columns[NUM_ADDONS] = {
	"config_secret_def", "user_extension_secret_def", "priority_class_def",
	"docker_secret_def", "token_secret_def"
};

/* Where a framework's synchronisation stands. */
typedef enum SyncStep
{
	STEP_PATCH,					/* merge-patch the request onto the framework */
	STEP_CREATE_ADDON,			/* create add-on `addon` (404 on patch) */
	STEP_CREATE,				/* create the framework */
	STEP_PATCH_EXISTING,		/* create said 409: patch it instead */
	STEP_OWNER_REF,				/* give secret add-on `addon` an owner reference */
	STEP_DELETE,				/* delete a completed framework */
	STEP_DELETE_ADDON,			/* then its add-ons, in case an owner reference is missing */
	STEP_DELETE_ORPHAN			/* delete a framework unknown to the database */
} SyncStep;

/* One framework (or orphan) being synchronised; lives in its own context. */
typedef struct SyncJob
{
	char		name[NAMEDATALEN];	/* hash key */
	MemoryContext cxt;
	SyncStep	step;
	bool		is_orphan;
	int64		generation;
	int			failures;		/* consecutive failures before this attempt */
	bool		never_started;	/* pending status, no retries */
	char	   *request_json;
	char	   *addon_json[NUM_ADDONS];
	char	   *addon_name[NUM_ADDONS];
	char	   *addon_ns[NUM_ADDONS];
	int			addon;			/* current add-on index */
	char	   *uid;			/* framework uid (owner references) or orphan uid */
	int			delete_outcome; /* OutcomeKind once the framework delete is done */
	K8sRequest *req;
} SyncJob;

/* What to write to the database once a job ends. */
typedef enum OutcomeKind
{
	OUTCOME_SUCCESS,			/* reset the failure count if it was raised */
	OUTCOME_RETRY,				/* back off and send again later */
	OUTCOME_PERMANENT,			/* refused for good */
	OUTCOME_GONE,				/* completed framework already gone: mock DELETED */
	OUTCOME_ORPHAN_DONE,		/* orphan deleted (or gone) */
	OUTCOME_ORPHAN_RETRY		/* orphan deletion failed */
} OutcomeKind;

typedef struct Outcome
{
	OutcomeKind kind;
	char		name[NAMEDATALEN];
	int64		generation;
	int			failures;
	long		delay_ms;
	char	   *message;
} Outcome;

static K8sClient *client = NULL;
static HTAB *jobs = NULL;
static MemoryContext loop_cxt = NULL;
static List *outcomes = NIL;	/* in loop_cxt */
static bool more_work = false;	/* the last claim filled every free slot */
static TimestampTz paused_until = 0;	/* API server unreachable: hold off */
static SPIPlanPtr plan_claim = NULL;
static SPIPlanPtr plan_next_due = NULL;
static SPIPlanPtr plan_claim_orphans = NULL;

/* Prepare the claim statements once. */
static void
prepare_plans(void)
{
	Oid			types[3] = {TEXTARRAYOID, INT4OID, INT4OID};
	StringInfoData sql;
	int			i;

	if (plan_claim != NULL)
		return;
	initStringInfo(&sql);
	/*
	 * Due rows of the work list, oldest due first, skipping rows a writer
	 * holds; marked as sent in the same statement.
	 */
	appendStringInfoString(&sql,
						   "WITH due AS (SELECT name FROM paidb.framework "
						   " WHERE NOT api_server_deleted AND (NOT request_synced OR sub_state = 'Completed') "
						   "   AND (next_sync_at IS NULL OR next_sync_at <= pg_catalog.now()) "
						   "   AND NOT (name = ANY ($1)) "
						   " ORDER BY next_sync_at NULLS FIRST, name LIMIT $2 FOR UPDATE SKIP LOCKED) "
						   "UPDATE paidb.framework f SET sent_generation = f.request_generation, "
						   "  sent_at = pg_catalog.now(), "
						   "  next_sync_at = pg_catalog.now() + $3 * interval '1 millisecond' "
						   "FROM due WHERE f.name = due.name "
						   "RETURNING f.name, f.request_generation, f.sub_state, f.retries, "
						   "  f.sync_failures, f.snapshot OPERATOR(pg_catalog.-) 'status', "
						   "  f.resource_version IS NULL");
	for (i = 0; i < NUM_ADDONS; i++)
		appendStringInfo(&sql, ", f.%s", addon_columns[i]);
	plan_claim = paidb_prepare_kept(sql.data, 3, types);

	plan_next_due = paidb_prepare_kept("SELECT pg_catalog.min(next_sync_at) FROM paidb.framework "
								"WHERE NOT api_server_deleted AND (NOT request_synced OR sub_state = 'Completed')",
								0, NULL);

	plan_claim_orphans = paidb_prepare_kept("SELECT o.name, o.uid, o.failures FROM paidb.orphan o "
									 "WHERE (o.next_attempt_at IS NULL OR o.next_attempt_at <= pg_catalog.now()) "
									 "  AND NOT (o.name = ANY ($1)) "
									 "  AND NOT EXISTS (SELECT 1 FROM paidb.framework f WHERE f.name = o.name) "
									 "ORDER BY o.queued_at LIMIT $2",
									 2, types);
	pfree(sql.data);
}

/* The names of the jobs in flight, as a text[] for the claim. */
static Datum
in_flight_names(void)
{
	HASH_SEQ_STATUS seq;
	SyncJob    *job;
	Datum	   *elems;
	int			n = 0;

	elems = palloc(sizeof(Datum) * (hash_get_num_entries(jobs) + 1));
	hash_seq_init(&seq, jobs);
	while ((job = hash_seq_search(&seq)) != NULL)
		elems[n++] = CStringGetTextDatum(job->name);
	return PointerGetDatum(construct_array(elems, n, TEXTOID, -1, false, TYPALIGN_INT));
}

/* A text column of the current SPI row as a string in cxt, or NULL. */
static char *
spi_text(HeapTuple tup, TupleDesc desc, int col, MemoryContext cxt)
{
	bool		isnull;
	Datum		d = SPI_getbinval(tup, desc, col, &isnull);

	if (isnull)
		return NULL;
	return MemoryContextStrdup(cxt, TextDatumGetCString(d));
}

/* A new job entry for a name, with its own memory context. */
static SyncJob *
new_job(const char *name)
{
	bool		found;
	SyncJob    *job = hash_search(jobs, name, HASH_ENTER, &found);

	Assert(!found);
	job->cxt = AllocSetContextCreate(paidb_worker_context, "paidb sync job",
									 ALLOCSET_SMALL_SIZES);
	job->req = NULL;
	job->uid = NULL;
	job->addon = -1;
	job->is_orphan = false;
	job->request_json = NULL;
	memset(job->addon_json, 0, sizeof(job->addon_json));
	memset(job->addon_name, 0, sizeof(job->addon_name));
	memset(job->addon_ns, 0, sizeof(job->addon_ns));
	return job;
}

/* Forget a job: free its request and memory. */
static void
end_job(SyncJob *job)
{
	if (job->req)
		k8s_request_free(job->req);
	MemoryContextDelete(job->cxt);
	hash_search(jobs, job->name, HASH_REMOVE, NULL);
	if (more_work)
		SetLatch(MyLatch);		/* a slot is free: claim again */
}

/* Record what the database must learn about a finished job, then end it. */
static void
finish_job(SyncJob *job, OutcomeKind kind, long delay_ms, const char *message)
{
	MemoryContext old = MemoryContextSwitchTo(loop_cxt);
	Outcome    *o = palloc0(sizeof(Outcome));

	o->kind = kind;
	strlcpy(o->name, job->name, sizeof(o->name));
	o->generation = job->generation;
	o->failures = job->failures;
	o->delay_ms = delay_ms;
	o->message = message ? pstrdup(message) : NULL;
	outcomes = lappend(outcomes, o);
	MemoryContextSwitchTo(old);
	end_job(job);
}

/* Send the request of the job's current step. */
static void
send_step(SyncJob *job)
{
	MemoryContext old = MemoryContextSwitchTo(job->cxt);
	char	   *path;
	char	   *body;

	if (job->req)
	{
		k8s_request_free(job->req);
		job->req = NULL;
	}
	switch (job->step)
	{
		case STEP_PATCH:
		case STEP_PATCH_EXISTING:
			path = k8s_path_frameworks(client, NULL, job->name);
			job->req = k8s_new_merge_patch(client, path, job->request_json);
			break;
		case STEP_CREATE_ADDON:
			if (job->addon == ADDON_PRIORITY_CLASS)
				path = k8s_path_priorityclasses(NULL);
			else
				path = k8s_path_secrets(client, job->addon_ns[job->addon], NULL);
			job->req = k8s_new_create(client, path, job->addon_json[job->addon]);
			break;
		case STEP_CREATE:
			path = k8s_path_frameworks(client, NULL, NULL);
			job->req = k8s_new_create(client, path, job->request_json);
			break;
		case STEP_OWNER_REF:
			{
				StringInfoData b;

				initStringInfo(&b);
				appendStringInfoString(&b, "{\"metadata\": {\"ownerReferences\": [{\"apiVersion\": "
									   "\"frameworkcontroller.microsoft.com/v1\", \"kind\": \"Framework\", \"name\": ");
				escape_json(&b, job->name);
				appendStringInfoString(&b, ", \"uid\": ");
				escape_json(&b, job->uid);
				appendStringInfoString(&b, ", \"controller\": true, \"blockOwnerDeletion\": true}]}}");
				path = k8s_path_secrets(client, job->addon_ns[job->addon], job->addon_name[job->addon]);
				job->req = k8s_new_merge_patch(client, path, b.data);
				break;
			}
		case STEP_DELETE:
			path = k8s_path_frameworks(client, NULL, job->name);
			job->req = k8s_new_delete(client, path, "Foreground");
			break;
		case STEP_DELETE_ADDON:
			if (job->addon == ADDON_PRIORITY_CLASS)
				path = k8s_path_priorityclasses(job->addon_name[job->addon]);
			else
				path = k8s_path_secrets(client, job->addon_ns[job->addon], job->addon_name[job->addon]);
			job->req = k8s_new_delete(client, path, "Background");
			break;
		case STEP_DELETE_ORPHAN:
			{
				StringInfoData b;

				/* the uid precondition spares a framework recreated under the same name */
				initStringInfo(&b);
				appendStringInfoString(&b, "{\"kind\": \"DeleteOptions\", \"apiVersion\": \"v1\", "
									   "\"propagationPolicy\": \"Foreground\"");
				if (job->uid)
				{
					appendStringInfoString(&b, ", \"preconditions\": {\"uid\": ");
					escape_json(&b, job->uid);
					appendStringInfoChar(&b, '}');
				}
				appendStringInfoChar(&b, '}');
				body = b.data;
				path = k8s_path_frameworks(client, NULL, job->name);
				job->req = k8s_request_new(client, K8S_DELETE, path, "application/json",
										   body, strlen(body));
				break;
			}
	}
	k8s_request_set_user_data(job->req, job);
	k8s_request_submit(job->req);
	paidb_worker_report(PAIDB_WORKER_SYNC, NULL, NULL, 0, 1, 0, NULL);
	MemoryContextSwitchTo(old);
}

/* The next add-on at or after `from` that the job has, or -1. */
static int
next_addon(SyncJob *job, int from, bool secrets_only)
{
	int			i;

	for (i = from; i < NUM_ADDONS; i++)
		if (job->addon_json[i] && !(secrets_only && i == ADDON_PRIORITY_CLASS))
			return i;
	return -1;
}

/* The next add-on at or after `from` that has a name to delete it by, or -1. */
static int
next_named_addon(SyncJob *job, int from)
{
	int			i;

	for (i = from; i < NUM_ADDONS; i++)
		if (job->addon_json[i] && job->addon_name[i])
			return i;
	return -1;
}

/* Whether the API server refused for good (SPEC §6). */
static bool
is_permanent(const K8sResult *res)
{
	if (res->kind != K8S_RESULT_HTTP_ERROR)
		return false;
	if (res->http_status == 413 || res->http_status == 422)
		return true;
	return res->http_status == 500 && res->message != NULL &&
		strstr(res->message, "ResourceExhausted") != NULL;
}

/* The uid in a response body holding an object, or NULL. */
static char *
response_uid(const K8sResult *res, MemoryContext cxt)
{
	Jsonb	   *obj;
	char	   *uid;
	MemoryContext old;

	if (res->body == NULL || res->body_len == 0)
		return NULL;
	old = MemoryContextSwitchTo(loop_cxt);
	obj = jb_from_text(res->body, res->body_len);
	uid = jb_get_cstring(&obj->root, 2, (const char *[]) {"metadata", "uid"});
	MemoryContextSwitchTo(old);
	return uid ? MemoryContextStrdup(cxt, uid) : NULL;
}

/* A short description of a failed request for status() and logs. */
static char *
describe_failure(SyncJob *job, const K8sResult *res)
{
	StringInfoData s;

	initStringInfo(&s);
	appendStringInfo(&s, "%s %s: ", k8s_request_method_name(job->req), job->name);
	if (res->http_status)
		appendStringInfo(&s, "HTTP %ld", res->http_status);
	else
		appendStringInfoString(&s, k8s_result_kind_name(res->kind));
	if (res->reason)
		appendStringInfo(&s, " %s", res->reason);
	if (res->message)
		appendStringInfo(&s, ": %s", res->message);
	return s.data;
}

/* A request failed in a way worth retrying: back off (honouring Retry-After). */
static void
fail_retry(SyncJob *job, const K8sResult *res)
{
	long		delay = paidb_backoff_ms(job->failures + 1, res->retry_after_ms > 0 ? res->retry_after_ms : 0);
	char	   *what = describe_failure(job, res);

	k8s_log_failure(job->failures == 0 ? LOG : DEBUG1, job->req, job->name);
	paidb_worker_report(PAIDB_WORKER_SYNC, NULL, NULL, 0, 0, 1, what);
	/* the server itself is struggling: hold off every new request a while */
	if (res->kind == K8S_RESULT_TRANSPORT || res->kind == K8S_RESULT_TIMEOUT ||
		res->http_status == 429 || res->http_status == 503)
	{
		TimestampTz until = TimestampTzPlusMilliseconds(GetCurrentTimestamp(),
														res->retry_after_ms > 0 ? res->retry_after_ms
														: paidb_backoff_ms(1, 0));

		if (until > paused_until)
			paused_until = until;
	}
	finish_job(job, job->is_orphan ? OUTCOME_ORPHAN_RETRY : OUTCOME_RETRY, delay, what);
}

/* Advance one job after its request finished. */
static void
advance(SyncJob *job)
{
	const K8sResult *res = k8s_request_result(job->req);
	bool		ok = (res->kind == K8S_RESULT_OK);
	long		http = res->http_status;

	switch (job->step)
	{
		case STEP_PATCH:
			if (ok)
				return finish_job(job, OUTCOME_SUCCESS, 0, NULL);
			if (http == 404)
			{
				/* never created (or deleted behind our back): add-ons first */
				job->addon = next_addon(job, 0, false);
				job->step = job->addon >= 0 ? STEP_CREATE_ADDON : STEP_CREATE;
				return send_step(job);
			}
			break;
		case STEP_CREATE_ADDON:
			if (ok || http == 409)
			{
				/* 409: it exists already, which is fine */
				job->addon = next_addon(job, job->addon + 1, false);
				job->step = job->addon >= 0 ? STEP_CREATE_ADDON : STEP_CREATE;
				return send_step(job);
			}
			break;
		case STEP_CREATE:
		case STEP_PATCH_EXISTING:
			if (ok)
			{
				job->uid = response_uid(res, job->cxt);
				job->addon = job->uid ? next_addon(job, 0, true) : -1;
				if (job->addon < 0)
					return finish_job(job, OUTCOME_SUCCESS, 0, NULL);
				job->step = STEP_OWNER_REF;
				return send_step(job);
			}
			if (job->step == STEP_CREATE && http == 409)
			{
				job->step = STEP_PATCH_EXISTING;
				return send_step(job);
			}
			break;
		case STEP_OWNER_REF:
			if (!ok)
			{
				/* the framework exists; a missing owner reference only leaks a secret */
				k8s_log_failure(WARNING, job->req, job->name);
			}
			job->addon = next_addon(job, job->addon + 1, true);
			if (job->addon < 0)
				return finish_job(job, OUTCOME_SUCCESS, 0, NULL);
			return send_step(job);
		case STEP_DELETE:
			if (ok || http == 404)
			{
				/*
				 * Delete the add-ons too: owner references let Kubernetes
				 * do it, but one may be missing (a create whose answer was
				 * lost), and a priority class cannot be owned by a
				 * namespaced object at all.
				 */
				job->delete_outcome = ok ? OUTCOME_SUCCESS : OUTCOME_GONE;
				job->addon = next_named_addon(job, 0);
				if (job->addon < 0)
					return finish_job(job, job->delete_outcome, 0, NULL);
				job->step = STEP_DELETE_ADDON;
				return send_step(job);
			}
			break;
		case STEP_DELETE_ADDON:
			if (!ok && http != 404)
				k8s_log_failure(WARNING, job->req, job->name);
			job->addon = next_named_addon(job, job->addon + 1);
			if (job->addon < 0)
				return finish_job(job, job->delete_outcome, 0, NULL);
			return send_step(job);
		case STEP_DELETE_ORPHAN:
			/* gone, or recreated with another uid (409): nothing left to do */
			if (ok || http == 404 || http == 409)
			{
				ereport(LOG,
						(errmsg("paidb deleted framework \"%s\" that the database does not know",
								job->name),
						 errhint("Set paidb.retain_mode = on to keep such frameworks.")));
				return finish_job(job, OUTCOME_ORPHAN_DONE, 0, NULL);
			}
			break;
	}

	/* the request failed */
	if (is_permanent(res) && job->never_started &&
		(job->step == STEP_CREATE || job->step == STEP_CREATE_ADDON ||
		 job->step == STEP_PATCH || job->step == STEP_PATCH_EXISTING))
	{
		char	   *what = describe_failure(job, res);

		k8s_log_failure(WARNING, job->req, job->name);
		paidb_worker_report(PAIDB_WORKER_SYNC, NULL, NULL, 0, 0, 1, what);
		return finish_job(job, OUTCOME_PERMANENT, 0,
						  res->message ? res->message : what);
	}
	fail_retry(job, res);
}

/* Copy the add-on definitions of a claimed row into the job. */
static void
take_addons(SyncJob *job, HeapTuple tup, TupleDesc desc, int firstcol)
{
	int			i;

	for (i = 0; i < NUM_ADDONS; i++)
	{
		bool		isnull;
		Datum		d = SPI_getbinval(tup, desc, firstcol + i, &isnull);
		Jsonb	   *def;
		char	   *name;
		char	   *ns;

		if (isnull)
			continue;
		def = DatumGetJsonbP(d);
		if (!JB_ROOT_IS_OBJECT(def))
			continue;
		job->addon_json[i] = MemoryContextStrdup(job->cxt, jb_to_text(&def->root, VARSIZE(def)));
		name = jb_get_cstring(&def->root, 2, (const char *[]) {"metadata", "name"});
		ns = jb_get_cstring(&def->root, 2, (const char *[]) {"metadata", "namespace"});
		job->addon_name[i] = name ? MemoryContextStrdup(job->cxt, name) : NULL;
		job->addon_ns[i] = ns ? MemoryContextStrdup(job->cxt, ns) : NULL;
	}
}

/*
 * Claim due work in one short transaction and start its requests after the
 * commit.  Returns the time the next row falls due (0: now / unknown).
 */
static TimestampTz
claim_work(void)
{
	int			slots = paidb_max_rpc_concurrency - (int) hash_get_num_entries(jobs);
	Datum		args[3];
	List	   *started = NIL;
	ListCell   *lc;
	uint64		i;
	TimestampTz next_due = 0;
	int			claimed = 0;

	if (slots <= 0)
	{
		more_work = true;
		return 0;
	}
	paidb_worker_begin("paidb sync: claiming work");
	prepare_plans();
	args[0] = in_flight_names();
	args[1] = Int32GetDatum(slots);
	args[2] = Int32GetDatum(paidb_resync_interval_ms);
	if (SPI_execute_plan(plan_claim, args, NULL, false, 0) != SPI_OK_UPDATE_RETURNING)
		elog(ERROR, "could not claim frameworks to sync");
	for (i = 0; i < SPI_processed; i++)
	{
		HeapTuple	tup = SPI_tuptable->vals[i];
		TupleDesc	desc = SPI_tuptable->tupdesc;
		char	   *name = SPI_getvalue(tup, desc, 1);
		bool		isnull;
		SyncJob    *job = new_job(name);
		char	   *sub_state = spi_text(tup, desc, 3, job->cxt);
		Datum		d;
		Jsonb	   *object;
		Jsonb	   *request;
		MemoryContext old;
		bool		never_seen;

		job->generation = DatumGetInt64(SPI_getbinval(tup, desc, 2, &isnull));
		d = SPI_getbinval(tup, desc, 4, &isnull);
		job->never_started = sub_state && strcmp(sub_state, "AttemptCreationPending") == 0 &&
			(isnull || DatumGetInt32(d) == 0);
		job->failures = DatumGetInt32(SPI_getbinval(tup, desc, 5, &isnull));
		never_seen = DatumGetBool(SPI_getbinval(tup, desc, 7, &isnull));
		take_addons(job, tup, desc, 8);
		if (sub_state && strcmp(sub_state, "Completed") == 0)
			job->step = STEP_DELETE;
		else
		{
			d = SPI_getbinval(tup, desc, 6, &isnull);
			object = DatumGetJsonbP(d);
			old = MemoryContextSwitchTo(job->cxt);
			request = paidb_request_part(&object->root, job->generation);
			job->request_json = jb_to_text(&request->root, VARSIZE(request));
			MemoryContextSwitchTo(old);
			/*
			 * A job the API server has never shown us needs one request:
			 * create it (add-ons first), rather than patch, 404, create.
			 */
			if (never_seen && job->failures == 0 && next_addon(job, 0, false) < 0)
				job->step = STEP_CREATE;
			else if (never_seen && job->failures == 0)
			{
				job->step = STEP_CREATE_ADDON;
				job->addon = next_addon(job, 0, false);
			}
			else
				job->step = STEP_PATCH;
		}
		/* the list outlives the transaction's memory: keep it in the loop's */
		old = MemoryContextSwitchTo(loop_cxt);
		started = lappend(started, job);
		MemoryContextSwitchTo(old);
		claimed++;
	}
	slots -= claimed;

	/* orphans: delete frameworks the database does not know, unless retained */
	if (slots > 0 && !paidb_retain_mode)
	{
		args[1] = Int32GetDatum(slots);
		if (SPI_execute_plan(plan_claim_orphans, args, NULL, true, 0) != SPI_OK_SELECT)
			elog(ERROR, "could not claim orphan frameworks");
		for (i = 0; i < SPI_processed; i++)
		{
			HeapTuple	tup = SPI_tuptable->vals[i];
			TupleDesc	desc = SPI_tuptable->tupdesc;
			bool		isnull;
			SyncJob    *job = new_job(SPI_getvalue(tup, desc, 1));
			MemoryContext old;

			job->is_orphan = true;
			job->uid = spi_text(tup, desc, 2, job->cxt);
			job->failures = DatumGetInt32(SPI_getbinval(tup, desc, 3, &isnull));
			job->step = STEP_DELETE_ORPHAN;
			old = MemoryContextSwitchTo(loop_cxt);
			started = lappend(started, job);
			MemoryContextSwitchTo(old);
			claimed++;
		}
		slots -= SPI_processed;
	}

	more_work = (slots <= 0);
	if (!more_work)
	{
		bool		isnull;
		Datum		d;

		/* nothing else is due now: when is the next row due? */
		if (SPI_execute_plan(plan_next_due, NULL, NULL, true, 1) == SPI_OK_SELECT &&
			SPI_processed == 1)
		{
			d = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);
			if (!isnull)
				next_due = DatumGetTimestampTz(d);
		}
	}
	paidb_worker_commit();

	/* HTTP only after the commit */
	foreach(lc, started)
		send_step((SyncJob *) lfirst(lc));
	list_free(started);
	return next_due;
}

/* Order of outcomes: by framework name, bytewise. */
static int
outcome_name_cmp(const ListCell *a, const ListCell *b)
{
	return strcmp(((Outcome *) lfirst(a))->name, ((Outcome *) lfirst(b))->name);
}

/*
 * Write the outcomes of finished jobs, each in a subtransaction.  Returns
 * whether a retry was scheduled (the caller must then look again for the
 * next due row: the retry may fall due before anything else).
 */
static bool
record_outcomes(void)
{
	ListCell   *lc;
	Oid			types[4] = {TEXTOID, INT8OID, INT4OID, TEXTOID};
	volatile bool retry_scheduled = false;

	if (outcomes == NIL)
		return false;
	/* rows in name order, as the watchers apply them: no lock cycle */
	list_sort(outcomes, outcome_name_cmp);
	paidb_worker_begin("paidb sync: recording outcomes");
	foreach(lc, outcomes)
	{
		Outcome    *o = lfirst(lc);
		MemoryContext oldcxt = CurrentMemoryContext;
		ResourceOwner oldowner = CurrentResourceOwner;
		Datum		args[4];

		paidb_exit_if_postmaster_died();

		if (o->kind == OUTCOME_SUCCESS && o->failures == 0)
			continue;
		if (o->kind == OUTCOME_RETRY || o->kind == OUTCOME_ORPHAN_RETRY)
			retry_scheduled = true;
		args[0] = CStringGetTextDatum(o->name);
		args[1] = Int64GetDatum(o->generation);
		args[2] = Int32GetDatum((int32) o->delay_ms);
		args[3] = CStringGetTextDatum(o->message ? o->message : "");

		BeginInternalSubTransaction(NULL);
		MemoryContextSwitchTo(oldcxt);
		PG_TRY();
		{
			switch (o->kind)
			{
				case OUTCOME_SUCCESS:
					SPI_execute_with_args("UPDATE paidb.framework SET sync_failures = 0 "
										  "WHERE name = $1 AND request_generation = $2",
										  2, types, args, NULL, false, 0);
					break;
				case OUTCOME_RETRY:
					/* a changed request (new generation) is due now anyway */
					SPI_execute_with_args("UPDATE paidb.framework SET sent_generation = NULL, "
										  "sync_failures = sync_failures + 1, "
										  "next_sync_at = pg_catalog.now() + $3 * interval '1 millisecond' "
										  "WHERE name = $1 AND request_generation = $2",
										  3, types, args, NULL, false, 0);
					break;
				case OUTCOME_PERMANENT:
					paidb_fail_permanently_internal(o->name, o->generation, o->message);
					break;
				case OUTCOME_GONE:
					{
						/* the poller's 404: mock a DELETED event of the stored snapshot */
						if (SPI_execute_with_args("SELECT snapshot FROM paidb.framework WHERE name = $1",
												  1, types, args, NULL, true, 1) == SPI_OK_SELECT &&
							SPI_processed == 1)
						{
							bool		isnull;
							Datum		d = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);

							if (!isnull)
								paidb_apply_watch_event_internal("DELETED", DatumGetJsonbPCopy(d));
						}
						break;
					}
				case OUTCOME_ORPHAN_DONE:
					SPI_execute_with_args("DELETE FROM paidb.orphan WHERE name = $1",
										  1, types, args, NULL, false, 0);
					break;
				case OUTCOME_ORPHAN_RETRY:
					SPI_execute_with_args("UPDATE paidb.orphan SET failures = failures + 1, "
										  "next_attempt_at = pg_catalog.now() + $3 * interval '1 millisecond' "
										  "WHERE name = $1",
										  3, types, args, NULL, false, 0);
					break;
			}
			ReleaseCurrentSubTransaction();
			MemoryContextSwitchTo(oldcxt);
			CurrentResourceOwner = oldowner;
		}
		PG_CATCH();
		{
			ErrorData  *edata;

			MemoryContextSwitchTo(oldcxt);
			edata = CopyErrorData();
			FlushErrorState();
			RollbackAndReleaseCurrentSubTransaction();
			MemoryContextSwitchTo(oldcxt);
			CurrentResourceOwner = oldowner;
			ereport(WARNING,
					(errmsg("paidb sync could not record the outcome for framework \"%s\": %s",
							o->name, edata->message)));
			paidb_worker_report(PAIDB_WORKER_SYNC, NULL, NULL, 0, 0, 1, edata->message);
			FreeErrorData(edata);
		}
		PG_END_TRY();
	}
	paidb_worker_commit();
	outcomes = NIL;
	return retry_scheduled;
}

/* The sync worker's main loop. */
void
paidb_sync_main(void)
{
	HASHCTL		ctl;
	bool		want_claim = true;
	TimestampTz next_due = 0;
	TimestampTz last_claim = 0;

	memset(&ctl, 0, sizeof(ctl));
	ctl.keysize = NAMEDATALEN;
	ctl.entrysize = sizeof(SyncJob);
	ctl.hcxt = paidb_worker_context;
	jobs = hash_create("paidb sync jobs", 256, &ctl, HASH_ELEM | HASH_STRINGS | HASH_CONTEXT);
	loop_cxt = AllocSetContextCreate(paidb_worker_context, "paidb sync loop",
									 ALLOCSET_DEFAULT_SIZES);
	client = k8s_client_create(paidb_worker_context);
	if (k8s_client_base_url(client) == NULL)
		ereport(WARNING,
				(errmsg("paidb sync has no API server to talk to"),
				 errhint("Set paidb.k8s_api_server, or run inside a Kubernetes pod.")));

	for (;;)
	{
		TimestampTz now = GetCurrentTimestamp();
		long		timeout = paidb_resync_interval_ms;
		K8sRequest *req;
		int			rc;

		/* how long may we sleep? */
		if (want_claim)
			timeout = (paused_until > now) ? TimestampDifferenceMilliseconds(now, paused_until) : 0;
		else if (next_due > 0)
			timeout = Min(timeout, Max(0, TimestampDifferenceMilliseconds(now, next_due) + 1));

		MemoryContextSwitchTo(loop_cxt);
		rc = k8s_client_wait(client, timeout, PG_WAIT_EXTENSION);
		if (rc & WL_LATCH_SET)
		{
			/* a commit needing sync, wakeup(), or a freed slot */
			ResetLatch(MyLatch);
			want_claim = true;
		}
		CHECK_FOR_INTERRUPTS();
		if (paidb_worker_reload_if_needed())
		{
			k8s_client_reload(client);
			want_claim = true;
		}

		while ((req = k8s_client_next_done(client)) != NULL)
			advance((SyncJob *) k8s_request_user_data(req));
		if (record_outcomes())
			want_claim = true;	/* finds when the retry falls due */
		MemoryContextSwitchTo(loop_cxt);

		/* a row fell due, or it is time for the safety-net rescan */
		now = GetCurrentTimestamp();
		if ((rc & WL_TIMEOUT) || (next_due > 0 && now >= next_due) ||
			now >= TimestampTzPlusMilliseconds(last_claim, paidb_resync_interval_ms))
			want_claim = true;
		if (want_claim && now >= paused_until)
		{
			last_claim = now;
			next_due = claim_work();
			want_claim = false;
			paidb_worker_report(PAIDB_WORKER_SYNC,
								hash_get_num_entries(jobs) > 0 ? "sending" : "idle",
								NULL, 0, 0, 0, NULL);
		}
		MemoryContextReset(loop_cxt);
	}
}
