/*
 * worker_sync.h — the sync worker (SPEC §6): pushes unsynced requests to
 * the API server and deletes completed frameworks and orphans.
 */
#ifndef PAIDB_WORKER_SYNC_H
#define PAIDB_WORKER_SYNC_H

#include "fmgr.h"

/* The sync worker's entry point (bgw_function_name). */
extern PGDLLEXPORT void paidb_sync_main(Datum main_arg);

#endif							/* PAIDB_WORKER_SYNC_H */
