/*
 * pkey_lookup.h — one row of a paidb table found by its text primary key,
 * without a statement (for look-ups on the submission path, where an SPI
 * statement's executor set-up costs more than the look itself).
 */
#ifndef PAIDB_PKEY_LOOKUP_H
#define PAIDB_PKEY_LOOKUP_H

#include "nodes/lockoptions.h"
#include "utils/snapshot.h"

/*
 * Whether the table `relid` has a row whose one-column text primary key
 * equals `key`, visible to `snapshot`.  If so and `column` is not NULL,
 * *value gets that column's text (NULL for SQL NULL), palloc'd.  The table
 * and its key stay locked AccessShare to the end of the transaction, as a
 * statement's would.  A table without such a key: an error.
 */
extern bool paidb_pkey_lookup(Oid relid, const char *key, Snapshot snapshot,
							  const char *column, char **value);

/*
 * The row of `relid` whose one-column text primary key equals `key`,
 * locked in `mode` as SELECT ... FOR <mode> in a statement of its own
 * would lock it: found with the snapshot such a statement would take,
 * waiting for a conflicting lock, and in READ COMMITTED the latest version
 * of a row updated meanwhile (not found if it was deleted, or its key
 * changed); under REPEATABLE READ and SERIALIZABLE a concurrent update is a
 * serialization failure.  If found, values[i] and isnull[i] get column
 * columns[i], copied into the current memory context (a toasted value
 * stays a pointer to the TOAST table, as in a statement's result).
 */
extern bool paidb_pkey_lock_datums(Oid relid, const char *key, LockTupleMode mode,
								   int ncolumns, const char *const *columns,
								   Datum *values, bool *isnull);

#endif							/* PAIDB_PKEY_LOOKUP_H */
