/*
 * spi_plan.c — SPI plans prepared once per process and kept.
 *
 * Every paidb statement run through SPI is prepared on first use and kept
 * (SPI_keepplan): the plan cache revalidates it if the extension is dropped
 * and created again, so a backend or worker never has to forget it.
 */
#include "postgres.h"

#include "executor/spi.h"

#include "catalog/namespace.h"
#include "nodes/makefuncs.h"
#include "storage/lmgr.h"

#include "spi_plan.h"

/* Prepare a statement (inside an SPI session) and keep it for the process. */
SPIPlanPtr
paidb_prepare_kept(const char *sql, int nargs, Oid *argtypes)
{
	SPIPlanPtr	plan = SPI_prepare(sql, nargs, argtypes);

	if (plan == NULL)
		elog(ERROR, "could not prepare \"%s\": %s", sql,
			 SPI_result_code_string(SPI_result));
	if (SPI_keepplan(plan) != 0)
		elog(ERROR, "could not keep the plan of \"%s\"", sql);
	return plan;
}

/* See spi_plan.h. */
Oid
paidb_lock_table_for_write(const char *relname)
{
	/* RangeVarGetRelid locks, takes pending invalidations, and re-checks the name */
	return RangeVarGetRelid(makeRangeVar("paidb", pstrdup(relname), -1), RowExclusiveLock, true);
}
