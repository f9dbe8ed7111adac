/*
 * guc.h — paidb's settings (SPEC §7).
 */
#ifndef PAIDB_GUC_H
#define PAIDB_GUC_H

extern char *paidb_database;
extern char *paidb_worker_role;
extern bool paidb_enabled;
extern char *paidb_k8s_api_server;
extern char *paidb_k8s_namespace;
extern char *paidb_k8s_token_file;
extern char *paidb_k8s_ca_file;
extern int	paidb_k8s_timeout_ms;
extern int	paidb_resync_interval_ms;
extern int	paidb_max_rpc_concurrency;
extern int	paidb_sync_batch_delay_ms;
extern int	paidb_snapshot_cache_kb;
extern bool paidb_retain_mode;
extern int	paidb_watch_timeout_s;
extern int	paidb_list_page_size;
extern int	paidb_max_request_bytes;
extern int	paidb_max_object_bytes;
extern int	paidb_max_retry_after_ms;
extern int	paidb_retention_s;
extern int	paidb_event_retention_s;
extern int	paidb_retention_interval_ms;
extern int	paidb_retention_batch_size;
extern bool paidb_openpai_count_rewrite;
extern bool paidb_openpai_tag_rewrite;
extern int	paidb_max_clusters;
extern char *paidb_default_cluster;

extern void paidb_define_gucs(void);

#endif							/* PAIDB_GUC_H */
