/*
 * job_config.h — the few keys paidb reads from a job's YAML config
 * (annotation `config`).
 */
#ifndef PAIDB_JOB_CONFIG_H
#define PAIDB_JOB_CONFIG_H

typedef struct JobConfigKeys
{
	bool		valid;			/* the text was parsed as YAML */
	char	   *job_priority;	/* extras.hivedScheduler.jobPriorityClass */
	bool		notify_running; /* extras.jobStatusChangeNotification.* */
	bool		notify_succeeded;
	bool		notify_failed;
	bool		notify_stopped;
	bool		notify_retried;
} JobConfigKeys;

/*
 * Read the needed keys from YAML text.  Never raises an error for bad YAML:
 * an invalid config leaves every key unset (valid = false).
 */
extern void paidb_read_job_config(const char *yaml_text, size_t len, JobConfigKeys *out);

#ifdef PAIDB_FUZZING			/* test/fuzz only (make fuzz) */
extern void paidb_read_job_config_uncached(const char *yaml_text, size_t len, JobConfigKeys *out);
#endif

#endif							/* PAIDB_JOB_CONFIG_H */
