/*
 * worker_retention.h — the retention worker: job-count compaction and the
 * deletion of expired jobs and events (SPEC §10).
 */
#ifndef PAIDB_WORKER_RETENTION_H
#define PAIDB_WORKER_RETENTION_H

/* Main loop of the retention worker; never returns. */
extern void paidb_retention_main(void);

#endif							/* PAIDB_WORKER_RETENTION_H */
