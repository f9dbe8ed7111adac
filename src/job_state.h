/*
 * job_state.h — the OpenPAI job state of a framework (SPEC §4)
 */
#ifndef PAIDB_JOB_STATE_H
#define PAIDB_JOB_STATE_H

/*
 * The job state (WAITING, RUNNING, STOPPING, SUCCEEDED, STOPPED, FAILED or
 * UNKNOWN) of a framework whose status.state is sub_state (NULL when absent)
 * and whose completion exit code is exit_code (ignored when exit_code_isnull).
 * Returns a static string.
 */
extern const char *paidb_framework_state_name(const char *sub_state,
											  bool exit_code_isnull,
											  int exit_code);

#endif							/* PAIDB_JOB_STATE_H */
