/*
 * rewrite_perms.h — the privilege checks of a rewritten query (SPEC §10).
 *
 * A rewrite of the openpai views must make exactly the privilege checks the
 * query without it makes: it keeps the checks of every relation it stops
 * reading (and, for a view, of everything the view's expansion checks), and
 * reads its own relations without checking the caller's rights.  This is
 * the one module that knows how PostgreSQL records those checks (15: fields
 * of RangeTblEntry; 16 and later: RTEPermissionInfo), so a port to another
 * major version changes this file only (docs/queries.md, "Porting").
 */
#ifndef PAIDB_REWRITE_PERMS_H
#define PAIDB_REWRITE_PERMS_H

#include "nodes/parsenodes.h"

/*
 * Add to *checks what reading `rte` (an entry of `owner`'s range table)
 * makes PostgreSQL check: the entry's own check and, for a view, every
 * check its definition makes, recursively, as the rewriter would apply
 * them.  False if row security is enabled on any table involved (then no
 * rewrite may fire: SPEC §10), true otherwise.
 */
extern bool paidb_collect_checks(Query *owner, RangeTblEntry *rte, List **checks);

/*
 * Append the collected checks to query's range table, unreferenced: the
 * executor checks them when the statement runs (and the plan cache watches
 * their relations), nothing reads them.
 */
extern void paidb_append_checks(Query *query, List *checks);

/* Read rte on the rewrite's own account: no check of the caller's rights. */
extern void paidb_rte_unchecked(Query *owner, RangeTblEntry *rte);

/*
 * Parse analysis of a SELECT paidb writes itself (schema-qualified names
 * only), without the analysis hooks, every relation in it read unchecked.
 */
extern Query *paidb_internal_select(const char *sql);

/* Whether relation relid is a table with row security enabled. */
extern bool paidb_has_row_security(Oid relid);

#endif							/* PAIDB_REWRITE_PERMS_H */
