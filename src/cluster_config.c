/*
 * cluster_config.c — the effective configuration of the calling process's
 * cluster (SPEC §11): the cluster row's value where it has one, else the
 * paidb.* setting that configured the single API server before 0.3.
 */
#include "postgres.h"

#include "cluster_config.h"
#include "guc.h"

PaidbClusterConfig *paidb_my_cluster = NULL;

/* The row's value, or the setting when the row has NULL (""). */
static const char *
row_or_setting(const char *row_value, const char *setting)
{
	if (paidb_my_cluster != NULL && row_value[0] != '\0')
		return row_value;
	return setting;
}

const char *
paidb_cluster_api_server(void)
{
	return row_or_setting(paidb_my_cluster ? paidb_my_cluster->api_server : "",
						  paidb_k8s_api_server);
}

const char *
paidb_cluster_namespace(void)
{
	return row_or_setting(paidb_my_cluster ? paidb_my_cluster->namespace : "",
						  paidb_k8s_namespace);
}

const char *
paidb_cluster_token_file(void)
{
	return row_or_setting(paidb_my_cluster ? paidb_my_cluster->token_file : "",
						  paidb_k8s_token_file);
}

const char *
paidb_cluster_ca_file(void)
{
	return row_or_setting(paidb_my_cluster ? paidb_my_cluster->ca_file : "",
						  paidb_k8s_ca_file);
}

bool
paidb_cluster_retain_mode(void)
{
	if (paidb_my_cluster != NULL && paidb_my_cluster->retain_mode >= 0)
		return paidb_my_cluster->retain_mode != 0;
	return paidb_retain_mode;
}

const char *
paidb_cluster_name(void)
{
	return paidb_my_cluster ? paidb_my_cluster->name : PAIDB_DEFAULT_CLUSTER;
}

/* Whether two configurations need different connections (a restart). */
bool
paidb_cluster_connection_differs(const PaidbClusterConfig *a, const PaidbClusterConfig *b)
{
	return strcmp(a->api_server, b->api_server) != 0 ||
		strcmp(a->namespace, b->namespace) != 0 ||
		strcmp(a->token_file, b->token_file) != 0 ||
		strcmp(a->ca_file, b->ca_file) != 0;
}

/* A worker's name for the log: the cluster is named unless it is the default. */
const char *
paidb_worker_label(const char *worker_name)
{
	/* a process is one worker: remember its label instead of allocating */
	static char label[PAIDB_CLUSTER_NAME_SIZE + 64];
	static const char *label_of = NULL;

	if (paidb_my_cluster == NULL ||
		strcmp(paidb_my_cluster->name, PAIDB_DEFAULT_CLUSTER) == 0)
		return worker_name;
	if (label_of != worker_name)
	{
		snprintf(label, sizeof(label), "%s of cluster \"%s\"", worker_name,
				 paidb_my_cluster->name);
		label_of = worker_name;
	}
	return label;
}
