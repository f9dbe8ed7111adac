-- paidb_openpai (SPEC §9): OpenPAI's relations over paidb, and their writes.
SET client_min_messages = warning;
DROP EXTENSION IF EXISTS paidb_openpai;
DROP EXTENSION IF EXISTS paidb CASCADE;
CREATE EXTENSION paidb CASCADE;
RESET client_min_messages;
-- errors without the PL/pgSQL line numbers of CONTEXT
\set SHOW_CONTEXT never
CREATE EXTENSION paidb_openpai;
SELECT extversion, extrelocatable, n.nspname
  FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace
 WHERE extname = 'paidb_openpai';

-- The relations and columns of OpenPAI's Sequelize models, in their order,
-- JSON as text, integers int4, times timestamptz.
SELECT table_name, string_agg(column_name || ' ' || data_type, ', ' ORDER BY ordinal_position)
  FROM information_schema.columns
 WHERE table_schema = 'openpai' AND table_name IN (SELECT viewname FROM pg_views WHERE schemaname = 'openpai')
 GROUP BY table_name ORDER BY table_name;

-- A job with add-ons (secrets), a tag, history and events.
SELECT name, request_generation, created FROM paidb.put_framework_request(
  '{"apiVersion": "frameworkcontroller.microsoft.com/v1", "kind": "Framework",
    "metadata": {"name": "ovjob1", "labels": {"userName": "alice", "virtualCluster": "default"},
                 "annotations": {"jobName": "hello", "config": "extras:\n  jobStatusChangeNotification:\n    running: true\n"}},
    "spec": {"executionType": "Start", "retryPolicy": {"maxRetryCount": 1},
             "taskRoles": [{"name": "worker", "taskNumber": 2}]}}',
  '2026-01-02 03:04:05+00',
  '{"configSecretDef": {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "ovjob1-configcred"}, "data": {"k": "c2VjcmV0"}},
    "priorityClassDef": {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "ovjob1-priority"}, "value": 1}}');
SELECT "insertedAt" IS NOT NULL AS inserted, name, namespace, "jobName", "userName", "executionType",
       "virtualCluster", "totalTaskNumber", "totalTaskRoleNumber", "submissionTime", "subState", state,
       "requestSynced", "apiServerDeleted", archived, "notificationAtRunning", "notifiedAtRunning",
       "notifiedAtRetried", (snapshot::json #>> '{metadata,annotations,requestGeneration}') AS generation
  FROM openpai.frameworks;
-- the add-on definitions are stored, but never shown here
SELECT config_secret_def IS NOT NULL AS stored FROM paidb.framework WHERE name = 'ovjob1';
SELECT "dockerSecretDef", "configSecretDef", "userExtensionSecretDef", "tokenSecretDef", "priorityClassDef"
  FROM openpai.frameworks;

-- The rest-server's list query shape (Sequelize findAll with tags included).
SELECT "framework".*, "tags"."name" AS "tags.name" FROM (
  SELECT "name", "jobName", "userName", "state", "retries", "totalGpuNumber", "submissionTime"
    FROM "openpai"."frameworks" AS "framework"
   WHERE "framework"."userName" IN ('alice') AND "framework"."name" NOT IN (
         SELECT "frameworkName" FROM "openpai"."tags" AS "tag" WHERE "tag"."name" IN ('hidden'))
   ORDER BY "framework"."submissionTime" DESC LIMIT 20 OFFSET 0) AS "framework"
  LEFT OUTER JOIN "openpai"."tags" AS "tags" ON "framework"."name" = "tags"."frameworkName"
 ORDER BY "framework"."submissionTime" DESC;

-- Tags, as Sequelize 5.21.3's findOrCreate sends them: a transaction, a
-- SELECT, then the INSERT inside a pg_temp function that catches
-- unique_violation.
SET search_path = openpai;
BEGIN;
SELECT "insertedAt", "uid", "frameworkName", "name", "updatedAt" FROM "tags" AS "tag"
 WHERE "tag"."frameworkName" = 'ovjob1' AND "tag"."name" = 'nice' AND "tag"."uid" = 'ovjob1+nice' LIMIT 1;
CREATE OR REPLACE FUNCTION pg_temp.testfunc(OUT response "tags", OUT sequelize_caught_exception text) RETURNS RECORD AS $func_1$
 BEGIN INSERT INTO "tags" ("insertedAt","uid","frameworkName","name","updatedAt")
 VALUES ('2026-01-02 04:00:00.000 +00:00','ovjob1+nice','ovjob1','nice','2026-01-02 04:00:00.000 +00:00') RETURNING * INTO response;
 EXCEPTION WHEN unique_violation THEN GET STACKED DIAGNOSTICS sequelize_caught_exception = PG_EXCEPTION_DETAIL; END $func_1$ LANGUAGE plpgsql;
SELECT (testfunc.response).*, testfunc.sequelize_caught_exception FROM pg_temp.testfunc();
DROP FUNCTION IF EXISTS pg_temp.testfunc();
COMMIT;
-- Sequelize 6: the same, RETURNING added by the generator, explicit columns selected
BEGIN;
CREATE OR REPLACE FUNCTION pg_temp.testfunc(OUT response "tags", OUT sequelize_caught_exception text) RETURNS RECORD AS $func_2$
 BEGIN INSERT INTO "tags" ("insertedAt","uid","frameworkName","name","updatedAt")
 VALUES ('2026-01-02 05:00:00.000 +00:00','ovjob1+nice','ovjob1','nice','2026-01-02 05:00:00.000 +00:00') RETURNING * INTO response;
 EXCEPTION WHEN unique_violation THEN GET STACKED DIAGNOSTICS sequelize_caught_exception = PG_EXCEPTION_DETAIL; END $func_2$ LANGUAGE plpgsql;
SELECT (testfunc.response)."insertedAt", (testfunc.response)."uid", (testfunc.response)."frameworkName",
       (testfunc.response)."name", testfunc.sequelize_caught_exception FROM pg_temp.testfunc();
DROP FUNCTION IF EXISTS pg_temp.testfunc();
COMMIT;
-- a tag the job already has under another uid (e.g. imported): no error, the stored row comes back
INSERT INTO "tags" ("insertedAt","uid","frameworkName","name","updatedAt")
VALUES (now(), 'another-uid', 'ovjob1', 'nice', now()) RETURNING "uid", "frameworkName", "name", "insertedAt";
SELECT uid, framework_name, name FROM paidb.tag ORDER BY name;
-- a uid another job's tag holds: the unique violation Sequelize expects
INSERT INTO "tags" ("uid","frameworkName","name") VALUES ('ovjob1+nice', 'ovjob1', 'other');
-- a tag for a job that does not exist, or without a name: refused, nothing stored
INSERT INTO "tags" ("uid","frameworkName","name") VALUES ('x+y', 'nosuchjob', 'y');
INSERT INTO "tags" ("uid","frameworkName") VALUES ('x+z', 'ovjob1');
SELECT count(*) AS tags FROM paidb.tag;
-- destroy: the row count is what was deleted
INSERT INTO "tags" ("uid","frameworkName","name") VALUES ('ovjob1+second', 'ovjob1', 'second');
DELETE FROM "tags" WHERE "frameworkName" = 'ovjob1' AND "name" = 'second';
DELETE FROM "tags" WHERE "frameworkName" = 'ovjob1' AND "name" = 'second';
UPDATE "tags" SET name = 'renamed';
SELECT uid, name FROM paidb.tag ORDER BY name;

-- The alert manager's notification updates (Sequelize save()).
UPDATE "frameworks" SET "notifiedAtRunning"=true,"updatedAt"='2026-01-02 06:00:00.000 +00:00'
 WHERE "name" = 'ovjob1' RETURNING "name", "notifiedAtRunning", "updatedAt" > '2026-01-02' AS touched;
UPDATE "frameworks" SET "notifiedAtRetried"=3 WHERE "name" = 'ovjob1';
UPDATE "frameworks" SET "notifiedAtRetried"=4 WHERE "name" = 'nosuchjob';
SELECT notified_at_running, notified_at_retried FROM paidb.framework WHERE name = 'ovjob1';
-- nothing else about a job changes here
UPDATE "frameworks" SET "state" = 'SUCCEEDED' WHERE "name" = 'ovjob1';
UPDATE "frameworks" SET "notifiedAtFailed" = true, "archived" = true WHERE "name" = 'ovjob1';
UPDATE "frameworks" SET "configSecretDef" = '{}' WHERE "name" = 'ovjob1';
SELECT state, archived, notified_at_failed, config_secret_def IS NOT NULL AS secret_kept
  FROM paidb.framework WHERE name = 'ovjob1';
DELETE FROM "frameworks";
INSERT INTO "frameworks" ("name", "submissionTime") VALUES ('ovjob2', now());

-- fluentd's pgjson: a SELECT, then the INSERT, for framework history ...
SELECT uid from framework_history where uid = md5('ovjob1+0+retry');
INSERT INTO framework_history ("insertedAt", "updatedAt", "uid", "frameworkName", "attemptIndex", "historyType", "snapshot")
VALUES ('2026-01-02 07:00:00+00', '2026-01-02 07:00:00+00', md5('ovjob1+0+retry'), 'ovjob1', 0, 'retry',
        '{"metadata": {"name": "ovjob1"}, "status": {"state": "AttemptCompleted", "transitionTime": "2026-01-02T07:00:00Z", "attemptStatus": {"id": 0, "completionStatus": {"code": 1}}}}');
-- the same attempt again, less complete: kept as it was
INSERT INTO framework_history ("uid", "frameworkName", "attemptIndex", "historyType", "snapshot")
VALUES (md5('ovjob1+0+retry'), 'ovjob1', 0, 'retry',
        '{"metadata": {"name": "ovjob1"}, "status": {"state": "AttemptRunning", "attemptStatus": {"id": 0, "completionStatus": null}}}')
RETURNING "uid" = md5('ovjob1+0+retry') AS same_uid, snapshot::json #>> '{status,state}' AS state;
-- a uid that is not the attempt's, a snapshot of another attempt, bad JSON: refused
INSERT INTO framework_history ("uid", "frameworkName", "attemptIndex", "snapshot")
VALUES ('0123', 'ovjob1', 1, '{"metadata": {"name": "ovjob1"}, "status": {"attemptStatus": {"id": 1}}}');
INSERT INTO framework_history ("frameworkName", "attemptIndex", "snapshot")
VALUES ('ovjob1', 2, '{"metadata": {"name": "ovjob1"}, "status": {"attemptStatus": {"id": 1}}}');
INSERT INTO framework_history ("frameworkName", "attemptIndex", "snapshot") VALUES ('ovjob1', 1, '{"metadata":');
SELECT "uid" = md5('ovjob1+0+retry') AS openpai_uid, "frameworkName", "attemptIndex", "historyType"
  FROM framework_history;

-- ... task history (a Task object snapshot) ...
INSERT INTO task_history ("insertedAt", "updatedAt", "uid", "frameworkName", "attemptIndex", "taskroleName", "taskName",
                          "taskIndex", "taskUid", "taskAttemptIndex", "podUid", "historyType", "snapshot")
VALUES ('2026-01-02 08:00:00+00', '2026-01-02 08:00:00+00', md5('task-uid-1+0+retry'), 'ovjob1', '0', 'worker',
        'ovjob1-worker-0', '0', 'task-uid-1', 0, 'pod-uid-1', 'retry',
        '{"kind": "Task", "metadata": {"name": "ovjob1-worker-0", "uid": "task-uid-1"}, "status": {"state": "Completed", "attemptStatus": {"id": 0, "podUID": "pod-uid-1", "completionStatus": {"code": 1}}}}')
RETURNING "uid" = md5('task-uid-1+0+retry') AS openpai_uid, "taskUid", "taskAttemptIndex";
INSERT INTO task_history ("uid", "frameworkName", "taskUid", "taskAttemptIndex", "historyType", "snapshot")
VALUES (md5('task-uid-1+0+retry'), 'ovjob1', 'task-uid-1', 0, 'retry', '{"kind": "Task", "status": {"state": "AttemptRunning"}}');
INSERT INTO task_history ("uid", "frameworkName", "taskUid", "taskAttemptIndex", "snapshot")
VALUES ('wrong', 'ovjob1', 'task-uid-1', 1, '{}');
INSERT INTO task_history ("frameworkName", "taskAttemptIndex", "snapshot") VALUES ('ovjob1', 1, '{}');
SELECT "frameworkName", "attemptIndex", "taskroleName", "taskName", "taskIndex", "taskUid", "taskAttemptIndex",
       "podUid", "historyType", snapshot::json #>> '{status,state}' AS state
  FROM task_history;
-- the rest-server's task attempts query
SELECT "snapshot"::json #>> '{status,attemptStatus,id}' AS attempt FROM "task_history" AS "task_history"
 WHERE ("task_history"."taskUid" = 'task-uid-1' AND "task_history"."taskAttemptIndex" < 1)
 ORDER BY "task_history"."taskAttemptIndex" DESC;

-- ... and deleted pods.
SELECT uid from pods where uid = 'pod-uid-1';
INSERT INTO pods ("insertedAt", "updatedAt", "uid", "frameworkName", "attemptIndex", "taskroleName", "taskroleIndex",
                  "taskAttemptIndex", "snapshot")
VALUES ('2026-01-02 09:00:00+00', '2026-01-02 09:00:00+00', 'pod-uid-1', 'ovjob1', '0', 'worker', '0', '0',
        '{"kind": "Pod", "metadata": {"uid": "pod-uid-1"}}');
INSERT INTO pods ("uid", "frameworkName", "snapshot") VALUES ('pod-uid-1', 'ovjob1', '{"kind": "Pod", "again": true}')
RETURNING "uid", "attemptIndex", snapshot;
INSERT INTO pods ("uid", "frameworkName", "snapshot") VALUES ('pod-uid-2', 'ovjob1', 'not json');
SELECT "uid", "frameworkName", "attemptIndex", "taskroleName", "taskroleIndex", "taskAttemptIndex", snapshot FROM pods;

-- Events are read-only here (the event watcher writes them).
INSERT INTO framework_events ("uid", "frameworkName", "type") VALUES ('e1', 'ovjob1', 'Normal');
RESET search_path;

-- DROP EXTENSION paidb_openpai leaves paidb's data alone.
DROP EXTENSION paidb_openpai;
SELECT count(*) AS jobs FROM paidb.framework;
SELECT count(*) AS objects_left FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = 'openpai';
CREATE EXTENSION paidb_openpai;
SELECT count(*) AS tags_seen FROM openpai.tags;
