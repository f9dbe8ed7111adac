/*
 * job_state.c — the OpenPAI job state of a framework (SPEC §4)
 *
 * Frameworkcontroller's status.state (the "sub state") and the completion
 * exit code map onto the job states OpenPAI shows its users.  The completion
 * codes -210 and -220 are the ones OpenPAI's database controller treats as a
 * stop (STOPPING while the attempt is being torn down, STOPPED once done).
 */
#include "postgres.h"

#include "fmgr.h"
#include "job_state.h"
#include "utils/builtins.h"

PG_FUNCTION_INFO_V1(paidb_framework_state);

/* Whether an exit code is one of the codes of a stop requested by the user. */
static inline bool
is_stop_exit_code(bool exit_code_isnull, int exit_code)
{
	return !exit_code_isnull && (exit_code == -210 || exit_code == -220);
}

/* The job state for a sub state and exit code, as in SPEC §4. */
const char *
paidb_framework_state_name(const char *sub_state, bool exit_code_isnull,
						   int exit_code)
{
	if (sub_state == NULL)
		return "UNKNOWN";

	if (strcmp(sub_state, "AttemptCreationPending") == 0 ||
		strcmp(sub_state, "AttemptCreationRequested") == 0 ||
		strcmp(sub_state, "AttemptPreparing") == 0)
		return "WAITING";

	if (strcmp(sub_state, "AttemptRunning") == 0)
		return "RUNNING";

	if (strcmp(sub_state, "AttemptDeletionPending") == 0 ||
		strcmp(sub_state, "AttemptDeletionRequested") == 0 ||
		strcmp(sub_state, "AttemptDeleting") == 0 ||
		strcmp(sub_state, "AttemptCompleted") == 0)
		return is_stop_exit_code(exit_code_isnull, exit_code) ? "STOPPING" : "RUNNING";

	if (strcmp(sub_state, "Completed") == 0)
	{
		if (!exit_code_isnull && exit_code == 0)
			return "SUCCEEDED";
		if (is_stop_exit_code(exit_code_isnull, exit_code))
			return "STOPPED";
		return "FAILED";
	}

	return "UNKNOWN";
}

/* SQL: paidb.framework_state(sub_state text, exit_code int) returns text */
Datum
paidb_framework_state(PG_FUNCTION_ARGS)
{
	char	   *sub_state = NULL;

	if (!PG_ARGISNULL(0))
		sub_state = text_to_cstring(PG_GETARG_TEXT_PP(0));

	PG_RETURN_TEXT_P(cstring_to_text(paidb_framework_state_name(sub_state,
																PG_ARGISNULL(1),
																PG_ARGISNULL(1) ? 0 : PG_GETARG_INT32(1))));
}
