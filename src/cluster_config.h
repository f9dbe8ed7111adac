/*
 * cluster_config.h — the configuration one cluster's workers run with
 * (SPEC §11): a row of paidb.cluster, whose NULL columns fall back to the
 * paidb.k8s_* and paidb.retain_mode settings.
 */
#ifndef PAIDB_CLUSTER_CONFIG_H
#define PAIDB_CLUSTER_CONFIG_H

/* Sizes match the CHECK constraints of paidb.cluster. */
#define PAIDB_CLUSTER_NAME_SIZE 64
#define PAIDB_CLUSTER_URL_SIZE 1024
#define PAIDB_CLUSTER_PATH_SIZE 1024

/* The name of the cluster that 0.2's single API server became. */
#define PAIDB_DEFAULT_CLUSTER "default"

typedef struct PaidbClusterConfig
{
	char		name[PAIDB_CLUSTER_NAME_SIZE];
	/* "" stands for NULL: the column's setting applies */
	char		api_server[PAIDB_CLUSTER_URL_SIZE];
	char		namespace[PAIDB_CLUSTER_NAME_SIZE];
	char		token_file[PAIDB_CLUSTER_PATH_SIZE];
	char		ca_file[PAIDB_CLUSTER_PATH_SIZE];
	int			retain_mode;	/* -1: NULL, else 0 or 1 */
} PaidbClusterConfig;

/*
 * The cluster the calling process serves: a cluster worker's own, set at
 * start; NULL in every other process (their API-server settings are the
 * default cluster's fallbacks).
 */
extern PaidbClusterConfig *paidb_my_cluster;

/* The effective settings of the calling process's cluster. */
extern const char *paidb_cluster_api_server(void);
extern const char *paidb_cluster_namespace(void);
extern const char *paidb_cluster_token_file(void);
extern const char *paidb_cluster_ca_file(void);
extern bool paidb_cluster_retain_mode(void);
/* The cluster's name ("default" outside a cluster worker). */
extern const char *paidb_cluster_name(void);

/* Whether two configurations need different connections (a restart). */
extern bool paidb_cluster_connection_differs(const PaidbClusterConfig *a,
											 const PaidbClusterConfig *b);

/*
 * A worker's name as the log and pg_stat_activity show it: "sync" for the
 * default cluster (as before 0.3), "sync of cluster \"b\"" for another.
 */
extern const char *paidb_worker_label(const char *worker_name);

#endif							/* PAIDB_CLUSTER_CONFIG_H */
