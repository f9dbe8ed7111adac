/*
 * k8s_client.c — asynchronous Kubernetes API client on libcurl's multi
 * interface, driven from one WaitEventSet.
 *
 * Rules that shape this file:
 *
 * - Nothing inside a libcurl callback may throw a PostgreSQL ERROR: a longjmp
 *   out of libcurl would leave it in an undefined state.  The callbacks only
 *   copy bytes into malloc'd buffers and fixed-size fields and record socket
 *   and timer changes; everything that allocates with palloc, parses JSON or
 *   reports runs after curl_multi_socket_action() has returned.
 *
 * - Every libcurl object is owned by a memory context (the client's or the
 *   request's) through a reset callback, so it is released on every path:
 *   explicit free, or deletion of a parent context during error recovery.
 *
 * - PostgreSQL 15 cannot remove an event from a WaitEventSet, so the set
 *   (latch + postmaster death + curl sockets) is rebuilt before the next wait
 *   whenever curl changes its socket set.
 *
 * - The bearer token only ever goes into the Authorization header given to
 *   curl; that header is wiped before it is freed, CURLOPT_VERBOSE stays off,
 *   redirects are not followed, and no message includes it.
 */
#include "postgres.h"

#include <ctype.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <curl/curl.h>
#include <json-c/json.h>

#include "lib/ilist.h"
#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "portability/instr_time.h"
#include "postmaster/postmaster.h"
#include "storage/fd.h"
#include "storage/latch.h"
#include "utils/json.h"
#include "utils/memutils.h"

#include "cluster_config.h"
#include "guc.h"
#include "k8s_client.h"
#include "k8s_objects.h"
#include "worker_common.h"
#include "worker_shmem.h"

#define K8S_SA_DIR			"/var/run/secrets/kubernetes.io/serviceaccount"
#define K8S_MAX_TOKEN_BYTES (64 * 1024)
#define K8S_MAX_BODY_BYTES	((size_t) MaxAllocSize - 1)
#define K8S_USER_AGENT		"paidb/0.2"

static const char *k8s_user_agent(void);

/* Bytes of a streamed body buffered before the transfer is paused for the parser */
#define K8S_STREAM_HOLD_BYTES	(1024 * 1024)

/* One socket curl asked us to watch */
typedef struct K8sSocket
{
	curl_socket_t fd;
	int			what;			/* CURL_POLL_IN, _OUT or _INOUT */
} K8sSocket;

typedef enum K8sRequestState
{
	K8S_REQ_NEW,
	K8S_REQ_RUNNING,
	K8S_REQ_DONE
} K8sRequestState;

struct K8sClient
{
	MemoryContext mcxt;
	CURLM	   *multi;

	/* configuration (palloc'd in mcxt) */
	char	   *base_url;		/* no trailing slash; NULL: not configured */
	char	   *config_problem; /* why base_url is NULL */
	char	   *namespace;
	char	   *token_path;		/* NULL: send no token */
	char	   *ca_path;		/* NULL: the system's CA bundle */

	/* cached bearer token (wiped before it is freed) */
	char	   *token;
	bool		token_stat_valid;
	bool		token_warned;
	struct stat token_stat;

	/* sockets reported by curl; malloc'd since curl callbacks change them */
	K8sSocket  *socks;
	int			nsocks;
	int			maxsocks;
	bool		wes_dirty;
	WaitEventSet *wes;
	WaitEvent  *occurred;
	int			noccurred;

	/* curl's single timer */
	bool		timer_armed;
	uint64		timer_due_us;

	dlist_head	running;		/* submitted, not finished */
	dlist_head	done;			/* finished, waiting for k8s_client_next_done */
	int			nrunning;
	int			new_results;	/* results produced since the last wait returned */
};

struct K8sRequest
{
	K8sClient  *client;
	MemoryContext mcxt;
	dlist_node	node;			/* in client->running or client->done */
	bool		linked;
	K8sRequestState state;
	bool		blocking;		/* awaited by k8s_perform_request */

	K8sMethod	method;
	char	   *path;
	char	   *content_type;
	char	   *body;
	size_t		body_len;
	long		timeout_ms;
	long		idle_s;
	void	   *user_data;

	CURL	   *easy;
	bool		in_multi;
	struct curl_slist *headers;

	/* written by curl callbacks: malloc and fixed-size only */
	char	   *buf;
	size_t		buf_len;
	size_t		buf_cap;
	bool		buf_overflow;
	long		cb_status;
	char		retry_after[64];
	char		errbuf[CURL_ERROR_SIZE];

	/* streaming of a 2xx body */
	const K8sStreamOps *stream_ops;
	void	   *stream_state;
	bool		stream_cleaned;
	bool		streaming;
	bool		stream_failed;	/* consume() gave up: stop the transfer */
	bool		stream_paused;	/* held back until the parser took the buffer */

	K8sResult	result;
};

static void k8s_client_load_config(K8sClient *client);
static void k8s_client_collect(K8sClient *client);

/* Monotonic clock in microseconds */
static uint64
k8s_now_us(void)
{
	instr_time	now;

	INSTR_TIME_SET_CURRENT(now);
	return INSTR_TIME_GET_MICROSEC(now);
}

/*
 * Block asynchronous signals while libcurl runs.  libcurl may start a thread
 * (its threaded DNS resolver); a new thread inherits the signal mask of its
 * creator, so with everything blocked PostgreSQL's signal handlers can only
 * ever run on the main thread.  Signals arriving meanwhile stay pending and
 * are delivered by k8s_restore_signals().
 */
static void
k8s_block_signals(sigset_t *saved)
{
	sigset_t	all;

	sigfillset(&all);
	sigdelset(&all, SIGSEGV);
	sigdelset(&all, SIGBUS);
	sigdelset(&all, SIGFPE);
	sigdelset(&all, SIGILL);
	sigdelset(&all, SIGABRT);
	sigdelset(&all, SIGTRAP);
	sigprocmask(SIG_BLOCK, &all, saved);
}

/* Restore the signal mask saved by k8s_block_signals */
static void
k8s_restore_signals(const sigset_t *saved)
{
	sigprocmask(SIG_SETMASK, saved, NULL);
}

/* Overwrite and free a palloc'd secret string */
static void
k8s_free_secret(char *s)
{
	if (s == NULL)
		return;
	explicit_bzero(s, strlen(s));
	pfree(s);
}

/* Overwrite and free a curl header list (it may hold the token) */
static void
k8s_free_headers(struct curl_slist *list)
{
	struct curl_slist *item;

	for (item = list; item != NULL; item = item->next)
	{
		if (item->data)
			explicit_bzero(item->data, strlen(item->data));
	}
	curl_slist_free_all(list);
}

/* ---------------------------------------------------------------------
 * curl callbacks: no palloc, no ereport, no longjmp
 * ---------------------------------------------------------------------
 */

/*
 * Largest body buffered for the request: a streamed 2xx body is handed to
 * its parser after every wait (which bounds each object itself), anything
 * else is held whole, so it gets the object limit (SPEC §8), with room for
 * a Status around it.  The body counted is the decompressed one.
 */
static size_t
k8s_body_limit(const K8sRequest *req)
{
	if (req->stream_ops != NULL && req->cb_status >= 200 && req->cb_status < 300)
		return K8S_MAX_BODY_BYTES;
	return Min((size_t) paidb_max_object_bytes + 65536, K8S_MAX_BODY_BYTES);
}

/* Collect response bytes into the request's malloc'd buffer */
static size_t
k8s_write_cb(char *data, size_t size, size_t nmemb, void *userp)
{
	K8sRequest *req = (K8sRequest *) userp;
	size_t		len = size * nmemb;

	size_t		limit = k8s_body_limit(req);

	if (len == 0)
		return 0;
	/* a stream waits while its parser has not taken what came (curl keeps this chunk) */
	if (req->stream_ops != NULL && req->cb_status >= 200 && req->cb_status < 300 &&
		req->buf_len >= K8S_STREAM_HOLD_BYTES)
	{
		req->stream_paused = true;
		return CURL_WRITEFUNC_PAUSE;
	}
	if (req->buf_len + len + 1 > req->buf_cap)
	{
		size_t		need = req->buf_len + len + 1;
		size_t		cap = req->buf_cap ? req->buf_cap : 16384;
		char	   *p;

		if (need > limit + 1)
		{
			req->buf_overflow = true;
			return 0;
		}
		while (cap < need)
			cap *= 2;
		if (cap > limit + 1)
			cap = limit + 1;
		p = realloc(req->buf, cap);
		if (p == NULL)
		{
			req->buf_overflow = true;
			return 0;
		}
		req->buf = p;
		req->buf_cap = cap;
	}
	memcpy(req->buf + req->buf_len, data, len);
	req->buf_len += len;
	return len;
}

/* Note the status line and Retry-After of the response */
static size_t
k8s_header_cb(char *data, size_t size, size_t nitems, void *userp)
{
	K8sRequest *req = (K8sRequest *) userp;
	size_t		len = size * nitems;

	if (len > 5 && strncmp(data, "HTTP/", 5) == 0)
	{
		size_t		i = 5;
		long		code = 0;

		/* a new response (after 1xx): forget the previous one's headers */
		while (i < len && data[i] != ' ')
			i++;
		while (i < len && data[i] == ' ')
			i++;
		while (i < len && data[i] >= '0' && data[i] <= '9' && code < 1000)
			code = code * 10 + (data[i++] - '0');
		req->cb_status = code;
		req->retry_after[0] = '\0';
	}
	else if (len > 12 && pg_strncasecmp(data, "Retry-After:", 12) == 0)
	{
		size_t		i = 12;
		size_t		n = 0;

		while (i < len && (data[i] == ' ' || data[i] == '\t'))
			i++;
		while (i < len && data[i] != '\r' && data[i] != '\n' &&
			   n < sizeof(req->retry_after) - 1)
			req->retry_after[n++] = data[i++];
		req->retry_after[n] = '\0';
	}
	return len;
}

/* Record which sockets curl wants watched; the wait set is rebuilt later */
static int
k8s_socket_cb(CURL *easy, curl_socket_t s, int what, void *userp, void *socketp)
{
	K8sClient  *client = (K8sClient *) userp;
	int			i;

	for (i = 0; i < client->nsocks; i++)
	{
		if (client->socks[i].fd == s)
			break;
	}

	if (what == CURL_POLL_REMOVE)
	{
		if (i < client->nsocks)
		{
			client->socks[i] = client->socks[client->nsocks - 1];
			client->nsocks--;
			client->wes_dirty = true;
		}
		return 0;
	}

	if (i == client->nsocks)
	{
		if (client->nsocks == client->maxsocks)
		{
			int			newmax = client->maxsocks ? client->maxsocks * 2 : 16;
			K8sSocket  *p = realloc(client->socks, sizeof(K8sSocket) * newmax);

			if (p == NULL)
				return -1;		/* curl fails the transfers on this socket */
			client->socks = p;
			client->maxsocks = newmax;
		}
		client->socks[i].fd = s;
		client->nsocks++;
	}
	else if (client->socks[i].what == what)
		return 0;
	client->socks[i].what = what;
	client->wes_dirty = true;
	return 0;
}

/* Record curl's timer; it is run from k8s_client_wait */
static int
k8s_timer_cb(CURLM *multi, long timeout_ms, void *userp)
{
	K8sClient  *client = (K8sClient *) userp;

	if (timeout_ms < 0)
		client->timer_armed = false;
	else
	{
		client->timer_armed = true;
		client->timer_due_us = k8s_now_us() + (uint64) timeout_ms * 1000;
	}
	return 0;
}

/* ---------------------------------------------------------------------
 * client
 * ---------------------------------------------------------------------
 */

/* Release the client's libcurl objects, wait set and secrets (reset callback) */
static void
k8s_client_cleanup(void *arg)
{
	K8sClient  *client = (K8sClient *) arg;

	/* requests were in child contexts, already deleted */
	if (client->multi)
	{
		curl_multi_cleanup(client->multi);
		client->multi = NULL;
	}
	if (client->wes)
	{
		FreeWaitEventSet(client->wes);
		client->wes = NULL;
	}
	if (client->socks)
	{
		free(client->socks);
		client->socks = NULL;
	}
	client->nsocks = client->maxsocks = 0;
	if (client->token)
	{
		explicit_bzero(client->token, strlen(client->token));
		client->token = NULL;
	}
}

/*
 * The User-Agent of every request: "paidb/0.2 (host:port)", naming the
 * server that sent it, so that an API server's audit log (or the fake's)
 * tells the members of a replicated cluster apart after a failover.
 */
static const char *
k8s_user_agent(void)
{
	static char agent[128];

	if (agent[0] == '\0')
	{
		char		host[64];

		if (gethostname(host, sizeof(host)) != 0)
			strlcpy(host, "unknown", sizeof(host));
		host[sizeof(host) - 1] = '\0';
		snprintf(agent, sizeof(agent), "%s (%s:%d)", K8S_USER_AGENT, host, PostPortNumber);
	}
	return agent;
}

/* Create a client from the paidb.k8s_* settings, in a child of parent */
K8sClient *
k8s_client_create(MemoryContext parent)
{
	static bool curl_ready = false;
	MemoryContext mcxt;
	MemoryContextCallback *cb;
	K8sClient  *client;

	if (!curl_ready)
	{
		if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
			ereport(ERROR,
					(errcode(ERRCODE_INTERNAL_ERROR),
					 errmsg("could not initialize libcurl")));
		curl_ready = true;
	}

	mcxt = AllocSetContextCreate(parent, "paidb k8s client", ALLOCSET_DEFAULT_SIZES);
	client = MemoryContextAllocZero(mcxt, sizeof(K8sClient));
	client->mcxt = mcxt;
	dlist_init(&client->running);
	dlist_init(&client->done);
	client->wes_dirty = true;

	cb = MemoryContextAlloc(mcxt, sizeof(MemoryContextCallback));
	cb->func = k8s_client_cleanup;
	cb->arg = client;
	MemoryContextRegisterResetCallback(mcxt, cb);

	client->multi = curl_multi_init();
	if (client->multi == NULL)
	{
		MemoryContextDelete(mcxt);
		ereport(ERROR,
				(errcode(ERRCODE_OUT_OF_MEMORY),
				 errmsg("could not create a libcurl multi handle")));
	}
	curl_multi_setopt(client->multi, CURLMOPT_SOCKETFUNCTION, k8s_socket_cb);
	curl_multi_setopt(client->multi, CURLMOPT_SOCKETDATA, client);
	curl_multi_setopt(client->multi, CURLMOPT_TIMERFUNCTION, k8s_timer_cb);
	curl_multi_setopt(client->multi, CURLMOPT_TIMERDATA, client);
	curl_multi_setopt(client->multi, CURLMOPT_MAXCONNECTS,
					  (long) Max(paidb_max_rpc_concurrency + 4, 8));

	PG_TRY();
	{
		k8s_client_load_config(client);
	}
	PG_CATCH();
	{
		MemoryContextDelete(mcxt);
		PG_RE_THROW();
	}
	PG_END_TRY();

	return client;
}

/*
 * Read a small text file into a palloc'd string with surrounding blanks
 * trimmed; NULL with errno set if it cannot be opened or read.
 */
static char *
k8s_read_small_file(const char *path, size_t maxlen, struct stat *st_out)
{
	int			fd;
	int			save_errno;
	char	   *buf;
	ssize_t		n;
	size_t		len = 0;
	size_t		start;

	fd = OpenTransientFile(path, O_RDONLY | PG_BINARY);
	if (fd < 0)
		return NULL;
	if (st_out != NULL && fstat(fd, st_out) != 0)
	{
		save_errno = errno;
		CloseTransientFile(fd);
		errno = save_errno;
		return NULL;
	}
	buf = palloc(maxlen + 1);
	while (len < maxlen)
	{
		n = read(fd, buf + len, maxlen - len);
		if (n < 0)
		{
			if (errno == EINTR)
				continue;
			/* (e.g. EISDIR: the setting names a directory) */
			save_errno = errno;
			CloseTransientFile(fd);
			/* buf is not terminated: wipe what was read by length */
			explicit_bzero(buf, len);
			pfree(buf);
			errno = save_errno;		/* for the caller's %m */
			return NULL;
		}
		if (n == 0)
			break;
		len += n;
	}
	CloseTransientFile(fd);
	buf[len] = '\0';
	while (len > 0 && isspace((unsigned char) buf[len - 1]))
		buf[--len] = '\0';
	for (start = 0; start < len && isspace((unsigned char) buf[start]); start++)
		;
	if (start > 0)
		memmove(buf, buf + start, len - start + 1);
	return buf;
}

/* Store a setting or a default (NULL if both are empty) in the client's context */
static char *
k8s_config_string(K8sClient *client, const char *setting, const char *fallback)
{
	if (setting != NULL && setting[0] != '\0')
		return MemoryContextStrdup(client->mcxt, setting);
	if (fallback != NULL && fallback[0] != '\0')
		return MemoryContextStrdup(client->mcxt, fallback);
	return NULL;
}

/* Whether two optional strings differ */
static bool
k8s_strings_differ(const char *a, const char *b)
{
	if (a == NULL || b == NULL)
		return a != b;
	return strcmp(a, b) != 0;
}

/* (Re)compute base URL, namespace, token and CA paths from the settings */
static void
k8s_client_load_config(K8sClient *client)
{
	/* the calling worker's cluster: its row, else the paidb.k8s_* settings */
	const char *url = paidb_cluster_api_server();
	const char *token_file = paidb_cluster_token_file();
	const char *ca_file = paidb_cluster_ca_file();
	const char *namespace = paidb_cluster_namespace();
	char	   *old_token_path = client->token_path;
	char	   *new_token_path;

	if (client->base_url)
		pfree(client->base_url);
	if (client->config_problem)
		pfree(client->config_problem);
	if (client->namespace)
		pfree(client->namespace);
	if (client->ca_path)
		pfree(client->ca_path);
	client->base_url = client->config_problem = client->namespace = NULL;
	client->ca_path = NULL;

	if (url != NULL && url[0] != '\0')
	{
		size_t		len;

		/* an explicit URL */
		client->base_url = MemoryContextStrdup(client->mcxt, url);
		len = strlen(client->base_url);
		while (len > 0 && client->base_url[len - 1] == '/')
			client->base_url[--len] = '\0';
		new_token_path = k8s_config_string(client, token_file, NULL);
		client->ca_path = k8s_config_string(client, ca_file, NULL);
		client->namespace = k8s_config_string(client, namespace, "default");
	}
	else
	{
		const char *host = getenv("KUBERNETES_SERVICE_HOST");
		const char *port = getenv("KUBERNETES_SERVICE_PORT");

		/* in-cluster: the service account's files are the defaults */
		if (host != NULL && host[0] != '\0')
		{
			bool		v6 = strchr(host, ':') != NULL;

			client->base_url = MemoryContextStrdup(client->mcxt,
												   psprintf("https://%s%s%s:%s",
															v6 ? "[" : "", host, v6 ? "]" : "",
															(port && port[0]) ? port : "443"));
		}
		else
			client->config_problem =
				MemoryContextStrdup(client->mcxt,
									"paidb.k8s_api_server is empty and KUBERNETES_SERVICE_HOST is not set");
		new_token_path = k8s_config_string(client, token_file, K8S_SA_DIR "/token");
		client->ca_path = k8s_config_string(client, ca_file, K8S_SA_DIR "/ca.crt");

		/* 'default' (the setting's default) means the service account's namespace */
		if (namespace == NULL || namespace[0] == '\0' ||
			strcmp(namespace, "default") == 0)
		{
			char	   *ns = k8s_read_small_file(K8S_SA_DIR "/namespace", 253, NULL);

			if (ns != NULL && ns[0] != '\0')
				client->namespace = MemoryContextStrdup(client->mcxt, ns);
		}
		if (client->namespace == NULL)
			client->namespace = k8s_config_string(client, namespace, "default");
	}

	if (client->base_url != NULL &&
		pg_strncasecmp(client->base_url, "http://", 7) != 0 &&
		pg_strncasecmp(client->base_url, "https://", 8) != 0)
	{
		ereport(WARNING,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("paidb.k8s_api_server must start with \"http://\" or \"https://\"")));
		pfree(client->base_url);
		client->base_url = NULL;
		client->config_problem =
			MemoryContextStrdup(client->mcxt,
								"paidb.k8s_api_server is not an http:// or https:// URL");
	}

	/* a different token file: forget the cached token */
	client->token_path = new_token_path;
	if (k8s_strings_differ(old_token_path, new_token_path))
	{
		k8s_free_secret(client->token);
		client->token = NULL;
		client->token_stat_valid = false;
		client->token_warned = false;
	}
	if (old_token_path)
		pfree(old_token_path);
}

/* Re-read the settings (after SIGHUP); requests in flight are not affected */
void
k8s_client_reload(K8sClient *client)
{
	k8s_client_load_config(client);
	curl_multi_setopt(client->multi, CURLMOPT_MAXCONNECTS,
					  (long) Max(paidb_max_rpc_concurrency + 4, 8));
}

#ifdef PAIDB_TEST_HOOKS
/* Cancel every request and release everything the client owns */
void
k8s_client_destroy(K8sClient *client)
{
	if (client != NULL)
		MemoryContextDelete(client->mcxt);
}
#endif

/* The namespace of namespaced objects (setting, or in-cluster namespace file) */
const char *
k8s_client_namespace(K8sClient *client)
{
	return client->namespace;
}

/* The API server base URL in use, or NULL if none is configured */
const char *
k8s_client_base_url(K8sClient *client)
{
	return client->base_url;
}

#ifdef PAIDB_TEST_HOOKS
/* Number of submitted requests (watches and lists included) not yet finished */
int
k8s_client_in_flight(K8sClient *client)
{
	return client->nrunning;
}
#endif

/* Whether a stat result still describes the file we read the token from */
static bool
k8s_same_file(const struct stat *a, const struct stat *b)
{
	if (a->st_dev != b->st_dev || a->st_ino != b->st_ino ||
		a->st_size != b->st_size || a->st_mtime != b->st_mtime ||
		a->st_ctime != b->st_ctime)
		return false;
#if defined(__linux__)
	if (a->st_mtim.tv_nsec != b->st_mtim.tv_nsec ||
		a->st_ctim.tv_nsec != b->st_ctim.tv_nsec)
		return false;
#endif
	return true;
}

/* Re-read the token file if it changed since we last read it */
static void
k8s_client_refresh_token(K8sClient *client)
{
	struct stat st;
	struct stat fst;
	char	   *token;
	char	   *p;

	if (client->token_path == NULL)
		return;
	if (stat(client->token_path, &st) != 0)
	{
		if (!client->token_warned)
			ereport(WARNING,
					(errcode_for_file_access(),
					 errmsg("could not stat token file \"%s\": %m", client->token_path),
					 client->token ? errdetail("The token read earlier is used meanwhile.") : 0));
		client->token_warned = true;
		return;
	}
	if (client->token_stat_valid && k8s_same_file(&st, &client->token_stat))
		return;

	token = k8s_read_small_file(client->token_path, K8S_MAX_TOKEN_BYTES, &fst);
	if (token == NULL)
	{
		if (!client->token_warned)
			ereport(WARNING,
					(errcode_for_file_access(),
					 errmsg("could not read token file \"%s\": %m", client->token_path)));
		client->token_warned = true;
		return;
	}
	for (p = token; *p; p++)
	{
		if ((unsigned char) *p < 0x20 || (unsigned char) *p == 0x7f)
			break;
	}
	if (*p != '\0' || token[0] == '\0')
	{
		if (!client->token_warned)
			ereport(WARNING,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("token file \"%s\" is empty or holds control characters",
							client->token_path)));
		client->token_warned = true;
		k8s_free_secret(token);
		return;
	}

	k8s_free_secret(client->token);
	client->token = MemoryContextStrdup(client->mcxt, token);
	k8s_free_secret(token);
	client->token_stat = fst;
	client->token_stat_valid = true;
	client->token_warned = false;
}

/* ---------------------------------------------------------------------
 * requests
 * ---------------------------------------------------------------------
 */

/* Take the request off whichever client list it is on */
static void
k8s_request_unlink(K8sRequest *req)
{
	if (!req->linked)
		return;
	dlist_delete(&req->node);
	req->linked = false;
	if (req->state == K8S_REQ_RUNNING)
		req->client->nrunning--;
}

/* Release the request's libcurl and json-c objects (reset callback) */
static void
k8s_request_cleanup(void *arg)
{
	K8sRequest *req = (K8sRequest *) arg;
	K8sClient  *client = req->client;

	if (req->easy)
	{
		if (req->in_multi && client->multi)
			curl_multi_remove_handle(client->multi, req->easy);
		req->in_multi = false;
		curl_easy_cleanup(req->easy);
		req->easy = NULL;
	}
	if (req->headers)
	{
		k8s_free_headers(req->headers);
		req->headers = NULL;
	}
	if (req->buf)
	{
		free(req->buf);
		req->buf = NULL;
		req->buf_len = req->buf_cap = 0;
	}
	if (req->stream_ops && req->stream_ops->cleanup && !req->stream_cleaned)
	{
		req->stream_cleaned = true;
		req->stream_ops->cleanup(req->stream_state);
	}
	k8s_request_unlink(req);
}

/*
 * Refuse a path with an empty, "." or ".." segment before the query
 * (SPEC §8): the API server or a proxy would read it as another resource
 * (a collection, a parent), e.g. DELETE of every secret.  Every request
 * passes here, so no caller can send one.
 */
static void
k8s_check_path(const char *path)
{
	const char *seg = path + 1;

	for (;;)
	{
		size_t		n = strcspn(seg, "/?#");

		if (n == 0 || (n == 1 && seg[0] == '.') || (n == 2 && seg[0] == '.' && seg[1] == '.'))
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("refusing to send a kubernetes API request whose path has an empty, \".\" or \"..\" segment"),
					 errdetail("The path is \"%.200s\".", path)));
		if (seg[n] != '/')
			break;
		seg += n + 1;
	}
}

/* WARNING, once per API server and process, that the bearer token goes over plain http */
static void
k8s_warn_plain_http(K8sClient *client)
{
	static char *warned_for = NULL;

	if (pg_strncasecmp(client->base_url, "http://", 7) != 0)
		return;
	if (warned_for != NULL && strcmp(warned_for, client->base_url) == 0)
		return;
	if (warned_for != NULL)
		pfree(warned_for);
	warned_for = MemoryContextStrdup(TopMemoryContext, client->base_url);
	/* for the server log: a worker's WARNING goes there, a session's LOG too */
	ereport(IsBackgroundWorker ? WARNING : LOG,
			(errmsg("paidb sends its bearer token to %s over plain http", client->base_url),
			 errdetail("Anyone who can read the traffic can use the token against the cluster."),
			 errhint("Use an https:// URL in paidb.k8s_api_server.")));
}

/* New unsubmitted request; path is relative to the server (may carry a query) */
K8sRequest *
k8s_request_new(K8sClient *client, K8sMethod method, const char *path,
				const char *content_type, const char *body, size_t body_len)
{
	MemoryContext mcxt;
	MemoryContextCallback *cb;
	K8sRequest *req;

	if (path == NULL || path[0] != '/')
		elog(ERROR, "kubernetes API path must start with '/'");
	k8s_check_path(path);

	mcxt = AllocSetContextCreate(client->mcxt, "paidb k8s request", ALLOCSET_SMALL_SIZES);
	req = MemoryContextAllocZero(mcxt, sizeof(K8sRequest));
	req->client = client;
	req->mcxt = mcxt;
	req->state = K8S_REQ_NEW;
	cb = MemoryContextAlloc(mcxt, sizeof(MemoryContextCallback));
	cb->func = k8s_request_cleanup;
	cb->arg = req;
	MemoryContextRegisterResetCallback(mcxt, cb);

	req->method = method;
	req->path = MemoryContextStrdup(mcxt, path);
	if (content_type)
		req->content_type = MemoryContextStrdup(mcxt, content_type);
	if (body)
	{
		req->body = MemoryContextAllocHuge(mcxt, body_len + 1);
		memcpy(req->body, body, body_len);
		req->body[body_len] = '\0';
		req->body_len = body_len;
	}
	req->timeout_ms = paidb_k8s_timeout_ms;
	req->result.kind = K8S_RESULT_PENDING;
	req->result.retry_after_ms = -1;
	req->result.body = "";
	return req;
}

/* New GET request for path */
K8sRequest *
k8s_new_get(K8sClient *client, const char *path)
{
	return k8s_request_new(client, K8S_GET, path, NULL, NULL, 0);
}

/* New POST (create) of a JSON object into a collection path */
K8sRequest *
k8s_new_create(K8sClient *client, const char *collection_path, const char *json)
{
	return k8s_request_new(client, K8S_POST, collection_path, "application/json",
						   json, strlen(json));
}

/* New PATCH of an object with a JSON merge patch (application/merge-patch+json) */
K8sRequest *
k8s_new_merge_patch(K8sClient *client, const char *path, const char *json_patch)
{
	return k8s_request_new(client, K8S_PATCH, path, "application/merge-patch+json",
						   json_patch, strlen(json_patch));
}

/* New DELETE with DeleteOptions.propagationPolicy ("Foreground"...; NULL: none) */
K8sRequest *
k8s_new_delete(K8sClient *client, const char *path, const char *propagation_policy)
{
	char	   *body;
	K8sRequest *req;

	if (propagation_policy == NULL)
		return k8s_request_new(client, K8S_DELETE, path, NULL, NULL, 0);
	body = k8s_delete_options_body(propagation_policy);
	req = k8s_request_new(client, K8S_DELETE, path, "application/json", body, strlen(body));
	pfree(body);
	return req;
}

/* Override the request's total timeout (default: paidb.k8s_timeout) */
void
k8s_request_set_timeout(K8sRequest *req, long timeout_ms)
{
	req->timeout_ms = timeout_ms > 0 ? timeout_ms : paidb_k8s_timeout_ms;
}

/* End the request with K8S_RESULT_TIMEOUT if no byte arrives for idle_s seconds */
void
k8s_request_set_idle_timeout(K8sRequest *req, long idle_s)
{
	req->idle_s = idle_s > 0 ? idle_s : 0;
}

/* Attach a caller pointer to the request */
void
k8s_request_set_user_data(K8sRequest *req, void *user_data)
{
	req->user_data = user_data;
}

/* The caller pointer attached to the request */
void *
k8s_request_user_data(const K8sRequest *req)
{
	return req->user_data;
}

/* Stream the 2xx body through ops instead of collecting it (used by k8s_watch.c) */
void
k8s_request_set_stream(K8sRequest *req, const K8sStreamOps *ops, void *state)
{
	if (req->state != K8S_REQ_NEW)
		elog(ERROR, "cannot set the stream of a submitted kubernetes request");
	req->stream_ops = ops;
	req->stream_state = state;
}

/* The request's result (kind K8S_RESULT_PENDING while it runs) */
const K8sResult *
k8s_request_result(const K8sRequest *req)
{
	return &req->result;
}

/* Name of an HTTP method */
static const char *
k8s_method_name(K8sMethod method)
{
	switch (method)
	{
		case K8S_GET:
			return "GET";
		case K8S_POST:
			return "POST";
		case K8S_PUT:
			return "PUT";
		case K8S_PATCH:
			return "PATCH";
		case K8S_DELETE:
			return "DELETE";
	}
	return "GET";
}

/* The request's method name, for messages */
const char *
k8s_request_method_name(const K8sRequest *req)
{
	return k8s_method_name(req->method);
}

/* The request's path, for messages (never holds a credential) */
const char *
k8s_request_path(const K8sRequest *req)
{
	return req->path;
}

/* The client the request belongs to */
K8sClient *
k8s_request_client(const K8sRequest *req)
{
	return req->client;
}

/* The memory context that holds the request; freed with it */
MemoryContext
k8s_request_context(const K8sRequest *req)
{
	return req->mcxt;
}

/* Put a finished request where its owner will find it */
static void
k8s_request_deliver(K8sRequest *req)
{
	K8sClient  *client = req->client;

	k8s_request_unlink(req);
	req->state = K8S_REQ_DONE;
	if (!req->blocking && req->stream_ops == NULL)
	{
		dlist_push_tail(&client->done, &req->node);
		req->linked = true;
	}
	client->new_results++;
}

/* Finish a request at once, without a transfer (bad configuration) */
static void
k8s_request_fail_now(K8sRequest *req, K8sResultKind kind, const char *message)
{
	req->result.kind = kind;
	req->result.message = MemoryContextStrdup(req->mcxt, message);
	if (req->stream_ops && req->stream_ops->finish)
		req->stream_ops->finish(req, req->stream_state, &req->result);
	k8s_request_deliver(req);
}

/* Append one header line to the request's list, or fail */
static void
k8s_request_add_header(K8sRequest *req, const char *line)
{
	struct curl_slist *list = curl_slist_append(req->headers, line);

	if (list == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OUT_OF_MEMORY),
				 errmsg("out of memory while building a kubernetes API request")));
	req->headers = list;
}

/* Set a curl option that cannot fail with a correct libcurl */
#define K8S_SETOPT(easy, opt, val) \
	do { \
		CURLcode	setopt_rc_ = curl_easy_setopt((easy), (opt), (val)); \
		if (setopt_rc_ != CURLE_OK) \
			elog(ERROR, "curl_easy_setopt(%s) failed: %s", #opt, \
				 curl_easy_strerror(setopt_rc_)); \
	} while (0)

/* Set a curl option the transfer can do without (tuning, hardening extras) */
#define K8S_SETOPT_OPTIONAL(easy, opt, val) \
	((void) curl_easy_setopt((easy), (opt), (val)))

/* Start the request; its result comes back through k8s_client_next_done() */
void
k8s_request_submit(K8sRequest *req)
{
	K8sClient  *client = req->client;
	MemoryContext oldcxt;
	char	   *url;
	CURL	   *easy;
	CURLMcode	mc;
	sigset_t	saved;

	if (req->state != K8S_REQ_NEW)
		elog(ERROR, "kubernetes API request submitted twice");

	if (client->base_url == NULL)
	{
		k8s_request_fail_now(req, K8S_RESULT_TRANSPORT,
							 client->config_problem ? client->config_problem :
							 "no kubernetes API server is configured");
		return;
	}
	k8s_client_refresh_token(client);

	oldcxt = MemoryContextSwitchTo(req->mcxt);
	url = psprintf("%s%s", client->base_url, req->path);

	easy = curl_easy_init();
	if (easy == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OUT_OF_MEMORY),
				 errmsg("could not create a libcurl handle")));
	req->easy = easy;			/* owned by the request from here on */

	k8s_request_add_header(req, "Accept: application/json");
	k8s_request_add_header(req, "Expect:");
	if (req->content_type)
		k8s_request_add_header(req, psprintf("Content-Type: %s", req->content_type));
	if (client->token)
	{
		char	   *auth;

		k8s_warn_plain_http(client);
		auth = psprintf("Authorization: Bearer %s", client->token);

		k8s_request_add_header(req, auth);
		k8s_free_secret(auth);
	}

	K8S_SETOPT(easy, CURLOPT_URL, url);
	K8S_SETOPT(easy, CURLOPT_PRIVATE, (char *) req);
	K8S_SETOPT(easy, CURLOPT_NOSIGNAL, 1L);
	K8S_SETOPT(easy, CURLOPT_VERBOSE, 0L);
	K8S_SETOPT(easy, CURLOPT_HTTPHEADER, req->headers);
	K8S_SETOPT(easy, CURLOPT_USERAGENT, k8s_user_agent());
	K8S_SETOPT(easy, CURLOPT_WRITEFUNCTION, k8s_write_cb);
	K8S_SETOPT(easy, CURLOPT_WRITEDATA, req);
	K8S_SETOPT(easy, CURLOPT_HEADERFUNCTION, k8s_header_cb);
	K8S_SETOPT(easy, CURLOPT_HEADERDATA, req);
	K8S_SETOPT(easy, CURLOPT_ERRORBUFFER, req->errbuf);
	/* a redirect could carry the token elsewhere: never follow one (SPEC §8) */
	K8S_SETOPT(easy, CURLOPT_FOLLOWLOCATION, 0L);
	K8S_SETOPT(easy, CURLOPT_MAXREDIRS, 0L);
	/* send the path exactly as built: no dot-segment removal (SPEC §8) */
	K8S_SETOPT(easy, CURLOPT_PATH_AS_IS, 1L);
#if LIBCURL_VERSION_NUM >= 0x075700
	/* freeing a request must not wait for a DNS resolver thread */
	K8S_SETOPT_OPTIONAL(easy, CURLOPT_QUICK_EXIT, 1L);
#endif
#if LIBCURL_VERSION_NUM >= 0x075500
	K8S_SETOPT(easy, CURLOPT_PROTOCOLS_STR, "http,https");
#else
	K8S_SETOPT(easy, CURLOPT_PROTOCOLS, (long) (CURLPROTO_HTTP | CURLPROTO_HTTPS));
#endif
	K8S_SETOPT_OPTIONAL(easy, CURLOPT_ACCEPT_ENCODING, "");
	K8S_SETOPT(easy, CURLOPT_TIMEOUT_MS, req->timeout_ms);
	K8S_SETOPT(easy, CURLOPT_CONNECTTIMEOUT_MS,
			   Min(req->timeout_ms, (long) paidb_k8s_timeout_ms));
	K8S_SETOPT_OPTIONAL(easy, CURLOPT_TCP_KEEPALIVE, 1L);
	K8S_SETOPT_OPTIONAL(easy, CURLOPT_TCP_KEEPIDLE, 30L);
	K8S_SETOPT_OPTIONAL(easy, CURLOPT_TCP_KEEPINTVL, 10L);
	if (req->idle_s > 0)
	{
		K8S_SETOPT(easy, CURLOPT_LOW_SPEED_LIMIT, 1L);
		K8S_SETOPT(easy, CURLOPT_LOW_SPEED_TIME, req->idle_s);
	}

	/* TLS: verification is always on; only the CA bundle is configurable */
	K8S_SETOPT(easy, CURLOPT_SSL_VERIFYPEER, 1L);
	K8S_SETOPT(easy, CURLOPT_SSL_VERIFYHOST, 2L);
	if (client->ca_path)
		K8S_SETOPT(easy, CURLOPT_CAINFO, client->ca_path);
#if LIBCURL_VERSION_NUM >= 0x075700
	/* re-read the CA bundle for new connections, so a rotated CA is seen */
	K8S_SETOPT_OPTIONAL(easy, CURLOPT_CA_CACHE_TIMEOUT, 0L);
#endif

	switch (req->method)
	{
		case K8S_GET:
			K8S_SETOPT(easy, CURLOPT_HTTPGET, 1L);
			break;
		case K8S_POST:
		case K8S_PUT:
		case K8S_PATCH:
		case K8S_DELETE:
			if (req->method != K8S_POST)
				K8S_SETOPT(easy, CURLOPT_CUSTOMREQUEST, k8s_method_name(req->method));
			if (req->body != NULL)
			{
				K8S_SETOPT(easy, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t) req->body_len);
				K8S_SETOPT(easy, CURLOPT_POSTFIELDS, req->body);
			}
			else if (req->method != K8S_DELETE)
			{
				K8S_SETOPT(easy, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t) 0);
				K8S_SETOPT(easy, CURLOPT_POSTFIELDS, "");
			}
			break;
	}
	MemoryContextSwitchTo(oldcxt);

	k8s_block_signals(&saved);
	mc = curl_multi_add_handle(client->multi, easy);
	k8s_restore_signals(&saved);
	if (mc != CURLM_OK)
		ereport(ERROR,
				(errcode(ERRCODE_INTERNAL_ERROR),
				 errmsg("could not start a kubernetes API request: %s",
						curl_multi_strerror(mc))));
	req->in_multi = true;
	req->state = K8S_REQ_RUNNING;
	dlist_push_tail(&client->running, &req->node);
	req->linked = true;
	client->nrunning++;
}

/* Milliseconds to wait for a Retry-After value (delay-seconds or HTTP-date); -1 if invalid */
#ifndef PAIDB_TEST_HOOKS
static
#endif
long
k8s_retry_after_ms(const char *value)
{
	const char *p = value;
	long		secs = 0;

	if (value == NULL || value[0] == '\0')
		return -1;
	while (*p >= '0' && *p <= '9')
	{
		if (secs < 86400 * 7)
			secs = secs * 10 + (*p - '0');
		p++;
	}
	if (p != value)
	{
		while (*p == ' ' || *p == '\t')
			p++;
		if (*p == '\0')
			return Min(secs, 86400L * 7) * 1000;
		return -1;
	}
	else
	{
		time_t		when = curl_getdate(value, NULL);
		time_t		now = time(NULL);

		if (when == (time_t) -1)
			return -1;
		if (when <= now)
			return 0;
		return (long) Min((long) (when - now), 86400L * 7) * 1000;
	}
}

/* Copy a string member of a json-c object into the request's context */
static const char *
k8s_json_member_string(K8sRequest *req, struct json_object *obj, const char *key)
{
	struct json_object *v;

	if (!json_object_object_get_ex(obj, key, &v) ||
		!json_object_is_type(v, json_type_string))
		return NULL;
	return MemoryContextStrdup(req->mcxt, json_object_get_string(v));
}

/* Fill reason, message, code and details.retryAfterSeconds from a Status body */
static void
k8s_parse_status_body(K8sRequest *req)
{
	K8sResult  *res = &req->result;
	json_tokener *volatile tok = NULL;
	struct json_object *volatile obj = NULL;

	if (res->body_len == 0 || res->body[0] != '{')
		return;

	PG_TRY();
	{
		struct json_object *v;
		struct json_object *details;

		tok = json_tokener_new_ex(64);
		if (tok == NULL)
			elog(ERROR, "out of memory");
		obj = json_tokener_parse_ex(tok, res->body, (int) Min(res->body_len, (size_t) INT_MAX));
		if (obj != NULL && json_tokener_get_error(tok) == json_tokener_success &&
			json_object_is_type(obj, json_type_object) &&
			json_object_object_get_ex(obj, "kind", &v) &&
			json_object_is_type(v, json_type_string) &&
			strcmp(json_object_get_string(v), "Status") == 0)
		{
			res->reason = k8s_json_member_string(req, obj, "reason");
			res->message = k8s_json_member_string(req, obj, "message");
			if (json_object_object_get_ex(obj, "code", &v) &&
				json_object_is_type(v, json_type_int))
				res->status_code = json_object_get_int(v);
			if (res->retry_after_ms < 0 &&
				json_object_object_get_ex(obj, "details", &details) &&
				json_object_is_type(details, json_type_object) &&
				json_object_object_get_ex(details, "retryAfterSeconds", &v) &&
				json_object_is_type(v, json_type_int))
				res->retry_after_ms = (long) Min(Max(json_object_get_int(v), 0), 86400 * 7) * 1000L;
		}
	}
	PG_CATCH();
	{
		if (obj)
			json_object_put(obj);
		if (tok)
			json_tokener_free(tok);
		PG_RE_THROW();
	}
	PG_END_TRY();
	if (obj)
		json_object_put(obj);
	if (tok)
		json_tokener_free(tok);
}

/* Hand the bytes received so far to the stream parser, if the response is 2xx */
static void
k8s_request_flush_stream(K8sRequest *req)
{
	int			produced;
	size_t		len = req->buf_len;

	if (req->stream_ops == NULL || len == 0)
		return;
	if (req->cb_status < 200 || req->cb_status >= 300)
		return;					/* keep the error body for its Status */
	/* a watch that streams is the cluster answering (cluster_status) */
	paidb_worker_note_contact();
	req->streaming = true;
	req->buf_len = 0;
	if (req->stream_failed)
		return;
	produced = req->stream_ops->consume(req, req->stream_state, req->buf, len);
	if (produced > 0)
		req->client->new_results += produced;
	else if (produced < 0)
		req->stream_failed = true;
}

/* Copy at most max bytes of text, cut on a UTF-8 boundary, controls as spaces */
static char *
k8s_clip_text(MemoryContext mcxt, const char *s, size_t len, size_t max)
{
	char	   *out;
	size_t		i;

	if (len > max)
	{
		len = max;
		while (len > 0 && ((unsigned char) s[len] & 0xC0) == 0x80)
			len--;
	}
	out = MemoryContextAlloc(mcxt, len + 1);
	for (i = 0; i < len; i++)
		out[i] = ((unsigned char) s[i] < 0x20 || s[i] == 0x7f) ? ' ' : s[i];
	out[len] = '\0';
	return out;
}

/* Turn a finished transfer into a typed result; runs outside curl callbacks */
static void
k8s_request_complete(K8sRequest *req, CURLcode code)
{
	K8sClient  *client = req->client;
	K8sResult  *res = &req->result;
	long		status = 0;

	curl_easy_getinfo(req->easy, CURLINFO_RESPONSE_CODE, &status);
	curl_multi_remove_handle(client->multi, req->easy);
	req->in_multi = false;
	curl_easy_cleanup(req->easy);
	req->easy = NULL;
	k8s_free_headers(req->headers);
	req->headers = NULL;

	k8s_request_flush_stream(req);

	res->http_status = status;
	res->curl_code = (int) code;
	/* an answer that is not overload or a server fault counts as contact */
	if (code == CURLE_OK && status >= 200 && status < 500 && status != 429)
		paidb_worker_note_contact();
	if (code == CURLE_OK)
		res->kind = (status >= 200 && status < 300) ? K8S_RESULT_OK : K8S_RESULT_HTTP_ERROR;
	else if (code == CURLE_OPERATION_TIMEDOUT)
		res->kind = K8S_RESULT_TIMEOUT;
	else
		res->kind = K8S_RESULT_TRANSPORT;

	if (!req->streaming)
	{
		if (req->buf != NULL)
		{
			req->buf[req->buf_len] = '\0';
			res->body = req->buf;
			res->body_len = req->buf_len;
		}
		if (code == CURLE_OK && (status < 200 || status >= 300))
			k8s_parse_status_body(req);
	}

	if (code != CURLE_OK)
	{
		if (code == CURLE_WRITE_ERROR && req->buf_overflow)
		{
			char		msg[128];

			snprintf(msg, sizeof(msg),
					 "response body larger than %zu bytes (paidb.max_object_bytes)",
					 k8s_body_limit(req));
			res->message = MemoryContextStrdup(req->mcxt, msg);
		}
		else
			res->message = MemoryContextStrdup(req->mcxt,
											   req->errbuf[0] ? req->errbuf : curl_easy_strerror(code));
	}
	else if (res->kind == K8S_RESULT_HTTP_ERROR && res->message == NULL && res->body_len > 0)
	{
		/* no Status: keep the start of the body as the message */
		res->message = k8s_clip_text(req->mcxt, res->body, res->body_len, 200);
	}

	if (req->retry_after[0] != '\0')
	{
		long		ms = k8s_retry_after_ms(req->retry_after);

		if (ms >= 0)
			res->retry_after_ms = ms;
	}

	/* a server may not park us for longer than paidb.max_retry_after */
	if (res->retry_after_ms > (long) paidb_max_retry_after_ms)
		res->retry_after_ms = paidb_max_retry_after_ms;

	/* a refused token: read the file again before the next request */
	if (status == 401)
		client->token_stat_valid = false;

	if (req->stream_ops && req->stream_ops->finish)
		req->stream_ops->finish(req, req->stream_state, res);

	k8s_request_deliver(req);
}

/* ---------------------------------------------------------------------
 * the wait loop
 * ---------------------------------------------------------------------
 */

/* Feed stream bytes to parsers and turn finished transfers into results */
static void
k8s_client_collect(K8sClient *client)
{
	dlist_mutable_iter iter;
	CURLMsg    *msg;
	int			left;

	dlist_foreach_modify(iter, &client->running)
	{
		K8sRequest *req = dlist_container(K8sRequest, node, iter.cur);

		if (req->stream_ops && req->buf_len > 0)
		{
			k8s_request_flush_stream(req);
			/* the parser has it all: let curl go on (it may deliver at once) */
			while (req->stream_paused && !req->stream_failed && req->easy != NULL)
			{
				sigset_t	saved;

				req->stream_paused = false;
				k8s_block_signals(&saved);
				curl_easy_pause(req->easy, CURLPAUSE_CONT);
				k8s_restore_signals(&saved);
				if (req->buf_len > 0)
					k8s_request_flush_stream(req);
			}
			/* an unusable stream is not read to its end */
			if (req->stream_failed)
				k8s_request_complete(req, CURLE_WRITE_ERROR);
		}
	}

	while ((msg = curl_multi_info_read(client->multi, &left)) != NULL)
	{
		CURL	   *easy = msg->easy_handle;
		CURLcode	code = msg->data.result;
		char	   *priv = NULL;

		if (msg->msg != CURLMSG_DONE)
			continue;
		curl_easy_getinfo(easy, CURLINFO_PRIVATE, &priv);
		if (priv == NULL)
			elog(ERROR, "libcurl reported a transfer paidb does not know");
		k8s_request_complete((K8sRequest *) priv, code);
	}
}

/* Tell curl about socket activity or a due timer */
static void
k8s_client_socket_action(K8sClient *client, curl_socket_t fd, int ev_bitmask)
{
	int			running = 0;
	CURLMcode	mc;
	sigset_t	saved;

	k8s_block_signals(&saved);
	mc = curl_multi_socket_action(client->multi, fd, ev_bitmask, &running);
	k8s_restore_signals(&saved);
	if (mc != CURLM_OK && mc != CURLM_BAD_SOCKET)
		elog(WARNING, "curl_multi_socket_action failed: %s", curl_multi_strerror(mc));
}

/* Rebuild the wait set (latch, postmaster death, curl sockets) if it changed */
static void
k8s_client_rebuild_wait_set(K8sClient *client)
{
	int			n;
	int			i;

	if (client->wes != NULL && !client->wes_dirty)
		return;
	if (client->wes != NULL)
	{
		FreeWaitEventSet(client->wes);
		client->wes = NULL;
	}

	n = 2 + client->nsocks;
	client->wes = CreateWaitEventSet(client->mcxt, n);
	AddWaitEventToSet(client->wes, WL_LATCH_SET, PGINVALID_SOCKET, MyLatch, NULL);
	if (IsUnderPostmaster)
		AddWaitEventToSet(client->wes, WL_EXIT_ON_PM_DEATH, PGINVALID_SOCKET, NULL, NULL);
	for (i = 0; i < client->nsocks; i++)
	{
		uint32		events = 0;

		if (client->socks[i].what & CURL_POLL_IN)
			events |= WL_SOCKET_READABLE;
		if (client->socks[i].what & CURL_POLL_OUT)
			events |= WL_SOCKET_WRITEABLE;
		if (events != 0)
			AddWaitEventToSet(client->wes, events, client->socks[i].fd, NULL, NULL);
	}

	if (client->noccurred < n)
	{
		if (client->occurred)
			pfree(client->occurred);
		client->occurred = MemoryContextAlloc(client->mcxt, sizeof(WaitEvent) * n);
		client->noccurred = n;
	}
	client->wes_dirty = false;
}

/* Milliseconds until a deadline in microseconds, rounded up, at least 0 */
static long
k8s_ms_until(uint64 due_us, uint64 now_us)
{
	if (due_us <= now_us)
		return 0;
	return (long) ((due_us - now_us + 999) / 1000);
}

/*
 * Wait up to timeout_ms (-1: no limit) on latch, postmaster death and the
 * curl sockets while driving the transfers; see k8s_client.h.
 */
int
k8s_client_wait(K8sClient *client, long timeout_ms, uint32 wait_event_info)
{
	uint64		start_us = k8s_now_us();
	uint64		deadline_us = timeout_ms >= 0 ? start_us + (uint64) timeout_ms * 1000 : 0;

	for (;;)
	{
		int			flags = 0;
		long		wait_ms;
		uint64		now_us;
		int			nev;
		int			i;

		CHECK_FOR_INTERRUPTS();

		/* curl's timer: starts new transfers and enforces their timeouts */
		if (client->timer_armed && k8s_now_us() >= client->timer_due_us)
		{
			client->timer_armed = false;
			k8s_client_socket_action(client, CURL_SOCKET_TIMEOUT, 0);
			k8s_client_collect(client);
		}
		if (client->new_results > 0)
		{
			client->new_results = 0;
			return K8S_WAIT_RESULTS;
		}

		/* wait at least once, so that a zero timeout still drives curl */
		now_us = k8s_now_us();
		wait_ms = timeout_ms >= 0 ? k8s_ms_until(deadline_us, now_us) : -1;
		if (client->timer_armed)
		{
			long		t = k8s_ms_until(client->timer_due_us, now_us);

			wait_ms = wait_ms < 0 ? t : Min(wait_ms, t);
		}

		k8s_client_rebuild_wait_set(client);
		nev = WaitEventSetWait(client->wes, wait_ms, client->occurred,
							   client->noccurred, wait_event_info);

		for (i = 0; i < nev; i++)
		{
			WaitEvent  *ev = &client->occurred[i];

			if (ev->events & WL_LATCH_SET)
				flags |= WL_LATCH_SET;
			else if (ev->events & (WL_SOCKET_READABLE | WL_SOCKET_WRITEABLE))
			{
				int			mask = 0;

				if (ev->events & WL_SOCKET_READABLE)
					mask |= CURL_CSELECT_IN;
				if (ev->events & WL_SOCKET_WRITEABLE)
					mask |= CURL_CSELECT_OUT;
				k8s_client_socket_action(client, ev->fd, mask);
			}
		}
		if (nev > 0)
			k8s_client_collect(client);

		if (client->new_results > 0)
		{
			client->new_results = 0;
			flags |= K8S_WAIT_RESULTS;
		}
		if (flags != 0)
			return flags;
		if (timeout_ms >= 0 && k8s_now_us() >= deadline_us)
			return WL_TIMEOUT;
	}
}

/* Next finished asynchronous request, or NULL (watches and lists never appear here) */
K8sRequest *
k8s_client_next_done(K8sClient *client)
{
	K8sRequest *req;

	if (dlist_is_empty(&client->done))
		return NULL;
	req = dlist_container(K8sRequest, node, dlist_pop_head_node(&client->done));
	req->linked = false;
	return req;
}

/* Cancel the request if it is running, and free it and everything it owns */
void
k8s_request_free(K8sRequest *req)
{
	if (req != NULL)
		MemoryContextDelete(req->mcxt);
}

#ifdef PAIDB_TEST_HOOKS
/* What k8s_perform_request waits for */
typedef struct PerformWait
{
	K8sRequest *req;
	bool		others;			/* other requests finished meanwhile */
} PerformWait;

/* Whether the blocking request is done (paidb_wait_keeping_latch callback) */
static bool
perform_done(void *arg, int wait_rc)
{
	PerformWait *w = (PerformWait *) arg;

	if (wait_rc & K8S_WAIT_RESULTS)
		w->others = true;
	return w->req->state == K8S_REQ_DONE;
}

/*
 * Submit req and wait until it finishes, on the same wait loop; on ERROR the
 * request is cancelled and freed.  A latch wake-up is set again on return.
 */
void
k8s_perform_request(K8sRequest *req, uint32 wait_event_info)
{
	K8sClient  *client = req->client;
	PerformWait w = {req, false};

	req->blocking = true;
	PG_TRY();
	{
		k8s_request_submit(req);
		(void) paidb_wait_keeping_latch(client, -1, wait_event_info, perform_done, &w);
	}
	PG_CATCH();
	{
		k8s_request_free(req);
		PG_RE_THROW();
	}
	PG_END_TRY();

	/* let the caller's own loop see what happened meanwhile */
	if (w.others && (!dlist_is_empty(&client->done) || client->nrunning > 0))
		client->new_results++;
}
#endif

/* ---------------------------------------------------------------------
 * results
 * ---------------------------------------------------------------------
 */

/* Name of a result kind: "ok", "http_error", "transport", "timeout", "pending" */
const char *
k8s_result_kind_name(K8sResultKind kind)
{
	switch (kind)
	{
		case K8S_RESULT_PENDING:
			return "pending";
		case K8S_RESULT_OK:
			return "ok";
		case K8S_RESULT_HTTP_ERROR:
			return "http_error";
		case K8S_RESULT_TRANSPORT:
			return "transport";
		case K8S_RESULT_TIMEOUT:
			return "timeout";
	}
	return "unknown";
}

/* Whether the result means 410 Gone / Expired (list again from scratch) */
bool
k8s_result_is_gone(const K8sResult *res)
{
	if (res->kind != K8S_RESULT_HTTP_ERROR)
		return false;
	return res->http_status == 410 || res->status_code == 410 ||
		(res->reason != NULL &&
		 (strcmp(res->reason, "Expired") == 0 || strcmp(res->reason, "Gone") == 0));
}

/* Whether retrying later can help (429, 5xx, transport error, timeout) */
bool
k8s_result_is_retryable(const K8sResult *res)
{
	switch (res->kind)
	{
		case K8S_RESULT_TRANSPORT:
		case K8S_RESULT_TIMEOUT:
			return true;
		case K8S_RESULT_HTTP_ERROR:
			return res->http_status == 429 || res->http_status == 408 ||
				(res->http_status >= 500 && res->http_status != 501);
		default:
			return false;
	}
}

/* Log a failed request with status, reason, message and object name (never the token) */
void
k8s_log_failure(int elevel, const K8sRequest *req, const char *object_name)
{
	const K8sResult *res = &req->result;
	const char *name = object_name ? object_name : "";
	const char *method = k8s_method_name(req->method);

	switch (res->kind)
	{
		case K8S_RESULT_HTTP_ERROR:
			ereport(elevel,
					(errcode(ERRCODE_EXTERNAL_ROUTINE_EXCEPTION),
					 errmsg("kubernetes API request %s %s for \"%s\" failed with HTTP status %ld, reason %s",
							method, req->path, name, res->http_status,
							res->reason ? res->reason : "(none)"),
					 res->message ? errdetail("The API server said: %s", res->message) : 0,
					 res->retry_after_ms >= 0 ?
					 errhint("The API server asked to retry after %ld ms.", res->retry_after_ms) : 0));
			break;
		case K8S_RESULT_TIMEOUT:
			ereport(elevel,
					(errcode(ERRCODE_CONNECTION_FAILURE),
					 errmsg("kubernetes API request %s %s for \"%s\" timed out",
							method, req->path, name),
					 res->message ? errdetail("libcurl said: %s", res->message) : 0));
			break;
		case K8S_RESULT_TRANSPORT:
			ereport(elevel,
					(errcode(ERRCODE_CONNECTION_FAILURE),
					 errmsg("kubernetes API request %s %s for \"%s\" failed: %s",
							method, req->path, name,
							res->message ? res->message : "transport error"),
					 res->http_status ?
					 errdetail("The HTTP status was %ld.", res->http_status) : 0));
			break;
		case K8S_RESULT_OK:
		case K8S_RESULT_PENDING:
			elog(elevel, "kubernetes API request %s %s for \"%s\" has not failed (%s)",
				 method, req->path, name, k8s_result_kind_name(res->kind));
			break;
	}
}

/* ---------------------------------------------------------------------
 * paths
 * ---------------------------------------------------------------------
 */

/* Percent-encode s for a path segment or a query value (RFC 3986 unreserved kept) */
char *
k8s_url_escape(const char *s)
{
	static const char hex[] = "0123456789ABCDEF";
	StringInfoData buf;
	const unsigned char *p;

	initStringInfo(&buf);
	for (p = (const unsigned char *) s; *p; p++)
	{
		if ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
			(*p >= '0' && *p <= '9') || *p == '-' || *p == '.' || *p == '_' || *p == '~')
			appendStringInfoChar(&buf, (char) *p);
		else
		{
			appendStringInfoChar(&buf, '%');
			appendStringInfoChar(&buf, hex[*p >> 4]);
			appendStringInfoChar(&buf, hex[*p & 0xF]);
		}
	}
	return buf.data;
}

/* Append "?key=value" or "&key=value" to path (value escaped), returning a new string */
char *
k8s_path_add_query(const char *path, const char *key, const char *value)
{
	return psprintf("%s%c%s=%s", path, strchr(path, '?') ? '&' : '?',
					k8s_url_escape(key), k8s_url_escape(value ? value : ""));
}

/* Refuse to build a path for a name its kind does not allow (SPEC §8) */
static void
k8s_check_name(const char *what, const char *name, bool ok)
{
	if (!ok)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_NAME),
				 errmsg("invalid kubernetes name \"%.*s%s\" for %s", 253, name,
						strlen(name) > 253 ? "..." : "", what),
				 errdetail("paidb sends no request for a name the API server could not hold.")));
}

/*
 * Build prefix/namespaces/{ns}/plural[/{name}] with escaped segments, after
 * checking the namespace (DNS-1123 label) and the name (name_ok, the rule of
 * the kind).
 */
static char *
k8s_namespaced_path(K8sClient *client, const char *prefix, const char *ns,
					const char *plural, const char *name, bool (*name_ok) (const char *))
{
	StringInfoData buf;

	if (ns == NULL)
		ns = client ? client->namespace : "default";
	k8s_check_name("namespace", ns, k8s_valid_dns_label(ns));
	if (name != NULL)
		k8s_check_name(plural, name, name_ok(name));
	initStringInfo(&buf);
	appendStringInfo(&buf, "%s/namespaces/%s/%s", prefix, k8s_url_escape(ns), plural);
	if (name != NULL)
		appendStringInfo(&buf, "/%s", k8s_url_escape(name));
	return buf.data;
}

/* /apis/frameworkcontroller.microsoft.com/v1/namespaces/{ns}/frameworks[/{name}] */
char *
k8s_path_frameworks(K8sClient *client, const char *ns, const char *name)
{
	return k8s_namespaced_path(client, "/apis/frameworkcontroller.microsoft.com/v1",
							   ns, "frameworks", name, paidb_valid_framework_name);
}

/* /api/v1/namespaces/{ns}/secrets[/{name}] */
char *
k8s_path_secrets(K8sClient *client, const char *ns, const char *name)
{
	return k8s_namespaced_path(client, "/api/v1", ns, "secrets", name, k8s_valid_dns_subdomain);
}

/* /apis/scheduling.k8s.io/v1/priorityclasses[/{name}] (cluster scoped) */
char *
k8s_path_priorityclasses(const char *name)
{
	if (name == NULL)
		return pstrdup("/apis/scheduling.k8s.io/v1/priorityclasses");
	k8s_check_name("priorityclasses", name, k8s_valid_dns_subdomain(name));
	return psprintf("/apis/scheduling.k8s.io/v1/priorityclasses/%s", k8s_url_escape(name));
}

/* /api/v1/namespaces/{ns}/events[/{name}] */
char *
k8s_path_events(K8sClient *client, const char *ns, const char *name)
{
	return k8s_namespaced_path(client, "/api/v1", ns, "events", name, k8s_valid_dns_subdomain);
}

/* The body of a DeleteOptions with the given propagation policy */
char *
k8s_delete_options_body(const char *propagation_policy)
{
	StringInfoData buf;

	initStringInfo(&buf);
	appendStringInfoString(&buf, "{\"kind\":\"DeleteOptions\",\"apiVersion\":\"v1\"");
	if (propagation_policy != NULL)
	{
		appendStringInfoString(&buf, ",\"propagationPolicy\":");
		escape_json(&buf, propagation_policy);
	}
	appendStringInfoChar(&buf, '}');
	return buf.data;
}
