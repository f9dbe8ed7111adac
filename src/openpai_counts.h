/*
 * openpai_counts.h — rest-server's job counts through the openpai views
 * answered from paidb's count table (SPEC §10, docs/queries.md).
 */
#ifndef PAIDB_OPENPAI_COUNTS_H
#define PAIDB_OPENPAI_COUNTS_H

/* Install the parse-analysis hook; called once from _PG_init. */
extern void paidb_openpai_counts_init(void);

#endif							/* PAIDB_OPENPAI_COUNTS_H */
