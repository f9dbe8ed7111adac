-- Job-list benchmark data: :jobs realistic jobs in paidb's tables, built in
-- a few set-based statements (no call per job).  Needs fixtures.sql.
-- Mixed users (skewed: a few heavy users), 8 virtual clusters, every job
-- state, four priorities (one of them none), tags on a third of the jobs,
-- 10% of the jobs with retry history.  Derived columns come from
-- paidb.snapshot_columns(), the code every writer uses.
--   psql -v jobs=1000000 -f queries_data.sql
-- The same jobs every time (test/t/051 relies on it for stable plans).
DO $$ BEGIN PERFORM setseed(0.42); END $$;

-- The snapshot as text with placeholders; one replace() chain per job.
CREATE TABLE bench.job_template AS
SELECT replace(replace(replace(replace(replace(replace(replace(replace(replace(
         (bench.request_3kb('__name__') || jsonb_build_object('status', jsonb_build_object(
            'state', '__substate__', 'startTime', '2020-08-01T10:00:00Z', 'transitionTime', '2020-08-01T10:01:00Z',
            'completionTime', '__ctime__',
            'retryPolicyStatus', jsonb_build_object('totalRetriedCount', '__retries__', 'accountableRetriedCount', '__retries__', 'retryDelaySec', null),
            'attemptStatus', jsonb_build_object('id', '__attempt__', 'startTime', '2020-08-01T10:00:00Z',
               'instanceUID', '0_6d7c1a44-1a2b-4c3d-9e8f-001122334455', 'configMapName', '__name__-attempt',
               'completionStatus', '__completion__',
               'taskRoleStatuses', jsonb_build_array(jsonb_build_object('name', 'worker', 'podGracefulDeletionTimeoutSec', 1800,
                  'taskStatuses', (SELECT jsonb_agg(jsonb_build_object(
                      'index', i, 'instanceUID', '0_4fa1c2d3-' || i, 'state', 'TaskAttemptRunning',
                      'startTime', '2020-08-01T10:00:00Z', 'transitionTime', '2020-08-01T10:01:00Z',
                      'retryPolicyStatus', jsonb_build_object('totalRetriedCount', 0, 'accountableRetriedCount', 0),
                      'attemptStatus', jsonb_build_object('id', 0, 'podName', '__name__-worker-' || i,
                          'podUID', 'a1b2c3d4-0000-4000-8000-00000000000' || i, 'podNodeName', 'node-' || i,
                          'podIP', '10.0.0.' || i, 'podHostIP', '192.168.0.' || i, 'completionStatus', null)) ORDER BY i)
                    FROM generate_series(0, 3) i)))))))::text,
       '"alice"', '"__user__"'), 'alice/', '__user__/'), 'alice~', '__user__~'),
       '"default"', '"__vc__"'), 'virtualCluster: default', 'virtualCluster: __vc__'),
       'mnist-train', '__job__'), E'  hivedScheduler:\\n    jobPriorityClass: prod\\n', '__prio__'),
       '"__completion__"', '__completion__'), '"__ctime__"', '__ctime__') AS t;

-- One row of parameters per job.
CREATE TABLE bench.job_param AS
SELECT i,
       md5('job' || i) AS name,
       'user' || lpad((floor(power(random(), 3) * 500))::int::text, 3, '0') AS user_name,
       (ARRAY['default', 'prod', 'research', 'vision', 'speech', 'nlp', 'infra', 'test'])[1 + floor(power(random(), 2) * 8)::int] AS vc,
       (ARRAY['mnist', 'resnet', 'bert', 'gpt', 'yolo', 'lstm', 'cifar', 'imagenet', 'tfjob', 'torchrun'])[1 + (i % 10)]
           || '_' || to_hex((i::bigint * 7919) % 1048576) AS job_name,
       (ARRAY[NULL, 'prod', 'test', 'oppo'])[1 + floor(random() * 4)::int] AS prio,
       pg_catalog.now() - (((:jobs - i)::float8 / :jobs) * interval '730 days') AS submitted,
       i % 100 AS kind,
       CASE WHEN i % 10 = 3 THEN 1 + (i / 10) % 3 ELSE 0 END AS retries
FROM generate_series(1, :jobs) i;

-- paidb 0.3 stores snapshots packed (snapshot_packed); 0.1 and 0.2 as jsonb
SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_attribute WHERE attrelid = 'paidb.framework'::regclass
                 AND attname = 'snapshot_packed' AND NOT attisdropped) AS packed \gset
\if :packed
\set snapshot_column snapshot_packed
\set store_snapshot 'paidb.pack_snapshot(s.snap, c.job_config, true)'
\set store_history 'paidb.pack_snapshot'
\set stored_snapshot 'paidb.snapshot(f)'
\else
\set snapshot_column snapshot
\set store_snapshot 's.snap'
\set store_history ''
\set stored_snapshot 'f.snapshot'
\endif

INSERT INTO paidb.framework (name, namespace, job_name, user_name, job_config, execution_type,
    virtual_cluster, job_priority, total_gpu_number, total_task_number, total_task_role_number,
    log_path_infix, submission_time, creation_time, launch_time, completion_time, retries,
    retry_delay_time, platform_retries, resource_retries, user_retries, app_exit_code, sub_state,
    state, :snapshot_column, request_generation, request_synced, api_server_deleted,
    notification_at_running, notification_at_succeeded, notification_at_failed,
    notification_at_stopped, notification_at_retried)
SELECT c.name, c.namespace, c.job_name, c.user_name, c.job_config, c.execution_type,
    c.virtual_cluster, c.job_priority, c.total_gpu_number, c.total_task_number, c.total_task_role_number,
    c.log_path_infix, s.submitted, c.creation_time, c.launch_time, c.completion_time, c.retries,
    c.retry_delay_time, c.platform_retries, c.resource_retries, c.user_retries, c.app_exit_code, c.sub_state,
    c.state, :store_snapshot, 1, true, s.kind < 70,
    c.notification_at_running, c.notification_at_succeeded, c.notification_at_failed,
    c.notification_at_stopped, c.notification_at_retried
FROM (
    SELECT p.*, replace(replace(replace(replace(replace(replace(replace(replace(replace(replace(t.t,
             '__name__', p.name), '__user__', p.user_name), '__vc__', p.vc), '__job__', p.job_name),
             '__prio__', CASE WHEN p.prio IS NULL THEN '' ELSE E'  hivedScheduler:\\n    jobPriorityClass: ' || p.prio || E'\\n' END),
             '__substate__', CASE WHEN p.kind < 70 THEN 'Completed' WHEN p.kind < 85 THEN 'AttemptRunning' WHEN p.kind < 95 THEN 'AttemptCreationPending' ELSE 'AttemptDeletionPending' END),
             '__completion__', CASE WHEN p.kind < 50 THEN '{"code": 0, "phrase": "Succeeded"}'
                                    WHEN p.kind < 65 THEN '{"code": 1, "phrase": "Failed"}'
                                    WHEN p.kind < 70 THEN '{"code": -210, "phrase": "FrameworkAttemptStopped"}'
                                    ELSE 'null' END),
             '__ctime__', CASE WHEN p.kind < 70 THEN '"' || to_char((p.submitted + interval '3 hours') AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"') || '"' ELSE 'null' END),
             '"__retries__"', p.retries::text), '"__attempt__"', p.retries::text)::jsonb AS snap
    FROM bench.job_param p, bench.job_template t
) s, paidb.snapshot_columns(s.snap) c;

-- Tags on a third of the jobs (50 distinct names, one or two per job).
INSERT INTO paidb.tag (uid, framework_name, name)
SELECT md5(p.name || g), p.name, 'tag' || ((p.i * 7 + g * 13) % 50)
FROM bench.job_param p, generate_series(1, 2) g
WHERE p.i % 3 = 0 AND (g = 1 OR p.i % 2 = 0);

-- Tags of every density (issue 17): on 0.1%, 1%, 10% and half of the jobs,
-- spread over their whole history.
INSERT INTO paidb.tag (uid, framework_name, name)
SELECT md5(p.name || d.name), p.name, d.name
FROM bench.job_param p, (VALUES ('dense0_1', 1000), ('dense1', 100), ('dense10', 10), ('dense50', 2)) d(name, every)
WHERE p.i % d.every = 1;

-- Retry history: each retried job's earlier attempts.
INSERT INTO paidb.framework_history (uid, framework_name, attempt_index, :snapshot_column)
SELECT paidb.history_uid(f.name, a, 'retry'), f.name, a,
       :store_history(jsonb_set(jsonb_set(:stored_snapshot, '{status,attemptStatus,id}', to_jsonb(a)),
                 '{status,attemptStatus,completionStatus}', '{"code": 1, "phrase": "Failed"}'))
FROM paidb.framework f, generate_series(0, 2) a
WHERE f.retries > 0 AND a < f.retries;

VACUUM ANALYZE paidb.framework, paidb.tag, paidb.framework_history;
