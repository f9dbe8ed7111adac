/*
 * spi_plan.h — SPI plans prepared once per process and kept.
 */
#ifndef PAIDB_SPI_PLAN_H
#define PAIDB_SPI_PLAN_H

#include "executor/spi.h"

/* Prepare a statement (inside an SPI session) and keep it for the process. */
extern SPIPlanPtr paidb_prepare_kept(const char *sql, int nargs, Oid *argtypes);

#endif							/* PAIDB_SPI_PLAN_H */
