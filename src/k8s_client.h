/*
 * k8s_client.h — asynchronous Kubernetes API client (libcurl multi).
 *
 * One K8sClient per process (a background worker, or a backend running the
 * test functions).  Requests run concurrently; the caller waits with
 * k8s_client_wait(), which sleeps on ONE WaitEventSet holding the process
 * latch, postmaster death and every curl socket, so latch wake-ups, SIGHUP and
 * SIGTERM are noticed while requests are pending.  All curl handles, sockets
 * and buffers belong to this process; nothing lives in shared memory.
 *
 * A typical asynchronous loop:
 *
 *		K8sRequest *req = k8s_new_merge_patch(client, path, patch_json);
 *		k8s_request_set_user_data(req, my_job);
 *		k8s_request_submit(req);
 *		for (;;)
 *		{
 *			int		rc = k8s_client_wait(client, 1000, PG_WAIT_EXTENSION);
 *
 *			if (rc & WL_LATCH_SET)
 *				ResetLatch(MyLatch);
 *			... handle ConfigReloadPending (then k8s_client_reload) ...
 *			while ((req = k8s_client_next_done(client)) != NULL)
 *			{
 *				const K8sResult *res = k8s_request_result(req);
 *
 *				... use res, k8s_request_user_data(req) ...
 *				k8s_request_free(req);
 *			}
 *		}
 *
 * Memory: the client and its requests live in memory contexts of their own
 * (children of the context given to k8s_client_create), never in the
 * caller's CurrentMemoryContext, so a request outlives the transaction it was
 * created in: free each one (k8s_request_free) or destroy the client.
 * Deleting a request or the client, explicitly or because a parent context is
 * deleted during error recovery, releases every libcurl and json-c object it
 * owns.  Strings in a K8sResult stay valid until the request is freed.
 *
 * Errors: nothing here throws for a failed request; failures come back as a
 * typed K8sResult.  ERROR is raised only for out-of-memory and misuse, and by
 * CHECK_FOR_INTERRUPTS() while waiting (cancel, or FATAL on SIGTERM with the
 * die() handler).  Do not call this API from a curl or json-c callback.
 *
 * Threads: libcurl's threaded DNS resolver starts threads; signals are
 * blocked while libcurl runs so that PostgreSQL's handlers only run on the
 * main thread.
 *
 * Credentials: the bearer token is read from a file, re-read when the file
 * changes, and never appears in a log line, an error, or a result.
 */
#ifndef PAIDB_K8S_CLIENT_H
#define PAIDB_K8S_CLIENT_H

#include "storage/latch.h"
#include "utils/palloc.h"

typedef struct K8sClient K8sClient;
typedef struct K8sRequest K8sRequest;

/* k8s_client_wait() sets this bit when new results are ready for the caller */
#define K8S_WAIT_RESULTS	WL_SOCKET_READABLE

/* HTTP methods used with the API server */
typedef enum K8sMethod
{
	K8S_GET,
	K8S_POST,
	K8S_PUT,
	K8S_PATCH,
	K8S_DELETE
} K8sMethod;

/* How a request ended */
typedef enum K8sResultKind
{
	K8S_RESULT_PENDING = 0,		/* not finished yet */
	K8S_RESULT_OK,				/* HTTP 2xx */
	K8S_RESULT_HTTP_ERROR,		/* another HTTP status: see http_status, reason */
	K8S_RESULT_TRANSPORT,		/* refused, DNS, TLS, connection cut, bad data */
	K8S_RESULT_TIMEOUT			/* the request's deadline or idle guard passed */
} K8sResultKind;

/* The typed outcome of a finished request; strings live as long as it */
typedef struct K8sResult
{
	K8sResultKind kind;
	long		http_status;	/* 0 when no HTTP response arrived */
	const char *reason;			/* Status.reason ("NotFound", "Expired"...) or NULL */
	const char *message;		/* Status.message, or transport error text, or NULL */
	int			status_code;	/* Status.code, 0 if the body was no Status */
	long		retry_after_ms; /* Retry-After (or details.retryAfterSeconds); -1 if none */
	const char *body;			/* response body, NUL-terminated, "" if none */
	size_t		body_len;		/* length of body in bytes */
	int			curl_code;		/* CURLcode of the transfer, for diagnostics */
} K8sResult;

/* Callbacks that consume a 2xx response body as it arrives (k8s_watch.c) */
typedef struct K8sStreamOps
{
	/*
	 * Consume body bytes (never called inside a curl callback); returns the
	 * number of new items, or -1 when the stream is unusable: the transfer
	 * is then stopped at once and ends as K8S_RESULT_TRANSPORT.
	 */
	int			(*consume) (K8sRequest *req, void *state, const char *data, size_t len);
	/* the transfer ended; may downgrade an OK result (e.g. truncated list) */
	void		(*finish) (K8sRequest *req, void *state, K8sResult *result);
	/* release non-palloc resources (json-c objects); called exactly once */
	void		(*cleanup) (void *state);
} K8sStreamOps;

/* ---- client ---- */

/* Create a client from the paidb.k8s_* settings, in a child of parent */
extern K8sClient *k8s_client_create(MemoryContext parent);

/* Re-read the settings (after SIGHUP); requests in flight are not affected */
extern void k8s_client_reload(K8sClient *client);

#ifdef PAIDB_TEST_HOOKS			/* test/modules/paidb_test only */
/* Cancel every request and release everything the client owns */
extern void k8s_client_destroy(K8sClient *client);
#endif

/* The namespace of namespaced objects (setting, or in-cluster namespace file) */
extern const char *k8s_client_namespace(K8sClient *client);

/* The API server base URL in use, or NULL if none is configured */
extern const char *k8s_client_base_url(K8sClient *client);

#ifdef PAIDB_TEST_HOOKS			/* test/modules/paidb_test only */
/* Number of submitted requests (watches and lists included) not yet finished */
extern int	k8s_client_in_flight(K8sClient *client);
#endif

/*
 * Wait up to timeout_ms (-1: no limit) on latch, postmaster death and the
 * curl sockets while driving the transfers.  Returns as soon as the latch is
 * set (WL_LATCH_SET; the caller does ResetLatch), new results are ready
 * (K8S_WAIT_RESULTS: a request finished, or a watch or list has new events or
 * items), or the timeout passed (WL_TIMEOUT).  A timeout of 0 polls: it
 * drives curl once without sleeping.  CHECK_FOR_INTERRUPTS() runs on every
 * turn, so a SIGTERM or a query cancel ends it promptly.
 */
extern int	k8s_client_wait(K8sClient *client, long timeout_ms, uint32 wait_event_info);

/* Next finished asynchronous request, or NULL (watches and lists never appear here) */
extern K8sRequest *k8s_client_next_done(K8sClient *client);

/* ---- requests ---- */

/* New unsubmitted request; path is relative to the server (may carry a query) */
extern K8sRequest *k8s_request_new(K8sClient *client, K8sMethod method,
								   const char *path, const char *content_type,
								   const char *body, size_t body_len);

/* New GET request for path */
extern K8sRequest *k8s_new_get(K8sClient *client, const char *path);

/* New POST (create) of a JSON object into a collection path */
extern K8sRequest *k8s_new_create(K8sClient *client, const char *collection_path,
								  const char *json);

/* New PATCH of an object with a JSON merge patch (application/merge-patch+json) */
extern K8sRequest *k8s_new_merge_patch(K8sClient *client, const char *path,
									   const char *json_patch);

/* New DELETE with DeleteOptions.propagationPolicy ("Foreground"...; NULL: none) */
extern K8sRequest *k8s_new_delete(K8sClient *client, const char *path,
								  const char *propagation_policy);

/* Override the request's total timeout before submitting it (default: paidb.k8s_timeout) */
extern void k8s_request_set_timeout(K8sRequest *req, long timeout_ms);

/* Before submitting: end with K8S_RESULT_TIMEOUT if no byte arrives for idle_s seconds */
extern void k8s_request_set_idle_timeout(K8sRequest *req, long idle_s);

/* Attach a caller pointer to the request */
extern void k8s_request_set_user_data(K8sRequest *req, void *user_data);

/* The caller pointer attached to the request */
extern void *k8s_request_user_data(const K8sRequest *req);

/* Stream the 2xx body through ops instead of collecting it (used by k8s_watch.c) */
extern void k8s_request_set_stream(K8sRequest *req, const K8sStreamOps *ops, void *state);

/* Start the request; its result comes back through k8s_client_next_done() (a missing
 * configuration fails it at once, as K8S_RESULT_TRANSPORT) */
extern void k8s_request_submit(K8sRequest *req);

/* The request's result (kind K8S_RESULT_PENDING while it runs) */
extern const K8sResult *k8s_request_result(const K8sRequest *req);

/* The request's method and path, for messages (never holds a credential) */
extern const char *k8s_request_method_name(const K8sRequest *req);
extern const char *k8s_request_path(const K8sRequest *req);

/* The client the request belongs to */
extern K8sClient *k8s_request_client(const K8sRequest *req);

/* The memory context that holds the request; freed with it */
extern MemoryContext k8s_request_context(const K8sRequest *req);

/* Cancel the request if it is running, and free it and everything it owns */
extern void k8s_request_free(K8sRequest *req);

#ifdef PAIDB_TEST_HOOKS			/* test/modules/paidb_test only */
/*
 * Submit req and wait until it finishes, on the same wait loop (other
 * requests progress meanwhile).  CHECK_FOR_INTERRUPTS() runs every turn; on
 * ERROR the request is cancelled and freed.  A latch wake-up seen while
 * waiting is not lost: the latch is set again before returning.
 */
extern void k8s_perform_request(K8sRequest *req, uint32 wait_event_info);
#endif


/* ---- results ---- */

/* Name of a result kind: "ok", "http_error", "transport", "timeout", "pending" */
extern const char *k8s_result_kind_name(K8sResultKind kind);

#ifdef PAIDB_TEST_HOOKS			/* test/modules/paidb_test only */
/* Milliseconds to wait for a Retry-After value (delay-seconds or HTTP-date); -1 if invalid */
extern long k8s_retry_after_ms(const char *value);
#endif

/* Whether the result means 410 Gone / Expired (list again from scratch) */
extern bool k8s_result_is_gone(const K8sResult *res);

/* Whether retrying later can help (429, 5xx, transport error, timeout) */
extern bool k8s_result_is_retryable(const K8sResult *res);

/*
 * Log a failed request at elevel with its method, path, HTTP status,
 * Kubernetes reason, message and the object's name (never the token).
 */
extern void k8s_log_failure(int elevel, const K8sRequest *req, const char *object_name);

/* ---- paths (palloc'd in CurrentMemoryContext; NULL namespace: the client's) ---- */

/* /apis/frameworkcontroller.microsoft.com/v1/namespaces/{ns}/frameworks[/{name}] */
extern char *k8s_path_frameworks(K8sClient *client, const char *ns, const char *name);

/* /api/v1/namespaces/{ns}/secrets[/{name}] */
extern char *k8s_path_secrets(K8sClient *client, const char *ns, const char *name);

/* /apis/scheduling.k8s.io/v1/priorityclasses[/{name}] (cluster scoped) */
extern char *k8s_path_priorityclasses(const char *name);

/* /api/v1/namespaces/{ns}/events[/{name}] */
extern char *k8s_path_events(K8sClient *client, const char *ns, const char *name);

/* Percent-encode s for a path segment or a query value (RFC 3986 unreserved kept) */
extern char *k8s_url_escape(const char *s);

/* Append "?key=value" or "&key=value" to path (value escaped), returning a new string */
extern char *k8s_path_add_query(const char *path, const char *key, const char *value);

/* The body of a DeleteOptions with the given propagation policy */
extern char *k8s_delete_options_body(const char *propagation_policy);

#endif							/* PAIDB_K8S_CLIENT_H */
