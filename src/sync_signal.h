/*
 * sync_signal.h — waking the sync worker when a transaction that needs
 * syncing commits.
 */
#ifndef PAIDB_SYNC_SIGNAL_H
#define PAIDB_SYNC_SIGNAL_H

/*
 * Remember that the current transaction changed a row that the sync worker
 * of `cluster` must act on; NULL when unknown (every cluster's is woken).
 */
extern void paidb_note_sync_needed(const char *cluster);

/* Register the transaction callback; called once from _PG_init. */
extern void paidb_sync_signal_init(void);

#endif							/* PAIDB_SYNC_SIGNAL_H */
