/*
 * paidb_test.c — test-only SQL functions that exercise paidb's Kubernetes
 * client (src/k8s_client.c, src/k8s_watch.c), for test/t/010_k8s_client.pl.
 *
 * They send any verb to any path with paidb's credentials, so they are not
 * in the production library: this module is built and installed only by the
 * tests (test/lib/common.sh), with its own build of the client sources
 * (PAIDB_TEST_HOOKS adds the accessors only tests need; see the Makefile).
 * paidb must be loaded first (session_preload_libraries = 'paidb'): the
 * client reads paidb's settings.  A test declares the functions it needs:
 *
 *		CREATE FUNCTION paidb_test_k8s_request(text, text, text DEFAULT NULL,
 *			int DEFAULT 0) RETURNS jsonb
 *			AS '$libdir/paidb_test', 'paidb_test_k8s_request' LANGUAGE C;
 *
 * They use one client per session, kept in TopMemoryContext like a worker
 * keeps its own, and re-read the settings at each call (as a worker does
 * after SIGHUP).  Results are jsonb documents; they never contain the bearer
 * token.
 */
#include "postgres.h"

#include "fmgr.h"
#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "portability/instr_time.h"
#include "catalog/pg_type.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/fmgrprotos.h"
#include "utils/json.h"
#include "utils/memutils.h"
#include "utils/wait_event.h"

#include "jsonb_util.h"
#include "k8s_client.h"
#include "k8s_watch.h"

PG_MODULE_MAGIC;

PG_FUNCTION_INFO_V1(paidb_test_k8s_request);
PG_FUNCTION_INFO_V1(paidb_test_k8s_path);
PG_FUNCTION_INFO_V1(paidb_test_k8s_list);
PG_FUNCTION_INFO_V1(paidb_test_k8s_watch);
PG_FUNCTION_INFO_V1(paidb_test_k8s_concurrent);
PG_FUNCTION_INFO_V1(paidb_test_k8s_in_flight);
PG_FUNCTION_INFO_V1(paidb_test_k8s_reset);
PG_FUNCTION_INFO_V1(paidb_test_k8s_config);
PG_FUNCTION_INFO_V1(paidb_test_k8s_retry_after);
PG_FUNCTION_INFO_V1(paidb_test_jsonb_without);
PG_FUNCTION_INFO_V1(paidb_test_jsonb_print);
PG_FUNCTION_INFO_V1(paidb_test_jsonb_replaced);
PG_FUNCTION_INFO_V1(paidb_test_jsonb_selected);

/* The session's client */
static K8sClient *test_client = NULL;

/* The session's client, created on first use, settings re-read */
static K8sClient *
test_client_get(void)
{
	if (test_client == NULL)
		test_client = k8s_client_create(TopMemoryContext);
	else
		k8s_client_reload(test_client);
	return test_client;
}

/* Text argument n as a C string, or NULL */
static char *
test_text_arg(FunctionCallInfo fcinfo, int n)
{
	if (PG_NARGS() <= n || PG_ARGISNULL(n))
		return NULL;
	return text_to_cstring(PG_GETARG_TEXT_PP(n));
}

/* Integer argument n, or dflt when absent or NULL */
static int32
test_int_arg(FunctionCallInfo fcinfo, int n, int32 dflt)
{
	if (PG_NARGS() <= n || PG_ARGISNULL(n))
		return dflt;
	return PG_GETARG_INT32(n);
}

/* Append "key": string-or-null */
static void
test_json_str(StringInfo buf, const char *key, const char *value)
{
	escape_json(buf, key);
	appendStringInfoChar(buf, ':');
	if (value)
		escape_json(buf, value);
	else
		appendStringInfoString(buf, "null");
}

/* Append the fields of a result (no braces) */
static void
test_json_result_fields(StringInfo buf, const K8sResult *res, bool with_body)
{
	test_json_str(buf, "kind", k8s_result_kind_name(res->kind));
	appendStringInfo(buf, ",\"http_status\":%ld", res->http_status);
	appendStringInfoChar(buf, ',');
	test_json_str(buf, "reason", res->reason);
	appendStringInfoChar(buf, ',');
	test_json_str(buf, "message", res->message);
	appendStringInfo(buf, ",\"status_code\":%d,\"retry_after_ms\":%ld,\"curl_code\":%d,"
					 "\"gone\":%s,\"retryable\":%s,\"body_len\":%zu",
					 res->status_code, res->retry_after_ms, res->curl_code,
					 k8s_result_is_gone(res) ? "true" : "false",
					 k8s_result_is_retryable(res) ? "true" : "false",
					 res->body_len);
	if (with_body)
	{
		appendStringInfoChar(buf, ',');
		test_json_str(buf, "body", res->body);
	}
}

/* Return a jsonb Datum parsed from the text in buf */
static Datum
test_jsonb(StringInfo buf)
{
	return DirectFunctionCall1(jsonb_in, CStringGetDatum(buf->data));
}

/* Milliseconds on a monotonic clock */
static int64
test_now_ms(void)
{
	instr_time	now;

	INSTR_TIME_SET_CURRENT(now);
	return (int64) INSTR_TIME_GET_MILLISEC(now);
}

/*
 * paidb_test_k8s_request(verb text, path text, body text, timeout_ms int)
 * returns jsonb: one blocking request.  verb: get, create, merge-patch,
 * delete (body: propagation policy or NULL), put, post (raw JSON body).
 */
Datum
paidb_test_k8s_request(PG_FUNCTION_ARGS)
{
	char	   *verb = test_text_arg(fcinfo, 0);
	char	   *path = test_text_arg(fcinfo, 1);
	char	   *body = test_text_arg(fcinfo, 2);
	int32		timeout_ms = test_int_arg(fcinfo, 3, 0);
	K8sClient  *client;
	K8sRequest *req;
	StringInfoData buf;
	Datum		result;

	if (verb == NULL || path == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("verb and path must not be null")));
	client = test_client_get();

	if (strcmp(verb, "get") == 0)
		req = k8s_new_get(client, path);
	else if (strcmp(verb, "create") == 0 || strcmp(verb, "post") == 0)
		req = k8s_new_create(client, path, body ? body : "{}");
	else if (strcmp(verb, "merge-patch") == 0)
		req = k8s_new_merge_patch(client, path, body ? body : "{}");
	else if (strcmp(verb, "delete") == 0)
		req = k8s_new_delete(client, path, body);
	else if (strcmp(verb, "put") == 0)
		req = k8s_request_new(client, K8S_PUT, path, "application/json",
							  body ? body : "{}", body ? strlen(body) : 2);
	else
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("unknown verb \"%s\"", verb),
				 errhint("Use get, create, post, merge-patch, delete or put.")));
	if (timeout_ms > 0)
		k8s_request_set_timeout(req, timeout_ms);

	/* on ERROR (cancel, timeout) k8s_perform_request frees the request */
	k8s_perform_request(req, PG_WAIT_EXTENSION);

	initStringInfo(&buf);
	appendStringInfoChar(&buf, '{');
	test_json_result_fields(&buf, k8s_request_result(req), true);
	appendStringInfoString(&buf, ",\"method\":");
	escape_json(&buf, k8s_request_method_name(req));
	appendStringInfoString(&buf, ",\"path\":");
	escape_json(&buf, k8s_request_path(req));
	appendStringInfoChar(&buf, '}');

	/* the log line a worker would write for a failure */
	if (k8s_request_result(req)->kind != K8S_RESULT_OK)
		k8s_log_failure(LOG, req, "test-object");
	k8s_request_free(req);

	result = test_jsonb(&buf);
	PG_RETURN_DATUM(result);
}

/*
 * paidb_test_k8s_path(kind text, name text, ns text, qkey text, qvalue text)
 * returns text: the path builders (kind: frameworks, secrets,
 * priorityclasses, events), with one query parameter appended if given.
 */
Datum
paidb_test_k8s_path(PG_FUNCTION_ARGS)
{
	char	   *kind = test_text_arg(fcinfo, 0);
	char	   *name = test_text_arg(fcinfo, 1);
	char	   *ns = test_text_arg(fcinfo, 2);
	char	   *qkey = test_text_arg(fcinfo, 3);
	char	   *qvalue = test_text_arg(fcinfo, 4);
	K8sClient  *client = test_client_get();
	char	   *path;

	if (kind == NULL)
		PG_RETURN_NULL();
	if (strcmp(kind, "frameworks") == 0)
		path = k8s_path_frameworks(client, ns, name);
	else if (strcmp(kind, "secrets") == 0)
		path = k8s_path_secrets(client, ns, name);
	else if (strcmp(kind, "priorityclasses") == 0)
		path = k8s_path_priorityclasses(name);
	else if (strcmp(kind, "events") == 0)
		path = k8s_path_events(client, ns, name);
	else
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("unknown kind \"%s\"", kind)));
	if (qkey != NULL)
		path = k8s_path_add_query(path, qkey, qvalue);
	PG_RETURN_TEXT_P(cstring_to_text(path));
}

/*
 * paidb_test_k8s_list(path text, page_limit int, max_pages int,
 * continue_token text) returns jsonb: pages through a collection, taking
 * items one by one as they are parsed.
 */
Datum
paidb_test_k8s_list(PG_FUNCTION_ARGS)
{
	char	   *path = test_text_arg(fcinfo, 0);
	int32		limit = test_int_arg(fcinfo, 1, 0);
	int32		max_pages = test_int_arg(fcinfo, 2, 1000);
	char	   *cont = test_text_arg(fcinfo, 3);
	K8sClient  *client;
	K8sList    *volatile list = NULL;
	StringInfoData names;
	StringInfoData sizes;
	StringInfoData buf;
	int			pages = 0;
	char	   *last_rv = NULL;
	char	   *last_cont = NULL;
	int64		remaining = -1;
	bool		first_item = true;
	Datum		result;

	if (path == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("path must not be null")));
	client = test_client_get();
	initStringInfo(&names);
	initStringInfo(&sizes);
	initStringInfo(&buf);

	PG_TRY();
	{
		for (;;)
		{
			K8sListItem *item;
			const K8sResult *res;

			list = k8s_list_start(client, path, cont, limit);
			pages++;
			while ((item = k8s_list_next_item_wait(list, PG_WAIT_EXTENSION)) != NULL)
			{
				if (!first_item)
					appendStringInfoChar(&names, ',');
				first_item = false;
				if (item->name)
					escape_json(&names, item->name);
				else
					appendStringInfoString(&names, "null");
				k8s_list_item_free(item);
			}
			res = k8s_list_result(list);
			if (pages > 1)
				appendStringInfoChar(&sizes, ',');
			appendStringInfo(&sizes, "%d", k8s_list_item_count(list));
			if (res->kind != K8S_RESULT_OK)
			{
				appendStringInfoChar(&buf, '{');
				test_json_result_fields(&buf, res, false);
				appendStringInfoChar(&buf, '}');
				k8s_log_failure(LOG, k8s_list_request(list), "test-list");
				k8s_list_free(list);
				list = NULL;
				break;
			}
			last_rv = k8s_list_resource_version(list) ?
				pstrdup(k8s_list_resource_version(list)) : NULL;
			last_cont = k8s_list_continue(list) ? pstrdup(k8s_list_continue(list)) : NULL;
			remaining = k8s_list_remaining_item_count(list);
			k8s_list_free(list);
			list = NULL;
			cont = last_cont;
			if (cont == NULL || pages >= max_pages)
			{
				appendStringInfoString(&buf, "{\"kind\":\"ok\"}");
				break;
			}
		}
	}
	PG_CATCH();
	{
		if (list != NULL)
			k8s_list_free(list);
		PG_RE_THROW();
	}
	PG_END_TRY();

	{
		StringInfoData out;

		initStringInfo(&out);
		appendStringInfo(&out, "{\"pages\":%d,\"names\":[%s],\"page_sizes\":[%s],",
						 pages, names.data, sizes.data);
		test_json_str(&out, "resource_version", last_rv);
		appendStringInfoChar(&out, ',');
		test_json_str(&out, "continue", last_cont);
		appendStringInfo(&out, ",\"remaining\":%lld,\"result\":%s,\"in_flight\":%d}",
						 (long long) remaining, buf.data, k8s_client_in_flight(client));
		result = test_jsonb(&out);
	}
	PG_RETURN_DATUM(result);
}

/* Append one watch event as a JSON object */
static void
test_json_event(StringInfo buf, const K8sWatchEvent *ev)
{
	appendStringInfoChar(buf, '{');
	test_json_str(buf, "type", ev->type_name);
	appendStringInfoChar(buf, ',');
	test_json_str(buf, "name", ev->name);
	appendStringInfoChar(buf, ',');
	test_json_str(buf, "rv", ev->resource_version);
	if (ev->type == K8S_WATCH_ERROR)
	{
		appendStringInfo(buf, ",\"code\":%d,", ev->error_code);
		test_json_str(buf, "reason", ev->error_reason);
		appendStringInfoChar(buf, ',');
		test_json_str(buf, "message", ev->error_message);
	}
	appendStringInfo(buf, ",\"len\":%zu,\"object\":%s}", ev->object_len,
					 ev->object_json ? ev->object_json : "null");
}

/*
 * paidb_test_k8s_watch(path text, resource_version text, max_events int,
 * timeout_s int, wall_ms int, bookmarks bool, idle_s int, jitter bool)
 * returns jsonb: watches until max_events events (0: no limit) were taken,
 * the stream ended, or wall_ms passed.
 */
Datum
paidb_test_k8s_watch(PG_FUNCTION_ARGS)
{
	char	   *path = test_text_arg(fcinfo, 0);
	char	   *rv = test_text_arg(fcinfo, 1);
	int32		max_events = test_int_arg(fcinfo, 2, 0);
	int32		timeout_s = test_int_arg(fcinfo, 3, 0);
	int32		wall_ms = test_int_arg(fcinfo, 4, 10000);
	bool		bookmarks = (PG_NARGS() > 5 && !PG_ARGISNULL(5)) ? PG_GETARG_BOOL(5) : true;
	int32		idle_s = test_int_arg(fcinfo, 6, 0);
	bool		jitter = (PG_NARGS() > 7 && !PG_ARGISNULL(7)) ? PG_GETARG_BOOL(7) : false;
	K8sClient  *client;
	K8sWatch   *volatile watch = NULL;
	K8sWatchOptions opts;
	StringInfoData events;
	StringInfoData out;
	const char *stop = NULL;
	int			nevents = 0;
	int64		deadline;
	Datum		result;

	if (path == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("path must not be null")));
	client = test_client_get();
	k8s_watch_options_init(&opts);
	opts.resource_version = rv;
	opts.timeout_s = timeout_s;
	opts.allow_bookmarks = bookmarks;
	opts.idle_timeout_s = idle_s;
	opts.jitter = jitter;
	initStringInfo(&events);
	initStringInfo(&out);
	deadline = test_now_ms() + wall_ms;

	PG_TRY();
	{
		watch = k8s_watch_start(client, path, &opts);
		for (;;)
		{
			K8sWatchEvent *ev;
			int64		left;
			int			rc;

			while (stop == NULL && (ev = k8s_watch_next_event(watch)) != NULL)
			{
				if (nevents > 0)
					appendStringInfoChar(&events, ',');
				test_json_event(&events, ev);
				k8s_watch_event_free(ev);
				nevents++;
				if (max_events > 0 && nevents >= max_events)
					stop = "max_events";
			}
			if (stop == NULL && k8s_watch_end(watch) != K8S_WATCH_OPEN)
				stop = "end";
			left = deadline - test_now_ms();
			if (stop == NULL && left <= 0)
				stop = "wall";
			if (stop != NULL)
				break;
			rc = k8s_client_wait(client, (long) left, PG_WAIT_EXTENSION);
			if (rc & WL_LATCH_SET)
				ResetLatch(MyLatch);
		}

		appendStringInfo(&out, "{\"events\":[%s],\"count\":%d,", events.data, nevents);
		test_json_str(&out, "stop", stop);
		appendStringInfoChar(&out, ',');
		test_json_str(&out, "end", k8s_watch_end_name(k8s_watch_end(watch)));
		appendStringInfo(&out, ",\"expired\":%s,\"timeout_s\":%d,",
						 k8s_watch_expired(watch) ? "true" : "false",
						 k8s_watch_timeout_s(watch));
		test_json_str(&out, "last_rv", k8s_watch_resource_version(watch));
		appendStringInfoString(&out, ",\"result\":{");
		test_json_result_fields(&out, k8s_watch_result(watch), false);
		appendStringInfoChar(&out, '}');
		if (k8s_watch_end(watch) != K8S_WATCH_OPEN && k8s_watch_end(watch) != K8S_WATCH_CLOSED)
			k8s_log_failure(LOG, k8s_watch_request(watch), "test-watch");
		k8s_watch_free(watch);
		watch = NULL;
		appendStringInfo(&out, ",\"in_flight\":%d}", k8s_client_in_flight(client));
	}
	PG_CATCH();
	{
		if (watch != NULL)
			k8s_watch_free(watch);
		PG_RE_THROW();
	}
	PG_END_TRY();

	result = test_jsonb(&out);
	PG_RETURN_DATUM(result);
}

/*
 * paidb_test_k8s_concurrent(path text, n int, timeout_ms int) returns jsonb:
 * n GETs submitted at once and collected with k8s_client_next_done.
 */
Datum
paidb_test_k8s_concurrent(PG_FUNCTION_ARGS)
{
	char	   *path = test_text_arg(fcinfo, 0);
	int32		n = test_int_arg(fcinfo, 1, 1);
	int32		timeout_ms = test_int_arg(fcinfo, 2, 0);
	K8sClient  *client;
	K8sRequest **volatile reqs;
	int			kinds[K8S_RESULT_TIMEOUT + 1] = {0};
	int			done = 0;
	int			max_in_flight = 0;
	int64		start;
	StringInfoData out;
	Datum		result;
	int			i;

	if (path == NULL || n < 1 || n > 1000)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("path must not be null and n between 1 and 1000")));
	client = test_client_get();
	reqs = palloc0(sizeof(K8sRequest *) * n);
	start = test_now_ms();

	PG_TRY();
	{
		for (i = 0; i < n; i++)
		{
			reqs[i] = k8s_new_get(client, path);
			k8s_request_set_user_data(reqs[i], &reqs[i]);
			if (timeout_ms > 0)
				k8s_request_set_timeout(reqs[i], timeout_ms);
			k8s_request_submit(reqs[i]);
		}
		max_in_flight = k8s_client_in_flight(client);
		while (done < n)
		{
			K8sRequest *req;
			int			rc = k8s_client_wait(client, 1000, PG_WAIT_EXTENSION);

			if (rc & WL_LATCH_SET)
				ResetLatch(MyLatch);
			while ((req = k8s_client_next_done(client)) != NULL)
			{
				K8sRequest **slot = (K8sRequest **) k8s_request_user_data(req);

				kinds[k8s_request_result(req)->kind]++;
				k8s_request_free(req);
				*slot = NULL;
				done++;
			}
		}
	}
	PG_CATCH();
	{
		for (i = 0; i < n; i++)
		{
			if (reqs[i] != NULL)
				k8s_request_free(reqs[i]);
		}
		PG_RE_THROW();
	}
	PG_END_TRY();

	initStringInfo(&out);
	appendStringInfo(&out, "{\"n\":%d,\"ok\":%d,\"http_error\":%d,\"transport\":%d,"
					 "\"timeout\":%d,\"max_in_flight\":%d,\"elapsed_ms\":%lld,\"in_flight\":%d}",
					 n, kinds[K8S_RESULT_OK], kinds[K8S_RESULT_HTTP_ERROR],
					 kinds[K8S_RESULT_TRANSPORT], kinds[K8S_RESULT_TIMEOUT],
					 max_in_flight, (long long) (test_now_ms() - start),
					 k8s_client_in_flight(client));
	result = test_jsonb(&out);
	PG_RETURN_DATUM(result);
}

/* paidb_test_k8s_in_flight() returns int: requests of the session's client in flight */
Datum
paidb_test_k8s_in_flight(PG_FUNCTION_ARGS)
{
	PG_RETURN_INT32(test_client ? k8s_client_in_flight(test_client) : 0);
}

/* paidb_test_k8s_reset() returns void: destroy the session's client */
Datum
paidb_test_k8s_reset(PG_FUNCTION_ARGS)
{
	if (test_client != NULL)
	{
		K8sClient  *c = test_client;

		test_client = NULL;
		k8s_client_destroy(c);
	}
	PG_RETURN_VOID();
}

/* paidb_test_k8s_config() returns jsonb: the base URL and namespace in use */
Datum
paidb_test_k8s_config(PG_FUNCTION_ARGS)
{
	K8sClient  *client = test_client_get();
	StringInfoData out;

	initStringInfo(&out);
	appendStringInfoChar(&out, '{');
	test_json_str(&out, "base_url", k8s_client_base_url(client));
	appendStringInfoChar(&out, ',');
	test_json_str(&out, "namespace", k8s_client_namespace(client));
	appendStringInfoChar(&out, '}');
	PG_RETURN_DATUM(test_jsonb(&out));
}

/* paidb_test_k8s_retry_after(value text) returns bigint: the Retry-After parser */
Datum
paidb_test_k8s_retry_after(PG_FUNCTION_ARGS)
{
	char	   *value = test_text_arg(fcinfo, 0);

	PG_RETURN_INT64((int64) k8s_retry_after_ms(value));
}

/*
 * paidb_test_jsonb_without(json text, key text) returns jsonb: how the
 * framework watcher parses a watched object (src/jsonb_util.c), for the
 * property that it equals json::jsonb - key.
 */
Datum
paidb_test_jsonb_without(PG_FUNCTION_ARGS)
{
	text	   *json = PG_GETARG_TEXT_PP(0);
	char	   *key = test_text_arg(fcinfo, 1);

	PG_RETURN_JSONB_P(jb_from_text_without(VARDATA_ANY(json), (int) VARSIZE_ANY_EXHDR(json), key));
}

/*
 * paidb_test_jsonb_print(value jsonb, skip text[]) returns text: jb_print
 * (src/jsonb_util.c) leaving out the member at path skip, for the property
 * that it equals (value #- skip)::text.
 */
Datum
paidb_test_jsonb_print(PG_FUNCTION_ARGS)
{
	Jsonb	   *value = PG_GETARG_JSONB_P(0);
	ArrayType  *skip = PG_GETARG_ARRAYTYPE_P(1);
	Datum	   *elems;
	bool	   *nulls;
	int			n,
				i;
	const char **path;
	StringInfoData out;

	deconstruct_array(skip, TEXTOID, -1, false, TYPALIGN_INT, &elems, &nulls, &n);
	path = palloc(sizeof(char *) * Max(n, 1));
	for (i = 0; i < n; i++)
		path[i] = TextDatumGetCString(elems[i]);
	initStringInfo(&out);
	jb_print(&out, &value->root, n, path);
	PG_RETURN_TEXT_P(cstring_to_text(out.data));
}

/* The keys and values of a (keys text[], vals jsonb[]) pair of arguments. */
static int
test_members(ArrayType *karr, ArrayType *varr, const char ***keys_out, JsonbValue ***vals_out)
{
	Datum	   *kd,
			   *vd;
	bool	   *kn,
			   *vn;
	int			nk,
				nv,
				i;
	const char **keys;
	JsonbValue **vals;

	deconstruct_array(karr, TEXTOID, -1, false, TYPALIGN_INT, &kd, &kn, &nk);
	deconstruct_array(varr, JSONBOID, -1, false, TYPALIGN_INT, &vd, &vn, &nv);
	if (nk != nv)
		elog(ERROR, "as many values as keys, please");
	keys = palloc(sizeof(char *) * Max(nk, 1));
	vals = palloc(sizeof(JsonbValue *) * Max(nk, 1));
	for (i = 0; i < nk; i++)
	{
		keys[i] = TextDatumGetCString(kd[i]);
		vals[i] = NULL;
		if (!vn[i])
		{
			vals[i] = palloc(sizeof(JsonbValue));
			jb_container_value(vals[i], &DatumGetJsonbP(vd[i])->root);
		}
	}
	*keys_out = keys;
	*vals_out = vals;
	return nk;
}

static void
same_encoding(const char *what, Jsonb *fast, Jsonb *slow)
{
	if (VARSIZE(fast) != VARSIZE(slow) || memcmp(fast, slow, VARSIZE(fast)) != 0)
		ereport(ERROR,
				(errmsg("%s wrote other bytes than JsonbValueToJsonb", what),
				 errdetail("%u bytes against %u.", VARSIZE(fast), VARSIZE(slow))));
}

/*
 * paidb_test_jsonb_replaced(obj jsonb, keys text[], vals jsonb[]) returns
 * jsonb: jb_object_replaced (a NULL value removes the key), after checking
 * that its bytes are those of JsonbValueToJsonb(jb_object_replace(...)).
 */
Datum
paidb_test_jsonb_replaced(PG_FUNCTION_ARGS)
{
	Jsonb	   *obj = PG_ARGISNULL(0) ? NULL : PG_GETARG_JSONB_P(0);
	const char **keys;
	JsonbValue **vals;
	int			nk = test_members(PG_GETARG_ARRAYTYPE_P(1), PG_GETARG_ARRAYTYPE_P(2), &keys, &vals);
	Jsonb	   *fast = jb_object_replaced(obj ? &obj->root : NULL, nk, keys, vals);

	same_encoding("jb_object_replaced", fast,
				  JsonbValueToJsonb(jb_object_replace(obj ? &obj->root : NULL, nk, keys, vals)));
	PG_RETURN_JSONB_P(fast);
}

/*
 * paidb_test_jsonb_selected(obj jsonb, keys text[], vals jsonb[]) returns
 * jsonb: jb_object_selected (a NULL value takes obj's member), after
 * checking that its bytes are those jsonb's encoder makes of the members
 * pushed one by one.
 */
Datum
paidb_test_jsonb_selected(PG_FUNCTION_ARGS)
{
	Jsonb	   *obj = PG_ARGISNULL(0) ? NULL : PG_GETARG_JSONB_P(0);
	const char **keys;
	JsonbValue **vals;
	int			nk = test_members(PG_GETARG_ARRAYTYPE_P(1), PG_GETARG_ARRAYTYPE_P(2), &keys, &vals);
	Jsonb	   *fast = jb_object_selected(obj ? &obj->root : NULL, nk, keys, vals);
	JsonbParseState *st = NULL;
	JsonbValue	k,
				v;

	pushJsonbValue(&st, WJB_BEGIN_OBJECT, NULL);
	for (int i = 0; i < nk; i++)
	{
		JsonbValue *member = vals[i];

		if (member == NULL && obj != NULL && JB_ROOT_IS_OBJECT(obj) &&
			jb_get_path(&obj->root, &v, 1, &keys[i]))
			member = &v;
		if (member == NULL)
			continue;
		jb_string_value(&k, keys[i]);
		pushJsonbValue(&st, WJB_KEY, &k);
		pushJsonbValue(&st, WJB_VALUE, member);
	}
	same_encoding("jb_object_selected", fast, JsonbValueToJsonb(pushJsonbValue(&st, WJB_END_OBJECT, NULL)));
	PG_RETURN_JSONB_P(fast);
}
