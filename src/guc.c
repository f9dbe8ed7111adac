/*
 * guc.c — definitions of the paidb.* settings (SPEC §7).
 *
 * Contexts are chosen on purpose: the database the workers attach to and
 * whether they start at all are fixed at postmaster start; everything a
 * running worker can honour is PGC_SIGHUP; retain mode is also settable per
 * session (PGC_SUSET) so that a superuser can test it in one transaction.
 */
#include "postgres.h"

#include <limits.h>

#include "miscadmin.h"
#include "utils/guc.h"
#include "utils/memutils.h"

#include "guc.h"

char	   *paidb_database = NULL;
char	   *paidb_worker_role = NULL;
bool		paidb_enabled = true;
char	   *paidb_k8s_api_server = NULL;
char	   *paidb_k8s_namespace = NULL;
char	   *paidb_k8s_token_file = NULL;
char	   *paidb_k8s_ca_file = NULL;
int			paidb_k8s_timeout_ms = 30000;
int			paidb_resync_interval_ms = 60000;
int			paidb_max_rpc_concurrency = 32;
int			paidb_sync_batch_delay_ms = 20;
int			paidb_snapshot_cache_kb = 4096;
bool		paidb_retain_mode = false;
int			paidb_watch_timeout_s = 300;
int			paidb_list_page_size = 500;
int			paidb_max_request_bytes = 16 * 1024 * 1024;
int			paidb_max_object_bytes = 64 * 1024 * 1024;
int			paidb_max_retry_after_ms = 5 * 60 * 1000;
int			paidb_retention_s = 0;
int			paidb_event_retention_s = 30 * 86400;
int			paidb_retention_interval_ms = 60000;
int			paidb_retention_batch_size = 100;
bool		paidb_openpai_count_rewrite = true;
bool		paidb_openpai_tag_rewrite = true;
int			paidb_max_clusters = 16;
char	   *paidb_default_cluster = NULL;

/* Define every paidb.* setting; called once from _PG_init. */
void
paidb_define_gucs(void)
{
	/*
	 * PostgreSQL allows PGC_POSTMASTER settings only while preloading; they
	 * matter only to the workers, which exist only then.
	 */
	if (process_shared_preload_libraries_in_progress)
	{
		DefineCustomStringVariable("paidb.database",
								   "Database the paidb background workers connect to.",
								   "It must be the database where CREATE EXTENSION paidb was run.",
								   &paidb_database, "postgres",
								   PGC_POSTMASTER, 0, NULL, NULL, NULL);

		DefineCustomBoolVariable("paidb.enabled",
								 "Start the paidb background workers.",
								 NULL,
								 &paidb_enabled, true,
								 PGC_POSTMASTER, 0, NULL, NULL, NULL);

		DefineCustomStringVariable("paidb.worker_role",
								   "Role the paidb background workers connect as.",
								   "Empty: the bootstrap superuser. It needs LOGIN and the privileges docs/workers.md lists.",
								   &paidb_worker_role, "",
								   PGC_POSTMASTER, GUC_SUPERUSER_ONLY, NULL, NULL, NULL);

		DefineCustomIntVariable("paidb.max_clusters",
								"Largest number of clusters with workers at once.",
								"Each cluster that is not removed needs a slot, and three "
								"background worker processes (see max_worker_processes).",
								&paidb_max_clusters, 16, 1, 1000,
								PGC_POSTMASTER, 0, NULL, NULL, NULL);
	}

	DefineCustomStringVariable("paidb.default_cluster",
							   "Cluster of a new job whose virtual cluster has no placement.",
							   "A row of paidb.cluster; see paidb.virtual_cluster_placement.",
							   &paidb_default_cluster, "default",
							   PGC_USERSET, 0, NULL, NULL, NULL);

	DefineCustomStringVariable("paidb.k8s_api_server",
							   "URL of the Kubernetes API server.",
							   "Empty means in-cluster: KUBERNETES_SERVICE_HOST/PORT and the service account files.",
							   &paidb_k8s_api_server, "",
							   PGC_SIGHUP, 0, NULL, NULL, NULL);

	DefineCustomStringVariable("paidb.k8s_namespace",
							   "Namespace of frameworks, secrets and events.",
							   NULL,
							   &paidb_k8s_namespace, "default",
							   PGC_SIGHUP, 0, NULL, NULL, NULL);

	DefineCustomStringVariable("paidb.k8s_token_file",
							   "File holding the bearer token for the API server.",
							   "Re-read whenever it changes, so rotated tokens are picked up.",
							   &paidb_k8s_token_file, "",
							   PGC_SIGHUP, GUC_SUPERUSER_ONLY, NULL, NULL, NULL);

	DefineCustomStringVariable("paidb.k8s_ca_file",
							   "CA bundle used to verify the API server's certificate.",
							   "TLS verification is always on for https.",
							   &paidb_k8s_ca_file, "",
							   PGC_SIGHUP, GUC_SUPERUSER_ONLY, NULL, NULL, NULL);

	DefineCustomIntVariable("paidb.k8s_timeout",
							"Timeout of one API server request.",
							NULL,
							&paidb_k8s_timeout_ms, 30000, 100, INT_MAX,
							PGC_SIGHUP, GUC_UNIT_MS, NULL, NULL, NULL);

	DefineCustomIntVariable("paidb.resync_interval",
							"Safety-net rescan interval of the sync worker.",
							NULL,
							&paidb_resync_interval_ms, 60000, 10, INT_MAX,
							PGC_SIGHUP, GUC_UNIT_MS, NULL, NULL, NULL);

	DefineCustomIntVariable("paidb.max_rpc_concurrency",
							"Largest number of API server requests in flight.",
							NULL,
							&paidb_max_rpc_concurrency, 32, 1, 1024,
							PGC_SIGHUP, 0, NULL, NULL, NULL);

	DefineCustomIntVariable("paidb.sync_batch_delay",
							"Shortest time between two claims of a sync worker that is keeping up.",
							"Submissions that commit within it are sent together; 0 claims at every commit.",
							&paidb_sync_batch_delay_ms, 20, 0, 1000,
							PGC_SIGHUP, GUC_UNIT_MS, NULL, NULL, NULL);

	DefineCustomIntVariable("paidb.snapshot_cache_size",
							"Memory a session may keep of the snapshots it last read or wrote, per job.",
							"Its next update of the same job then skips unpacking the stored snapshot; 0 keeps none. "
							"The framework watcher keeps its own 32MB.",
							&paidb_snapshot_cache_kb, 4096, 0, 1024 * 1024,
							PGC_USERSET, GUC_UNIT_KB, NULL, NULL, NULL);

	DefineCustomBoolVariable("paidb.retain_mode",
							 "Keep frameworks that exist only in the API server.",
							 "When off, frameworks unknown to the database are deleted from the API server.",
							 &paidb_retain_mode, false,
							 PGC_SUSET, 0, NULL, NULL, NULL);

	DefineCustomIntVariable("paidb.watch_timeout",
							"Server-side timeout of one watch request.",
							NULL,
							&paidb_watch_timeout_s, 300, 1, 86400,
							PGC_SIGHUP, GUC_UNIT_S, NULL, NULL, NULL);

	DefineCustomIntVariable("paidb.list_page_size",
							"The limit of one page of a paged LIST request.",
							NULL,
							&paidb_list_page_size, 500, 1, 100000,
							PGC_SIGHUP, 0, NULL, NULL, NULL);

	DefineCustomIntVariable("paidb.max_request_bytes",
							"Largest framework request accepted from SQL.",
							NULL,
							&paidb_max_request_bytes, 16 * 1024 * 1024, 1024, MaxAllocSize / 2,
							PGC_SUSET, GUC_UNIT_BYTE, NULL, NULL, NULL);

	DefineCustomIntVariable("paidb.max_object_bytes",
							"Largest object accepted from the API server.",
							"A larger watched or listed object is skipped with a WARNING.",
							&paidb_max_object_bytes, 64 * 1024 * 1024, 1024, MaxAllocSize / 2,
							PGC_SIGHUP, GUC_UNIT_BYTE, NULL, NULL, NULL);

	DefineCustomIntVariable("paidb.max_retry_after",
							"Longest Retry-After of the API server that is honoured.",
							NULL,
							&paidb_max_retry_after_ms, 5 * 60 * 1000, 0, 24 * 3600 * 1000,
							PGC_SIGHUP, GUC_UNIT_MS, NULL, NULL, NULL);

	DefineCustomIntVariable("paidb.retention",
							"Age after which completed jobs gone from the API server are deleted.",
							"Measured from the job's completion time; 0 keeps jobs forever.",
							&paidb_retention_s, 0, 0, INT_MAX,
							PGC_SIGHUP, GUC_UNIT_S, NULL, NULL, NULL);

	DefineCustomIntVariable("paidb.event_retention",
							"Age after which framework and pod events are deleted.",
							"0 keeps events forever.",
							&paidb_event_retention_s, 30 * 86400, 0, INT_MAX,
							PGC_SIGHUP, GUC_UNIT_S, NULL, NULL, NULL);

	DefineCustomIntVariable("paidb.retention_interval",
							"How often the retention worker compacts job counts and looks for expired rows.",
							NULL,
							&paidb_retention_interval_ms, 60000, 10, INT_MAX,
							PGC_SIGHUP, GUC_UNIT_MS, NULL, NULL, NULL);

	DefineCustomIntVariable("paidb.retention_batch_size",
							"Jobs (or events) the retention worker deletes in one transaction.",
							NULL,
							&paidb_retention_batch_size, 100, 1, 10000,
							PGC_SIGHUP, 0, NULL, NULL, NULL);

	DefineCustomBoolVariable("paidb.openpai_count_rewrite",
							 "Answer job counts through the openpai views from paidb's count table.",
							 "Only counts whose filter reads nothing but userName, virtualCluster, "
							 "state, jobPriority and archived are rewritten; the result is the same.",
							 &paidb_openpai_count_rewrite, true,
							 PGC_USERSET, 0, NULL, NULL, NULL);

	DefineCustomBoolVariable("paidb.openpai_tag_rewrite",
							 "Drop the has-a-tag test Sequelize adds beside a tags IN through the openpai views.",
							 "The IN already implies it; the result is the same.",
							 &paidb_openpai_tag_rewrite, true,
							 PGC_USERSET, 0, NULL, NULL, NULL);

	MarkGUCPrefixReserved("paidb");
}
