/*
 * spi_plan.h — SPI plans prepared once per process and kept, and the
 * arguments of batch statements.
 */
#ifndef PAIDB_SPI_PLAN_H
#define PAIDB_SPI_PLAN_H

#include "executor/spi.h"

/* Prepare a statement (inside an SPI session) and keep it for the process. */
extern SPIPlanPtr paidb_prepare_kept(const char *sql, int nargs, Oid *argtypes);

/*
 * The OID of table paidb.<relname>, locked in RowExclusiveLock (as a write
 * to it locks it; held to the end of the transaction), or InvalidOid if
 * there is no such table.  Kept plans that depend on the table's columns
 * look at them only after this: the lock waits for an ALTER EXTENSION
 * UPDATE in progress and takes its catalog changes, so the plans are made
 * for the columns the statement will see (a plain catalog look-up could
 * still see the old ones, and the plan then fail once the lock is had).
 */
extern Oid	paidb_lock_table_for_write(const char *relname);

/*
 * `nrows` rows of the composite type `rowtype` (a table's row type) as one
 * array, for a batch statement to unnest: one parameter where an array per
 * column made PostgreSQL store every value as a tuple of its own.  Column c
 * of row r is values[c][r] (NULL if nulls[c][r]) and goes to the row
 * type's column named columns[c], which must be of type types[c]; a NULL
 * columns[c] is left out.  The row type's other columns are NULL.
 */
extern Datum paidb_row_array(Oid rowtype, int ncolumns, const char *const *columns, const Oid *types,
							 Datum *const *values, bool *const *nulls, int nrows);

#endif							/* PAIDB_SPI_PLAN_H */
