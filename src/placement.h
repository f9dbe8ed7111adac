/*
 * placement.h — which cluster a job belongs to (SPEC §11): the placement of
 * a new job in the submitting transaction, and a cluster's configuration
 * read from paidb.cluster.
 */
#ifndef PAIDB_PLACEMENT_H
#define PAIDB_PLACEMENT_H

#include "cluster_config.h"

/*
 * The cluster of a new job, locked against removal until the transaction
 * ends: the cluster argument if not NULL, else the placement of the job's
 * virtual cluster (NULL if none), else paidb.default_cluster.  Raises 22023
 * for an unknown cluster and 55000 for one that takes no new jobs.  Inside
 * SPI.
 */
extern void paidb_place_new_job(const char *cluster_arg, const char *virtual_cluster,
								PaidbClusterConfig *conf);

/* A cluster's row as a configuration; false when there is no such row.  Inside SPI. */
extern bool paidb_read_cluster(const char *name, PaidbClusterConfig *conf, char **state);

#endif							/* PAIDB_PLACEMENT_H */
