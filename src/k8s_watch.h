/*
 * k8s_watch.h — WATCH streams and paged LIST requests, parsed incrementally.
 *
 * Both run on a K8sClient (k8s_client.h) like any request and are driven by
 * k8s_client_wait(); they never appear in k8s_client_next_done().  Their
 * bodies are framed as bytes arrive: each event or item is kept as the
 * server's own text, at most paidb.max_object_bytes of it (a larger one is
 * scanned to its end without being kept, and handed on marked oversized),
 * so memory stays bounded by that limit plus what arrived during one wait
 * (events and items are queued until the caller takes them, so take them
 * after every wait).

 * Watch loop of a worker (client-go's reflector):
 *
 *		K8sWatchOptions opts;
 *
 *		k8s_watch_options_init(&opts);
 *		opts.resource_version = rv;			-- from the LIST, or stored
 *		w = k8s_watch_start(client, k8s_path_frameworks(client, NULL, NULL), &opts);
 *		for (;;)
 *		{
 *			rc = k8s_client_wait(client, timeout, PG_WAIT_EXTENSION);
 *			... latch ...
 *			while ((ev = k8s_watch_next_event(w)) != NULL)
 *				... ev->type, ev->object_json, ev->resource_version ...
 *			if (k8s_watch_end(w) != K8S_WATCH_OPEN)
 *				break;		-- k8s_watch_expired(w): LIST again; otherwise
 *							-- watch again from k8s_watch_resource_version(w)
 *		}
 *		k8s_watch_free(w);
 *
 * Paged LIST:
 *
 *		l = k8s_list_start(client, path, continue_token, 0);
 *		while ((item = k8s_list_next_item_wait(l, PG_WAIT_EXTENSION)) != NULL)
 *			... item->json ...
 *		res = k8s_list_result(l);	-- OK: k8s_list_resource_version(l),
 *									-- k8s_list_continue(l) (NULL: last page);
 *									-- k8s_result_is_gone(res): continue
 *									-- token expired, list from the start
 *		k8s_list_free(l);
 */
#ifndef PAIDB_K8S_WATCH_H
#define PAIDB_K8S_WATCH_H

#include "k8s_client.h"

typedef struct K8sWatch K8sWatch;
typedef struct K8sList K8sList;

/* Type of a watch event */
typedef enum K8sWatchEventType
{
	K8S_WATCH_ADDED,
	K8S_WATCH_MODIFIED,
	K8S_WATCH_DELETED,
	K8S_WATCH_BOOKMARK,
	K8S_WATCH_ERROR,			/* object is a Status; see error_code/reason */
	K8S_WATCH_UNKNOWN			/* any other type string (type_name tells) */
} K8sWatchEventType;

/*
 * One watch event, palloc'd in the caller's CurrentMemoryContext.  The
 * object is the server's own text, not yet checked as JSON beyond its
 * structure (the caller parses it once, e.g. with jsonb_in).  An event the
 * caller cannot use says why in `problem`; an object larger than
 * paidb.max_object_bytes is not kept (`oversized`, object_json NULL).
 */
typedef struct K8sWatchEvent
{
	K8sWatchEventType type;
	const char *type_name;		/* "ADDED", ... as sent by the server */
	char	   *object_json;	/* the object's JSON text, or NULL */
	size_t		object_len;		/* its length (the size seen if oversized) */
	bool		oversized;		/* larger than paidb.max_object_bytes */
	bool		in_progress;	/* a notice: this event has just passed
								 * paidb.max_object_bytes and is still
								 * streaming (type and name as seen so far;
								 * object_len: bytes so far).  The event
								 * itself follows, told, when it ends. */
	bool		told;			/* a notice of this oversized event came before */
	const char *problem;		/* why the event is unusable, or NULL */
	bool		rv_ignored;		/* its resourceVersion is not decimal: not
								 * taken as the watch position */
	char	   *name;			/* metadata.name, or NULL */
	char	   *resource_version;	/* metadata.resourceVersion, or NULL */
	/* K8S_WATCH_ERROR only: the Status */
	int			error_code;		/* Status.code, e.g. 410 */
	char	   *error_reason;	/* Status.reason, e.g. "Expired" */
	char	   *error_message;	/* Status.message */
} K8sWatchEvent;

/* State of a watch stream */
typedef enum K8sWatchEnd
{
	K8S_WATCH_OPEN,				/* running, or events still queued */
	K8S_WATCH_CLOSED,			/* the server ended it cleanly at an event boundary
								 * (timeoutSeconds passed, or after an ERROR event) */
	K8S_WATCH_CUT,				/* it broke after it had started (transport error,
								 * timeout, idle guard, or mid-event: the partial
								 * event is dropped) */
	K8S_WATCH_FAILED,			/* it never started: HTTP error (410 too), refused
								 * connection, TLS, timeout; see k8s_watch_result */
	K8S_WATCH_BAD_DATA			/* the stream was not JSON watch events */
} K8sWatchEnd;

/* Options of a watch; initialise with k8s_watch_options_init */
typedef struct K8sWatchOptions
{
	const char *resource_version;	/* events after this RV; NULL/"": from now,
									 * starting with synthetic ADDEDs */
	bool		allow_bookmarks;	/* ask for BOOKMARK events (default true) */
	int			timeout_s;		/* base timeoutSeconds; 0: paidb.watch_timeout */
	bool		jitter;			/* timeoutSeconds in [t, 2t) (default true) */
	int			idle_timeout_s; /* cut after this long without a byte;
								 * 0: 180 s with bookmarks, none without */
} K8sWatchOptions;

/*
 * One LIST item, palloc'd in the caller's CurrentMemoryContext; the item's
 * own JSON text (json NULL when larger than paidb.max_object_bytes).  An
 * item that is not an object or has no metadata.name fails the page.
 */
typedef struct K8sListItem
{
	char	   *json;			/* the item's JSON text, or NULL if oversized */
	size_t		len;			/* its length (the size seen if oversized) */
	bool		oversized;		/* larger than paidb.max_object_bytes */
	char	   *name;			/* metadata.name, or NULL */
	char	   *resource_version;	/* metadata.resourceVersion, or NULL */
} K8sListItem;

/* Whether a resourceVersion is a decimal that fits in int64 (etcd's do); its value */
extern bool k8s_rv_parse(const char *rv, int64 *value);
/* Whether a resourceVersion is a position paidb can watch from (k8s_rv_parse) */
extern bool k8s_rv_is_decimal(const char *rv);

/* ---- watch ---- */

/* Fill opts with the defaults (bookmarks, jitter, paidb.watch_timeout) */
extern void k8s_watch_options_init(K8sWatchOptions *opts);

/* Start a watch of a collection path (which may carry selectors) */
extern K8sWatch *k8s_watch_start(K8sClient *client, const char *collection_path,
								 const K8sWatchOptions *opts);

/* Next whole event, or NULL if none is queued now (the caller may pfree it) */
extern K8sWatchEvent *k8s_watch_next_event(K8sWatch *watch);

/* Number of events queued and not yet taken */
extern int	k8s_watch_pending(K8sWatch *watch);

/* State of the stream; K8S_WATCH_OPEN while running or events remain */
extern K8sWatchEnd k8s_watch_end(K8sWatch *watch);

/* Name of an end state: "open", "closed", "cut", "failed", "bad_data" */
extern const char *k8s_watch_end_name(K8sWatchEnd end);

/* Whether the watch hit 410 Gone/Expired (HTTP status or ERROR event): LIST again */
extern bool k8s_watch_expired(K8sWatch *watch);

/* Decimal RV of the last ADDED/MODIFIED/DELETED/BOOKMARK event taken, or the start RV */
extern const char *k8s_watch_resource_version(K8sWatch *watch);

/* The timeoutSeconds actually sent (after jitter) */
extern int	k8s_watch_timeout_s(K8sWatch *watch);

/* The underlying request's result (kind PENDING while running) */
extern const K8sResult *k8s_watch_result(K8sWatch *watch);

/* The underlying request (for k8s_log_failure, user data) */
extern K8sRequest *k8s_watch_request(K8sWatch *watch);

/* Stop the watch if it runs and free it with its queued events */
extern void k8s_watch_free(K8sWatch *watch);

#ifdef PAIDB_TEST_HOOKS			/* test/modules/paidb_test only */
/* Name of an event type ("ADDED", ...) */
extern const char *k8s_watch_event_type_name(K8sWatchEventType type);
#endif

#ifdef PAIDB_TEST_HOOKS			/* test/modules/paidb_test only */
/* Free an event returned by k8s_watch_next_event */
extern void k8s_watch_event_free(K8sWatchEvent *event);
#endif

/* ---- paged list ---- */

/* Start one LIST page; limit 0: paidb.list_page_size; continue_token NULL: first page */
extern K8sList *k8s_list_start(K8sClient *client, const char *collection_path,
							   const char *continue_token, int limit);

/* Next item already received, or NULL if none is queued now */
extern K8sListItem *k8s_list_next_item(K8sList *list);

#ifdef PAIDB_TEST_HOOKS			/* test/modules/paidb_test only */
/* Next item, waiting for it (interrupts honoured); NULL when the page is over */
extern K8sListItem *k8s_list_next_item_wait(K8sList *list, uint32 wait_event_info);
#endif

/* Whether the page is over (transfer ended and every item taken) */
extern bool k8s_list_finished(K8sList *list);

/* The page's result; a 2xx body that was cut or malformed becomes TRANSPORT */
extern const K8sResult *k8s_list_result(K8sList *list);

/* metadata.resourceVersion of the list, or NULL if not (yet) seen */
extern const char *k8s_list_resource_version(K8sList *list);

/* metadata.continue of the list, or NULL if this is the last page */
extern const char *k8s_list_continue(K8sList *list);

#ifdef PAIDB_TEST_HOOKS			/* test/modules/paidb_test only */
/* metadata.remainingItemCount, or -1 if absent */
extern int64 k8s_list_remaining_item_count(K8sList *list);
#endif

#ifdef PAIDB_TEST_HOOKS			/* test/modules/paidb_test only */
/* Number of items received on this page so far */
extern int	k8s_list_item_count(K8sList *list);
#endif

/* The underlying request (for k8s_log_failure, user data) */
extern K8sRequest *k8s_list_request(K8sList *list);

/* Stop the list request if it runs and free it with its queued items */
extern void k8s_list_free(K8sList *list);

#ifdef PAIDB_TEST_HOOKS			/* test/modules/paidb_test only */
/* Free an item returned by k8s_list_next_item */
extern void k8s_list_item_free(K8sListItem *item);
#endif

#ifdef PAIDB_FUZZING			/* test/fuzz only (make fuzz) */
extern K8sWatch *k8s_watch_fuzz_new(K8sRequest *req);
extern int	k8s_watch_fuzz_feed(K8sWatch *w, const char *data, size_t len, K8sResult *res);
extern K8sList *k8s_list_fuzz_new(K8sRequest *req);
extern int	k8s_list_fuzz_feed(K8sList *l, const char *data, size_t len, K8sResult *res);
extern int64 k8s_list_fuzz_remaining(K8sList *l);
#endif

#endif							/* PAIDB_K8S_WATCH_H */
