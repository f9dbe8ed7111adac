/*
 * k8s_watch.c — WATCH streams and paged LIST bodies, parsed as they arrive.
 *
 * A watch body is a sequence of JSON objects {"type": ..., "object": ...};
 * a LIST body is one object whose "items" array may be large.  Both are fed
 * chunk by chunk, whatever the chunk boundaries, to json-c's incremental
 * tokener (json_tokener_parse_ex): a watch event or a list item is queued
 * only once it is whole, so a stream cut in the middle of an event yields no
 * half event, and memory is bounded by the largest single object.  For a
 * LIST, a small state machine walks the outer object so that each element of
 * "items" is parsed on its own and the page is never held as one document.
 *
 * The parse callbacks run from k8s_client_wait() after libcurl has returned,
 * never inside a curl callback.  Queued json-c objects belong to the request;
 * its memory context's reset callback releases them on every path.
 */
#include "postgres.h"

#include <ctype.h>
#include <limits.h>

#include <json-c/json.h>

#include "common/pg_prng.h"
#include "lib/ilist.h"
#include "miscadmin.h"
#include "utils/memutils.h"

#include "guc.h"
#include "k8s_watch.h"

/* Deepest JSON nesting accepted in an object (json-c's default is 32) */
#define K8S_JSON_MAX_DEPTH	512

/* Default idle guard of a watch that asked for bookmarks */
#define K8S_WATCH_IDLE_DEFAULT_S 180

/* A parsed object waiting to be taken */
typedef struct K8sQueued
{
	dlist_node	node;
	struct json_object *obj;
} K8sQueued;

struct K8sWatch
{
	K8sRequest *req;
	json_tokener *tok;
	bool		in_event;		/* bytes of an unfinished event were fed */
	bool		bad;
	char	   *bad_message;
	dlist_head	queue;
	int			nqueued;
	char	   *last_rv;
	bool		expired;
	bool		finished;
	K8sWatchEnd end;
	int			timeout_s;
};

/* Where the LIST parser is in the outer object */
typedef enum K8sListState
{
	LS_START,					/* before '{' */
	LS_KEY,						/* before a key or '}' */
	LS_KEY_STRING,				/* inside a key (tokener) */
	LS_COLON,					/* before ':' */
	LS_VALUE,					/* inside a member value (tokener) */
	LS_ITEMS_OPEN,				/* before the '[' of "items" */
	LS_ITEM_OR_END,				/* before the first item or ']' */
	LS_ITEM,					/* inside an item (tokener) */
	LS_ITEM_SEP,				/* before ',' or ']' */
	LS_AFTER_VALUE,				/* before ',' or '}' */
	LS_DONE						/* after the final '}' */
} K8sListState;

struct K8sList
{
	K8sRequest *req;
	json_tokener *tok;
	K8sListState state;
	char	   *key;
	bool		bad;
	char	   *bad_message;
	dlist_head	queue;
	int			nqueued;
	int			nitems;
	char	   *resource_version;
	char	   *continue_token;
	int64		remaining;
	bool		finished;
};

static const char *const k8s_event_type_names[] = {
	"ADDED", "MODIFIED", "DELETED", "BOOKMARK", "ERROR", "UNKNOWN"
};

/* ---------------------------------------------------------------------
 * shared helpers
 * ---------------------------------------------------------------------
 */

/* Queue a json-c object; on failure the object is released before the ERROR */
static void
k8s_queue_push(MemoryContext mcxt, dlist_head *queue, int *count, struct json_object *obj)
{
	K8sQueued  *q = MemoryContextAllocExtended(mcxt, sizeof(K8sQueued), MCXT_ALLOC_NO_OOM);

	if (q == NULL)
	{
		json_object_put(obj);
		ereport(ERROR,
				(errcode(ERRCODE_OUT_OF_MEMORY),
				 errmsg("out of memory")));
	}
	q->obj = obj;
	dlist_push_tail(queue, &q->node);
	(*count)++;
}

/* Take the first queued json-c object (the caller owns it), or NULL */
static struct json_object *
k8s_queue_pop(dlist_head *queue, int *count)
{
	K8sQueued  *q;
	struct json_object *obj;

	if (dlist_is_empty(queue))
		return NULL;
	q = dlist_container(K8sQueued, node, dlist_pop_head_node(queue));
	(*count)--;
	obj = q->obj;
	pfree(q);
	return obj;
}

/* Release every queued json-c object (from a reset callback: no ERROR) */
static void
k8s_queue_release(dlist_head *queue, int *count)
{
	while (!dlist_is_empty(queue))
	{
		K8sQueued  *q = dlist_container(K8sQueued, node, dlist_pop_head_node(queue));

		json_object_put(q->obj);
		q->obj = NULL;
	}
	*count = 0;
}

/* A string member of obj, or NULL */
static const char *
k8s_json_get_string(struct json_object *obj, const char *key)
{
	struct json_object *v;

	if (obj == NULL || !json_object_is_type(obj, json_type_object) ||
		!json_object_object_get_ex(obj, key, &v) ||
		!json_object_is_type(v, json_type_string))
		return NULL;
	return json_object_get_string(v);
}

/* A string member of obj.metadata, or NULL */
static const char *
k8s_json_get_meta(struct json_object *obj, const char *key)
{
	struct json_object *meta;

	if (obj == NULL || !json_object_is_type(obj, json_type_object) ||
		!json_object_object_get_ex(obj, "metadata", &meta))
		return NULL;
	return k8s_json_get_string(meta, key);
}

/* pstrdup that keeps NULL */
static char *
k8s_pstrdup_or_null(const char *s)
{
	return s ? pstrdup(s) : NULL;
}

/* Serialise obj as compact JSON into a palloc'd string */
static char *
k8s_json_text(struct json_object *obj, size_t *len)
{
	size_t		n = 0;
	const char *s;
	char	   *out;

	s = json_object_to_json_string_length(obj,
										  JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE,
										  &n);
	if (s == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OUT_OF_MEMORY),
				 errmsg("out of memory while serialising a kubernetes object")));
	if (n >= MaxAllocSize)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("kubernetes object of %zu bytes is too large", n)));
	out = palloc(n + 1);
	memcpy(out, s, n);
	out[n] = '\0';
	*len = n;
	return out;
}

/* Create a json-c tokener able to parse deep objects */
static json_tokener *
k8s_new_tokener(void)
{
	json_tokener *tok = json_tokener_new_ex(K8S_JSON_MAX_DEPTH);

	if (tok == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OUT_OF_MEMORY),
				 errmsg("out of memory")));
	return tok;
}

/* ---------------------------------------------------------------------
 * watch
 * ---------------------------------------------------------------------
 */

/* Parse watch-stream bytes; queue every whole event; returns the number queued */
static int
k8s_watch_consume(K8sRequest *req, void *state, const char *data, size_t len)
{
	K8sWatch   *w = (K8sWatch *) state;
	size_t		pos = 0;
	int			produced = 0;

	while (pos < len && !w->bad)
	{
		struct json_object *obj;
		struct json_object *inner;
		enum json_tokener_error err;
		size_t		chunk;
		const char *type;

		if (!w->in_event)
		{
			while (pos < len && isspace((unsigned char) data[pos]))
				pos++;
			if (pos == len)
				break;
		}
		chunk = Min(len - pos, (size_t) INT_MAX);
		obj = json_tokener_parse_ex(w->tok, data + pos, (int) chunk);
		err = json_tokener_get_error(w->tok);
		if (err == json_tokener_continue)
		{
			w->in_event = true;
			pos += chunk;
			continue;
		}
		if (err != json_tokener_success)
		{
			json_object_put(obj);
			w->bad = true;
			w->bad_message = MemoryContextStrdup(k8s_request_context(req),
												 psprintf("invalid JSON in watch stream: %s",
														  json_tokener_error_desc(err)));
			return -1;
		}
		pos += json_tokener_get_parse_end(w->tok);
		json_tokener_reset(w->tok);
		w->in_event = false;

		type = k8s_json_get_string(obj, "type");
		if (type == NULL || !json_object_object_get_ex(obj, "object", &inner) ||
			!json_object_is_type(inner, json_type_object))
		{
			json_object_put(obj);
			w->bad = true;
			w->bad_message = MemoryContextStrdup(k8s_request_context(req),
												 "watch stream holds an event without type or object");
			return -1;
		}
		if (strcmp(type, "ERROR") == 0)
		{
			struct json_object *code;

			if (json_object_object_get_ex(inner, "code", &code) &&
				json_object_get_int(code) == 410)
				w->expired = true;
		}
		k8s_queue_push(k8s_request_context(req), &w->queue, &w->nqueued, obj);
		produced++;
	}
	return produced;
}

/* Decide how the watch stream ended */
static void
k8s_watch_finish(K8sRequest *req, void *state, K8sResult *res)
{
	K8sWatch   *w = (K8sWatch *) state;
	bool		started = res->http_status >= 200 && res->http_status < 300;

	w->finished = true;
	if (w->bad && started)
	{
		w->end = K8S_WATCH_BAD_DATA;
		res->kind = K8S_RESULT_TRANSPORT;
		res->message = w->bad_message;
	}
	else if (started)
	{
		if (res->kind == K8S_RESULT_OK && !w->in_event)
			w->end = K8S_WATCH_CLOSED;
		else
		{
			w->end = K8S_WATCH_CUT;
			if (res->kind == K8S_RESULT_OK)
			{
				res->kind = K8S_RESULT_TRANSPORT;
				res->message = "watch stream ended in the middle of an event";
			}
		}
	}
	else
	{
		w->end = K8S_WATCH_FAILED;
		if (k8s_result_is_gone(res))
			w->expired = true;
	}
	/* drop any partial event */
	if (w->tok)
		json_tokener_reset(w->tok);
	w->in_event = false;
}

/* Release the watch's json-c objects (reset callback of the request) */
static void
k8s_watch_cleanup(void *state)
{
	K8sWatch   *w = (K8sWatch *) state;

	k8s_queue_release(&w->queue, &w->nqueued);
	if (w->tok)
	{
		json_tokener_free(w->tok);
		w->tok = NULL;
	}
}

static const K8sStreamOps k8s_watch_ops = {
	k8s_watch_consume,
	k8s_watch_finish,
	k8s_watch_cleanup
};

/* Fill opts with the defaults (bookmarks, jitter, paidb.watch_timeout) */
void
k8s_watch_options_init(K8sWatchOptions *opts)
{
	memset(opts, 0, sizeof(*opts));
	opts->allow_bookmarks = true;
	opts->jitter = true;
}

/* Start a watch of a collection path (which may carry selectors) */
K8sWatch *
k8s_watch_start(K8sClient *client, const char *collection_path,
				const K8sWatchOptions *opts)
{
	K8sWatchOptions defaults;
	const K8sWatchOptions *o = opts;
	int			base;
	int			timeout_s;
	long		idle_s;
	const char *start_rv;
	char	   *path;
	K8sRequest *req;
	K8sWatch   *w;

	if (o == NULL)
	{
		k8s_watch_options_init(&defaults);
		o = &defaults;
	}
	base = o->timeout_s > 0 ? o->timeout_s : paidb_watch_timeout_s;
	timeout_s = base;
	if (o->jitter && base > 1)
		timeout_s = base + (int) pg_prng_uint64_range(&pg_global_prng_state, 0, base - 1);
	if (o->idle_timeout_s > 0)
		idle_s = o->idle_timeout_s;
	else if (o->idle_timeout_s == 0 && o->allow_bookmarks)
		idle_s = K8S_WATCH_IDLE_DEFAULT_S;
	else
		idle_s = 0;
	start_rv = (o->resource_version != NULL && o->resource_version[0] != '\0') ?
		o->resource_version : NULL;

	path = k8s_path_add_query(collection_path, "watch", "true");
	if (start_rv != NULL)
		path = k8s_path_add_query(path, "resourceVersion", start_rv);
	if (o->allow_bookmarks)
		path = k8s_path_add_query(path, "allowWatchBookmarks", "true");
	path = k8s_path_add_query(path, "timeoutSeconds", psprintf("%d", timeout_s));

	req = k8s_new_get(client, path);
	PG_TRY();
	{
		w = MemoryContextAllocZero(k8s_request_context(req), sizeof(K8sWatch));
		w->req = req;
		w->timeout_s = timeout_s;
		w->end = K8S_WATCH_OPEN;
		dlist_init(&w->queue);
		if (start_rv != NULL)
			w->last_rv = MemoryContextStrdup(k8s_request_context(req), start_rv);
		k8s_request_set_stream(req, &k8s_watch_ops, w);
		w->tok = k8s_new_tokener();

		/* the server ends the watch; our deadline only catches a dead one */
		k8s_request_set_timeout(req, (long) timeout_s * 1000 + paidb_k8s_timeout_ms);
		k8s_request_set_idle_timeout(req, idle_s);
		k8s_request_submit(req);
	}
	PG_CATCH();
	{
		k8s_request_free(req);
		PG_RE_THROW();
	}
	PG_END_TRY();
	return w;
}

#ifdef PAIDB_TEST_HOOKS
/* Name of an event type ("ADDED", ...) */
const char *
k8s_watch_event_type_name(K8sWatchEventType type)
{
	if ((int) type < 0 || (int) type > (int) K8S_WATCH_UNKNOWN)
		return "UNKNOWN";
	return k8s_event_type_names[type];
}
#endif

/* Map a type string to its enum value */
static K8sWatchEventType
k8s_watch_event_type(const char *name)
{
	int			i;

	for (i = 0; i < (int) K8S_WATCH_UNKNOWN; i++)
	{
		if (strcmp(name, k8s_event_type_names[i]) == 0)
			return (K8sWatchEventType) i;
	}
	return K8S_WATCH_UNKNOWN;
}

/* Next whole event, or NULL if none is queued now (the caller may pfree it) */
K8sWatchEvent *
k8s_watch_next_event(K8sWatch *watch)
{
	struct json_object *volatile obj;
	K8sWatchEvent *volatile ev = NULL;

	obj = k8s_queue_pop(&watch->queue, &watch->nqueued);
	if (obj == NULL)
		return NULL;

	PG_TRY();
	{
		struct json_object *inner = NULL;
		const char *type = k8s_json_get_string(obj, "type");
		K8sWatchEvent *e = palloc0(sizeof(K8sWatchEvent));

		json_object_object_get_ex(obj, "object", &inner);
		e->type = k8s_watch_event_type(type);
		e->type_name = e->type == K8S_WATCH_UNKNOWN ? pstrdup(type) :
			k8s_event_type_names[e->type];
		e->object_json = k8s_json_text(inner, &e->object_len);
		e->name = k8s_pstrdup_or_null(k8s_json_get_meta(inner, "name"));
		e->resource_version = k8s_pstrdup_or_null(k8s_json_get_meta(inner, "resourceVersion"));
		if (e->type == K8S_WATCH_ERROR)
		{
			struct json_object *code;

			if (json_object_object_get_ex(inner, "code", &code))
				e->error_code = json_object_get_int(code);
			e->error_reason = k8s_pstrdup_or_null(k8s_json_get_string(inner, "reason"));
			e->error_message = k8s_pstrdup_or_null(k8s_json_get_string(inner, "message"));
		}
		else if (e->type != K8S_WATCH_UNKNOWN && e->resource_version != NULL)
		{
			char	   *rv = MemoryContextStrdup(k8s_request_context(watch->req),
												 e->resource_version);

			if (watch->last_rv)
				pfree(watch->last_rv);
			watch->last_rv = rv;
		}
		ev = e;
	}
	PG_CATCH();
	{
		json_object_put(obj);
		PG_RE_THROW();
	}
	PG_END_TRY();
	json_object_put(obj);

	return ev;
}

/* Number of events queued and not yet taken */
int
k8s_watch_pending(K8sWatch *watch)
{
	return watch->nqueued;
}

/* State of the stream; K8S_WATCH_OPEN while running or events remain */
K8sWatchEnd
k8s_watch_end(K8sWatch *watch)
{
	if (!watch->finished || watch->nqueued > 0)
		return K8S_WATCH_OPEN;
	return watch->end;
}

/* Name of an end state: "open", "closed", "cut", "failed", "bad_data" */
const char *
k8s_watch_end_name(K8sWatchEnd end)
{
	switch (end)
	{
		case K8S_WATCH_OPEN:
			return "open";
		case K8S_WATCH_CLOSED:
			return "closed";
		case K8S_WATCH_CUT:
			return "cut";
		case K8S_WATCH_FAILED:
			return "failed";
		case K8S_WATCH_BAD_DATA:
			return "bad_data";
	}
	return "unknown";
}

/* Whether the watch hit 410 Gone/Expired (HTTP status or ERROR event): LIST again */
bool
k8s_watch_expired(K8sWatch *watch)
{
	return watch->expired;
}

/* RV of the last ADDED/MODIFIED/DELETED/BOOKMARK event taken, or the start RV */
const char *
k8s_watch_resource_version(K8sWatch *watch)
{
	return watch->last_rv;
}

/* The timeoutSeconds actually sent (after jitter) */
int
k8s_watch_timeout_s(K8sWatch *watch)
{
	return watch->timeout_s;
}

/* The underlying request's result (kind PENDING while running) */
const K8sResult *
k8s_watch_result(K8sWatch *watch)
{
	return k8s_request_result(watch->req);
}

/* The underlying request (for k8s_log_failure, user data) */
K8sRequest *
k8s_watch_request(K8sWatch *watch)
{
	return watch->req;
}

/* Stop the watch if it runs and free it with its queued events */
void
k8s_watch_free(K8sWatch *watch)
{
	if (watch != NULL)
		k8s_request_free(watch->req);
}

#ifdef PAIDB_TEST_HOOKS
/* Free an event returned by k8s_watch_next_event */
void
k8s_watch_event_free(K8sWatchEvent *event)
{
	if (event == NULL)
		return;
	if (event->type == K8S_WATCH_UNKNOWN && event->type_name)
		pfree((char *) event->type_name);
	if (event->object_json)
		pfree(event->object_json);
	if (event->name)
		pfree(event->name);
	if (event->resource_version)
		pfree(event->resource_version);
	if (event->error_reason)
		pfree(event->error_reason);
	if (event->error_message)
		pfree(event->error_message);
	pfree(event);
}
#endif

/* ---------------------------------------------------------------------
 * paged list
 * ---------------------------------------------------------------------
 */

/* Mark the list body as malformed */
static void
k8s_list_set_bad(K8sList *l, const char *what)
{
	l->bad = true;
	l->bad_message = MemoryContextStrdup(k8s_request_context(l->req),
										 psprintf("malformed list response: %s", what));
}

/* Take metadata.resourceVersion, continue and remainingItemCount of the list */
static void
k8s_list_take_metadata(K8sList *l, struct json_object *meta)
{
	MemoryContext mcxt = k8s_request_context(l->req);
	const char *s;
	struct json_object *v;

	if (meta == NULL || !json_object_is_type(meta, json_type_object))
		return;
	s = k8s_json_get_string(meta, "resourceVersion");
	if (s != NULL)
		l->resource_version = MemoryContextStrdup(mcxt, s);
	s = k8s_json_get_string(meta, "continue");
	if (s != NULL && s[0] != '\0')
		l->continue_token = MemoryContextStrdup(mcxt, s);
	if (json_object_object_get_ex(meta, "remainingItemCount", &v) &&
		json_object_is_type(v, json_type_int))
		l->remaining = json_object_get_int64(v);
}

/* Parse LIST bytes; queue every whole item; returns the number queued */
static int
k8s_list_consume(K8sRequest *req, void *state, const char *data, size_t len)
{
	K8sList    *l = (K8sList *) state;
	size_t		pos = 0;
	int			produced = 0;

	while (pos < len && !l->bad)
	{
		char		c = data[pos];

		switch (l->state)
		{
			case LS_KEY_STRING:
			case LS_VALUE:
			case LS_ITEM:
				{
					size_t		chunk = Min(len - pos, (size_t) INT_MAX);
					struct json_object *obj;
					enum json_tokener_error err;

					obj = json_tokener_parse_ex(l->tok, data + pos, (int) chunk);
					err = json_tokener_get_error(l->tok);
					if (err == json_tokener_continue)
					{
						pos += chunk;
						break;
					}
					if (err != json_tokener_success)
					{
						json_object_put(obj);
						k8s_list_set_bad(l, json_tokener_error_desc(err));
						break;
					}
					pos += json_tokener_get_parse_end(l->tok);
					json_tokener_reset(l->tok);

					if (l->state == LS_KEY_STRING)
					{
						MemoryContext mcxt = k8s_request_context(req);

						if (obj == NULL || !json_object_is_type(obj, json_type_string))
						{
							json_object_put(obj);
							k8s_list_set_bad(l, "a key is not a string");
							break;
						}
						if (l->key)
							pfree(l->key);
						l->key = MemoryContextStrdup(mcxt, json_object_get_string(obj));
						json_object_put(obj);
						l->state = LS_COLON;
					}
					else if (l->state == LS_VALUE)
					{
						if (strcmp(l->key, "metadata") == 0)
							k8s_list_take_metadata(l, obj);
						json_object_put(obj);
						l->state = LS_AFTER_VALUE;
					}
					else
					{
						if (obj != NULL)
						{
							k8s_queue_push(k8s_request_context(req), &l->queue, &l->nqueued, obj);
							l->nitems++;
							produced++;
						}
						l->state = LS_ITEM_SEP;
					}
				}
				break;

			default:
				if (isspace((unsigned char) c))
				{
					pos++;
					break;
				}
				switch (l->state)
				{
					case LS_START:
						if (c != '{')
							k8s_list_set_bad(l, "it is not a JSON object");
						l->state = LS_KEY;
						pos++;
						break;
					case LS_KEY:
						if (c == '}')
						{
							l->state = LS_DONE;
							pos++;
						}
						else if (c == '"')
							l->state = LS_KEY_STRING;	/* the tokener reads it */
						else
							k8s_list_set_bad(l, "a key was expected");
						break;
					case LS_COLON:
						if (c != ':')
							k8s_list_set_bad(l, "':' was expected");
						pos++;
						l->state = strcmp(l->key, "items") == 0 ? LS_ITEMS_OPEN : LS_VALUE;
						break;
					case LS_ITEMS_OPEN:
						if (c == '[')
						{
							l->state = LS_ITEM_OR_END;
							pos++;
						}
						else
							l->state = LS_VALUE;	/* null, or anything odd */
						break;
					case LS_ITEM_OR_END:
						if (c == ']')
						{
							l->state = LS_AFTER_VALUE;
							pos++;
						}
						else
							l->state = LS_ITEM;
						break;
					case LS_ITEM_SEP:
						if (c == ',')
							l->state = LS_ITEM;
						else if (c == ']')
							l->state = LS_AFTER_VALUE;
						else
							k8s_list_set_bad(l, "',' or ']' was expected in items");
						pos++;
						break;
					case LS_AFTER_VALUE:
						if (c == ',')
							l->state = LS_KEY;
						else if (c == '}')
							l->state = LS_DONE;
						else
							k8s_list_set_bad(l, "',' or '}' was expected");
						pos++;
						break;
					case LS_DONE:
						k8s_list_set_bad(l, "data follows the list object");
						break;
					default:
						elog(ERROR, "unexpected list parser state %d", (int) l->state);
				}
				break;
		}
	}
	return l->bad ? -1 : produced;
}

/* A 2xx LIST body that was cut or malformed becomes a transport failure */
static void
k8s_list_finish(K8sRequest *req, void *state, K8sResult *res)
{
	K8sList    *l = (K8sList *) state;

	l->finished = true;
	if (l->bad)
	{
		res->kind = K8S_RESULT_TRANSPORT;
		res->message = l->bad_message;
		return;
	}
	if (res->kind != K8S_RESULT_OK)
		return;
	if (l->bad)
	{
		res->kind = K8S_RESULT_TRANSPORT;
		res->message = l->bad_message;
	}
	else if (l->state != LS_DONE)
	{
		res->kind = K8S_RESULT_TRANSPORT;
		res->message = "list response ended early";
	}
}

/* Release the list's json-c objects (reset callback of the request) */
static void
k8s_list_cleanup(void *state)
{
	K8sList    *l = (K8sList *) state;

	k8s_queue_release(&l->queue, &l->nqueued);
	if (l->tok)
	{
		json_tokener_free(l->tok);
		l->tok = NULL;
	}
}

static const K8sStreamOps k8s_list_ops = {
	k8s_list_consume,
	k8s_list_finish,
	k8s_list_cleanup
};

/* Start one LIST page; limit 0: paidb.list_page_size; continue_token NULL: first page */
K8sList *
k8s_list_start(K8sClient *client, const char *collection_path,
			   const char *continue_token, int limit)
{
	char	   *path;
	K8sRequest *req;
	K8sList    *l;

	if (limit <= 0)
		limit = paidb_list_page_size;
	path = k8s_path_add_query(collection_path, "limit", psprintf("%d", limit));
	if (continue_token != NULL && continue_token[0] != '\0')
		path = k8s_path_add_query(path, "continue", continue_token);

	req = k8s_new_get(client, path);
	PG_TRY();
	{
		l = MemoryContextAllocZero(k8s_request_context(req), sizeof(K8sList));
		l->req = req;
		l->state = LS_START;
		l->remaining = -1;
		dlist_init(&l->queue);
		k8s_request_set_stream(req, &k8s_list_ops, l);
		l->tok = k8s_new_tokener();
		k8s_request_submit(req);
	}
	PG_CATCH();
	{
		k8s_request_free(req);
		PG_RE_THROW();
	}
	PG_END_TRY();
	return l;
}

/* Next item already received, or NULL if none is queued now */
K8sListItem *
k8s_list_next_item(K8sList *list)
{
	struct json_object *volatile obj;
	K8sListItem *volatile item = NULL;

	obj = k8s_queue_pop(&list->queue, &list->nqueued);
	if (obj == NULL)
		return NULL;
	PG_TRY();
	{
		K8sListItem *it = palloc0(sizeof(K8sListItem));

		it->json = k8s_json_text(obj, &it->len);
		it->name = k8s_pstrdup_or_null(k8s_json_get_meta(obj, "name"));
		it->resource_version = k8s_pstrdup_or_null(k8s_json_get_meta(obj, "resourceVersion"));
		item = it;
	}
	PG_CATCH();
	{
		json_object_put(obj);
		PG_RE_THROW();
	}
	PG_END_TRY();
	json_object_put(obj);
	return item;
}

#ifdef PAIDB_TEST_HOOKS
/* Next item, waiting for it (interrupts honoured); NULL when the page is over */
K8sListItem *
k8s_list_next_item_wait(K8sList *list, uint32 wait_event_info)
{
	K8sClient  *client = k8s_request_client(list->req);
	K8sListItem *volatile item = NULL;
	volatile bool latch_seen = false;

	PG_TRY();
	{
		for (;;)
		{
			int			rc;

			item = k8s_list_next_item(list);
			if (item != NULL || list->finished)
				break;
			rc = k8s_client_wait(client, -1, wait_event_info);
			if (rc & WL_LATCH_SET)
			{
				ResetLatch(MyLatch);
				latch_seen = true;
			}
		}
	}
	PG_CATCH();
	{
		if (latch_seen)
			SetLatch(MyLatch);
		PG_RE_THROW();
	}
	PG_END_TRY();
	if (latch_seen)
		SetLatch(MyLatch);
	return item;
}
#endif

/* Whether the page is over (transfer ended and every item taken) */
bool
k8s_list_finished(K8sList *list)
{
	return list->finished && list->nqueued == 0;
}

/* The page's result; a 2xx body that was cut or malformed becomes TRANSPORT */
const K8sResult *
k8s_list_result(K8sList *list)
{
	return k8s_request_result(list->req);
}

/* metadata.resourceVersion of the list, or NULL if not (yet) seen */
const char *
k8s_list_resource_version(K8sList *list)
{
	return list->resource_version;
}

/* metadata.continue of the list, or NULL if this is the last page */
const char *
k8s_list_continue(K8sList *list)
{
	return list->continue_token;
}

#ifdef PAIDB_TEST_HOOKS
/* metadata.remainingItemCount, or -1 if absent */
int64
k8s_list_remaining_item_count(K8sList *list)
{
	return list->remaining;
}
#endif

#ifdef PAIDB_TEST_HOOKS
/* Number of items received on this page so far */
int
k8s_list_item_count(K8sList *list)
{
	return list->nitems;
}
#endif

/* The underlying request (for k8s_log_failure, user data) */
K8sRequest *
k8s_list_request(K8sList *list)
{
	return list->req;
}

/* Stop the list request if it runs and free it with its queued items */
void
k8s_list_free(K8sList *list)
{
	if (list != NULL)
		k8s_request_free(list->req);
}

#ifdef PAIDB_TEST_HOOKS
/* Free an item returned by k8s_list_next_item */
void
k8s_list_item_free(K8sListItem *item)
{
	if (item == NULL)
		return;
	if (item->json)
		pfree(item->json);
	if (item->name)
		pfree(item->name);
	if (item->resource_version)
		pfree(item->resource_version);
	pfree(item);
}
#endif

#ifdef PAIDB_FUZZING
/* ---------------------------------------------------------------------
 * fuzzing entry points (test/fuzz, `make fuzz` only): the watch and list
 * parsers on an unsubmitted request, fed bytes as if the server sent them
 * ---------------------------------------------------------------------
 */

/* A watch parser on req (never submitted); freed with req */
K8sWatch *
k8s_watch_fuzz_new(K8sRequest *req)
{
	K8sWatch   *w = MemoryContextAllocZero(k8s_request_context(req), sizeof(K8sWatch));

	w->req = req;
	w->end = K8S_WATCH_OPEN;
	dlist_init(&w->queue);
	k8s_request_set_stream(req, &k8s_watch_ops, w);
	w->tok = k8s_new_tokener();
	return w;
}

/* Feed watch-stream bytes (-1: the stream is bad), or end it with res */
int
k8s_watch_fuzz_feed(K8sWatch *w, const char *data, size_t len, K8sResult *res)
{
	if (res != NULL)
	{
		k8s_watch_ops.finish(w->req, w, res);
		return 0;
	}
	return k8s_watch_ops.consume(w->req, w, data, len);
}

/* A list parser on req (never submitted); freed with req */
K8sList *
k8s_list_fuzz_new(K8sRequest *req)
{
	K8sList    *l = MemoryContextAllocZero(k8s_request_context(req), sizeof(K8sList));

	l->req = req;
	l->state = LS_START;
	l->remaining = -1;
	dlist_init(&l->queue);
	k8s_request_set_stream(req, &k8s_list_ops, l);
	l->tok = k8s_new_tokener();
	return l;
}

/* Feed LIST bytes (-1: the body is bad), or end it with res */
int
k8s_list_fuzz_feed(K8sList *l, const char *data, size_t len, K8sResult *res)
{
	if (res != NULL)
	{
		k8s_list_ops.finish(l->req, l, res);
		return 0;
	}
	return k8s_list_ops.consume(l->req, l, data, len);
}

/* remainingItemCount of a fuzzed list */
int64
k8s_list_fuzz_remaining(K8sList *l)
{
	return l->remaining;
}
#endif
