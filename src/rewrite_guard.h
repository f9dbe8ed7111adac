/*
 * rewrite_guard.h — when a rewrite of the openpai views may fire at all
 * (SPEC §10): never while a stored definition is being made, and only over
 * expressions whose evaluation can neither fail nor have an effect.
 */
#ifndef PAIDB_REWRITE_GUARD_H
#define PAIDB_REWRITE_GUARD_H

#include "nodes/parsenodes.h"

/* Install the utility hook that tracks stored definitions; from _PG_init. */
extern void paidb_rewrite_guard_init(void);

/*
 * Whether rewrites may fire in the statement being analysed: not in a
 * binary upgrade, and not inside CREATE VIEW, CREATE RULE, CREATE FUNCTION
 * (a BEGIN ATOMIC body), CREATE MATERIALIZED VIEW or CREATE/ALTER POLICY,
 * whose analysed query is stored and must stay the query as written.
 */
extern bool paidb_rewrites_allowed(void);

/*
 * Whether evaluating expr, on any row, can neither raise an error nor
 * change anything: a closed list of node kinds, functions and operators
 * that are leakproof, and LIKE/ILIKE with a constant, well-formed pattern
 * under a deterministic collation.  Any sub-select makes it false.
 */
extern bool paidb_expr_cannot_raise(Node *expr);

#endif							/* PAIDB_REWRITE_GUARD_H */
