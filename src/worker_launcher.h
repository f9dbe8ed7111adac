/*
 * worker_launcher.h — the launcher: one process that keeps, for every row
 * of paidb.cluster that is not removed, that cluster's sync, framework
 * watcher and event watcher running (SPEC §11).
 */
#ifndef PAIDB_WORKER_LAUNCHER_H
#define PAIDB_WORKER_LAUNCHER_H

#include "fmgr.h"

extern PGDLLEXPORT void paidb_launcher_main(Datum main_arg);

#endif							/* PAIDB_WORKER_LAUNCHER_H */
