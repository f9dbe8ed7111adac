/*
 * task_history.h — task attempt history (paidb.task_history, SPEC §9)
 */
#ifndef PAIDB_TASK_HISTORY_H
#define PAIDB_TASK_HISTORY_H

#include "utils/jsonb.h"

/*
 * The task history uid: lower-case hex md5 of
 * "<task_uid>+<task_attempt_index>+<history_type>" as OpenPAI's fluentd
 * computed it (a NULL attempt index is written as nothing).  palloc'd.
 */
extern char *paidb_task_history_uid(const char *task_uid, bool has_attempt,
									int32 task_attempt_index, const char *history_type);

/*
 * Compare the stored snapshot of a framework with the new one and record,
 * once, the earlier attempt of every task whose attempt index advanced
 * (same task instanceUID, higher attemptStatus.id).  Linear in the number
 * of tasks.  Call inside a transaction; opens its own SPI session.
 * Returns the number of task attempts offered to task_history.
 */
extern int	paidb_record_task_attempts(const char *framework_name, Jsonb *old_snapshot,
									   Jsonb *new_snapshot);

#endif							/* PAIDB_TASK_HISTORY_H */
