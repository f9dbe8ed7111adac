-- Job counts, archive, delete and retention (SPEC §10, docs/queries.md).
SET client_min_messages = warning;
DROP EXTENSION IF EXISTS paidb CASCADE;
RESET client_min_messages;
CREATE EXTENSION paidb CASCADE;
SET timezone = 'UTC';
CREATE FUNCTION pg_temp.try(sql text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN EXECUTE sql; RETURN 'ok';
EXCEPTION WHEN OTHERS THEN RETURN SQLSTATE || ': ' || SQLERRM;
END $$;
-- a job of user u, virtual cluster vc, priority p
CREATE FUNCTION pg_temp.submit(n text, u text, vc text, p text) RETURNS text LANGUAGE sql AS $$
SELECT name FROM paidb.put_framework_request(jsonb_build_object(
  'apiVersion', 'frameworkcontroller.microsoft.com/v1', 'kind', 'Framework',
  'metadata', jsonb_build_object('name', n, 'labels', jsonb_build_object('userName', u, 'virtualCluster', vc),
     'annotations', jsonb_build_object('jobName', n || '-job',
        'config', CASE WHEN p IS NULL THEN '' ELSE E'extras:\n  hivedScheduler:\n    jobPriorityClass: ' || p || E'\n' END)),
  'spec', jsonb_build_object('executionType', 'Start')), '2020-08-01 10:00:00+00')
$$;
-- a watch event: the job in sub_state st (completed with exit code ex at ct)
CREATE FUNCTION pg_temp.event(typ text, n text, rv int, st text, ex int, ct timestamptz) RETURNS text LANGUAGE sql AS $$
SELECT paidb.apply_watch_event(typ, jsonb_build_object(
  'metadata', jsonb_build_object('name', n, 'resourceVersion', rv::text, 'annotations', '{"requestGeneration": "1"}'::jsonb),
  'status', jsonb_build_object('state', st, 'completionTime', ct,
     'attemptStatus', jsonb_build_object('id', 0, 'completionStatus',
        CASE WHEN ex IS NULL THEN NULL ELSE jsonb_build_object('code', ex, 'phrase', 'x') END),
     'retryPolicyStatus', '{"totalRetriedCount": 0, "accountableRetriedCount": 0}'::jsonb)))
$$;
-- the maintained counts disagree with count(*) in these groups (none: empty)
CREATE VIEW pg_temp.count_errors AS
(SELECT 'count(*)' AS source, user_name, virtual_cluster, state, job_priority, archived, count(*) AS n
   FROM paidb.framework GROUP BY 2, 3, 4, 5, 6
 EXCEPT SELECT 'count(*)', user_name, virtual_cluster, state, job_priority, archived, n FROM paidb.job_counts)
UNION ALL
(SELECT 'job_counts', user_name, virtual_cluster, state, job_priority, archived, n FROM paidb.job_counts
 EXCEPT SELECT 'job_counts', user_name, virtual_cluster, state, job_priority, archived, count(*)
   FROM paidb.framework GROUP BY 2, 3, 4, 5, 6);
-- rows where paidb.job_summary differs from paidb.framework (none: empty)
CREATE VIEW pg_temp.summary_errors AS
(SELECT 'framework' AS source, name, job_name, user_name, execution_type, submission_time, creation_time,
        launch_time, virtual_cluster, total_gpu_number, total_task_number, total_task_role_number,
        job_priority, retries, retry_delay_time, platform_retries, resource_retries, user_retries,
        completion_time, app_exit_code, sub_state, state, archived FROM paidb.framework
 EXCEPT SELECT 'framework', * FROM paidb.job_summary)
UNION ALL
(SELECT 'job_summary', * FROM paidb.job_summary
 EXCEPT SELECT 'job_summary', name, job_name, user_name, execution_type, submission_time, creation_time,
        launch_time, virtual_cluster, total_gpu_number, total_task_number, total_task_role_number,
        job_priority, retries, retry_delay_time, platform_retries, resource_retries, user_retries,
        completion_time, app_exit_code, sub_state, state, archived FROM paidb.framework);

SELECT pg_temp.submit('run1', 'alice', 'default', 'prod'), pg_temp.submit('run2', 'alice', 'vc2', NULL),
       pg_temp.submit('done1', 'bob', 'default', 'prod'), pg_temp.submit('done2', 'bob', 'default', NULL),
       pg_temp.submit('done3', 'carol', 'vc2', 'test'), pg_temp.submit('done4', 'carol', 'vc2', 'test');
SELECT pg_temp.event('MODIFIED', 'run1', 10, 'AttemptRunning', NULL, NULL);
SELECT pg_temp.event('MODIFIED', j, 11, 'Completed', 0, '2020-08-01 11:00:00+00') FROM unnest('{done1,done2}'::text[]) j;
SELECT pg_temp.event('MODIFIED', j, 11, 'Completed', 1, now() - interval '1 hour') FROM unnest('{done3,done4}'::text[]) j;
SELECT pg_temp.event('DELETED', j, 12, 'Completed', 0, '2020-08-01 11:00:00+00') FROM unnest('{done1,done2}'::text[]) j;
SELECT pg_temp.event('DELETED', 'done3', 12, 'Completed', 1, now() - interval '1 hour');
SELECT name, user_name, virtual_cluster, job_priority, state, sub_state, api_server_deleted
  FROM paidb.framework ORDER BY name;
SELECT name, job_name, user_name, virtual_cluster, job_priority, state, completion_time IS NOT NULL AS completed, archived
  FROM paidb.job_summary ORDER BY name;

-- Counts: exact before and after compaction
SELECT * FROM pg_temp.count_errors;
SELECT name, source FROM pg_temp.summary_errors;
SELECT sum(n) AS total, sum(n) FILTER (WHERE user_name = 'bob') AS bob,
       sum(n) FILTER (WHERE virtual_cluster = 'vc2' AND state = 'FAILED') AS vc2_failed
  FROM paidb.job_counts WHERE NOT archived;
SELECT paidb.compact_job_counts() > 0 AS folded;
SELECT count(*) AS deltas_left FROM paidb.job_count_delta;
SELECT * FROM pg_temp.count_errors;
SELECT name, source FROM pg_temp.summary_errors;
SELECT paidb.compact_job_counts() AS folded_again;

-- Each listed column changed alone by a plain UPDATE (no FOR UPDATE first),
-- a change back, a NULL and a status-only update: the list follows, and only
-- key changes add count deltas
CREATE TEMP TABLE col_updates (col text, val text);
INSERT INTO col_updates VALUES
 ('job_name', '''renamed'''), ('user_name', '''dave'''), ('execution_type', '''Stop'''),
 ('submission_time', '''2020-01-01 00:00:00+00'''), ('creation_time', 'now()'), ('launch_time', 'now()'),
 ('virtual_cluster', '''vc3'''), ('total_gpu_number', '7'), ('total_task_number', '9'),
 ('total_task_role_number', '2'), ('job_priority', '''low'''), ('retries', '3'), ('retry_delay_time', '5'),
 ('platform_retries', '1'), ('resource_retries', '1'), ('user_retries', '1'),
 ('completion_time', 'now()'), ('app_exit_code', '137'), ('sub_state', '''AttemptDeletionPending'''),
 ('state', '''STOPPING'''), ('archived', 'true'), ('user_name', '''alice'''), ('job_name', 'NULL');
CREATE FUNCTION pg_temp.update_each() RETURNS TABLE (col text, list_wrong bigint, counts_wrong bigint, deltas bigint)
LANGUAGE plpgsql AS $$
DECLARE u record; d0 bigint;
BEGIN
    FOR u IN SELECT * FROM col_updates LOOP
        SELECT count(*) INTO d0 FROM paidb.job_count_delta;
        EXECUTE format('UPDATE paidb.framework SET %I = %s WHERE name = %L', u.col, u.val, 'run2');
        col := u.col;
        SELECT count(*) INTO list_wrong FROM pg_temp.summary_errors;
        SELECT count(*) INTO counts_wrong FROM pg_temp.count_errors;
        SELECT count(*) - d0 INTO deltas FROM paidb.job_count_delta;
        RETURN NEXT;
    END LOOP;
    UPDATE paidb.framework SET snapshot_packed = paidb.pack_snapshot(paidb.snapshot(framework) || '{"x": 1}', job_config),
           updated_at = now() WHERE name = 'run2';
    col := 'snapshot only';
    SELECT count(*) INTO list_wrong FROM pg_temp.summary_errors;
    SELECT count(*) INTO counts_wrong FROM pg_temp.count_errors;
    SELECT count(*) - d0 INTO deltas FROM paidb.job_count_delta;
    RETURN NEXT;
END $$;
BEGIN;
SELECT * FROM pg_temp.update_each();
ROLLBACK;
SELECT * FROM pg_temp.count_errors;
SELECT name, source FROM pg_temp.summary_errors;

-- Archive: hides from the default listing, and nothing else changes
CREATE TEMP TABLE before AS SELECT * FROM paidb.framework WHERE name = 'run1';
SELECT paidb.archive_job('run1') AS changed, paidb.archive_job('run1') AS again;
SELECT name FROM paidb.framework WHERE NOT archived ORDER BY submission_time DESC, name;
SELECT sum(n) AS listed FROM paidb.job_counts WHERE NOT archived;
SELECT sum(n) AS all_jobs FROM paidb.job_counts;
SELECT count(*) AS other_columns_differ FROM (
  SELECT (to_jsonb(b) - 'archived' - 'updated_at') = (to_jsonb(f) - 'archived' - 'updated_at') AS same
    FROM before b JOIN paidb.framework f USING (name)) s WHERE NOT same;
SELECT * FROM pg_temp.count_errors;
SELECT name, source FROM pg_temp.summary_errors;
SELECT paidb.archive_job('run1', false) AS unarchived;
SELECT archived FROM paidb.framework WHERE name = 'run1';
SELECT pg_temp.try($$SELECT paidb.archive_job('nosuchjob')$$);
SELECT pg_temp.try($$SELECT paidb.archive_job(NULL)$$);

-- Delete: only a completed job the API server no longer has
INSERT INTO paidb.tag (framework_name, name) VALUES ('done1', 'keep'), ('done1', 'x'), ('done2', 'keep');
INSERT INTO paidb.framework_history (uid, framework_name, attempt_index) VALUES (paidb.history_uid('done1', 0), 'done1', 0);
INSERT INTO paidb.task_history (uid, framework_name, task_uid) VALUES ('th1', 'done1', 't1');
INSERT INTO paidb.pod (uid, framework_name) VALUES ('pod1', 'done1'), ('pod2', 'done2');
INSERT INTO paidb.framework_event (uid, framework_name, type) VALUES ('ev1', 'done1', 'Normal');
INSERT INTO paidb.pod_event (uid, framework_name, pod_uid, type) VALUES ('pe1', 'done1', 'pod1', 'Normal');
SELECT pg_temp.try($$SELECT paidb.delete_job('run1')$$) AS running;
SELECT pg_temp.try($$SELECT paidb.delete_job('run2')$$) AS waiting;
SELECT pg_temp.try($$SELECT paidb.delete_job('done4')$$) AS completed_not_deleted;
SELECT pg_temp.try($$SELECT paidb.delete_job('nosuchjob')$$) AS unknown;
\set SHOW_CONTEXT never
SELECT paidb.delete_job('run1');
\set SHOW_CONTEXT errors
SELECT paidb.delete_job('done1');
SELECT (SELECT count(*) FROM paidb.framework WHERE name = 'done1') AS job,
       (SELECT count(*) FROM paidb.framework_history WHERE framework_name = 'done1') AS history,
       (SELECT count(*) FROM paidb.task_history WHERE framework_name = 'done1') AS task_history,
       (SELECT count(*) FROM paidb.pod WHERE framework_name = 'done1') AS pods,
       (SELECT count(*) FROM paidb.framework_event WHERE framework_name = 'done1') AS events,
       (SELECT count(*) FROM paidb.pod_event WHERE framework_name = 'done1') AS pod_events,
       (SELECT count(*) FROM paidb.tag WHERE framework_name = 'done1') AS tags;
SELECT framework_name, name FROM paidb.tag ORDER BY 1, 2;
SELECT uid FROM paidb.pod ORDER BY 1;
SELECT pg_temp.try($$SELECT paidb.delete_job('done1')$$) AS twice;
SELECT * FROM pg_temp.count_errors;
SELECT name, source FROM pg_temp.summary_errors;

-- Retention: exactly the expired jobs (completed, deleted, old enough);
-- never done4 (still in the API server), never a running job
SELECT pg_temp.submit('old5', 'dave', 'default', NULL);
SELECT pg_temp.event('MODIFIED', 'old5', 11, 'Completed', 0, '2020-01-01 00:00:00+00');
SELECT pg_temp.event('DELETED', 'old5', 12, 'Completed', 0, '2020-01-01 00:00:00+00');
UPDATE paidb.framework SET completion_time = '2019-01-01' WHERE name = 'done4';
INSERT INTO paidb.framework_event (uid, framework_name, type, last_timestamp, updated_at)
VALUES ('ev-old', 'run1', 'Normal', now() - interval '1 day', now() - interval '40 days'),
       ('ev-new', 'run1', 'Normal', now() - interval '400 days', now() - interval '1 day');
INSERT INTO paidb.pod_event (uid, framework_name, pod_uid, type) VALUES ('pe-new', 'run1', 'p', 'Normal');
SELECT * FROM paidb.retention_batch('1 day', '30 days', 1);
SELECT * FROM paidb.retention_batch('1 day', '30 days', 1);
SELECT * FROM paidb.retention_batch('1 day', '30 days', 1);
SELECT name, state, api_server_deleted FROM paidb.framework ORDER BY name;
SELECT uid FROM paidb.framework_event ORDER BY 1;
SELECT uid FROM paidb.pod_event ORDER BY 1;
-- no ages: nothing
SELECT * FROM paidb.retention_batch(NULL, NULL);
SELECT * FROM pg_temp.count_errors;
SELECT name, source FROM pg_temp.summary_errors;

-- Keyword indexes: paidb requires pg_trgm, so every install has them
-- (and making them again changes nothing)
SELECT indexrelid::regclass::text AS keyword_index FROM pg_index
 WHERE indrelid = 'paidb.job_summary'::regclass AND indexrelid::regclass::text LIKE '%trgm%' ORDER BY 1;
SET client_min_messages = warning;
SELECT paidb.create_keyword_indexes();
RESET client_min_messages;

-- Privileges: the writer archives and deletes; the reader does neither
SET ROLE paidb_writer;
SELECT paidb.archive_job('run2');
SELECT pg_temp.try($$SELECT paidb.delete_job('done3')$$) AS writer_delete;
SELECT pg_temp.try($$SELECT * FROM paidb.retention_batch('1 day', NULL)$$) AS writer_retention;
SELECT sum(n) AS writer_sees_counts FROM paidb.job_counts;
SELECT count(*) AS writer_sees_summary FROM paidb.job_summary;
RESET ROLE;
SET ROLE paidb_reader;
SELECT pg_temp.try($$SELECT paidb.archive_job('run2', false)$$) AS reader_archive;
SELECT pg_temp.try($$SELECT paidb.delete_job('done3')$$) AS reader_delete;
SELECT pg_temp.try($$SELECT paidb.compact_job_counts()$$) AS reader_compact;
SELECT pg_temp.try($$INSERT INTO paidb.job_count_delta VALUES ('x', 'x', 'x', 'x', false, 1000)$$) AS reader_insert;
SELECT sum(n) AS reader_sees_counts FROM paidb.job_counts;
SELECT count(*) AS reader_sees_summary FROM paidb.job_summary;
SELECT pg_temp.try($$UPDATE paidb.job_summary SET archived = true$$) AS reader_update;
RESET ROLE;
SELECT pg_temp.try($$SET ROLE paidb_writer; INSERT INTO paidb.job_count_delta VALUES ('x', 'x', 'x', 'x', false, 1000)$$) AS writer_insert;
RESET ROLE;
SELECT p.proname, p.prosecdef, p.proconfig FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
 WHERE n.nspname = 'paidb' AND p.proname IN ('archive_job', 'delete_job', 'retention_batch', 'compact_job_counts')
 ORDER BY 1;
SELECT * FROM pg_temp.count_errors;
SELECT name, source FROM pg_temp.summary_errors;
