SET client_min_messages = warning;
-- Helpers of test/bench/footprint.sh (issue 19): where a job's bytes go, in
-- paidb's tables and in OpenPAI's own schema (openpai_db) holding the same
-- jobs.  Needs fixtures.sql and OpenPAI's tables in
-- schema openpai_db.
CREATE SCHEMA IF NOT EXISTS bench;

-- Heap of a relation plus its TOAST table and TOAST index (no indexes).
CREATE OR REPLACE FUNCTION bench.heap_toast(r regclass) RETURNS bigint
LANGUAGE sql AS $$ SELECT pg_table_size(r) - pg_relation_size(r, 'fsm') - pg_relation_size(r, 'vm') $$;

-- The parts of a job's storage, bytes for all jobs.  "row" is the heap
-- and TOAST of the job table less the snapshot and the job config as
-- stored (compressed, inline or in TOAST): row headers, the other
-- columns, page overhead and the free space the fillfactor keeps.
CREATE OR REPLACE FUNCTION bench.parts(job regclass, snapshot_column text, config_column text, history regclass,
    task_history regclass, job_list regclass[], counts regclass[], tags regclass)
RETURNS TABLE (part text, bytes bigint)
LANGUAGE plpgsql AS $$
DECLARE
    snap bigint;
    conf bigint;
BEGIN
    EXECUTE format('SELECT coalesce(sum(pg_column_size(%I)), 0), coalesce(sum(pg_column_size(%I)), 0) FROM %s',
                   snapshot_column, config_column, job) INTO snap, conf;
    RETURN QUERY SELECT * FROM (VALUES
      ('1 job row',      bench.heap_toast(job) - snap - conf),
      ('2 snapshot',     snap),
      ('3 job config',   conf),
      ('4 job indexes',  pg_indexes_size(job)),
      ('5 history',      pg_total_relation_size(history)),
      ('6 task history', pg_total_relation_size(task_history)),
      ('7 job list',     (SELECT coalesce(sum(pg_total_relation_size(r)), 0)::bigint FROM unnest(job_list) r)),
      ('8 counts',       (SELECT coalesce(sum(pg_total_relation_size(r)), 0)::bigint FROM unnest(counts) r)),
      ('9 tags',         pg_total_relation_size(tags))) v(part, bytes);
END $$;

-- OpenPAI's tables made to hold exactly paidb's jobs (snapshots as TEXT,
-- as its Sequelize models store them).
CREATE OR REPLACE FUNCTION bench.copy_to_openpai() RETURNS void LANGUAGE sql AS $$
TRUNCATE openpai_db.frameworks, openpai_db.tags, openpai_db.framework_history, openpai_db.task_history CASCADE;
INSERT INTO openpai_db.frameworks ("insertedAt", name, namespace, "jobName", "userName", "jobConfig",
  "executionType", "creationTime", "launchTime", "virtualCluster", "jobPriority", "totalGpuNumber",
  "totalTaskNumber", "totalTaskRoleNumber", "logPathInfix", "submissionTime", retries, "retryDelayTime",
  "platformRetries", "resourceRetries", "userRetries", "completionTime", "appExitCode", "subState", state,
  snapshot, "requestSynced", "apiServerDeleted", "updatedAt")
SELECT inserted_at, name, namespace, job_name, user_name, job_config, execution_type, creation_time,
  launch_time, virtual_cluster, job_priority, total_gpu_number, total_task_number, total_task_role_number,
  log_path_infix, submission_time, retries, retry_delay_time, platform_retries, resource_retries,
  user_retries, completion_time, app_exit_code, sub_state, state, paidb.snapshot(f)::text, request_synced,
  api_server_deleted, updated_at FROM paidb.framework f;
INSERT INTO openpai_db.tags ("insertedAt", uid, "frameworkName", name, "updatedAt")
SELECT inserted_at, uid, framework_name, name, updated_at FROM paidb.tag;
INSERT INTO openpai_db.framework_history ("insertedAt", uid, "frameworkName", "attemptIndex", "historyType", snapshot, "updatedAt")
SELECT inserted_at, uid, framework_name, attempt_index, history_type, paidb.snapshot(h)::text, updated_at
  FROM paidb.framework_history h;
INSERT INTO openpai_db.task_history ("insertedAt", uid, "frameworkName", "attemptIndex", "taskroleName",
  "taskName", "taskIndex", "taskUid", "taskAttemptIndex", "podUid", "historyType", snapshot, "updatedAt")
SELECT inserted_at, uid, framework_name, attempt_index, taskrole_name, task_name, task_index, task_uid,
  task_attempt_index, pod_uid, history_type, snapshot::text, updated_at FROM paidb.task_history;
$$;

-- Both schemas' parts now, to subtract from a later reading.
CREATE OR REPLACE FUNCTION bench.footprint_reading() RETURNS TABLE (part text, paidb bigint, openpai bigint)
LANGUAGE sql AS $$
SELECT p.part, p.bytes, o.bytes
  FROM bench.parts('paidb.framework', 'snapshot_packed', 'job_config', 'paidb.framework_history', 'paidb.task_history',
                   '{paidb.job_summary}', '{paidb.job_count,paidb.job_count_delta}', 'paidb.tag') p
  JOIN bench.parts('openpai_db.frameworks', 'snapshot', 'jobConfig', 'openpai_db.framework_history', 'openpai_db.task_history',
                   '{}', '{}', 'openpai_db.tags') o USING (part)
$$;

-- Jobs that failed and were retried `attempts` times: the job as the
-- typical completed job with retries, each earlier attempt in the history
-- (its snapshot as it ended), and in each earlier attempt one task retried
-- once before the attempt failed (a task history row, as paidb records it).
CREATE OR REPLACE FUNCTION bench.add_retried_jobs(jobs int, attempts int) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    CREATE TEMP TABLE retried ON COMMIT DROP AS
    SELECT 'r' || lpad(i::text, 31, '0') AS name,
           jsonb_set(jsonb_set(jsonb_set(replace(paidb.unpack_snapshot(f.snapshot_packed, f.job_config)::text, f.name, 'r' || lpad(i::text, 31, '0'))::jsonb,
               '{status,attemptStatus,id}', to_jsonb(attempts)),
               '{status,retryPolicyStatus,totalRetriedCount}', to_jsonb(attempts)),
               '{status,retryPolicyStatus,accountableRetriedCount}', to_jsonb(attempts)) AS snap,
           f.submission_time
      FROM (SELECT * FROM paidb.framework WHERE sub_state = 'Completed' AND retries > 0
             ORDER BY name LIMIT 1) f, generate_series(1, jobs) i;
    INSERT INTO paidb.framework (name, namespace, job_name, user_name, job_config, execution_type,
        virtual_cluster, job_priority, total_gpu_number, total_task_number, total_task_role_number,
        log_path_infix, submission_time, creation_time, launch_time, completion_time, retries,
        retry_delay_time, platform_retries, resource_retries, user_retries, app_exit_code, sub_state,
        state, snapshot_packed, request_generation, request_synced, api_server_deleted)
    SELECT c.name, c.namespace, c.job_name, c.user_name, c.job_config, c.execution_type,
        c.virtual_cluster, c.job_priority, c.total_gpu_number, c.total_task_number, c.total_task_role_number,
        c.log_path_infix, r.submission_time, c.creation_time, c.launch_time, c.completion_time, c.retries,
        c.retry_delay_time, c.platform_retries, c.resource_retries, c.user_retries, c.app_exit_code,
        c.sub_state, c.state, paidb.pack_snapshot(r.snap, c.job_config, true), 1, true, true
      FROM retried r, paidb.snapshot_columns(r.snap) c;
    INSERT INTO paidb.framework_history (uid, framework_name, attempt_index, snapshot_packed)
    SELECT paidb.history_uid(r.name, a, 'retry'), r.name, a,
           paidb.pack_snapshot(jsonb_set(jsonb_set(r.snap, '{status,attemptStatus,id}', to_jsonb(a)),
                     '{status,attemptStatus,completionStatus}', '{"code": 1, "phrase": "Failed"}'))
      FROM retried r, generate_series(0, attempts - 1) a;
    INSERT INTO paidb.task_history (uid, framework_name, attempt_index, taskrole_name, task_name, task_index,
        task_uid, task_attempt_index, pod_uid, history_type, snapshot)
    SELECT md5(t.uid || '+0+retry'), r.name, a, 'worker', r.name || '-worker-0', 0, t.uid, 0, t.pod_uid, 'retry',
           jsonb_build_object('kind', 'Task',
               'metadata', jsonb_build_object('name', r.name || '-worker-0', 'uid', t.uid,
                   'annotations', jsonb_build_object('FC_FRAMEWORK_NAME', r.name, 'FC_FRAMEWORK_ATTEMPT_ID', a::text,
                       'FC_TASKROLE_NAME', 'worker', 'FC_TASK_INDEX', '0')),
               'status', jsonb_set(r.snap #> '{status,attemptStatus,taskRoleStatuses,0,taskStatuses,0}',
                   '{attemptStatus,completionStatus}', '{"code": 1, "phrase": "Failed"}'))
      FROM retried r, generate_series(0, attempts - 1) a,
           LATERAL (SELECT md5(r.name || a) AS uid, md5('pod' || r.name || a) AS pod_uid) t;
END $$;

-- Jobs of 1,000 instances (a ~600 KB snapshot each) with one retried
-- attempt in the history.
CREATE OR REPLACE FUNCTION bench.add_big_jobs(jobs int) RETURNS void
LANGUAGE sql AS $$
INSERT INTO paidb.framework (name, job_name, user_name, virtual_cluster, submission_time, snapshot_packed,
    request_generation, request_synced, state, sub_state)
SELECT 'big' || i, 'big', 'user001', 'default', now(), paidb.pack_snapshot(bench.snapshot_600kb('big' || i), NULL, true), 1, true,
       'RUNNING', 'AttemptRunning'
  FROM generate_series(1, jobs) i;
INSERT INTO paidb.framework_history (uid, framework_name, attempt_index, snapshot_packed)
SELECT paidb.history_uid('big' || i, 0, 'retry'), 'big' || i, 0, paidb.pack_snapshot(bench.snapshot_600kb('big' || i))
  FROM generate_series(1, jobs) i;
$$;

-- Each snapshot of the jobs named by a pattern as PostgreSQL stores it
-- alone in a row (one table of one column per way, default TOAST
-- settings: a value over ~2 KB is compressed, then moved out of line if
-- still too big): the median bytes (pg_column_size).  Each value is made
-- anew (a copied value keeps the compression it was stored with).
CREATE OR REPLACE FUNCTION bench.snapshot_stored(pattern text, sample int)
RETURNS TABLE (how text, median_bytes numeric)
LANGUAGE plpgsql AS $$
DECLARE
    w record;
    m numeric;
BEGIN
    FOR w IN SELECT * FROM (VALUES
            ('jsonb, uncompressed', 'jsonb', 'pglz', 'EXTERNAL', 'paidb.snapshot(framework)::text::jsonb'),
            ('jsonb, lz4 (paidb 0.2)', 'jsonb', 'lz4', 'EXTENDED', 'paidb.snapshot(framework)::text::jsonb'),
            ('jsonb, pglz', 'jsonb', 'pglz', 'EXTENDED', 'paidb.snapshot(framework)::text::jsonb'),
            ('text, uncompressed', 'text', 'pglz', 'EXTERNAL', 'paidb.snapshot(framework)::text'),
            ('text, lz4', 'text', 'lz4', 'EXTENDED', 'paidb.snapshot(framework)::text'),
            ('text, pglz (OpenPAI)', 'text', 'pglz', 'EXTENDED', 'paidb.snapshot(framework)::text'),
            ('packed (paidb 0.3: zstd, dictionary, no config)', 'bytea', 'pglz', 'EXTERNAL', 'paidb.pack_snapshot(paidb.snapshot(framework), job_config)'),
            ('packed as a live job''s row (lz4, dictionary, no config)', 'bytea', 'pglz', 'EXTERNAL',
             'paidb.pack_snapshot(jsonb_set(paidb.snapshot(framework), ''{status,state}'', ''"AttemptRunning"''), job_config, true)'),
            ('packed with the config', 'bytea', 'pglz', 'EXTERNAL', 'paidb.pack_snapshot(paidb.snapshot(framework))'))
         v(label, typ, comp, storage, expr)
    LOOP
        EXECUTE format('CREATE TEMP TABLE st (v %s COMPRESSION %s)', w.typ, w.comp);
        EXECUTE format('ALTER TABLE st ALTER v SET STORAGE %s', w.storage);
        EXECUTE format('INSERT INTO st SELECT %s FROM paidb.framework WHERE name ~ $1 ORDER BY name LIMIT $2', w.expr)
          USING pattern, sample;
        SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY pg_column_size(v))::numeric INTO m FROM st;
        DROP TABLE st;
        how := w.label; median_bytes := m;
        RETURN NEXT;
    END LOOP;
END $$;
