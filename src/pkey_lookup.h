/*
 * pkey_lookup.h — one row of a paidb table found by its text primary key,
 * without a statement (for look-ups on the submission path, where an SPI
 * statement's executor set-up costs more than the look itself).
 */
#ifndef PAIDB_PKEY_LOOKUP_H
#define PAIDB_PKEY_LOOKUP_H

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

#endif							/* PAIDB_PKEY_LOOKUP_H */
