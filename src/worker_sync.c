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

#include "cluster_config.h"
#include "guc.h"
#include "jsonb_util.h"
#include "k8s_client.h"
#include "k8s_objects.h"
#include "merge_patch.h"
#include "snapshot.h"
#include "spi_plan.h"
#include "sync_signal.h"
#include "worker_common.h"
#include "worker_shmem.h"
#include "worker_sync.h"
#include "write_merger.h"

#define NUM_ADDONS PAIDB_NUM_ADDONS
#define ADDON_PRIORITY_CLASS PAIDB_ADDON_PRIORITY_CLASS

/* Where a framework's synchronisation stands. */
typedef enum SyncStep
{
	STEP_PATCH,					/* merge-patch the request onto the framework */
	STEP_CREATE_ADDON,			/* create add-on `addon` (404 on patch) */
	STEP_GET_ADDON,				/* its create said 409: is the existing one ours? */
	STEP_CREATE,				/* create the framework */
	STEP_GET_EXISTING,			/* create said 409: is the existing framework ours? */
	STEP_PATCH_EXISTING,		/* it is: patch it instead */
	STEP_CHECK_ADDON,			/* before an owner reference or a delete: is add-on `addon` ours? */
	STEP_OWNER_REF,				/* give secret add-on `addon` an owner reference */
	STEP_DELETE,				/* delete a completed framework */
	STEP_DELETE_ADDON,			/* then its add-ons, in case an owner reference is missing */
	STEP_DELETE_ORPHAN,			/* delete a framework unknown to the database */
	STEP_MOVE_OUT				/* delete a moving job's framework here until 404 (SPEC §11) */
} SyncStep;

/* One framework (or orphan) being synchronised; lives in its own context. */
typedef struct SyncJob
{
	char		name[PAIDB_FRAMEWORK_NAME_SIZE];	/* hash key */
	MemoryContext cxt;
	SyncStep	step;
	bool		is_orphan;
	bool		is_moving;		/* moving out of this worker's cluster */
	int64		generation;
	int			placement;		/* paidb.framework.placement, labelled on objects */
	int			failures;		/* consecutive failures before this attempt */
	bool		never_started;	/* pending status, no retries */
	char	   *request_json;
	char	   *addon_json[NUM_ADDONS];
	char	   *addon_name[NUM_ADDONS];
	char	   *addon_uid[NUM_ADDONS];	/* uid of an add-on known to be ours */
	char	   *bad_addon;		/* why a stored add-on cannot be created, or NULL */
	int			addon;			/* current add-on index */
	bool		deleting;		/* STEP_CHECK_ADDON leads to a delete, not an owner reference */
	char	   *conflict;		/* the API server's words on a 409 being checked */
	char	   *refusal;		/* why a foreign framework ends the job */
	char	   *uid;			/* framework uid (owner references) or orphan uid */
	int			delete_outcome; /* OutcomeKind once the framework delete is done */
	int			step_failures;	/* failures of the current owner-reference step */
	TimestampTz resend_at;		/* send the current step again then (0: not waiting) */
	K8sRequest *req;
} SyncJob;

/* How often a moving job's framework is asked for while its deletion runs */
#define MOVE_POLL_MS 1000

/* How often an owner reference is tried within one job before it is left to the delete */
#define OWNER_REF_TRIES 6

/* What to write to the database once a job ends. */
typedef enum OutcomeKind
{
	OUTCOME_SUCCESS,			/* reset the failure count if it was raised */
	OUTCOME_RETRY,				/* back off and send again later */
	OUTCOME_PERMANENT,			/* refused for good */
	OUTCOME_PERMANENT_FOREIGN,	/* refused: its name is another's framework, never delete it */
	OUTCOME_GONE,				/* completed framework already gone: mock DELETED */
	OUTCOME_ORPHAN_DONE,		/* orphan deleted (or gone) */
	OUTCOME_ORPHAN_RETRY,		/* orphan deletion failed */
	OUTCOME_MOVED_OUT,			/* a moving job's framework is confirmed gone here */
	OUTCOME_MOVE_WAIT,			/* its deletion is under way: ask again soon */
	OUTCOME_MOVE_RETRY			/* the delete failed: back off */
} OutcomeKind;

typedef struct Outcome
{
	OutcomeKind kind;
	char		name[PAIDB_FRAMEWORK_NAME_SIZE];
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
/*
 * The rows of the sync work list, as the predicate of
 * framework_needs_sync_idx reads them.  "Completed" twice: the job state of
 * 0.3's index and the sub state of 0.2's (the same rows, src/job_state.c),
 * so that either index serves, 0.2's until 0.3's is built after the update.
 */
#define SYNC_WORK_LIST \
	"NOT api_server_deleted AND (NOT request_synced OR sub_state = 'Completed') " \
	"AND (NOT request_synced OR state IN ('SUCCEEDED', 'FAILED', 'STOPPED'))"

static SPIPlanPtr plan_claim = NULL;
static SPIPlanPtr plan_next_due = NULL;
static SPIPlanPtr plan_claim_orphans = NULL;
static SPIPlanPtr plan_claim_moving = NULL;

/* Prepare the claim statements once. */
static void
prepare_plans(void)
{
	Oid			types[4] = {TEXTARRAYOID, INT4OID, INT4OID, TEXTOID};
	StringInfoData sql;
	int			i;

	if (plan_claim != NULL)
		return;
	initStringInfo(&sql);
	/*
	 * Due rows of the work list, oldest due first, skipping rows a writer
	 * holds; marked as sent in the same statement.  Only this worker's
	 * cluster's rows ($4): another cluster's never wait for this one.
	 */
	appendStringInfoString(&sql,
						   "WITH due AS (SELECT name FROM paidb.framework "
						   " WHERE cluster = $4 AND moving_from IS NULL "
						   "   AND " SYNC_WORK_LIST " "
						   "   AND COALESCE(next_sync_at, '-infinity'::pg_catalog.timestamptz) <= pg_catalog.now() "
						   "   AND NOT (name = ANY ($1)) "
						   " ORDER BY COALESCE(next_sync_at, '-infinity'::pg_catalog.timestamptz), name "
						   " LIMIT $2 FOR UPDATE SKIP LOCKED) "
						   "UPDATE paidb.framework f SET sent_generation = f.request_generation, "
						   "  sent_at = pg_catalog.now(), "
						   "  next_sync_at = pg_catalog.now() OPERATOR(pg_catalog.+) "
						   "    ($3 OPERATOR(pg_catalog.*) interval '1 millisecond') "
						   "FROM due WHERE f.name = due.name "
						   "RETURNING f.name, f.request_generation, f.sub_state, f.retries, "
						   "  f.sync_failures, "
						   /*
							* the snapshot only for its request part (status and
							* all: dropping it would copy the rest once more); a
							* completed job is only deleted
							*/
						   "  CASE WHEN f.sub_state IS DISTINCT FROM 'Completed' THEN paidb.snapshot(f) END, "
						   "  f.resource_version IS NULL, f.placement");
	for (i = 0; i < NUM_ADDONS; i++)
		appendStringInfo(&sql, ", f.%s", paidb_addon_slots[i].column);
	plan_claim = paidb_prepare_kept(sql.data, 4, types);

	plan_next_due = paidb_prepare_kept("SELECT LEAST("
								"(SELECT next_sync_at FROM paidb.framework "
								" WHERE cluster = $1 AND moving_from IS NULL "
								"   AND " SYNC_WORK_LIST " "
								"   AND COALESCE(next_sync_at, '-infinity'::pg_catalog.timestamptz) > "
								"       '-infinity'::pg_catalog.timestamptz "
								" ORDER BY COALESCE(next_sync_at, '-infinity'::pg_catalog.timestamptz), name LIMIT 1), "
								"(SELECT pg_catalog.min(next_sync_at) FROM paidb.framework WHERE moving_from = $1))",
								1, &types[3]);

	/*
	 * Jobs moving out of this cluster (SPEC §11): their framework here is
	 * deleted until a 404 confirms it gone.  The new cluster's worker leaves
	 * such a row alone, so its next_sync_at and sync_failures are ours.
	 */
	plan_claim_moving = paidb_prepare_kept(
									"WITH due AS (SELECT name FROM paidb.framework "
									" WHERE moving_from = $3 "
									"   AND (next_sync_at IS NULL OR next_sync_at <= pg_catalog.now()) "
									"   AND NOT (name = ANY ($1)) "
									" ORDER BY next_sync_at NULLS FIRST, name LIMIT $2 FOR UPDATE SKIP LOCKED) "
									"UPDATE paidb.framework f SET "
									"  next_sync_at = pg_catalog.now() OPERATOR(pg_catalog.+) "
									"    ($4 OPERATOR(pg_catalog.*) interval '1 millisecond') "
									"FROM due WHERE f.name = due.name "
									"RETURNING f.name, f.sync_failures",
									4, (Oid[]) {TEXTARRAYOID, INT4OID, TEXTOID, INT4OID});

	plan_claim_orphans = paidb_prepare_kept("SELECT o.name, o.uid, o.failures FROM paidb.orphan o "
									 "WHERE (o.next_attempt_at IS NULL OR o.next_attempt_at <= pg_catalog.now()) "
									 "  AND o.cluster = $3 AND NOT (o.name = ANY ($1)) "
									 "  AND o.name OPERATOR(pg_catalog.~) '" PAIDB_FRAMEWORK_NAME_RULE "' "
									 "  AND NOT EXISTS (SELECT 1 FROM paidb.framework f "
									 "                   WHERE f.name = o.name AND f.cluster = o.cluster) "
									 /* retain mode keeps what only the API server has, not a job's old copy */
									 "  AND (NOT $4 OR EXISTS (SELECT 1 FROM paidb.framework f WHERE f.name = o.name)) "
									 "ORDER BY o.queued_at LIMIT $2",
									 4, (Oid[]) {TEXTARRAYOID, INT4OID, TEXTOID, BOOLOID});
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

/*
 * A new job entry for a name, with its own memory context; NULL (with a
 * WARNING) for a name that is not a framework name or already in flight:
 * such a name would be truncated as the hash key and could overwrite the
 * entry of a request in flight.
 */
static SyncJob *
new_job(const char *name)
{
	bool		found;
	SyncJob    *job;

	if (!paidb_valid_framework_name(name))
	{
		ereport(WARNING,
				(errmsg("paidb %s skips framework \"%.*s\": not a framework name", paidb_worker_label("sync"),
						PAIDB_FRAMEWORK_NAME_SIZE, name)));
		paidb_worker_report(PAIDB_WORKER_SYNC, NULL, NULL, 0, 0, 1, "skipped a framework with an invalid name");
		return NULL;
	}
	job = hash_search(jobs, name, HASH_ENTER, &found);
	if (found)
		return NULL;
	job->cxt = AllocSetContextCreate(paidb_worker_context, "paidb sync job",
									 ALLOCSET_SMALL_SIZES);
	job->req = NULL;
	job->uid = NULL;
	job->addon = -1;
	job->is_orphan = false;
	job->is_moving = false;
	job->placement = 1;
	job->request_json = NULL;
	memset(job->addon_json, 0, sizeof(job->addon_json));
	memset(job->addon_name, 0, sizeof(job->addon_name));
	memset(job->addon_uid, 0, sizeof(job->addon_uid));
	job->bad_addon = NULL;
	job->deleting = false;
	job->conflict = NULL;
	job->refusal = NULL;
	job->step_failures = 0;
	job->resend_at = 0;
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

/* The path of add-on i of a job (its collection when name is false). */
static char *
addon_path(SyncJob *job, int i, bool name)
{
	if (i == ADDON_PRIORITY_CLASS)
		return k8s_path_priorityclasses(name ? job->addon_name[i] : NULL);
	/* a secret add-on lives in paidb's namespace (checked in take_addons) */
	return k8s_path_secrets(client, NULL, name ? job->addon_name[i] : NULL);
}

/* A DeleteOptions body: propagation policy, and a uid precondition if given. */
static char *
delete_body(const char *policy, const char *uid)
{
	StringInfoData b;

	initStringInfo(&b);
	appendStringInfoString(&b, "{\"kind\": \"DeleteOptions\", \"apiVersion\": \"v1\", \"propagationPolicy\": ");
	escape_json(&b, policy);
	if (uid)
	{
		appendStringInfoString(&b, ", \"preconditions\": {\"uid\": ");
		escape_json(&b, uid);
		appendStringInfoChar(&b, '}');
	}
	appendStringInfoChar(&b, '}');
	return b.data;
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
			job->req = k8s_new_create(client, addon_path(job, job->addon, false),
									  job->addon_json[job->addon]);
			break;
		case STEP_GET_ADDON:
		case STEP_CHECK_ADDON:
			job->req = k8s_new_get(client, addon_path(job, job->addon, true));
			break;
		case STEP_CREATE:
			path = k8s_path_frameworks(client, NULL, NULL);
			job->req = k8s_new_create(client, path, job->request_json);
			break;
		case STEP_GET_EXISTING:
			job->req = k8s_new_get(client, k8s_path_frameworks(client, NULL, job->name));
			break;
		case STEP_OWNER_REF:
			{
				StringInfoData b;

				/* the add-on's uid makes the patch fail on another object of that name */
				initStringInfo(&b);
				appendStringInfoString(&b, "{\"metadata\": {\"uid\": ");
				escape_json(&b, job->addon_uid[job->addon]);
				appendStringInfoString(&b, ", \"ownerReferences\": [{\"apiVersion\": "
									   "\"frameworkcontroller.microsoft.com/v1\", \"kind\": \"Framework\", \"name\": ");
				escape_json(&b, job->name);
				appendStringInfoString(&b, ", \"uid\": ");
				escape_json(&b, job->uid);
				appendStringInfoString(&b, ", \"controller\": true, \"blockOwnerDeletion\": true}]}}");
				job->req = k8s_new_merge_patch(client, addon_path(job, job->addon, true), b.data);
				break;
			}
		case STEP_DELETE:
			path = k8s_path_frameworks(client, NULL, job->name);
			job->req = k8s_new_delete(client, path, "Foreground");
			break;
		case STEP_DELETE_ADDON:
			/* the uid precondition spares an object recreated under that name */
			body = delete_body("Background", job->addon_uid[job->addon]);
			job->req = k8s_request_new(client, K8S_DELETE, addon_path(job, job->addon, true),
									   "application/json", body, strlen(body));
			break;
		case STEP_MOVE_OUT:
			/* nothing of this job may stay here: no precondition */
			path = k8s_path_frameworks(client, NULL, job->name);
			job->req = k8s_new_delete(client, path, "Foreground");
			break;
		case STEP_DELETE_ORPHAN:
			/* the uid precondition spares a framework recreated under the same name */
			body = delete_body("Foreground", job->uid);
			path = k8s_path_frameworks(client, NULL, job->name);
			job->req = k8s_request_new(client, K8S_DELETE, path, "application/json",
									   body, strlen(body));
			break;
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

/* Whether the API server refused for good (SPEC §6; 400: the body cannot be decoded). */
static bool
is_permanent(const K8sResult *res)
{
	if (res->kind != K8S_RESULT_HTTP_ERROR)
		return false;
	if (res->http_status == 400 || res->http_status == 413 || res->http_status == 422)
		return true;
	return res->http_status == 500 && res->message != NULL &&
		strstr(res->message, "ResourceExhausted") != NULL;
}

/* The object in a response body (ERROR if it is not JSON), or NULL if empty. */
static Jsonb *
response_object(const K8sResult *res)
{
	Jsonb	   *obj;

	if (res->body == NULL || res->body_len == 0)
		return NULL;
	obj = jb_from_text(res->body, res->body_len);
	return JB_ROOT_IS_OBJECT(obj) ? obj : NULL;
}

/* The uid in a response body holding an object (copied into cxt), or NULL. */
static char *
response_uid(const K8sResult *res, MemoryContext cxt)
{
	Jsonb	   *obj = response_object(res);
	char	   *uid = obj ? jb_get_cstring(&obj->root, 2, (const char *[]) {"metadata", "uid"}) : NULL;

	return uid ? MemoryContextStrdup(cxt, uid) : NULL;
}

/*
 * Whether the object in a GET response is the job's (SPEC §8): it carries
 * the label paidb.io/framework: <job name>, or (with owner_ref) an owner
 * reference to the job's framework.  Its uid is copied into *uid.
 */
static bool
response_is_ours(SyncJob *job, const K8sResult *res, bool owner_ref, char **uid)
{
	Jsonb	   *obj = response_object(res);
	char	   *label;
	JsonbContainer *refs;
	bool		ours = false;

	*uid = NULL;
	if (obj == NULL)
		return false;
	label = jb_get_cstring(&obj->root, 3, (const char *[]) {"metadata", "labels", PAIDB_FRAMEWORK_LABEL});
	if (label != NULL && strcmp(label, job->name) == 0)
		ours = true;
	else if (owner_ref)
	{
		JsonbValue	v;

		refs = (jb_get_path(&obj->root, &v, 2, (const char *[]) {"metadata", "ownerReferences"}) &&
				v.type == jbvBinary && JsonContainerIsArray(v.val.binary.data)) ? v.val.binary.data : NULL;
		if (refs != NULL)
		{
			JsonbIterator *it = JsonbIteratorInit(refs);
			JsonbIteratorToken tok;

			while ((tok = JsonbIteratorNext(&it, &v, true)) != WJB_DONE)
			{
				char	   *kind;
				char	   *name;
				char	   *ref_uid;

				if (tok != WJB_ELEM || v.type != jbvBinary || !JsonContainerIsObject(v.val.binary.data))
					continue;
				kind = jb_get_cstring(v.val.binary.data, 1, (const char *[]) {"kind"});
				name = jb_get_cstring(v.val.binary.data, 1, (const char *[]) {"name"});
				ref_uid = jb_get_cstring(v.val.binary.data, 1, (const char *[]) {"uid"});
				if (kind && strcmp(kind, "Framework") == 0 && name && strcmp(name, job->name) == 0 &&
					(job->uid == NULL || (ref_uid && strcmp(ref_uid, job->uid) == 0)))
					ours = true;
			}
		}
	}
	if (ours)
	{
		char	   *u = jb_get_cstring(&obj->root, 2, (const char *[]) {"metadata", "uid"});

		*uid = u ? MemoryContextStrdup(job->cxt, u) : NULL;
	}
	return ours;
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

/* Retry a job later, with backoff of at least min_ms, for the reason `what`. */
static void
retry_later(SyncJob *job, long min_ms, const char *what)
{
	long		delay = paidb_backoff_ms(job->failures + 1, min_ms);

	paidb_worker_report(PAIDB_WORKER_SYNC, NULL, NULL, 0, 0, 1, what);
	finish_job(job, job->is_orphan ? OUTCOME_ORPHAN_RETRY :
			   job->is_moving ? OUTCOME_MOVE_RETRY : OUTCOME_RETRY, delay, what);
}

/* A request failed in a way worth retrying: back off (honouring Retry-After). */
static void
fail_retry(SyncJob *job, const K8sResult *res)
{
	k8s_log_failure(job->failures == 0 ? LOG : DEBUG1, job->req, job->name);
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
	retry_later(job, res->retry_after_ms > 0 ? res->retry_after_ms : 0, describe_failure(job, res));
}

/*
 * The job cannot go on for a reason that retrying does not change: a job
 * that never started gets the permanent-failure status (SPEC §6), any other
 * is retried with backoff.
 */
static void
refuse(SyncJob *job, const char *message)
{
	ereport(WARNING,
			(errmsg("paidb %s cannot create framework \"%s\": %s", paidb_worker_label("sync"), job->name, message)));
	if (!job->never_started)
		return retry_later(job, 0, message);
	paidb_worker_report(PAIDB_WORKER_SYNC, NULL, NULL, 0, 0, 1, message);
	finish_job(job, OUTCOME_PERMANENT, 0, message);
}

static void next_addon_delete(SyncJob *job, int from);

/*
 * The job's framework name belongs to a framework paidb did not create: a
 * job that never started fails for good and paidb never deletes that
 * framework; the add-ons this attempt created are deleted first.  Any other
 * job is retried with backoff.
 */
static void
refuse_foreign(SyncJob *job, const char *message)
{
	int			i;

	if (!job->never_started)
		return refuse(job, message);
	ereport(WARNING,
			(errmsg("paidb %s cannot create framework \"%s\": %s", paidb_worker_label("sync"), job->name, message)));
	paidb_worker_report(PAIDB_WORKER_SYNC, NULL, NULL, 0, 0, 1, message);
	job->refusal = MemoryContextStrdup(job->cxt, message);
	job->delete_outcome = OUTCOME_PERMANENT_FOREIGN;
	for (i = 0; i < NUM_ADDONS; i++)
		if (job->addon_uid[i] == NULL)
			job->addon_json[i] = NULL;	/* not created by this attempt: not ours to delete */
	next_addon_delete(job, 0);
}

/* After the framework exists (uid known): owner references for its secret add-ons, from `from`. */
static void
next_owner_ref(SyncJob *job, int from)
{
	job->addon = job->uid ? next_addon(job, from, true) : -1;
	if (job->addon < 0)
		return finish_job(job, OUTCOME_SUCCESS, 0, NULL);
	/* one created or adopted by this attempt is ours; any other is checked first */
	job->step = job->addon_uid[job->addon] ? STEP_OWNER_REF : STEP_CHECK_ADDON;
	job->deleting = false;
	send_step(job);
}

/* After the framework delete: delete its add-ons that are ours, from `from`. */
static void
next_addon_delete(SyncJob *job, int from)
{
	int			i;

	for (i = from; i < NUM_ADDONS; i++)
		if (job->addon_json[i] && job->addon_name[i])
			break;
	if (i >= NUM_ADDONS)
		return finish_job(job, job->delete_outcome, 0, job->refusal);
	job->addon = i;
	/* one this attempt created or adopted is ours (its uid the precondition) */
	job->step = job->addon_uid[i] ? STEP_DELETE_ADDON : STEP_CHECK_ADDON;
	job->deleting = true;
	send_step(job);
}

/*
 * An owner-reference step failed (the framework exists): send it again
 * after a backoff, within this job, a few times; then leave the add-on to
 * the delete at completion (which finds it by its label) and go on.
 */
static void
owner_ref_failed(SyncJob *job, const K8sResult *res)
{
	char	   *what = describe_failure(job, res);

	paidb_worker_report(PAIDB_WORKER_SYNC, NULL, NULL, 0, 0, 1, what);
	if (k8s_result_is_retryable(res) && ++job->step_failures < OWNER_REF_TRIES)
	{
		k8s_log_failure(job->step_failures == 1 ? LOG : DEBUG1, job->req, job->name);
		job->resend_at = TimestampTzPlusMilliseconds(GetCurrentTimestamp(),
													 paidb_backoff_ms(job->step_failures,
																	  Max(res->retry_after_ms, 0)));
		return;
	}
	k8s_log_failure(WARNING, job->req, job->name);
	job->step_failures = 0;
	next_owner_ref(job, job->addon + 1);
}

/* Create the add-ons from `from` on, then the framework. */
static void
next_create(SyncJob *job, int from)
{
	job->addon = next_addon(job, from, false);
	job->step = job->addon >= 0 ? STEP_CREATE_ADDON : STEP_CREATE;
	send_step(job);
}

/* Advance one job after its request finished. */
static void
advance(SyncJob *job)
{
	const K8sResult *res = k8s_request_result(job->req);
	bool		ok = (res->kind == K8S_RESULT_OK);
	long		http = res->http_status;
	char	   *uid;

	switch (job->step)
	{
		case STEP_PATCH:
			if (ok)
			{
				/* an earlier attempt may have failed before its owner references */
				if (job->failures > 0 && next_addon(job, 0, true) >= 0)
				{
					job->uid = response_uid(res, job->cxt);
					return next_owner_ref(job, 0);
				}
				return finish_job(job, OUTCOME_SUCCESS, 0, NULL);
			}
			if (http == 404)
			{
				/* never created (or deleted behind our back): add-ons first */
				if (job->bad_addon)
					return refuse(job, job->bad_addon);
				return next_create(job, 0);
			}
			break;
		case STEP_CREATE_ADDON:
			if (ok)
			{
				job->addon_uid[job->addon] = response_uid(res, job->cxt);
				return next_create(job, job->addon + 1);
			}
			if (http == 409)
			{
				/* it exists already: ours only if it carries our label */
				job->conflict = MemoryContextStrdup(job->cxt, describe_failure(job, res));
				job->step = STEP_GET_ADDON;
				return send_step(job);
			}
			break;
		case STEP_GET_ADDON:
			if (ok)
			{
				if (!response_is_ours(job, res, false, &uid))
					return refuse(job, psprintf("%s; it was not created by paidb for this job "
												"(no label %s: %s), so paidb neither uses nor changes it",
												job->conflict, PAIDB_FRAMEWORK_LABEL, job->name));
				job->addon_uid[job->addon] = uid;
				return next_create(job, job->addon + 1);
			}
			break;
		case STEP_CREATE:
		case STEP_PATCH_EXISTING:
			if (ok)
			{
				job->uid = response_uid(res, job->cxt);
				return next_owner_ref(job, 0);
			}
			if (job->step == STEP_CREATE && http == 409)
			{
				job->conflict = MemoryContextStrdup(job->cxt, describe_failure(job, res));
				job->step = STEP_GET_EXISTING;
				return send_step(job);
			}
			break;
		case STEP_GET_EXISTING:
			if (ok)
			{
				/* ours (a create whose answer was lost): adopt it */
				if (!response_is_ours(job, res, false, &uid))
					return refuse_foreign(job, psprintf("%s; that framework was not created by paidb "
														"(no label %s: %s)", job->conflict,
														PAIDB_FRAMEWORK_LABEL, job->name));
				job->step = STEP_PATCH_EXISTING;
				return send_step(job);
			}
			break;
		case STEP_CHECK_ADDON:
			if (ok)
			{
				if (response_is_ours(job, res, true, &uid) && uid != NULL)
				{
					job->addon_uid[job->addon] = uid;
					job->step = job->deleting ? STEP_DELETE_ADDON : STEP_OWNER_REF;
					return send_step(job);
				}
				ereport(WARNING,
						(errmsg("paidb %s leaves %s \"%s\" alone: it is not paidb's for framework \"%s\"", paidb_worker_label("sync"),
								paidb_addon_slots[job->addon].kind, job->addon_name[job->addon], job->name),
						 errdetail("It has neither the label %s: %s nor an owner reference to the framework.",
								   PAIDB_FRAMEWORK_LABEL, job->name)));
			}
			else if (http != 404 && !job->deleting)
				return owner_ref_failed(job, res);
			else if (http != 404)
				k8s_log_failure(WARNING, job->req, job->name);
			if (job->deleting)
				return next_addon_delete(job, job->addon + 1);
			return next_owner_ref(job, job->addon + 1);
		case STEP_OWNER_REF:
			if (!ok && http != 404)
				return owner_ref_failed(job, res);
			job->step_failures = 0;
			return next_owner_ref(job, job->addon + 1);
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
				return next_addon_delete(job, 0);
			}
			break;
		case STEP_DELETE_ADDON:
			/* 409: the uid precondition failed, it is another object now */
			if (!ok && http != 404 && http != 409)
				k8s_log_failure(WARNING, job->req, job->name);
			return next_addon_delete(job, job->addon + 1);
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
		case STEP_MOVE_OUT:
			/* only a 404 confirms it absent; an accepted delete may still run pods */
			if (http == 404)
			{
				ereport(LOG,
						(errmsg("paidb %s: framework \"%s\" is gone from this cluster, its move can go on",
								paidb_worker_label("sync"), job->name)));
				return finish_job(job, OUTCOME_MOVED_OUT, 0, NULL);
			}
			if (ok)
				return finish_job(job, OUTCOME_MOVE_WAIT, MOVE_POLL_MS, NULL);
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

/* Error context while a job's response is handled. */
static void
job_error_callback(void *arg)
{
	SyncJob    *job = (SyncJob *) arg;

	if (job->req)
		errcontext("handling the answer to %s %s for framework \"%s\"",
				   k8s_request_method_name(job->req), k8s_request_path(job->req), job->name);
	else
		errcontext("synchronising framework \"%s\"", job->name);
}

/*
 * Run fn(job) with an error boundary (SPEC §8): an ERROR while handling one
 * job (a non-JSON answer, a name no URL may hold...) is logged, counted in
 * status(), and that job alone is retried with backoff; the worker and the
 * other requests in flight go on.
 */
static void
run_job_step(SyncJob *job, void (*fn) (SyncJob *))
{
	char		name[PAIDB_FRAMEWORK_NAME_SIZE];
	MemoryContext oldcxt = CurrentMemoryContext;
	ErrorContextCallback errcb;

	strlcpy(name, job->name, sizeof(name));
	errcb.callback = job_error_callback;
	errcb.arg = job;
	errcb.previous = error_context_stack;
	PG_TRY();
	{
		error_context_stack = &errcb;
		fn(job);
		error_context_stack = errcb.previous;
	}
	PG_CATCH();
	{
		ErrorData  *edata;
		bool		found;

		error_context_stack = errcb.previous;
		MemoryContextSwitchTo(loop_cxt);
		edata = CopyErrorData();
		FlushErrorState();
		MemoryContextSwitchTo(oldcxt);

		ereport(WARNING,
				(errcode(edata->sqlerrcode),
				 errmsg("paidb %s failed on framework \"%s\": %s", paidb_worker_label("sync"), name, edata->message),
				 edata->detail ? errdetail_internal("%s", edata->detail) : 0,
				 edata->context ? errcontext_msg("%s", edata->context) : 0,
				 errhint("The job is retried with backoff; the others go on.")));
		/* the job may have ended before the error: retry it only if it is still there */
		job = hash_search(jobs, name, HASH_FIND, &found);
		if (found)
		{
			char	   *what = psprintf("%s %s: %s", job->req ? k8s_request_method_name(job->req) : "sync",
										name, edata->message);

			retry_later(job, 0, what);
		}
		else
			paidb_worker_report(PAIDB_WORKER_SYNC, NULL, NULL, 0, 0, 1, edata->message);
		FreeErrorData(edata);
	}
	PG_END_TRY();
}

/*
 * A JSON object with paidb's labels merged in: ownership,
 * paidb.io/framework: <name> (SPEC §8), and the job's placement,
 * paidb.io/placement: <n> (SPEC §11).
 */
static Jsonb *
with_label(Jsonb *object, const SyncJob *job)
{
	StringInfoData b;

	initStringInfo(&b);
	appendStringInfoString(&b, "{\"metadata\": {\"labels\": {");
	escape_json(&b, PAIDB_FRAMEWORK_LABEL);
	appendStringInfoString(&b, ": ");
	escape_json(&b, job->name);
	appendStringInfoString(&b, ", ");
	escape_json(&b, PAIDB_PLACEMENT_LABEL);
	appendStringInfo(&b, ": \"%d\"}}}", job->placement);
	return paidb_merge_patch(object, jb_from_text(b.data, b.len));
}

/*
 * Copy the add-on definitions of a claimed row into the job, labelled.  A
 * definition stored before they were checked (an older paidb) is checked
 * again here: a bad one is never sent, and the job cannot be created.
 */
static void
take_addons(SyncJob *job, HeapTuple tup, TupleDesc desc, int firstcol)
{
	const char *ns = k8s_client_namespace(client);
	int			i;

	for (i = 0; i < NUM_ADDONS; i++)
	{
		bool		isnull;
		Datum		d = SPI_getbinval(tup, desc, firstcol + i, &isnull);
		Jsonb	   *def;
		char	   *name;
		char	   *problem;

		if (isnull)
			continue;
		def = DatumGetJsonbP(d);
		problem = paidb_addon_problem(&paidb_addon_slots[i], &def->root, ns);
		if (problem != NULL)
		{
			if (job->bad_addon == NULL)
				job->bad_addon = MemoryContextStrdup(job->cxt,
													 psprintf("invalid add-on %s: %s",
															  paidb_addon_slots[i].key, problem));
			continue;
		}
		def = with_label(def, job);
		job->addon_json[i] = MemoryContextStrdup(job->cxt, jb_to_text(&def->root, VARSIZE(def)));
		name = jb_get_cstring(&def->root, 2, (const char *[]) {"metadata", "name"});
		job->addon_name[i] = name ? MemoryContextStrdup(job->cxt, name) : NULL;
	}
}

/*
 * A claimed row (name in column 1, failures in failures_col) as a new job at
 * `step`, added to *started (in the loop's memory); NULL if it is in flight
 * already or not a framework name.
 */
static SyncJob *
start_claimed(List **started, HeapTuple tup, TupleDesc desc, SyncStep step, int failures_col)
{
	SyncJob    *job = new_job(SPI_getvalue(tup, desc, 1));
	MemoryContext old;
	bool		isnull;

	if (job == NULL)
		return NULL;
	job->failures = DatumGetInt32(SPI_getbinval(tup, desc, failures_col, &isnull));
	job->step = step;
	old = MemoryContextSwitchTo(loop_cxt);
	*started = lappend(*started, job);
	MemoryContextSwitchTo(old);
	return job;
}

/*
 * Claim due work in one short transaction and start its requests after the
 * commit.  Returns the time the next row falls due (0: now / unknown).
 */
static TimestampTz
claim_work(void)
{
	int			slots = paidb_max_rpc_concurrency - (int) hash_get_num_entries(jobs);
	Datum		args[4];
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
	args[3] = CStringGetTextDatum(paidb_cluster_name());
	if (SPI_execute_plan(plan_claim, args, NULL, false, 0) != SPI_OK_UPDATE_RETURNING)
		elog(ERROR, "could not claim frameworks to sync");
	for (i = 0; i < SPI_processed; i++)
	{
		HeapTuple	tup = SPI_tuptable->vals[i];
		TupleDesc	desc = SPI_tuptable->tupdesc;
		char	   *name = SPI_getvalue(tup, desc, 1);
		bool		isnull;
		SyncJob    *job = new_job(name);
		char	   *sub_state;
		Datum		d;
		Jsonb	   *object;
		Jsonb	   *request;
		MemoryContext old;
		bool		never_seen;

		if (job == NULL)
			continue;
		sub_state = spi_text(tup, desc, 3, job->cxt);
		job->generation = DatumGetInt64(SPI_getbinval(tup, desc, 2, &isnull));
		d = SPI_getbinval(tup, desc, 4, &isnull);
		job->never_started = sub_state && strcmp(sub_state, "AttemptCreationPending") == 0 &&
			(isnull || DatumGetInt32(d) == 0);
		job->failures = DatumGetInt32(SPI_getbinval(tup, desc, 5, &isnull));
		never_seen = DatumGetBool(SPI_getbinval(tup, desc, 7, &isnull));
		job->placement = DatumGetInt32(SPI_getbinval(tup, desc, 8, &isnull));
		take_addons(job, tup, desc, 9);
		if (sub_state && strcmp(sub_state, "Completed") == 0)
			job->step = STEP_DELETE;
		else
		{
			d = SPI_getbinval(tup, desc, 6, &isnull);
			object = DatumGetJsonbP(d);
			old = MemoryContextSwitchTo(job->cxt);
			request = with_label(paidb_request_part(&object->root, job->generation), job);
			job->request_json = jb_to_text(&request->root, VARSIZE(request));
			MemoryContextSwitchTo(old);
			/*
			 * A job the API server has never shown us needs one request:
			 * create it (add-ons first), rather than patch, 404, create.
			 */
			if (never_seen && job->failures == 0 && job->bad_addon == NULL &&
				next_addon(job, 0, false) < 0)
				job->step = STEP_CREATE;
			else if (never_seen && job->failures == 0 && job->bad_addon == NULL)
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

	/* jobs moving out: delete their framework here until it is gone */
	if (slots > 0)
	{
		Datum		margs[4];

		margs[0] = args[0];
		margs[1] = Int32GetDatum(slots);
		margs[2] = args[3];		/* the cluster */
		margs[3] = Int32GetDatum(paidb_resync_interval_ms);
		if (SPI_execute_plan(plan_claim_moving, margs, NULL, false, 0) != SPI_OK_UPDATE_RETURNING)
			elog(ERROR, "could not claim jobs moving out");
		for (i = 0; i < SPI_processed; i++)
		{
			SyncJob    *job = start_claimed(&started, SPI_tuptable->vals[i],
											SPI_tuptable->tupdesc, STEP_MOVE_OUT, 2);

			if (job != NULL)
				job->is_moving = true;
		}
		slots -= (int) SPI_processed;
	}

	/*
	 * orphans: delete frameworks the database does not know, unless
	 * retained; an old copy of a job (another placement) goes anyway
	 */
	if (slots > 0)
	{
		args[1] = Int32GetDatum(slots);
		args[2] = args[3];		/* the cluster */
		args[3] = BoolGetDatum(paidb_cluster_retain_mode());
		if (SPI_execute_plan(plan_claim_orphans, args, NULL, true, 0) != SPI_OK_SELECT)
			elog(ERROR, "could not claim orphan frameworks");
		for (i = 0; i < SPI_processed; i++)
		{
			SyncJob    *job = start_claimed(&started, SPI_tuptable->vals[i],
											SPI_tuptable->tupdesc, STEP_DELETE_ORPHAN, 3);

			if (job != NULL)
			{
				job->is_orphan = true;
				job->uid = spi_text(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 2, job->cxt);
			}
		}
		slots -= (int) SPI_processed;
	}

	more_work = (slots <= 0);
	if (!more_work)
	{
		bool		isnull;
		Datum		d;

		/* nothing else is due now: when is the next row due? */
		Datum		cluster = CStringGetTextDatum(paidb_cluster_name());

		if (SPI_execute_plan(plan_next_due, &cluster, NULL, true, 1) == SPI_OK_SELECT &&
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
		run_job_step((SyncJob *) lfirst(lc), send_step);
	list_free(started);
	return next_due;
}

/* Order of outcomes: by framework name, bytewise. */
static int
outcome_name_cmp(const ListCell *a, const ListCell *b)
{
	return strcmp(((Outcome *) lfirst(a))->name, ((Outcome *) lfirst(b))->name);
}

/* Write one outcome to the database (run in a subtransaction). */
static void
record_outcome(void *arg)
{
	Outcome    *o = (Outcome *) arg;
	Oid			types[5] = {TEXTOID, INT8OID, INT4OID, TEXTOID, TEXTOID};
	Datum		args[5];

	args[0] = CStringGetTextDatum(o->name);
	args[1] = Int64GetDatum(o->generation);
	args[2] = Int32GetDatum((int32) o->delay_ms);
	args[3] = CStringGetTextDatum(o->message ? o->message : "");
	args[4] = CStringGetTextDatum(paidb_cluster_name());

	switch (o->kind)
	{
		case OUTCOME_SUCCESS:
			SPI_execute_with_args("UPDATE paidb.framework SET sync_failures = 0 "
								  "WHERE name = $1 AND request_generation = $2 AND cluster = $5",
								  5, types, args, NULL, false, 0);
			break;
		case OUTCOME_RETRY:
			/* a changed request (new generation) is due now anyway */
			SPI_execute_with_args("UPDATE paidb.framework SET sent_generation = NULL, "
								  "sync_failures = sync_failures + 1, "
								  "next_sync_at = pg_catalog.now() OPERATOR(pg_catalog.+) "
								  "  ($3 OPERATOR(pg_catalog.*) interval '1 millisecond') "
								  "WHERE name = $1 AND request_generation = $2 AND cluster = $5",
								  5, types, args, NULL, false, 0);
			break;
		case OUTCOME_PERMANENT:
			paidb_fail_permanently_internal(o->name, o->generation, o->message);
			break;
		case OUTCOME_PERMANENT_FOREIGN:
			/* failed, and never claimed for deletion: that framework is not ours */
			if (!paidb_fail_permanently_internal(o->name, o->generation, o->message))
				ereport(LOG,
						(errmsg("paidb %s did not fail framework \"%s\": it changed or started meanwhile", paidb_worker_label("sync"),
								o->name)));
			SPI_execute_with_args("UPDATE paidb.framework SET api_server_deleted = true "
								  "WHERE name = $1 AND request_generation = $2 AND sub_state = 'Completed' "
								  "  AND cluster = $5",
								  5, types, args, NULL, false, 0);
			break;
		case OUTCOME_GONE:
			/* the poller's 404: mock a DELETED event of the stored snapshot */
			if (SPI_execute_with_args("SELECT paidb.snapshot(f) FROM paidb.framework f "
									  "WHERE name = $1 AND cluster = $5",
									  5, types, args, NULL, true, 1) == SPI_OK_SELECT &&
				SPI_processed == 1)
			{
				bool		isnull;
				Datum		d = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);

				if (!isnull)
					paidb_apply_watch_event_internal("DELETED", DatumGetJsonbPCopy(d));
			}
			break;
		case OUTCOME_MOVED_OUT:
			/* the new cluster's sync worker may create it now: wake it at commit */
			if (SPI_execute_with_args("UPDATE paidb.framework SET moving_from = NULL, next_sync_at = NULL, "
									  "sync_failures = 0 WHERE name = $1 AND moving_from = $5 "
									  "RETURNING cluster",
									  5, types, args, NULL, false, 0) == SPI_OK_UPDATE_RETURNING &&
				SPI_processed == 1)
				paidb_note_sync_needed(SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1));
			break;
		case OUTCOME_MOVE_WAIT:
		case OUTCOME_MOVE_RETRY:
			SPI_execute_with_args(o->kind == OUTCOME_MOVE_WAIT ?
								  "UPDATE paidb.framework SET "
								  "next_sync_at = pg_catalog.now() OPERATOR(pg_catalog.+) "
								  "  ($3 OPERATOR(pg_catalog.*) interval '1 millisecond') "
								  "WHERE name = $1 AND moving_from = $5" :
								  "UPDATE paidb.framework SET sync_failures = sync_failures + 1, "
								  "next_sync_at = pg_catalog.now() OPERATOR(pg_catalog.+) "
								  "  ($3 OPERATOR(pg_catalog.*) interval '1 millisecond') "
								  "WHERE name = $1 AND moving_from = $5",
								  5, types, args, NULL, false, 0);
			break;
		case OUTCOME_ORPHAN_DONE:
			SPI_execute_with_args("DELETE FROM paidb.orphan WHERE name = $1 AND cluster = $5",
								  5, types, args, NULL, false, 0);
			break;
		case OUTCOME_ORPHAN_RETRY:
			SPI_execute_with_args("UPDATE paidb.orphan SET failures = failures + 1, "
								  "next_attempt_at = pg_catalog.now() OPERATOR(pg_catalog.+) "
								  "  ($3 OPERATOR(pg_catalog.*) interval '1 millisecond') "
								  "WHERE name = $1 AND cluster = $5",
								  5, types, args, NULL, false, 0);
			break;
	}
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
	bool		retry_scheduled = false;

	if (outcomes == NIL)
		return false;
	/* rows in name order, as the watchers apply them: no lock cycle */
	list_sort(outcomes, outcome_name_cmp);
	paidb_worker_begin("paidb sync: recording outcomes");
	foreach(lc, outcomes)
	{
		Outcome    *o = lfirst(lc);
		ErrorData  *edata;

		paidb_exit_if_postmaster_died();

		if (o->kind == OUTCOME_SUCCESS && o->failures == 0)
			continue;
		if (o->kind == OUTCOME_RETRY || o->kind == OUTCOME_ORPHAN_RETRY ||
			o->kind == OUTCOME_MOVE_RETRY || o->kind == OUTCOME_MOVE_WAIT)
			retry_scheduled = true;
		edata = paidb_run_in_subxact(record_outcome, o, loop_cxt);
		if (edata != NULL)
		{
			ereport(WARNING,
					(errmsg("paidb %s could not record the outcome for framework \"%s\": %s", paidb_worker_label("sync"),
							o->name, edata->message)));
			paidb_worker_report(PAIDB_WORKER_SYNC, NULL, NULL, 0, 0, 1, edata->message);
			FreeErrorData(edata);
		}
	}
	paidb_worker_commit();
	outcomes = NIL;
	return retry_scheduled;
}

/*
 * Send again the steps of jobs whose wait is over; returns when the next
 * one is due (0: none waits).
 */
static TimestampTz
resend_due(void)
{
	HASH_SEQ_STATUS seq;
	SyncJob    *job;
	List	   *due = NIL;
	ListCell   *lc;
	TimestampTz now = GetCurrentTimestamp();
	TimestampTz next = 0;

	hash_seq_init(&seq, jobs);
	while ((job = hash_seq_search(&seq)) != NULL)
	{
		if (job->resend_at == 0)
			continue;
		if (job->resend_at <= now)
			due = lappend(due, job);
		else if (next == 0 || job->resend_at < next)
			next = job->resend_at;
	}
	foreach(lc, due)
	{
		job = (SyncJob *) lfirst(lc);
		job->resend_at = 0;
		run_job_step(job, send_step);
	}
	list_free(due);
	return next;
}

/* When the next claim may run: after a pause, and not within a batch delay. */
static TimestampTz
claim_not_before(TimestampTz last_claim)
{
	if (more_work || paidb_sync_batch_delay_ms <= 0)
		return paused_until;
	return Max(paused_until, TimestampTzPlusMilliseconds(last_claim, paidb_sync_batch_delay_ms));
}

/* The sync worker's entry point and main loop. */
void
paidb_sync_main(Datum main_arg)
{
	HASHCTL		ctl;
	bool		want_claim = true;
	TimestampTz next_due = 0;
	TimestampTz last_claim = 0;
	TimestampTz next_resend = 0;

	paidb_worker_startup(PAIDB_WORKER_SYNC);
	/*
	 * This worker runs its few statements (C, no PL/pgSQL) thousands of
	 * times with parameters that do not change their best plan (a cluster,
	 * names in flight, a batch size): plan them once.  With custom plans
	 * it planned its claim at every wake-up (perf: planner time in the
	 * sync worker).  Other workers keep the default: the retention
	 * worker's PL/pgSQL compares times, where a generic plan could scan.
	 */
	SetConfigOption("plan_cache_mode", "force_generic_plan", PGC_SUSET, PGC_S_OVERRIDE);
	memset(&ctl, 0, sizeof(ctl));
	ctl.keysize = PAIDB_FRAMEWORK_NAME_SIZE;
	ctl.entrysize = sizeof(SyncJob);
	ctl.hcxt = paidb_worker_context;
	jobs = hash_create("paidb sync jobs", 256, &ctl, HASH_ELEM | HASH_STRINGS | HASH_CONTEXT);
	loop_cxt = AllocSetContextCreate(paidb_worker_context, "paidb sync loop",
									 ALLOCSET_DEFAULT_SIZES);
	client = k8s_client_create(paidb_worker_context);
	if (k8s_client_base_url(client) == NULL)
		ereport(WARNING,
				(errmsg("paidb %s has no API server to talk to", paidb_worker_label("sync")),
				 errhint("Set paidb.k8s_api_server, or run inside a Kubernetes pod.")));

	for (;;)
	{
		TimestampTz now = GetCurrentTimestamp();
		long		timeout = paidb_resync_interval_ms;
		K8sRequest *req;
		int			rc;

		/*
		 * How long may we sleep?  A worker that is keeping up (its last
		 * claim left slots free) claims at most once per
		 * paidb.sync_batch_delay: under a stream of submissions each claim
		 * then takes several rows, instead of one claim per commit, which
		 * with many clusters cost more CPU than the requests themselves.
		 * An idle worker's first claim, and one that filled every slot,
		 * do not wait.
		 */
		if (want_claim)
		{
			TimestampTz not_before = claim_not_before(last_claim);

			timeout = (not_before > now) ? TimestampDifferenceMilliseconds(now, not_before) + 1 : 0;
		}
		else if (next_due > 0)
			timeout = Min(timeout, Max(0, TimestampDifferenceMilliseconds(now, next_due) + 1));
		if (next_resend > 0)
			timeout = Min(timeout, Max(0, TimestampDifferenceMilliseconds(now, next_resend) + 1));

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
			run_job_step((SyncJob *) k8s_request_user_data(req), advance);
		next_resend = resend_due();
		if (record_outcomes())
			want_claim = true;	/* finds when the retry falls due */
		MemoryContextSwitchTo(loop_cxt);

		/* a row fell due, or it is time for the safety-net rescan */
		now = GetCurrentTimestamp();
		if ((rc & WL_TIMEOUT) || (next_due > 0 && now >= next_due) ||
			now >= TimestampTzPlusMilliseconds(last_claim, paidb_resync_interval_ms))
			want_claim = true;
		if (want_claim && now >= claim_not_before(last_claim))
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
