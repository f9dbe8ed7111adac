/*
 * spi_plan.c — SPI plans prepared once per process and kept, and the
 * arguments of batch statements.
 *
 * Every paidb statement run through SPI is prepared on first use and kept
 * (SPI_keepplan): the plan cache revalidates it if the extension is dropped
 * and created again, so a backend or worker never has to forget it.
 */
#include "postgres.h"

#include "executor/spi.h"

#include "access/htup_details.h"
#include "catalog/namespace.h"
#include "funcapi.h"
#include "nodes/makefuncs.h"
#include "storage/lmgr.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/typcache.h"

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

/* See spi_plan.h. */
Datum
paidb_row_array(Oid rowtype, int ncolumns, const char *const *columns, const Oid *types,
				Datum *const *values, bool *const *nulls, int nrows)
{
	TupleDesc	desc = lookup_rowtype_tupdesc(rowtype, -1);
	int			natts = desc->natts;
	int		   *where = palloc(sizeof(int) * ncolumns);
	Datum	   *rowvalues = palloc(sizeof(Datum) * natts);
	bool	   *rownulls = palloc(sizeof(bool) * natts);
	Datum	   *rows = palloc(sizeof(Datum) * Max(nrows, 1));
	int16		typlen;
	bool		typbyval;
	char		typalign;
	int			c,
				r;

	for (c = 0; c < ncolumns; c++)
	{
		if (columns[c] == NULL)
			continue;
		where[c] = SPI_fnumber(desc, columns[c]) - 1;
		if (where[c] < 0 || TupleDescAttr(desc, where[c])->atttypid != types[c])
			elog(ERROR, "%s has no column %s of the expected type", format_type_be(rowtype), columns[c]);
	}
	for (r = 0; r < nrows; r++)
	{
		memset(rownulls, true, sizeof(bool) * natts);
		for (c = 0; c < ncolumns; c++)
		{
			if (columns[c] == NULL)
				continue;
			rowvalues[where[c]] = values[c][r];
			rownulls[where[c]] = nulls[c][r];
		}
		rows[r] = HeapTupleGetDatum(heap_form_tuple(desc, rowvalues, rownulls));
	}
	ReleaseTupleDesc(desc);
	get_typlenbyvalalign(rowtype, &typlen, &typbyval, &typalign);
	return PointerGetDatum(construct_array(rows, nrows, rowtype, typlen, typbyval, typalign));
}
