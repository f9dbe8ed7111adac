/*
 * merge_patch.h — RFC 7396 JSON merge patch on binary jsonb
 */
#ifndef PAIDB_MERGE_PATCH_H
#define PAIDB_MERGE_PATCH_H

#include "utils/jsonb.h"

/*
 * Apply the merge patch `patch` to `target` (RFC 7396) and return the result.
 *
 * Both arguments must be detoasted (PG_GETARG_JSONB_P or DatumGetJsonbP).
 * `target` may be NULL, meaning JSON null / absent.  The result is allocated
 * in CurrentMemoryContext, except that when the outcome is one of the inputs
 * unchanged (the patch is not an object, or it is {} and the target is an
 * object) that input itself is returned, not a copy.  Scratch memory is freed
 * before returning.  Runaway nesting raises 54001.
 */
extern Jsonb *paidb_merge_patch(Jsonb *target, Jsonb *patch);

#endif							/* PAIDB_MERGE_PATCH_H */
