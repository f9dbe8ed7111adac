/*
 * worker_retention.h — the retention worker: job-count compaction and the
 * deletion of expired jobs and events (SPEC §10).
 */
#ifndef PAIDB_WORKER_RETENTION_H
#define PAIDB_WORKER_RETENTION_H

#include "fmgr.h"

/* Main loop of the retention worker; never returns. */
extern PGDLLEXPORT void paidb_retention_main(Datum main_arg);

#endif							/* PAIDB_WORKER_RETENTION_H */
