-- Task attempt history written by the framework watcher (SPEC §9): when a
-- task's attempt index advances, its earlier attempt is recorded once.
SET client_min_messages = warning;
DROP EXTENSION IF EXISTS paidb_openpai;
DROP EXTENSION IF EXISTS paidb CASCADE;
CREATE EXTENSION paidb CASCADE;
RESET client_min_messages;
-- errors without the PL/pgSQL line numbers of CONTEXT
\set SHOW_CONTEXT never
SET paidb.retain_mode = on;
SELECT name FROM paidb.put_framework_request(
  '{"metadata": {"name": "thjob"}, "spec": {"executionType": "Start",
    "taskRoles": [{"name": "ps", "taskNumber": 1}, {"name": "worker", "taskNumber": 3}]}}', '2026-01-01');

-- A watched framework: task role statuses with per-task attempts.
CREATE FUNCTION pg_temp.task(idx int, uid text, attempt int, done boolean, pod text)
RETURNS jsonb LANGUAGE sql AS $$
  SELECT jsonb_build_object('index', idx, 'instanceUID', uid,
           'state', CASE WHEN done THEN 'AttemptCompleted' ELSE 'AttemptRunning' END,
           'attemptStatus', jsonb_build_object('id', attempt, 'podUID', pod || '-' || attempt,
             'completionStatus', CASE WHEN done THEN '{"code": 1, "phrase": "Failed"}'::jsonb
                                      ELSE 'null'::jsonb END))
$$;
CREATE FUNCTION pg_temp.fw(rv int, fw_attempt int, attempts int[], uids text[] DEFAULT NULL,
                           done boolean[] DEFAULT '{f,f,f,f}')
RETURNS jsonb LANGUAGE sql AS $$
  SELECT jsonb_build_object(
    'metadata', jsonb_build_object('name', 'thjob', 'resourceVersion', rv::text,
                                   'annotations', jsonb_build_object('requestGeneration', '1')),
    'spec', jsonb_build_object('executionType', 'Start'),
    'status', jsonb_build_object('state', 'AttemptRunning', 'attemptStatus',
      jsonb_build_object('id', fw_attempt, 'taskRoleStatuses', jsonb_build_array(
        jsonb_build_object('name', 'ps', 'taskStatuses', jsonb_build_array(
          pg_temp.task(0, coalesce(uids[1], fw_attempt || '-ps-0'), attempts[1], done[1], 'pod-ps0'))),
        jsonb_build_object('name', 'worker', 'taskStatuses', jsonb_build_array(
          pg_temp.task(0, coalesce(uids[2], fw_attempt || '-worker-0'), attempts[2], done[2], 'pod-w0'),
          pg_temp.task(1, coalesce(uids[3], fw_attempt || '-worker-1'), attempts[3], done[3], 'pod-w1'),
          pg_temp.task(2, coalesce(uids[4], fw_attempt || '-worker-2'), attempts[4], done[4], 'pod-w2')))))))
$$;

SELECT paidb.apply_watch_event('MODIFIED', pg_temp.fw(10, 0, '{0,0,0,0}'));
SELECT count(*) AS task_history FROM paidb.task_history;
-- worker 1 fails: its attempt 0 completes, nothing recorded yet
SELECT paidb.apply_watch_event('MODIFIED', pg_temp.fw(11, 0, '{0,0,0,0}', NULL, '{f,f,t,f}'));
SELECT count(*) AS task_history FROM paidb.task_history;
-- worker 1 is retried (attempt 1): its attempt 0, as last seen, is recorded
SELECT paidb.apply_watch_event('MODIFIED', pg_temp.fw(12, 0, '{0,0,1,0}'));
SELECT uid = md5('0-worker-1+0+retry') AS openpai_uid, framework_name, attempt_index, taskrole_name, task_name,
       task_index, task_uid, task_attempt_index, pod_uid, history_type,
       snapshot #>> '{status,state}' AS state, snapshot #> '{status,attemptStatus,completionStatus,code}' AS code,
       snapshot #> '{metadata}' AS metadata, snapshot ->> 'kind' AS kind
  FROM paidb.task_history;
-- the same event again, and a stale one: recorded once
SELECT paidb.apply_watch_event('MODIFIED', pg_temp.fw(12, 0, '{0,0,1,0}'));
SELECT paidb.apply_watch_event('MODIFIED', pg_temp.fw(9, 0, '{0,0,0,0}'));
SELECT count(*) AS task_history FROM paidb.task_history;
-- two tasks advance in one event, one of them by two attempts (the watcher
-- missed one): each earlier attempt that was seen is recorded
SELECT paidb.apply_watch_event('MODIFIED', pg_temp.fw(13, 0, '{1,0,3,0}'));
SELECT task_uid, task_attempt_index, pod_uid FROM paidb.task_history ORDER BY task_uid, task_attempt_index;
-- the tasks in another order (positions do not line up): matched by instanceUID
SELECT paidb.apply_watch_event('MODIFIED', pg_temp.fw(14, 0, '{1,0,3,1}',
         '{0-worker-2,0-worker-1,0-worker-0,0-ps-0}'));
SELECT task_uid, task_attempt_index, pod_uid FROM paidb.task_history ORDER BY task_uid, task_attempt_index;
-- a new framework attempt has new task instances: no task history, the
-- framework attempt goes to framework_history
SELECT paidb.apply_watch_event('MODIFIED', pg_temp.fw(15, 1, '{0,0,0,0}'));
SELECT count(*) AS task_history, (SELECT count(*) FROM paidb.framework_history) AS framework_history
  FROM paidb.task_history;
-- the rest-server's query for a task's earlier attempts
SELECT snapshot::json #>> '{status,attemptStatus,id}' AS attempt, snapshot::json #>> '{status,attemptStatus,podUID}' AS pod
  FROM paidb.task_history WHERE task_uid = '0-worker-1' AND task_attempt_index < 3 ORDER BY task_attempt_index DESC;

-- A task status without an instanceUID or attempt id is skipped, never an error.
SELECT paidb.apply_watch_event('MODIFIED', jsonb_set(pg_temp.fw(16, 1, '{0,0,0,0}'),
         '{status,attemptStatus,taskRoleStatuses,0,taskStatuses,0}', '{"index": 0}'));
SELECT paidb.apply_watch_event('MODIFIED', jsonb_set(pg_temp.fw(17, 1, '{1,0,0,0}'),
         '{status,attemptStatus,taskRoleStatuses}', '"garbage"'));
SELECT count(*) AS task_history FROM paidb.task_history;

-- record_task_history directly: the completed snapshot wins over one without completion
SELECT paidb.record_task_history('{"status": {"attemptStatus": {"id": 0, "completionStatus": null}}}',
         'thjob', 0, 'ps', 'thjob-ps-0', 0, 'direct-uid', 0, NULL) = md5('direct-uid+0+retry') AS uid_ok;
SELECT paidb.record_task_history('{"status": {"attemptStatus": {"id": 0, "completionStatus": {"code": 0}}}}',
         'thjob', 0, 'ps', 'thjob-ps-0', 0, 'direct-uid', 0, NULL, 'retry');
SELECT paidb.record_task_history('{"status": {"attemptStatus": {"id": 0, "completionStatus": null}, "late": true}}',
         'thjob', 0, 'ps', 'thjob-ps-0', 0, 'direct-uid', 0, NULL, 'retry');
SELECT snapshot FROM paidb.task_history WHERE task_uid = 'direct-uid';
-- a NULL attempt index is written as nothing in the uid, as fluentd's Ruby did
SELECT paidb.record_task_history('{}', 'thjob', NULL, NULL, NULL, NULL, 'nullattempt', NULL, NULL, 'deletion')
       = md5('nullattempt++deletion') AS null_attempt_uid;
-- bad input
SELECT paidb.record_task_history('[]', 'thjob', 0, NULL, NULL, NULL, 'x', 0, NULL);
SELECT paidb.record_task_history('{}', 'thjob', 0, NULL, NULL, NULL, NULL, 0, NULL);
SELECT paidb.record_task_history('{}', 'thjob', 0, NULL, NULL, NULL, '', 0, NULL);
