/*
 * paidb.c — module entry point: settings, the commit-time wake-up, and
 * (when preloaded) shared memory and the background workers.
 */
#include "postgres.h"

#include "fmgr.h"
#include "miscadmin.h"

#include "guc.h"
#include "openpai_counts.h"
#include "rewrite_guard.h"
#include "sync_signal.h"
#include "worker_common.h"
#include "worker_shmem.h"

PG_MODULE_MAGIC;

void		_PG_init(void);

/* Load-time set-up: define settings; register workers only when preloaded. */
void
_PG_init(void)
{
	paidb_define_gucs();
	paidb_sync_signal_init();
	paidb_rewrite_guard_init();
	paidb_openpai_counts_init();

	/* the SQL functions work without preloading; the workers need it */
	if (!process_shared_preload_libraries_in_progress || IsBinaryUpgrade)
		return;
	paidb_shmem_init();
	if (paidb_enabled)
		paidb_register_workers();
}
