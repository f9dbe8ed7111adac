/*
 * worker_watch.c — the framework watcher and the event watcher (SPEC §6).
 *
 * Both are one reflector in the manner of client-go: LIST the collection
 * (paged), then WATCH it from the list's resourceVersion with bookmarks;
 * a watch that ends normally is started again from the last
 * resourceVersion seen, a cut or failed one after a backoff, and 410 Gone
 * (HTTP status or an ERROR event in the stream) means LIST again.  After
 * a LIST, frameworks that the database had seen in the API server but that
 * are no longer listed get a DELETED event made from their stored snapshot
 * (OpenPAI's jobs stayed RUNNING forever without that).
 *
 * No HTTP runs inside a transaction: the client parses what arrives while
 * we wait; afterwards the queued events (or list items) are taken and
 * applied in ONE short transaction per batch, together with the
 * resourceVersion of the last one, so a restart resumes the watch exactly
 * there.  A batch first runs in a single subtransaction; if that fails, it
 * runs again with one subtransaction per event, so that one bad event is
 * logged and skipped without losing the others and without crashing the
 * worker (and without the cost of hundreds of subtransactions per batch
 * in the common case).  Failures that are not about the event itself (lock
 * timeouts, deadlocks, a dropped table, out of memory) end the worker
 * instead; it restarts and resumes from the stored resourceVersion.
 *
 * The first time the framework watcher runs after CREATE EXTENSION it
 * imports what it lists (OpenPAI's initializer): an existing cluster's
 * jobs are adopted, never deleted as orphans.
 */
#include "postgres.h"

#ifdef __GLIBC__
#include <malloc.h>
#endif

#include "access/xact.h"
#include "access/xlog.h"
#include "catalog/pg_type.h"
#include "common/hashfn.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "storage/latch.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/hsearch.h"
#include "utils/jsonb.h"
#include "utils/memutils.h"
#include "utils/resowner.h"
#include "utils/timestamp.h"

#include "cluster_config.h"
#include "guc.h"
#include "jsonb_util.h"
#include "k8s_client.h"
#include "k8s_objects.h"
#include "k8s_watch.h"
#include "snapshot_pack.h"
#include "spi_plan.h"
#include "worker_common.h"
#include "worker_watch.h"
#include "write_merger.h"

/* At most this many events or list items are applied in one transaction */
#define WATCH_BATCH_MAX_ITEMS	1000

/* ... and no more JSON than this (a single larger object still goes alone) */
#define WATCH_BATCH_MAX_BYTES	(8 * 1024 * 1024)

/* An item this large has its text freed once parsed, and memory trimmed after */
#define LARGE_ITEM_BYTES		(1024 * 1024)

/* A watch that ends sooner than this without any event counts as a failure */
#define WATCH_MIN_HEALTHY_MS	1000

/* A first watch that lasted this long before its 410 does not count towards the re-list backoff */
#define RELIST_HEALTHY_MS		60000

/* Rows fetched at a time while looking for frameworks that disappeared */
#define RECONCILE_FETCH			1000

/* Length of the framework-name part of a task pod's name */
#define POD_FRAMEWORK_NAME_LEN	32

/* What applying one item did */
typedef enum ApplyOutcome
{
	APPLY_DONE,					/* merged into the database */
	APPLY_SKIPPED				/* not ours (ignored, not an error) */
} ApplyOutcome;

/* How one LIST or WATCH round ended */
typedef enum RoundOutcome
{
	ROUND_OK,					/* go on at once */
	ROUND_RETRY_NOW,			/* start over at once (settings changed) */
	ROUND_BACKOFF				/* failed: wait before the next round */
} RoundOutcome;

/* One watch event or list item waiting to be applied */
typedef struct WatchItem
{
	const char *type;			/* "ADDED", "MODIFIED" or "DELETED" */
	char	   *name;			/* metadata.name, or NULL */
	char	   *json;			/* the object as JSON (reconcile: the list's RV) */
	size_t		len;			/* strlen(json) */
	int			seq;			/* place in the batch (keeps one object's order) */
	bool		last_use;		/* applied on its own: json may be freed once parsed */
	bool		has_rv;			/* a listed item's metadata.resourceVersion ... */
	int64		rv;				/* ... is this decimal */
} WatchItem;

typedef struct Reflector Reflector;

/* Apply one item inside the current transaction */
typedef ApplyOutcome (*ApplyFn) (Reflector *r, WatchItem *item);

/* What differs between the two watchers */
typedef struct WatcherDef
{
	PaidbWorkerKind kind;
	const char *watcher;		/* key in paidb.watch_state */
	const char *what;			/* the collection, for messages */
	char	   *(*collection_path) (K8sClient *client);
	bool		adopt_on_first_run; /* import what the first LIST finds */
	bool		reconcile;		/* DELETED for what a LIST no longer has */
	ApplyFn		apply;
} WatcherDef;

/* The state of one watcher process; everything else is in the database */
struct Reflector
{
	const WatcherDef *def;
	K8sClient  *client;
	MemoryContext batch_cxt;	/* the items of one batch */
	MemoryContext item_cxt;		/* one item being applied */
	MemoryContext list_cxt;		/* one LIST: names seen, continue token */
	MemoryContext round_cxt;	/* one LIST or WATCH round: paths, messages */
	bool		need_list;		/* no usable resourceVersion: LIST */
	bool		need_state;		/* the target changed: read the state again */
	char	   *rv;				/* where the next watch starts (may be "") */
	char		source[17];		/* hash of the API server and namespace */
	bool		import_pending; /* first run: adopt what is listed */
	bool		importing;		/* the LIST under way adopts */
	bool		adopt_in_watch; /* new timeline: the watch adopts too */
	HTAB	   *seen;			/* names listed so far (reconcile) */
	uint64		unchanged;		/* listed as last applied: not applied again */
	int			failures;		/* consecutive failed rounds */
	int			relists;		/* LISTs in a row whose first watch got 410 at once */
	bool		just_listed;	/* no watch since the last LIST */
	long		retry_after_ms; /* the server's Retry-After, or -1 */
	char		failure[256];	/* why the last round failed */
	/* the batch */
	WatchItem  *items;
	int			nitems;
	size_t		nbytes;
	bool		large;			/* the batch holds a LARGE_ITEM_BYTES item */
	uint64		applied;
	uint64		skipped;
	uint64		errors;
	char		last_error[256];
	bool		has_error;
};

/* Plans prepared once and kept */
static SPIPlanPtr plan_get_rv = NULL;
static SPIPlanPtr plan_put_rv = NULL;
static SPIPlanPtr plan_get_installation = NULL;
static SPIPlanPtr plan_put_installation = NULL;
static SPIPlanPtr plan_reconcile_candidates = NULL;
static SPIPlanPtr plan_deleted_snapshot = NULL;
static SPIPlanPtr plan_upsert_event = NULL;
static SPIPlanPtr plan_stored_rvs = NULL;

static ApplyOutcome apply_framework(Reflector *r, WatchItem *item);
static ApplyOutcome apply_event(Reflector *r, WatchItem *item);
static char *frameworks_path(K8sClient *client);
static char *events_path(K8sClient *client);

static const WatcherDef framework_watcher = {
	PAIDB_WORKER_FRAMEWORK_WATCHER,
	PAIDB_WATCHER_FRAMEWORKS,
	"frameworks",
	frameworks_path,
	true,
	true,
	apply_framework
};

static const WatcherDef event_watcher = {
	PAIDB_WORKER_EVENT_WATCHER,
	PAIDB_WATCHER_EVENTS,
	"events",
	events_path,
	false,
	false,
	apply_event
};

/* ---------------------------------------------------------------------
 * plans and small database helpers
 * ---------------------------------------------------------------------
 */

/* Prepare the watchers' plans once (inside a transaction with SPI). */
static void
prepare_plans(void)
{
	Oid			types[7];

	if (plan_upsert_event != NULL)
		return;

	types[0] = TEXTOID;
	plan_get_rv = paidb_prepare_kept(
							   "SELECT resource_version FROM paidb.watch_state WHERE watcher = $1",
							   1, types);
	plan_get_installation = paidb_prepare_kept(
										 "SELECT value FROM paidb.installation WHERE key = $1",
										 1, types);

	types[0] = TEXTOID;
	types[1] = TEXTOID;
	types[2] = BOOLOID;
	plan_put_rv = paidb_prepare_kept(
							   "INSERT INTO paidb.watch_state AS w (watcher, resource_version, listed_at, updated_at) "
							   "VALUES ($1, $2, CASE WHEN $3 THEN pg_catalog.now() END, pg_catalog.now()) "
							   "ON CONFLICT (watcher) DO UPDATE SET resource_version = EXCLUDED.resource_version, "
							   "listed_at = COALESCE(EXCLUDED.listed_at, w.listed_at), updated_at = pg_catalog.now()",
							   3, types);
	plan_put_installation = paidb_prepare_kept(
										 "INSERT INTO paidb.installation AS i (key, value, updated_at) "
										 "VALUES ($1, $2, pg_catalog.now()) "
										 "ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value, updated_at = pg_catalog.now()",
										 2, types);

	/* every framework query is about this worker's cluster ($2, $3) only */
	types[0] = INT8OID;
	types[1] = TEXTOID;
	plan_reconcile_candidates = paidb_prepare_kept(
											 "SELECT name FROM paidb.framework "
											 "WHERE cluster = $2 AND NOT api_server_deleted AND resource_version IS NOT NULL "
											 "AND ($1::pg_catalog.int8 IS NULL OR resource_version <= $1) "
											 "ORDER BY name COLLATE \"C\"",
											 2, types);

	/* the listed names' stored positions, in the order items are applied */
	types[0] = TEXTARRAYOID;
	types[1] = TEXTOID;
	plan_stored_rvs = paidb_prepare_kept(
								   "SELECT name, resource_version FROM paidb.framework "
								   "WHERE name OPERATOR(pg_catalog.=) ANY ($1) AND cluster = $2 "
								   "AND NOT api_server_deleted "
								   "AND resource_version IS NOT NULL ORDER BY name COLLATE \"C\"",
								   2, types);

	types[0] = TEXTOID;
	types[1] = TEXTOID;
	types[2] = TEXTOID;
	plan_deleted_snapshot = paidb_prepare_kept(
										 "SELECT pg_catalog.jsonb_set(paidb.snapshot(f), "
										 "'{metadata,resourceVersion}', pg_catalog.to_jsonb($2)) "
										 "FROM paidb.framework f WHERE name = $1 AND cluster = $3 AND NOT api_server_deleted",
										 3, types);

	/*
	 * The event's columns come from the event itself (old-style fields, or
	 * the new-style eventTime/series/reporting* ones); the same version
	 * again (a re-list) changes nothing, and neither does an older one.
	 */
	types[0] = JSONBOID;
	types[1] = TEXTOID;
	types[2] = TEXTOID;
	types[3] = TEXTOID;
	types[4] = TEXTOID;
	types[5] = INT4OID;
	types[6] = TEXTOID;
	/* not about a job of another cluster (SPEC §11) */
	plan_upsert_event = paidb_prepare_kept(
									 "INSERT INTO paidb.framework_event AS fe (uid, framework_name, pod_uid, "
									 "taskrole_name, task_name, task_index, type, reason, message, "
									 "first_timestamp, last_timestamp, count, source_component, source_host, event) "
									 "SELECT $2, $3, pg_catalog.jsonb_extract_path_text(e, 'involvedObject', 'uid'), $4, $5, $6, "
									 "COALESCE(NULLIF(pg_catalog.jsonb_extract_path_text(e, 'type'), ''), 'Normal'), pg_catalog.jsonb_extract_path_text(e, 'reason'), pg_catalog.jsonb_extract_path_text(e, 'message'), "
									 "COALESCE(NULLIF(pg_catalog.jsonb_extract_path_text(e, 'firstTimestamp'), ''), NULLIF(pg_catalog.jsonb_extract_path_text(e, 'eventTime'), ''))::pg_catalog.timestamptz, "
									 "COALESCE(NULLIF(pg_catalog.jsonb_extract_path_text(e, 'lastTimestamp'), ''), NULLIF(pg_catalog.jsonb_extract_path_text(e, 'series', 'lastObservedTime'), ''), "
									 "NULLIF(pg_catalog.jsonb_extract_path_text(e, 'eventTime'), ''))::pg_catalog.timestamptz, "
									 "COALESCE(pg_catalog.jsonb_extract_path_text(e, 'count'), pg_catalog.jsonb_extract_path_text(e, 'series', 'count'))::pg_catalog.int4, "
									 "COALESCE(NULLIF(pg_catalog.jsonb_extract_path_text(e, 'source', 'component'), ''), NULLIF(pg_catalog.jsonb_extract_path_text(e, 'reportingComponent'), '')), "
									 "COALESCE(NULLIF(pg_catalog.jsonb_extract_path_text(e, 'source', 'host'), ''), NULLIF(pg_catalog.jsonb_extract_path_text(e, 'reportingInstance'), '')), "
									 "e FROM (SELECT $1 AS e) AS s "
									 "WHERE NOT EXISTS (SELECT 1 FROM paidb.framework f "
									 "                  WHERE f.name = $3 AND f.cluster OPERATOR(pg_catalog.<>) $7) "
									 "ON CONFLICT (uid) DO UPDATE SET framework_name = EXCLUDED.framework_name, "
									 "pod_uid = EXCLUDED.pod_uid, taskrole_name = EXCLUDED.taskrole_name, "
									 "task_name = EXCLUDED.task_name, task_index = EXCLUDED.task_index, "
									 "type = EXCLUDED.type, reason = EXCLUDED.reason, message = EXCLUDED.message, "
									 "first_timestamp = EXCLUDED.first_timestamp, last_timestamp = EXCLUDED.last_timestamp, "
									 "count = EXCLUDED.count, source_component = EXCLUDED.source_component, "
									 "source_host = EXCLUDED.source_host, event = EXCLUDED.event, "
									 "updated_at = pg_catalog.now() "
									 "WHERE pg_catalog.jsonb_extract_path_text(fe.event, 'metadata', 'resourceVersion') IS DISTINCT FROM "
									 "pg_catalog.jsonb_extract_path_text(EXCLUDED.event, 'metadata', 'resourceVersion') "
									 "AND NOT (pg_catalog.jsonb_extract_path_text(fe.event, 'metadata', 'resourceVersion') OPERATOR(pg_catalog.~) '^[0-9]{1,18}$' "
									 "AND pg_catalog.jsonb_extract_path_text(EXCLUDED.event, 'metadata', 'resourceVersion') OPERATOR(pg_catalog.~) '^[0-9]{1,18}$' "
									 "AND (pg_catalog.jsonb_extract_path_text(EXCLUDED.event, 'metadata', 'resourceVersion'))::pg_catalog.int8 "
									 "< (pg_catalog.jsonb_extract_path_text(fe.event, 'metadata', 'resourceVersion'))::pg_catalog.int8)",
									 7, types);
}

/* The single text column of a one-row query's result, copied into mcxt, or NULL. */
static char *
spi_single_text(SPIPlanPtr plan, Datum *values, MemoryContext mcxt)
{
	char	   *result = NULL;

	if (SPI_execute_plan(plan, values, NULL, true, 1) != SPI_OK_SELECT)
		elog(ERROR, "could not read the watch state");
	if (SPI_processed > 0)
	{
		char	   *s = SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1);

		if (s != NULL)
			result = MemoryContextStrdup(mcxt, s);
	}
	SPI_freetuptable(SPI_tuptable);
	return result;
}

/*
 * A key of paidb.watch_state or paidb.installation for this worker's
 * cluster: the default cluster keeps 0.2's keys (its watch positions and
 * first-run state carry over), another cluster's end in "@<cluster>".
 */
static char *
cluster_key(const char *key)
{
	if (strcmp(paidb_cluster_name(), PAIDB_DEFAULT_CLUSTER) == 0)
		return pstrdup(key);
	return psprintf("%s@%s", key, paidb_cluster_name());
}

/* Set a paidb.installation key. */
static void
put_installation(const char *key, const char *value)
{
	Datum		values[2];
	char		nulls[2] = {' ', ' '};

	values[0] = CStringGetTextDatum(cluster_key(key));
	values[1] = value ? CStringGetTextDatum(value) : (Datum) 0;
	nulls[1] = value ? ' ' : 'n';
	if (SPI_execute_plan(plan_put_installation, values, nulls, false, 0) != SPI_OK_INSERT)
		elog(ERROR, "could not write paidb.installation");
}

/* Store where the watch resumes; listed: a LIST just ended there. */
static void
put_resource_version(Reflector *r, const char *rv, bool listed)
{
	Datum		values[3];
	char		nulls[3] = {' ', ' ', ' '};

	values[0] = CStringGetTextDatum(cluster_key(r->def->watcher));
	values[1] = CStringGetTextDatum(rv);
	values[2] = BoolGetDatum(listed);
	if (SPI_execute_plan(plan_put_rv, values, nulls, false, 0) != SPI_OK_INSERT)
		elog(ERROR, "could not write paidb.watch_state");
}

/* The paidb.installation key remembering which API server a watcher follows. */
static char *
source_key(Reflector *r)
{
	return psprintf("watch_source.%s", r->def->watcher);
}

/* Whether rv is a decimal resourceVersion; its value in *out. */
static bool
parse_rv(const char *rv, int64 *out)
{
	return k8s_rv_parse(rv, out);
}

/* ---------------------------------------------------------------------
 * settings and status
 * ---------------------------------------------------------------------
 */

/*
 * Fingerprint (16 hex digits) of the API server and namespace the client
 * talks to; a hash, so that the URL itself is not copied into a table.
 */
static void
compute_source(Reflector *r, char *out)
{
	const char *url = k8s_client_base_url(r->client);
	const char *ns = k8s_client_namespace(r->client);
	char	   *s = psprintf("%s\n%s", url ? url : "", ns ? ns : "");
	uint64		h = hash_bytes_extended((const unsigned char *) s, (int) strlen(s), 0);

	snprintf(out, 17, "%016llx", (unsigned long long) h);
	pfree(s);
}

/*
 * After SIGHUP: reload the settings and the client; true when the API
 * server or the namespace changed, which means LIST again.
 */
static bool
reflector_reload(Reflector *r)
{
	char		source[17];

	if (!paidb_worker_reload_if_needed())
		return false;
	k8s_client_reload(r->client);
	compute_source(r, source);
	if (strcmp(source, r->source) == 0)
		return false;
	ereport(LOG,
			(errmsg("paidb %s: the API server or namespace changed, listing %s again",
					paidb_worker_label(paidb_worker_names[r->def->kind]), r->def->what)));
	strlcpy(r->source, source, sizeof(r->source));
	r->need_list = true;
	r->need_state = true;		/* whether it is a first run: load_state */
	return true;
}

/* Show a state in paidb.status() (with the current resourceVersion). */
static void
report_state(Reflector *r, const char *state)
{
	paidb_worker_report(r->def->kind, state, r->rv, 0, 0, 0, NULL);
}

/* Count one request sent to the API server. */
static void
report_request(Reflector *r)
{
	paidb_worker_report(r->def->kind, NULL, NULL, 0, 1, 0, NULL);
}

/* Remember why a round failed (what, then the result) and count it as an error. */
static void
pg_attribute_printf(3, 4)
note_failure(Reflector *r, const K8sResult *res, const char *fmt,...)
{
	char		what[128];
	va_list		args;

	va_start(args, fmt);
	vsnprintf(what, sizeof(what), fmt, args);
	va_end(args);
	if (res == NULL)
		snprintf(r->failure, sizeof(r->failure), "%s", what);
	else if (res->kind == K8S_RESULT_HTTP_ERROR)
		snprintf(r->failure, sizeof(r->failure), "%s: HTTP %ld %s%s%s", what,
				 res->http_status, res->reason ? res->reason : "",
				 res->message ? ": " : "", res->message ? res->message : "");
	else
		snprintf(r->failure, sizeof(r->failure), "%s: %s%s%s", what,
				 k8s_result_kind_name(res->kind),
				 res->message ? ": " : "", res->message ? res->message : "");
	r->retry_after_ms = (res != NULL) ? res->retry_after_ms : -1;
	paidb_worker_report(r->def->kind, NULL, NULL, 0, 0, 1, r->failure);
}

/* Sleep for a backoff, still answering SIGHUP and SIGTERM. */
static void
backoff_sleep(Reflector *r)
{
	long		ms = paidb_backoff_ms(r->failures, Max(r->retry_after_ms, 0));
	TimestampTz until = TimestampTzPlusMilliseconds(GetCurrentTimestamp(), ms);
	char		state[64];

	snprintf(state, sizeof(state), "backing off %ld ms: %s", ms, r->failure);
	report_state(r, state);
	for (;;)
	{
		long		left = TimestampDifferenceMilliseconds(GetCurrentTimestamp(), until);

		if (left <= 0)
			break;
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 left, PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
		CHECK_FOR_INTERRUPTS();
		if (reflector_reload(r))
			break;				/* another server: no reason to wait for it */
	}
}

/* ---------------------------------------------------------------------
 * applying items: one transaction per batch, subtransactions inside
 * ---------------------------------------------------------------------
 */

/*
 * Whether an error is about the system rather than the event: such an error
 * must not make us skip the event, so it ends the worker instead (it
 * restarts and resumes from the stored resourceVersion).
 */
static bool
error_is_systemic(const ErrorData *edata)
{
	int			class = ERRCODE_TO_CATEGORY(edata->sqlerrcode);

	return class == ERRCODE_CONNECTION_EXCEPTION ||
		class == ERRCODE_INVALID_TRANSACTION_STATE ||
		class == ERRCODE_INVALID_CATALOG_NAME ||
		class == ERRCODE_INVALID_SCHEMA_NAME ||
		class == ERRCODE_TRANSACTION_ROLLBACK ||
		class == ERRCODE_SYNTAX_ERROR_OR_ACCESS_RULE_VIOLATION ||
		class == ERRCODE_INSUFFICIENT_RESOURCES ||
		class == ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE ||
		class == ERRCODE_OPERATOR_INTERVENTION ||
		class == ERRCODE_SYSTEM_ERROR ||
		edata->sqlerrcode == ERRCODE_DATA_CORRUPTED ||
		edata->sqlerrcode == ERRCODE_INDEX_CORRUPTED;
}

/* Error context: which event was being applied. */
static void
apply_error_callback(void *arg)
{
	WatchItem  *item = (WatchItem *) arg;

	errcontext("%s event of \"%s\"", item->type, item->name ? item->name : "(no name)");
}

/* What apply_run goes through, and how far it got */
typedef struct ApplyRun
{
	Reflector  *r;
	WatchItem  *items;
	int			n;
	ApplyFn		fn;
	int			i;				/* the item being applied */
	int			done;
	int			skipped;
} ApplyRun;

/*
 * Whether a run merges its framework events with one statement for all
 * rows read and one for all rows written (write_merger.h).  Not for one
 * event, and not while adopting: an import reads each row on its own.
 */
static bool
batch_statements(Reflector *r, ApplyFn fn, int n)
{
	return fn == apply_framework && n > 1 && !r->importing && !r->adopt_in_watch;
}

/* Apply the run's items one after the other (inside a subtransaction). */
static void
apply_run(void *arg)
{
	ApplyRun   *run = (ApplyRun *) arg;
	MemoryContext oldcxt = CurrentMemoryContext;
	bool		batched = batch_statements(run->r, run->fn, run->n);

	if (batched)
	{
		char	  **names = palloc(sizeof(char *) * run->n);

		for (run->i = 0; run->i < run->n; run->i++)
			names[run->i] = run->items[run->i].name;
		paidb_watch_batch_begin(names, run->n);
		pfree(names);
	}
	for (run->i = 0; run->i < run->n; run->i++)
	{
		WatchItem  *item = &run->items[run->i];
		ErrorContextCallback errcb;
		ApplyOutcome outcome;

		CHECK_FOR_INTERRUPTS();
		paidb_exit_if_postmaster_died();
		errcb.callback = apply_error_callback;
		errcb.arg = item;
		errcb.previous = error_context_stack;
		error_context_stack = &errcb;
		MemoryContextSwitchTo(run->r->item_cxt);
		item->last_use = (run->n == 1);
		outcome = run->fn(run->r, item);
		MemoryContextSwitchTo(oldcxt);
		error_context_stack = errcb.previous;
		MemoryContextReset(run->r->item_cxt);
		if (outcome == APPLY_DONE)
			run->done++;
		else
			run->skipped++;
	}
	if (batched)
		paidb_watch_batch_end();
}

/*
 * Apply items[0..n) inside one subtransaction.  On error the subtransaction
 * is rolled back and false returned (with a WARNING when `warn`); counters
 * move only when it commits.
 */
static bool
apply_protected(Reflector *r, WatchItem *items, int n, ApplyFn fn, bool warn)
{
	ApplyRun	run = {r, items, n, fn, 0, 0, 0};
	ErrorData  *edata;
	WatchItem  *bad;

	edata = paidb_run_in_subxact(apply_run, &run, r->batch_cxt);
	paidb_watch_batch_discard();	/* ended already, unless it failed */
	MemoryContextReset(r->item_cxt);
	if (edata == NULL)
	{
		r->applied += run.done;
		r->skipped += run.skipped;
		return true;
	}
	bad = &items[Min(run.i, n - 1)];
	if (error_is_systemic(edata))
		ReThrowError(edata);
	if (warn)
	{
		ereport(WARNING,
				(errcode(edata->sqlerrcode),
				 errmsg("paidb %s skipped the %s event of \"%s\": %s",
						paidb_worker_label(paidb_worker_names[r->def->kind]), bad->type,
						bad->name ? bad->name : "(no name)", edata->message),
				 edata->detail ? errdetail_internal("%s", edata->detail) : 0,
				 errhint("The event is not applied; the next event about the same object will be.")));
		snprintf(r->last_error, sizeof(r->last_error), "skipped the %s event of \"%s\": %s",
				 bad->type, bad->name ? bad->name : "(no name)", edata->message);
		r->has_error = true;
		r->errors++;
	}
	FreeErrorData(edata);
	return false;
}

/* Order of items: by name (bytewise), then as received. */
static int
item_cmp(const void *a, const void *b)
{
	const WatchItem *x = (const WatchItem *) a;
	const WatchItem *y = (const WatchItem *) b;
	int			c;

	if (x->name == NULL || y->name == NULL)
		c = (x->name != NULL) - (y->name != NULL);
	else
		c = strcmp(x->name, y->name);
	return c != 0 ? c : (x->seq > y->seq) - (x->seq < y->seq);
}

/*
 * Apply items in the current transaction, skipping (and logging) bad ones.
 * They go in name order, the order in which the sync worker records its
 * outcomes too, so the two never wait for each other's rows in a cycle
 * (each object's own events keep their order).
 */
static void
apply_items(Reflector *r, WatchItem *items, int n, ApplyFn fn)
{
	int			i;

	if (n == 0)
		return;
	qsort(items, n, sizeof(WatchItem), item_cmp);
	/* the common case: everything at once, in one subtransaction */
	if (n > 1 && apply_protected(r, items, n, fn, false))
		return;
	for (i = 0; i < n; i++)
		(void) apply_protected(r, &items[i], 1, fn, true);
}

/* Forget the batch (its items and counters). */
static void
batch_reset(Reflector *r)
{
	r->nitems = 0;
	r->nbytes = 0;
	r->applied = r->skipped = r->errors = 0;
	r->has_error = false;
	MemoryContextReset(r->batch_cxt);
#ifdef __GLIBC__
	/*
	 * The pieces a large object went through (parser, jsonb, snapshot,
	 * tuple) below glibc's mmap threshold stay in its heap once freed; give
	 * them back, or a watcher keeps its peak for good.
	 */
	if (r->large)
		malloc_trim(0);
#endif
	r->large = false;
}

/* Whether the batch is full. */
static bool
batch_full(Reflector *r)
{
	return r->nitems >= WATCH_BATCH_MAX_ITEMS || r->nbytes >= WATCH_BATCH_MAX_BYTES;
}

/* Add one item to the batch (strings must live in batch_cxt). */
static void
batch_add(Reflector *r, const char *type, char *name, char *json, size_t len)
{
	WatchItem  *item = &r->items[r->nitems++];

	item->type = type;
	item->name = name;
	item->json = json;
	item->len = len;
	item->seq = r->nitems - 1;
	item->last_use = false;
	item->has_rv = false;
	item->rv = 0;
	r->nbytes += len;
	if (len >= LARGE_ITEM_BYTES)
		r->large = true;
}

/* Report what a committed batch did. */
static void
batch_report(Reflector *r, const char *state)
{
	paidb_worker_report(r->def->kind, state, r->rv, r->applied, 0, r->errors,
						r->has_error ? r->last_error : NULL);
	if (r->skipped > 0)
		elog(DEBUG1, "paidb %s: %llu events applied, %llu not ours",
			 paidb_worker_label(paidb_worker_names[r->def->kind]),
			 (unsigned long long) r->applied, (unsigned long long) r->skipped);
}

/*
 * Skip one event or item the API server sent that cannot be applied: a
 * WARNING naming it, and an error in status() (SPEC §8); the watch goes on.
 */
static void
pg_attribute_printf(3, 4)
note_skip(Reflector *r, const char *name, const char *fmt,...)
{
	char		why[192];
	va_list		args;

	va_start(args, fmt);
	vsnprintf(why, sizeof(why), fmt, args);
	va_end(args);
	ereport(WARNING,
			(errcode(ERRCODE_EXTERNAL_ROUTINE_EXCEPTION),
			 errmsg("paidb %s skipped %s \"%s\" from the API server: %s",
					paidb_worker_label(paidb_worker_names[r->def->kind]), r->def->what,
					name ? name : "(no name)", why)));
	snprintf(r->last_error, sizeof(r->last_error), "skipped %s \"%s\": %s",
			 r->def->what, name ? name : "(no name)", why);
	r->has_error = true;
	r->errors++;
}

/*
 * A resourceVersion that is not decimal: Kubernetes calls them opaque, but
 * every etcd-backed server's are decimal, and paidb stores its position
 * only as one (SPEC §5.2, docs/workers.md).  The event itself is applied;
 * the position stays where it was.  Logged and counted.
 */
static void
note_bad_rv(Reflector *r, const char *what, const char *rv)
{
	ereport(WARNING,
			(errcode(ERRCODE_EXTERNAL_ROUTINE_EXCEPTION),
			 errmsg("paidb %s: resourceVersion \"%.64s\" of a %s event is not a decimal number of at most 64 bits",
					paidb_worker_label(paidb_worker_names[r->def->kind]), rv ? rv : "", what),
			 errdetail("The watch position is not moved to it.")));
	snprintf(r->last_error, sizeof(r->last_error),
			 "resourceVersion \"%.64s\" of a %s event is not a decimal number of at most 64 bits", rv ? rv : "", what);
	r->has_error = true;
	r->errors++;
}

/* ---------------------------------------------------------------------
 * the framework watcher
 * ---------------------------------------------------------------------
 */

/* Collection path of frameworks in the namespace. */
static char *
frameworks_path(K8sClient *client)
{
	return k8s_path_frameworks(client, NULL, NULL);
}

/*
 * Free an item's large JSON text once it is parsed, if nothing retries it:
 * a 50 MB object is then not held twice (text and jsonb) while it is merged.
 */
static void
drop_item_text(WatchItem *item)
{
	if (item->last_use && item->len >= LARGE_ITEM_BYTES)
	{
		pfree(item->json);
		item->json = NULL;
	}
}

/* Merge one framework event (or adopt a listed framework on the first run). */
static ApplyOutcome
apply_framework(Reflector *r, WatchItem *item)
{
	bool		may_import = r->importing || (r->adopt_in_watch && strcmp(item->type, "DELETED") != 0);
	Jsonb	   *object;
	const char *result;

	/*
	 * A watch event is merged with the stored request, never the object's
	 * own spec (paidb_compose_snapshot): it is left out of the parse, which
	 * is about half of a framework's text.  An import keeps the object whole.
	 */
	if (may_import)
		object = jb_from_text(item->json, (int) item->len);
	else
		object = jb_from_text_without(item->json, (int) item->len, "spec");
	drop_item_text(item);

	if (may_import && paidb_import_framework_internal(object))
	{
		elog(DEBUG1, "paidb framework watcher: adopted framework \"%s\"",
			 item->name ? item->name : "");
		return APPLY_DONE;
	}
	/* known already (or not importing): merge it as a watch event */
	result = paidb_apply_watch_event_internal(item->type, object);
	elog(DEBUG2, "paidb framework watcher: %s \"%s\": %s", item->type,
		 item->name ? item->name : "", result);
	return APPLY_DONE;
}

/*
 * A framework the database had seen in the API server is no longer listed:
 * merge a DELETED event made from its stored snapshot (at the list's
 * resourceVersion, so it is not stale).
 */
static ApplyOutcome
reconcile_one(Reflector *r, WatchItem *item)
{
	Datum		values[3];
	SPITupleTable *tuptable;
	Datum		d;
	bool		isnull;
	Jsonb	   *snapshot;
	const char *result;

	values[0] = CStringGetTextDatum(item->name);
	values[1] = CStringGetTextDatum(item->json);
	values[2] = CStringGetTextDatum(paidb_cluster_name());
	if (SPI_execute_plan(plan_deleted_snapshot, values, NULL, false, 1) != SPI_OK_SELECT)
		elog(ERROR, "could not read the snapshot of framework \"%s\"", item->name);
	tuptable = SPI_tuptable;
	if (SPI_processed == 0)
	{
		SPI_freetuptable(tuptable);
		return APPLY_SKIPPED;	/* deleted meanwhile */
	}
	d = SPI_getbinval(tuptable->vals[0], tuptable->tupdesc, 1, &isnull);
	if (isnull)
	{
		SPI_freetuptable(tuptable);
		return APPLY_SKIPPED;
	}
	snapshot = DatumGetJsonbPCopy(d);
	SPI_freetuptable(tuptable);

	result = paidb_apply_watch_event_internal("DELETED", snapshot);
	ereport(LOG,
			(errmsg("paidb framework watcher: framework \"%s\" is no longer in the API server (%s)",
					item->name, result),
			 strcmp(result, "reset") == 0 ?
			 errdetail("It had not completed, so its request is queued to be created again.") :
			 strcmp(result, "deleted") == 0 ?
			 errdetail("It had completed, so it is marked as deleted from the API server.") : 0));
	return APPLY_DONE;
}

/* Apply DELETED to every framework seen before the list's RV but not listed. */
static void
reconcile(Reflector *r, const char *list_rv)
{
	Datum		values[2];
	char		nulls[2] = {' ', ' '};
	int64		rv = 0;
	Portal		portal;
	List	   *missing = NIL;
	ListCell   *lc;
	MemoryContext oldcxt;

	nulls[0] = parse_rv(list_rv, &rv) ? ' ' : 'n';
	values[0] = Int64GetDatum(rv);
	values[1] = CStringGetTextDatum(paidb_cluster_name());
	portal = SPI_cursor_open(NULL, plan_reconcile_candidates, values, nulls, true);
	for (;;)
	{
		uint64		k;

		SPI_cursor_fetch(portal, true, RECONCILE_FETCH);
		if (SPI_processed == 0)
			break;
		for (k = 0; k < SPI_processed; k++)
		{
			char	   *name = SPI_getvalue(SPI_tuptable->vals[k], SPI_tuptable->tupdesc, 1);
			bool		found = false;

			if (name == NULL || strlen(name) >= PAIDB_FRAMEWORK_NAME_SIZE)
				continue;
			if (r->seen != NULL)
				(void) hash_search(r->seen, name, HASH_FIND, &found);
			if (!found)
			{
				oldcxt = MemoryContextSwitchTo(r->list_cxt);
				missing = lappend(missing, pstrdup(name));
				MemoryContextSwitchTo(oldcxt);
			}
			pfree(name);
		}
		SPI_freetuptable(SPI_tuptable);
		CHECK_FOR_INTERRUPTS();
		paidb_exit_if_postmaster_died();
	}
	SPI_cursor_close(portal);

	if (missing == NIL)
		return;
	ereport(LOG,
			(errmsg("paidb framework watcher: %d frameworks are no longer in the API server",
					list_length(missing))));

	/* the batch's own items were applied already: reuse the array */
	r->nitems = 0;
	r->nbytes = 0;
	foreach(lc, missing)
	{
		batch_add(r, "DELETED", (char *) lfirst(lc), (char *) list_rv, 0);
		if (r->nitems >= WATCH_BATCH_MAX_ITEMS)
		{
			apply_items(r, r->items, r->nitems, reconcile_one);
			r->nitems = 0;
		}
	}
	apply_items(r, r->items, r->nitems, reconcile_one);
	r->nitems = 0;
}

/* ---------------------------------------------------------------------
 * the event watcher
 * ---------------------------------------------------------------------
 */

/* Collection path of core v1 Events in the namespace. */
static char *
events_path(K8sClient *client)
{
	return k8s_path_events(client, NULL, NULL);
}

/*
 * Split a task pod's name "<framework>-<task role>-<index>": the framework
 * is 32 lower-case letters or digits, the index decimal digits.
 */
static bool
parse_pod_name(const char *pod, char *framework, char **taskrole, char **index)
{
	size_t		len = strlen(pod);
	const char *last_dash;
	const char *p;
	int			i;

	if (len < POD_FRAMEWORK_NAME_LEN + 4 || pod[POD_FRAMEWORK_NAME_LEN] != '-')
		return false;
	for (i = 0; i < POD_FRAMEWORK_NAME_LEN; i++)
	{
		char		c = pod[i];

		if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9')))
			return false;
	}
	last_dash = strrchr(pod, '-');
	/* a task role of at least one character between the two dashes */
	if (last_dash <= pod + POD_FRAMEWORK_NAME_LEN + 1 || last_dash[1] == '\0')
		return false;
	for (p = last_dash + 1; *p; p++)
	{
		if (*p < '0' || *p > '9')
			return false;
	}
	memcpy(framework, pod, POD_FRAMEWORK_NAME_LEN);
	framework[POD_FRAMEWORK_NAME_LEN] = '\0';
	*taskrole = pnstrdup(pod + POD_FRAMEWORK_NAME_LEN + 1,
						 last_dash - (pod + POD_FRAMEWORK_NAME_LEN + 1));
	*index = pstrdup(last_dash + 1);
	return true;
}

/* Upsert a Kubernetes event about a task pod into paidb.framework_event. */
static ApplyOutcome
apply_event(Reflector *r, WatchItem *item)
{
	Jsonb	   *event;
	char	   *kind;
	char	   *pod;
	char	   *uid;
	char		framework[POD_FRAMEWORK_NAME_LEN + 1];
	char	   *taskrole;
	char	   *index;
	Datum		values[7];
	char		nulls[7] = {' ', ' ', ' ', ' ', ' ', ' ', ' '};
	int			ret;

	/* events expire: the row stays when the API server deletes one */
	if (strcmp(item->type, "DELETED") == 0)
		return APPLY_SKIPPED;

	event = jb_from_text(item->json, (int) item->len);
	drop_item_text(item);
	if (!JB_ROOT_IS_OBJECT(event))
		return APPLY_SKIPPED;
	kind = jb_get_cstring(&event->root, 2, (const char *[]) {"involvedObject", "kind"});
	pod = jb_get_cstring(&event->root, 2, (const char *[]) {"involvedObject", "name"});
	uid = jb_get_cstring(&event->root, 2, (const char *[]) {"metadata", "uid"});
	if (kind == NULL || strcmp(kind, "Pod") != 0 || pod == NULL || uid == NULL || uid[0] == '\0')
		return APPLY_SKIPPED;
	if (!parse_pod_name(pod, framework, &taskrole, &index))
		return APPLY_SKIPPED;

	values[0] = JsonbPGetDatum(event);
	values[1] = CStringGetTextDatum(uid);
	values[2] = CStringGetTextDatum(framework);
	values[3] = CStringGetTextDatum(taskrole);
	values[4] = CStringGetTextDatum(pod);
	/* an index beyond int4 still names the task; only the number is lost */
	if (strlen(index) <= 9)
		values[5] = Int32GetDatum(pg_strtoint32(index));
	else
	{
		values[5] = (Datum) 0;
		nulls[5] = 'n';
	}
	values[6] = CStringGetTextDatum(paidb_cluster_name());
	ret = SPI_execute_plan(plan_upsert_event, values, nulls, false, 0);
	if (ret != SPI_OK_INSERT)
		elog(ERROR, "could not store event \"%s\": %s", uid, SPI_result_code_string(ret));
	return APPLY_DONE;
}

/* ---------------------------------------------------------------------
 * LIST
 * ---------------------------------------------------------------------
 */

/* Move the page's received items into the batch (and the set of seen names). */
static void
batch_fill_from_list(Reflector *r, K8sList *list)
{
	MemoryContext oldcxt = MemoryContextSwitchTo(r->batch_cxt);

	while (!batch_full(r))
	{
		K8sListItem *item = k8s_list_next_item(list);

		if (item == NULL)
			break;
		if (r->seen != NULL && item->name != NULL && strlen(item->name) < PAIDB_FRAMEWORK_NAME_SIZE)
			(void) hash_search(r->seen, item->name, HASH_ENTER, NULL);
		if (item->oversized)
		{
			/* still listed, so not reconciled as gone: only not applied */
			note_skip(r, item->name, "the listed object has %zu bytes, more than paidb.max_object_bytes (%d)",
					  item->len, paidb_max_object_bytes);
			continue;
		}
		batch_add(r, "ADDED", item->name, item->json, item->len);
		if (item->resource_version != NULL)
		{
			WatchItem  *added = &r->items[r->nitems - 1];

			added->has_rv = k8s_rv_parse(item->resource_version, &added->rv);
		}
	}
	MemoryContextSwitchTo(oldcxt);
}

/*
 * Take out of the batch the listed frameworks whose resourceVersion is the
 * one last applied to their row: a re-list (after 410 Gone or a restart
 * without a usable position) then costs a lookup for each unchanged job
 * instead of a parse, a merge and a row update.
 *
 * Why nothing is lost: an object's resourceVersion changes with every
 * change to it, so the listed object is the one whose merge produced the
 * row's status; merging it again recomposes the same snapshot from the
 * stored request and the same status, and request_synced from the same
 * generations.  Only this watcher moves resource_version (and a reconcile
 * or a DELETED, after which the row is api_server_deleted or holds a
 * version no live object can have), so the comparison made here holds
 * until the batch is applied in the same transaction.  Rows marked deleted
 * are always merged, as are items without a decimal version.
 */
static void
drop_unchanged(Reflector *r)
{
	Datum	   *names;
	int			nnames = 0;
	int			i;
	int			kept;
	uint64		k;
	SPITupleTable *tuptable;

	if (r->importing || r->nitems == 0)
		return;
	qsort(r->items, r->nitems, sizeof(WatchItem), item_cmp);
	names = palloc(sizeof(Datum) * r->nitems);
	for (i = 0; i < r->nitems; i++)
		if (r->items[i].has_rv && r->items[i].name != NULL)
			names[nnames++] = CStringGetTextDatum(r->items[i].name);
	if (nnames == 0)
		return;
	{
		Datum		args[2];

		args[0] = PointerGetDatum(construct_array(names, nnames, TEXTOID, -1, false, TYPALIGN_INT));
		args[1] = CStringGetTextDatum(paidb_cluster_name());
		if (SPI_execute_plan(plan_stored_rvs, args, NULL, true, 0) != SPI_OK_SELECT)
			elog(ERROR, "could not read the stored resourceVersions of listed frameworks");
	}
	tuptable = SPI_tuptable;

	/* both in bytewise name order: walk them together */
	kept = 0;
	k = 0;
	for (i = 0; i < r->nitems; i++)
	{
		WatchItem  *item = &r->items[i];
		bool		unchanged = false;

		while (item->name != NULL && k < SPI_processed)
		{
			char	   *stored_name = SPI_getvalue(tuptable->vals[k], tuptable->tupdesc, 1);
			int			c = strcmp(stored_name, item->name);

			if (c < 0)
			{
				k++;
				continue;
			}
			if (c == 0 && item->has_rv)
			{
				bool		isnull;
				Datum		d = SPI_getbinval(tuptable->vals[k], tuptable->tupdesc, 2, &isnull);

				unchanged = !isnull && DatumGetInt64(d) == item->rv;
			}
			break;
		}
		if (unchanged)
			r->unchanged++;
		else
			r->items[kept++] = *item;
	}
	SPI_freetuptable(tuptable);
	r->nitems = kept;
}

/*
 * Apply the batch in one transaction.  When the LIST is over (list_rv not
 * NULL), the same transaction reconciles, records the resourceVersion to
 * watch from, and, on the first run, that the import is done.
 */
static void
apply_list_batch(Reflector *r, const char *list_rv)
{
	char		activity[96];

	snprintf(activity, sizeof(activity), "paidb %s: applying %d listed %s",
			 paidb_worker_label(paidb_worker_names[r->def->kind]), r->nitems, r->def->what);
	paidb_worker_begin(activity);
	prepare_plans();
	if (r->def->reconcile)
		drop_unchanged(r);
	apply_items(r, r->items, r->nitems, r->def->apply);
	if (list_rv != NULL && r->def->reconcile && r->nitems > 0)
	{
		/*
		 * The reconcile locks rows in name order in a transaction of its
		 * own, so no transaction takes two runs of names (a lock cycle with
		 * the sync worker); the position is stored with the reconcile.
		 */
		paidb_worker_commit();
		paidb_worker_begin(activity);
	}
	if (list_rv != NULL)
	{
		if (r->def->reconcile)
			reconcile(r, list_rv);
		put_resource_version(r, list_rv, true);
		put_installation(source_key(r), r->source);
		if (r->importing)
			put_installation(PAIDB_INITIAL_IMPORT_DONE, r->source);
	}
	paidb_worker_commit();
}

/*
 * LIST everything (paged), applying each item as ADDED (or importing it on
 * the first run); then reconcile and watch from the list's resourceVersion.
 */
static RoundOutcome
run_list(Reflector *r)
{
	char	   *continue_token = NULL;
	char	   *list_rv = NULL;
	uint64		total = 0;
	int			pages = 0;
	HASHCTL		ctl;

	MemoryContextReset(r->list_cxt);
	r->seen = NULL;
	r->unchanged = 0;
	r->importing = r->import_pending;
	if (r->def->reconcile)
	{
		memset(&ctl, 0, sizeof(ctl));
		ctl.keysize = PAIDB_FRAMEWORK_NAME_SIZE;
		ctl.entrysize = PAIDB_FRAMEWORK_NAME_SIZE;
		ctl.hcxt = r->list_cxt;
		r->seen = hash_create("paidb listed names", 1024, &ctl,
							  HASH_ELEM | HASH_STRINGS | HASH_CONTEXT);
	}
	report_state(r, r->importing ? "importing" : "listing");
	ereport(LOG,
			(errmsg("paidb %s: %s %s", paidb_worker_label(paidb_worker_names[r->def->kind]),
					r->importing ? "importing existing" : "listing", r->def->what)));

	for (;;)
	{
		K8sList    *list;
		const K8sResult *res;
		const char *next;
		MemoryContext oldcxt;

		CHECK_FOR_INTERRUPTS();
		MemoryContextReset(r->round_cxt);
		oldcxt = MemoryContextSwitchTo(r->round_cxt);
		list = k8s_list_start(r->client, r->def->collection_path(r->client),
							  continue_token, 0);
		MemoryContextSwitchTo(oldcxt);
		report_request(r);
		pages++;

		/* items are applied in batches as they arrive; the page is never held */
		for (;;)
		{
			int			rc;

			batch_fill_from_list(r, list);
			if (k8s_list_finished(list))
				break;
			if (batch_full(r))
			{
				total += r->nitems;
				apply_list_batch(r, NULL);
				batch_report(r, r->importing ? "importing" : "listing");
				batch_reset(r);
				continue;
			}
			rc = k8s_client_wait(r->client, -1, PG_WAIT_EXTENSION);
			if (rc & WL_LATCH_SET)
				ResetLatch(MyLatch);
			if (reflector_reload(r))
			{
				batch_reset(r);
				k8s_list_free(list);
				return ROUND_RETRY_NOW;
			}
		}
		res = k8s_list_result(list);
		if (res->kind == K8S_RESULT_OK && !k8s_rv_is_decimal(k8s_list_resource_version(list)))
		{
			ereport(WARNING,
					(errcode(ERRCODE_EXTERNAL_ROUTINE_EXCEPTION),
					 errmsg("paidb %s: the %s list has resourceVersion \"%.64s\", which is not a decimal number",
							paidb_worker_label(paidb_worker_names[r->def->kind]), r->def->what,
							k8s_list_resource_version(list)),
					 errdetail("A watch cannot be resumed from it; the list is treated as failed.")));
			note_failure(r, NULL, "LIST %s: resourceVersion \"%.64s\" is not a decimal number",
						 r->def->what, k8s_list_resource_version(list));
			batch_reset(r);
			k8s_list_free(list);
			return ROUND_BACKOFF;
		}
		if (res->kind != K8S_RESULT_OK)
		{
			if (continue_token != NULL && k8s_result_is_gone(res))
				ereport(LOG,
						(errmsg("paidb %s: the continue token of the %s list expired, listing again from the start",
								paidb_worker_label(paidb_worker_names[r->def->kind]), r->def->what)));
			else
				k8s_log_failure(res->kind == K8S_RESULT_HTTP_ERROR ? WARNING : LOG,
								k8s_list_request(list), NULL);
			note_failure(r, res, "LIST %s", r->def->what);
			/* what was applied stays (it was listed); no reconcile, no position */
			batch_reset(r);
			k8s_list_free(list);
			return ROUND_BACKOFF;
		}
		if (list_rv == NULL)
			list_rv = MemoryContextStrdup(r->list_cxt, k8s_list_resource_version(list));
		next = k8s_list_continue(list);
		if (next != NULL)
			next = MemoryContextStrdup(r->list_cxt, next);

		/* the rest of the page; the last batch of the last page ends the list */
		total += r->nitems;
		apply_list_batch(r, next == NULL ? list_rv : NULL);
		if (next == NULL)
		{
			if (r->rv)
				pfree(r->rv);
			r->rv = MemoryContextStrdup(paidb_worker_context, list_rv);
			r->need_list = false;
		}
		batch_report(r, r->importing ? "importing" : "listing");
		batch_reset(r);
		k8s_list_free(list);

		if (next == NULL)
			break;
		continue_token = (char *) next;
	}

	ereport(LOG,
			(errmsg("paidb %s: %s %llu %s in %d pages at resourceVersion \"%s\"",
					paidb_worker_label(paidb_worker_names[r->def->kind]),
					r->importing ? "imported" : "listed", (unsigned long long) total,
					r->def->what, pages, r->rv),
			 r->unchanged > 0 ?
			 errdetail("%llu of them were unchanged since they were last applied and were not applied again.",
					   (unsigned long long) r->unchanged) : 0));
	r->failures = 0;
	r->just_listed = true;
	r->import_pending = false;
	r->importing = false;
	r->adopt_in_watch = false;
	r->seen = NULL;
	MemoryContextReset(r->list_cxt);
	return ROUND_OK;
}

/* ---------------------------------------------------------------------
 * WATCH
 * ---------------------------------------------------------------------
 */

/*
 * Move queued watch events into the batch.  BOOKMARKs only move the
 * resourceVersion (the watch tracks it); an ERROR event ends the batch.
 */
static void
batch_fill_from_watch(Reflector *r, K8sWatch *watch, bool *error_event)
{
	MemoryContext oldcxt = MemoryContextSwitchTo(r->batch_cxt);

	while (!batch_full(r))
	{
		K8sWatchEvent *ev = k8s_watch_next_event(watch);

		if (ev == NULL)
			break;
		if (ev->in_progress)
		{
			/* said while it still streams; the event's end is not waited for */
			note_skip(r, ev->name, "the object of its %s event has %zu bytes, more than paidb.max_object_bytes (%d), and still streams",
					  ev->type_name, ev->object_len, paidb_max_object_bytes);
			continue;
		}
		if (ev->oversized && ev->told)
		{
			elog(LOG, "paidb %s: the %s event of \"%s\" that passed paidb.max_object_bytes ended after %zu bytes",
				 paidb_worker_label(paidb_worker_names[r->def->kind]), ev->type_name, ev->name ? ev->name : "(no name)",
				 ev->object_len);
			continue;
		}
		if (ev->problem != NULL)
		{
			note_skip(r, ev->name, "a %s event: %s", ev->type_name, ev->problem);
			continue;
		}
		if (ev->oversized)
		{
			note_skip(r, ev->name, "the object of its %s event has %zu bytes, more than paidb.max_object_bytes (%d)",
					  ev->type_name, ev->object_len, paidb_max_object_bytes);
			continue;
		}
		if (ev->rv_ignored)
			note_bad_rv(r, ev->type_name, ev->resource_version);
		switch (ev->type)
		{
			case K8S_WATCH_ADDED:
			case K8S_WATCH_MODIFIED:
			case K8S_WATCH_DELETED:
				batch_add(r, ev->type_name, ev->name, ev->object_json, ev->object_len);
				break;
			case K8S_WATCH_BOOKMARK:
				break;
			case K8S_WATCH_ERROR:
				if (ev->error_code == 410 || k8s_watch_expired(watch))
					ereport(LOG,
							(errmsg("paidb %s: resourceVersion \"%s\" of %s is too old, listing again",
									paidb_worker_label(paidb_worker_names[r->def->kind]), r->rv ? r->rv : "",
									r->def->what),
							 ev->error_message ? errdetail("The API server said: %s", ev->error_message) : 0));
				else
				{
					ereport(WARNING,
							(errcode(ERRCODE_EXTERNAL_ROUTINE_EXCEPTION),
							 errmsg("paidb %s: the watch of %s ended with an error %d, reason %s",
									paidb_worker_label(paidb_worker_names[r->def->kind]), r->def->what,
									ev->error_code, ev->error_reason ? ev->error_reason : "(none)"),
							 ev->error_message ? errdetail("The API server said: %s", ev->error_message) : 0));
					snprintf(r->failure, sizeof(r->failure), "WATCH %s: ERROR event %d %s%s%s",
							 r->def->what, ev->error_code,
							 ev->error_reason ? ev->error_reason : "",
							 ev->error_message ? ": " : "",
							 ev->error_message ? ev->error_message : "");
					*error_event = true;
				}
				break;
			case K8S_WATCH_UNKNOWN:
				break;			/* has a problem, skipped above */
		}
	}
	MemoryContextSwitchTo(oldcxt);
}

/* Apply the batch and store the watch's resourceVersion in one transaction. */
static void
apply_watch_batch(Reflector *r, const char *new_rv)
{
	char		activity[96];

	/* nothing to apply and nothing to remember (e.g. only an ERROR event) */
	if (r->nitems == 0 &&
		(new_rv == NULL || (r->rv != NULL && strcmp(new_rv, r->rv) == 0)))
		return;
	snprintf(activity, sizeof(activity), "paidb %s: applying %d %s events",
			 paidb_worker_label(paidb_worker_names[r->def->kind]), r->nitems, r->def->what);
	paidb_worker_begin(activity);
	prepare_plans();
	apply_items(r, r->items, r->nitems, r->def->apply);
	if (new_rv != NULL && (r->rv == NULL || strcmp(new_rv, r->rv) != 0))
		put_resource_version(r, new_rv, false);
	paidb_worker_commit();

	if (new_rv != NULL)
	{
		char	   *copy = MemoryContextStrdup(paidb_worker_context, new_rv);

		if (r->rv)
			pfree(r->rv);
		r->rv = copy;
	}
}

/* WATCH from r->rv until the stream ends; apply events in batches. */
static RoundOutcome
run_watch(Reflector *r)
{
	K8sWatchOptions opts;
	K8sWatch   *watch;
	K8sWatchEnd end;
	const K8sResult *res;
	TimestampTz started = GetCurrentTimestamp();
	uint64		events = 0;
	bool		error_event = false;
	bool		fresh = r->just_listed; /* the first watch after a LIST */
	MemoryContext oldcxt;

	r->just_listed = false;
	MemoryContextReset(r->round_cxt);
	oldcxt = MemoryContextSwitchTo(r->round_cxt);
	k8s_watch_options_init(&opts);
	opts.resource_version = r->rv;
	watch = k8s_watch_start(r->client, r->def->collection_path(r->client), &opts);
	MemoryContextSwitchTo(oldcxt);
	report_request(r);
	report_state(r, "watching");
	elog(DEBUG1, "paidb %s: watching %s from resourceVersion \"%s\" for %d s",
		 paidb_worker_label(paidb_worker_names[r->def->kind]), r->def->what, r->rv ? r->rv : "",
		 k8s_watch_timeout_s(watch));

	for (;;)
	{
		int			rc = k8s_client_wait(r->client, -1, PG_WAIT_EXTENSION);

		if (rc & WL_LATCH_SET)
			ResetLatch(MyLatch);
		if (reflector_reload(r))
		{
			k8s_watch_free(watch);
			return ROUND_RETRY_NOW;
		}
		while (k8s_watch_pending(watch) > 0)
		{
			const char *rv;
			char	   *new_rv;

			batch_fill_from_watch(r, watch, &error_event);
			rv = k8s_watch_resource_version(watch);
			new_rv = rv ? MemoryContextStrdup(r->batch_cxt, rv) : NULL;
			events += r->nitems;
			apply_watch_batch(r, new_rv);
			batch_report(r, "watching");
			batch_reset(r);
			if (error_event)
				break;
		}
		if (error_event || k8s_watch_end(watch) != K8S_WATCH_OPEN)
			break;
	}

	end = k8s_watch_end(watch);
	res = k8s_watch_result(watch);
	if (k8s_watch_expired(watch))
	{
		long		lasted = TimestampDifferenceMilliseconds(started, GetCurrentTimestamp());

		if (end == K8S_WATCH_FAILED)
			ereport(LOG,
					(errmsg("paidb %s: resourceVersion \"%s\" of %s is too old, listing again",
							paidb_worker_label(paidb_worker_names[r->def->kind]), r->rv ? r->rv : "", r->def->what)));
		k8s_watch_free(watch);
		r->need_list = true;
		r->failures = 0;

		/*
		 * The first re-list goes at once; a server that answers every watch
		 * of a fresh list with 410 again gets them with a backoff (0.8 s
		 * doubling to 30 s, jitter), not hundreds a second.
		 */
		if (!fresh || events > 0 || lasted >= RELIST_HEALTHY_MS)
			r->relists = 0;
		if (++r->relists > 1)
		{
			note_failure(r, NULL, "WATCH %s: 410 Gone %d times in a row right after listing",
						 r->def->what, r->relists);
			r->failures = r->relists - 2;	/* the caller counts this one */
			return ROUND_BACKOFF;
		}
		return ROUND_OK;
	}

	if (events > 0)
		r->failures = 0;		/* it worked for a while */
	if (error_event)
	{
		k8s_watch_free(watch);
		paidb_worker_report(r->def->kind, NULL, NULL, 0, 0, 1, r->failure);
		r->retry_after_ms = -1;
		return ROUND_BACKOFF;
	}
	if (end == K8S_WATCH_CLOSED || end == K8S_WATCH_OPEN)
	{
		long		lasted = TimestampDifferenceMilliseconds(started, GetCurrentTimestamp());

		k8s_watch_free(watch);
		if (events == 0 && lasted < WATCH_MIN_HEALTHY_MS)
		{
			/* closed at once: don't hammer a server that does that */
			note_failure(r, NULL, "WATCH %s closed after %ld ms", r->def->what, lasted);
			return ROUND_BACKOFF;
		}
		elog(DEBUG1, "paidb %s: the watch of %s ended after %ld ms, watching again",
			 paidb_worker_label(paidb_worker_names[r->def->kind]), r->def->what, lasted);
		r->adopt_in_watch = false;	/* caught up with what the server had */
		return ROUND_OK;
	}

	/* cut, failed or bad data: back off, then watch again from r->rv */
	k8s_log_failure(res->kind == K8S_RESULT_HTTP_ERROR ? WARNING : LOG,
					k8s_watch_request(watch), NULL);
	note_failure(r, res, "WATCH %s %s", r->def->what, k8s_watch_end_name(end));
	k8s_watch_free(watch);
	return ROUND_BACKOFF;
}

/* ---------------------------------------------------------------------
 * main loop
 * ---------------------------------------------------------------------
 */

/*
 * A database on another timeline than when the watcher last ran was promoted
 * or restored (point-in-time recovery, or a failover that lost the
 * asynchronous window): it may have forgotten frameworks that the API server
 * runs.  Adopt the frameworks it does not know, as on the first run, while
 * resuming the watch (and on a LIST) instead of deleting them as orphans.
 * Called inside load_state's transaction; true if the timeline changed.
 */
static bool
check_timeline(Reflector *r)
{
	Datum		arg = CStringGetTextDatum(cluster_key(PAIDB_WATCH_TIMELINE));
	char	   *stored = spi_single_text(plan_get_installation, &arg, CurrentMemoryContext);
	char	   *current = psprintf("%u", GetWALInsertionTimeLine());

	bool		moved = stored != NULL && strcmp(stored, current) != 0;

	if (moved)
		ereport(LOG,
				(errmsg("paidb %s: the database moved from timeline %s to %s, adopting the %s it does not know",
						paidb_worker_label(paidb_worker_names[r->def->kind]), stored, current, r->def->what),
				 errdetail("A promoted or restored database may have lost recent jobs that the API server still runs; they are imported, not deleted.")));
	if (stored == NULL || moved)
		put_installation(PAIDB_WATCH_TIMELINE, current);
	return moved;
}

/* Read where the watcher stands from the database. */
static void
load_state(Reflector *r)
{
	Datum		arg;
	char	   *rv;
	char	   *stored_source;
	char	   *import_done = NULL;
	bool		new_timeline = false;

	paidb_worker_begin("paidb: reading the watch state");
	prepare_plans();
	arg = CStringGetTextDatum(cluster_key(r->def->watcher));
	rv = spi_single_text(plan_get_rv, &arg, paidb_worker_context);
	arg = CStringGetTextDatum(cluster_key(source_key(r)));
	stored_source = spi_single_text(plan_get_installation, &arg, paidb_worker_context);
	if (r->def->adopt_on_first_run)
	{
		arg = CStringGetTextDatum(cluster_key(PAIDB_INITIAL_IMPORT_DONE));
		import_done = spi_single_text(plan_get_installation, &arg, paidb_worker_context);
		new_timeline = check_timeline(r);
	}
	paidb_worker_commit();

	/* the import belongs to a target: another one is a first run again */
	r->import_pending = r->def->adopt_on_first_run &&
		(import_done == NULL || strcmp(import_done, r->source) != 0);
	if (r->import_pending && import_done != NULL)
		ereport(LOG,
				(errmsg("paidb %s: the API server or namespace is not the one imported from, importing its %s",
						paidb_worker_label(paidb_worker_names[r->def->kind]), r->def->what)));
	r->rv = rv;
	r->need_list = (rv == NULL || r->import_pending);
	/* after a promotion or a restore: adopt while resuming, and on a LIST */
	r->adopt_in_watch = new_timeline;
	r->import_pending |= new_timeline;
	if (!r->need_list && (stored_source == NULL || strcmp(stored_source, r->source) != 0))
	{
		ereport(LOG,
				(errmsg("paidb %s: the stored resourceVersion belongs to another API server or namespace, listing %s again",
						paidb_worker_label(paidb_worker_names[r->def->kind]), r->def->what)));
		r->need_list = true;
	}
	if (!r->need_list)
		ereport(LOG,
				(errmsg("paidb %s: resuming the watch of %s at resourceVersion \"%s\"",
						paidb_worker_label(paidb_worker_names[r->def->kind]), r->def->what, r->rv)));
}

/* Run a watcher for ever. */
static void
reflector_main(const WatcherDef *def)
{
	Reflector  *r;

	MemoryContextSwitchTo(paidb_worker_context);
	r = palloc0(sizeof(Reflector));
	r->def = def;
	r->retry_after_ms = -1;
	r->items = palloc(sizeof(WatchItem) * WATCH_BATCH_MAX_ITEMS);
	r->batch_cxt = AllocSetContextCreate(paidb_worker_context, "paidb watch batch",
										 ALLOCSET_DEFAULT_SIZES);
	r->item_cxt = AllocSetContextCreate(paidb_worker_context, "paidb watch item",
										ALLOCSET_DEFAULT_SIZES);
	r->list_cxt = AllocSetContextCreate(paidb_worker_context, "paidb watch list",
										ALLOCSET_DEFAULT_SIZES);
	r->round_cxt = AllocSetContextCreate(paidb_worker_context, "paidb watch round",
										 ALLOCSET_SMALL_SIZES);
	r->client = k8s_client_create(paidb_worker_context);
	compute_source(r, r->source);
	load_state(r);

	for (;;)
	{
		RoundOutcome outcome;

		CHECK_FOR_INTERRUPTS();
		(void) reflector_reload(r);
		if (r->need_state)
		{
			r->need_state = false;
			load_state(r);
			r->need_list = true;
		}
		outcome = r->need_list ? run_list(r) : run_watch(r);
		MemoryContextSwitchTo(paidb_worker_context);
		if (outcome == ROUND_BACKOFF)
		{
			r->failures++;
			backoff_sleep(r);
		}
	}
}

/*
 * What the framework watcher keeps of the snapshots it packed: 32 MB, a
 * few thousand typical running jobs (~7 KB each) or a few of 1,000 tasks
 */
#define PAIDB_WATCHER_SNAPSHOT_CACHE_BYTES	(32 * 1024 * 1024)
/* freed heap kept before glibc trims it, and the size glibc maps apart */
#define PAIDB_WATCHER_TRIM_THRESHOLD		(64 * 1024 * 1024)
#define PAIDB_WATCHER_MMAP_THRESHOLD		(32 * 1024 * 1024)

/* The framework watcher's entry point. */
void
paidb_framework_watcher_main(Datum main_arg)
{
	paidb_worker_startup(PAIDB_WORKER_FRAMEWORK_WATCHER);
#ifdef __GLIBC__
	/*
	 * Each batch frees what it parsed and packed, and the next allocates it
	 * again: with glibc's defaults the heap shrinks and regrows (or blocks
	 * are mapped and unmapped) every batch, and the page faults took ~12% of
	 * the watcher's CPU per event (docs/design.md).  Keep freed memory up to
	 * a bound; batch_reset still gives back what a large object left.
	 */
	mallopt(M_TRIM_THRESHOLD, PAIDB_WATCHER_TRIM_THRESHOLD);
	mallopt(M_MMAP_THRESHOLD, PAIDB_WATCHER_MMAP_THRESHOLD);
#endif
	/* each update of a job unpacks what the previous one packed */
	paidb_snapshot_cache_enable(PAIDB_WATCHER_SNAPSHOT_CACHE_BYTES);
	reflector_main(&framework_watcher);
}

/* The event watcher's entry point. */
void
paidb_event_watcher_main(Datum main_arg)
{
	paidb_worker_startup(PAIDB_WORKER_EVENT_WATCHER);
	reflector_main(&event_watcher);
}
