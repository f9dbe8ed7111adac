/*
 * history.h — framework attempt history (paidb.framework_history)
 */
#ifndef PAIDB_HISTORY_H
#define PAIDB_HISTORY_H

#include "utils/jsonb.h"

/*
 * The history uid of an attempt: lower-case hex md5 of
 * "<framework_name>+<attempt_index>+<history_type>", as OpenPAI computed it.
 * Returns a palloc'd string of 32 characters.
 */
extern char *paidb_history_uid_internal(const char *framework_name,
										int attempt_index,
										const char *history_type);

/*
 * Record a framework snapshot (detoasted) as the history of its attempt, as
 * paidb.record_history() does, and return the uid (palloc'd in the caller's
 * memory context).  Bad input raises 22023.  Works inside a caller's SPI
 * session (it opens a nested one) and from any search_path.
 */
extern char *paidb_record_history_internal(Jsonb *snapshot,
										   const char *history_type);

#endif							/* PAIDB_HISTORY_H */
