-- Stand-in for paidb_openpai's views (SPEC §9) when that extension is not
-- installed: the relation and column names of OpenPAI's models over paidb's
-- tables.  The list columns come from paidb.job_summary; the LEFT JOIN of
-- paidb.framework on its primary key is removed by the planner whenever a
-- query uses none of its columns (every list and count query does).
CREATE SCHEMA IF NOT EXISTS openpai;
CREATE OR REPLACE VIEW openpai.frameworks AS
SELECT f.inserted_at AS "insertedAt", s.name, f.namespace, s.job_name AS "jobName", s.user_name AS "userName",
  f.job_config AS "jobConfig", s.execution_type AS "executionType", s.creation_time AS "creationTime",
  s.launch_time AS "launchTime", s.virtual_cluster AS "virtualCluster", s.job_priority AS "jobPriority",
  s.total_gpu_number AS "totalGpuNumber", s.total_task_number AS "totalTaskNumber",
  s.total_task_role_number AS "totalTaskRoleNumber", f.log_path_infix AS "logPathInfix",
  s.submission_time AS "submissionTime", NULL::text AS "dockerSecretDef", NULL::text AS "configSecretDef",
  NULL::text AS "userExtensionSecretDef", NULL::text AS "tokenSecretDef", NULL::text AS "priorityClassDef",
  s.retries, s.retry_delay_time AS "retryDelayTime", s.platform_retries AS "platformRetries",
  s.resource_retries AS "resourceRetries", s.user_retries AS "userRetries", s.completion_time AS "completionTime",
  s.app_exit_code AS "appExitCode", s.sub_state AS "subState", s.state, f.snapshot::text AS snapshot,
  f.request_synced AS "requestSynced", f.api_server_deleted AS "apiServerDeleted", s.archived,
  f.updated_at AS "updatedAt"
FROM paidb.job_summary s LEFT JOIN paidb.framework f ON f.name = s.name;
CREATE OR REPLACE VIEW openpai.tags AS
SELECT t.inserted_at AS "insertedAt", t.uid, t.framework_name AS "frameworkName", t.name, t.updated_at AS "updatedAt"
  FROM paidb.tag t;
