/*
 * job_list.h — the trigger that keeps the job list and its counts
 * (paidb.job_summary, paidb.job_count_delta) in step with paidb.framework,
 * and its batched mode for the framework watcher.
 */
#ifndef PAIDB_JOB_LIST_H
#define PAIDB_JOB_LIST_H

/*
 * A framework watcher writes a batch of updates with one UPDATE statement
 * (write_merger.c).  Between paidb_job_list_defer_begin() and
 * paidb_job_list_defer_end(), the trigger does not write each row's list
 * change as it fires: it holds them, and paidb_job_list_flush() (in the
 * same transaction, inside SPI, after the statement) writes them with one
 * UPDATE of paidb.job_summary and one INSERT of the count deltas, summed
 * by count key.  _end must run on every path (PG_FINALLY): it drops what
 * was not flushed.
 */
extern void paidb_job_list_defer_begin(void);
extern void paidb_job_list_flush(void);
extern void paidb_job_list_defer_end(void);

#endif							/* PAIDB_JOB_LIST_H */
