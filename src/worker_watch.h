/*
 * worker_watch.h — the framework watcher and the event watcher (SPEC §6):
 * LIST then WATCH from the API server, applying what they see to the
 * database in batches.
 */
#ifndef PAIDB_WORKER_WATCH_H
#define PAIDB_WORKER_WATCH_H

#include "fmgr.h"

/* Key of the framework watcher in paidb.watch_state */
#define PAIDB_WATCHER_FRAMEWORKS	"frameworks"

/* Key of the event watcher in paidb.watch_state */
#define PAIDB_WATCHER_EVENTS		"events"

/*
 * paidb.installation key set once existing frameworks have been adopted;
 * its value is the fingerprint of the target (API server, namespace) they
 * were adopted from: another target is a first run again (SPEC §8).
 */
#define PAIDB_INITIAL_IMPORT_DONE	"initial_import_done"

/* paidb.installation key: the timeline the framework watcher last ran on */
#define PAIDB_WATCH_TIMELINE		"watch_timeline"

/* The framework watcher's entry point (bgw_function_name); never returns */
extern PGDLLEXPORT void paidb_framework_watcher_main(Datum main_arg);

/* The event watcher's entry point (bgw_function_name); never returns */
extern PGDLLEXPORT void paidb_event_watcher_main(Datum main_arg);

#endif							/* PAIDB_WORKER_WATCH_H */
