-- openpai.import_database (SPEC §9): an OpenPAI v1.2+ database's tables, in
-- another schema of this database, into paidb.  The tables below have the
-- columns, types, defaults and keys of OpenPAI's Sequelize models, written
-- by hand (without the foreign keys and indexes of the full definition,
-- test/t/data/openpai-tables.sql, a pg_dump of their sync()); the rows
-- carry OpenPAI's quirks.
SET client_min_messages = warning;
DROP EXTENSION IF EXISTS paidb_openpai;
DROP EXTENSION IF EXISTS paidb CASCADE;
CREATE EXTENSION paidb CASCADE;
RESET client_min_messages;
-- errors without the PL/pgSQL line numbers of CONTEXT
\set SHOW_CONTEXT never
CREATE EXTENSION paidb_openpai;
CREATE SCHEMA opai;
CREATE TABLE opai.frameworks ("insertedAt" timestamptz, name varchar(64) PRIMARY KEY, namespace varchar(64),
  "jobName" varchar(256), "userName" varchar(256), "jobConfig" text, "executionType" varchar(32),
  "creationTime" timestamptz, "launchTime" timestamptz, "virtualCluster" varchar(256), "jobPriority" varchar(256),
  "totalGpuNumber" int, "totalTaskNumber" int, "totalTaskRoleNumber" int, "logPathInfix" varchar(256),
  "submissionTime" timestamptz NOT NULL, "dockerSecretDef" text, "configSecretDef" text, "userExtensionSecretDef" text,
  "tokenSecretDef" text, "priorityClassDef" text, retries int, "retryDelayTime" int, "platformRetries" int,
  "resourceRetries" int, "userRetries" int, "completionTime" timestamptz, "appExitCode" int, "subState" varchar(32),
  state varchar(32), snapshot text, "requestSynced" boolean NOT NULL DEFAULT false,
  "apiServerDeleted" boolean NOT NULL DEFAULT false, archived boolean NOT NULL DEFAULT false,
  "notificationAtRunning" boolean, "notifiedAtRunning" boolean, "notificationAtSucceeded" boolean,
  "notifiedAtSucceeded" boolean, "notificationAtFailed" boolean, "notifiedAtFailed" boolean,
  "notificationAtStopped" boolean, "notifiedAtStopped" boolean, "notificationAtRetried" boolean,
  "notifiedAtRetried" int, "updatedAt" timestamptz NOT NULL);
CREATE TABLE opai.framework_history ("insertedAt" timestamptz, uid varchar(36) PRIMARY KEY,
  "frameworkName" varchar(64) NOT NULL, "attemptIndex" int, "historyType" varchar(16) NOT NULL DEFAULT 'retry',
  snapshot text, "updatedAt" timestamptz NOT NULL);
CREATE TABLE opai.task_history ("insertedAt" timestamptz, uid varchar(36) PRIMARY KEY,
  "frameworkName" varchar(64) NOT NULL, "attemptIndex" int, "taskroleName" varchar(256), "taskName" varchar(256),
  "taskIndex" int, "taskUid" varchar(36) NOT NULL, "taskAttemptIndex" int, "podUid" varchar(36),
  "historyType" varchar(16) NOT NULL DEFAULT 'retry', snapshot text, "updatedAt" timestamptz NOT NULL);
CREATE TABLE opai.pods ("insertedAt" timestamptz, uid varchar(36) PRIMARY KEY, "frameworkName" varchar(64) NOT NULL,
  "attemptIndex" int, "taskroleName" varchar(256), "taskroleIndex" int, "taskAttemptIndex" int, snapshot text,
  "updatedAt" timestamptz NOT NULL);
CREATE TABLE opai.framework_events ("insertedAt" timestamptz, uid varchar(36) PRIMARY KEY,
  "frameworkName" varchar(64) NOT NULL, "podUid" varchar(36), "taskroleName" varchar(256), "taskName" varchar(256),
  "taskIndex" int, type varchar(32) NOT NULL, reason varchar(64), message text, "firstTimestamp" timestamptz,
  "lastTimestamp" timestamptz, count int, "sourceComponent" varchar(255), "sourceHost" varchar(255), event text,
  "updatedAt" timestamptz NOT NULL);
CREATE TABLE opai.pod_events ("insertedAt" timestamptz, uid varchar(36) PRIMARY KEY, "frameworkName" varchar(64) NOT NULL,
  "podUid" varchar(36) NOT NULL, type varchar(32) NOT NULL, message text, event text, "updatedAt" timestamptz NOT NULL);
CREATE TABLE opai.tags ("insertedAt" timestamptz, uid varchar(36) PRIMARY KEY, "frameworkName" varchar(64) NOT NULL,
  name varchar(512) NOT NULL, "updatedAt" timestamptz NOT NULL);

-- OpenPAI's rows.  A snapshot as OpenPAI's watcher stored it.
CREATE FUNCTION pg_temp.snap(name text, state text, exit_code int, attempt int, rv int, gen text DEFAULT '1',
                             retried int DEFAULT 0, execution text DEFAULT 'Start')
RETURNS text LANGUAGE sql AS $$
  SELECT jsonb_strip_nulls(jsonb_build_object(
    'apiVersion', 'frameworkcontroller.microsoft.com/v1', 'kind', 'Framework',
    'metadata', jsonb_build_object('name', name, 'namespace', 'default', 'uid', 'uid-' || name,
       'resourceVersion', rv::text, 'creationTimestamp', '2026-01-01T00:00:01Z',
       'labels', jsonb_build_object('userName', 'alice', 'virtualCluster', 'vc1'),
       'annotations', jsonb_build_object('jobName', 'job-' || name, 'requestGeneration', gen,
          'config', E'extras:\n  jobStatusChangeNotification:\n    running: true\n')),
    'spec', jsonb_build_object('executionType', execution, 'retryPolicy', jsonb_build_object('maxRetryCount', 3),
       'taskRoles', jsonb_build_array(jsonb_build_object('name', 'worker', 'taskNumber', 1))),
    'status', jsonb_build_object('state', state, 'startTime', '2026-01-01T00:00:02Z',
       'runTime', CASE WHEN state <> 'AttemptCreationPending' THEN '2026-01-01T00:00:03Z' END,
       'completionTime', CASE WHEN state = 'Completed' THEN '2026-01-01T01:00:00Z' END,
       'transitionTime', '2026-01-01T00:00:03Z',
       'retryPolicyStatus', jsonb_build_object('totalRetriedCount', retried, 'accountableRetriedCount', retried),
       'attemptStatus', jsonb_build_object('id', attempt,
          'completionStatus', CASE WHEN exit_code IS NOT NULL THEN jsonb_build_object('code', exit_code, 'phrase', 'x') END,
          'taskRoleStatuses', jsonb_build_array(jsonb_build_object('name', 'worker', 'taskStatuses',
             jsonb_build_array(jsonb_build_object('index', 0, 'instanceUID', attempt || '_' || name,
                'state', 'AttemptRunning', 'attemptStatus', jsonb_build_object('id', 0)))))))))::text
$$;
INSERT INTO opai.frameworks (name, "jobName", "userName", "submissionTime", snapshot, "requestSynced",
    "apiServerDeleted", archived, state, retries, "configSecretDef", "dockerSecretDef",
    "notificationAtRunning", "notifiedAtRunning", "notifiedAtRetried", "insertedAt", "updatedAt") VALUES
  -- running, synced, with secrets
  ('running1', 'job-running1', 'alice', '2026-01-01 00:00:00+00', pg_temp.snap('running1', 'AttemptRunning', NULL, 0, 1100),
   true, false, false, 'RUNNING', 0, '{"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "running1-configcred"}}',
   '', true, true, 0, '2026-01-01 00:00:00+00', '2026-01-01 00:10:00+00'),
  -- running, its snapshot without a requestGeneration annotation (older OpenPAI), NULL notification columns
  ('running2', 'job-running2', 'alice', '2026-01-01 00:01:00+00',
   (pg_temp.snap('running2', 'AttemptRunning', NULL, 1, 1101, NULL, 1))::text, true, false, false, 'RUNNING', 1, NULL, NULL,
   NULL, NULL, NULL, NULL, '2026-01-01 00:11:00+00'),
  -- waiting: submitted, not yet synced (the sync worker creates it)
  ('waiting1', 'job-waiting1', 'alice', '2026-01-01 00:02:00+00', pg_temp.snap('waiting1', 'AttemptCreationPending', NULL, 0, NULL),
   false, false, false, 'WAITING', 0, NULL, NULL, false, false, 0, '2026-01-01 00:02:00+00', '2026-01-01 00:02:00+00'),
  -- succeeded after two retries, deleted from the API server, add-ons '' after deletion, archived
  ('done1', 'job-done1', 'alice', '2026-01-01 00:03:00+00', pg_temp.snap('done1', 'Completed', 0, 2, 1200, '1', 2),
   true, true, true, 'SUCCEEDED', 2, '', '', false, false, 2, '2026-01-01 00:03:00+00', '2026-01-01 02:00:00+00'),
  -- stopped (generation 2: the stop request)
  ('stopped1', 'job-stopped1', 'alice', '2026-01-01 00:04:00+00', pg_temp.snap('stopped1', 'Completed', -210, 0, 1300, '2', 0, 'Stop'),
   true, true, false, 'STOPPED', 0, '', '', false, false, 0, '2026-01-01 00:04:00+00', '2026-01-01 02:00:00+00'),
  -- failed for good, still in the API server (the poller had not deleted it yet)
  ('failed1', 'job-failed1', 'alice', '2026-01-01 00:05:00+00', pg_temp.snap('failed1', 'Completed', 1, 0, 1400),
   true, false, false, 'FAILED', 0, NULL, NULL, NULL, NULL, NULL, '2026-01-01 00:05:00+00', '2026-01-01 02:00:00+00'),
  -- quirks that cannot be taken: a 64-character name, an unparsable snapshot, a snapshot of another job,
  -- an add-on definition that is not JSON
  (repeat('x', 64), 'long', 'alice', '2026-01-01 00:06:00+00', pg_temp.snap(repeat('x', 64), 'Completed', 0, 0, 1500),
   true, true, false, 'SUCCEEDED', 0, NULL, NULL, NULL, NULL, NULL, NULL, '2026-01-01 02:00:00+00'),
  ('badjson1', 'bad', 'alice', '2026-01-01 00:07:00+00', '{"apiVersion": "frameworkcontroller.microsoft.com/v1", "metadata": {',
   true, true, false, 'SUCCEEDED', 0, NULL, NULL, NULL, NULL, NULL, NULL, '2026-01-01 02:00:00+00'),
  ('wrongname1', 'bad', 'alice', '2026-01-01 00:08:00+00', pg_temp.snap('othername', 'Completed', 0, 0, 1600),
   true, true, false, 'SUCCEEDED', 0, NULL, NULL, NULL, NULL, NULL, NULL, '2026-01-01 02:00:00+00'),
  ('badaddon1', 'bad', 'alice', '2026-01-01 00:09:00+00', pg_temp.snap('badaddon1', 'AttemptRunning', NULL, 0, 1700),
   true, false, false, 'RUNNING', 0, '{"apiVersion": "v1", "kind": "Secr', NULL, NULL, NULL, NULL, NULL, '2026-01-01 02:00:00+00');
-- a job whose task role statuses the controller had compressed
INSERT INTO opai.frameworks (name, "jobName", "userName", state, retries, "submissionTime", snapshot, "requestSynced", "updatedAt")
SELECT 'compressed1', 'job-compressed1', 'alice', 'RUNNING', 0, '2026-01-01 00:10:00+00',
       jsonb_set(jsonb_set(pg_temp.snap('compressed1', 'AttemptRunning', NULL, 0, 1800)::jsonb,
         '{status,attemptStatus,taskRoleStatuses}', 'null'),
         '{status,attemptStatus,taskRoleStatusesCompressed}',
         '"H4sIAAAAAAACAyXMMQuDMBCG4f/yzRmcsxW6uFY6iZTTHCLBU8xJCyH/3bPZju94nz5DaGV4fLcj8gEHpRQ7JT0TJ/g+Y5HAP/jG2ZWUZOJ3+7Si+dA4WWCb3sJDldddX6fIIrM9qA4Vgzcp/Jl9C1W4+1KGMlz6JJWGhwAAAA=="')::text,
       true, '2026-01-01 00:10:00+00';
INSERT INTO opai.framework_history VALUES
  ('2026-01-01 00:30:00+00', md5('done1+0+retry'), 'done1', 0, 'retry', pg_temp.snap('done1', 'AttemptCompleted', 1, 0, 1190), '2026-01-01 00:30:00+00'),
  ('2026-01-01 00:40:00+00', md5('done1+1+retry'), 'done1', 1, 'retry', pg_temp.snap('done1', 'AttemptCompleted', 1, 1, 1195), '2026-01-01 00:40:00+00'),
  (NULL, md5('running2+0+retry'), 'running2', 0, 'retry', pg_temp.snap('running2', 'AttemptCompleted', 1, 0, 1050), '2026-01-01 00:20:00+00'),
  (NULL, md5('gone+0+retry'), 'gone', 0, 'retry', '{}', '2026-01-01 00:20:00+00'),
  (NULL, md5('running1+0+retry'), 'running1', 0, 'retry', 'not json', '2026-01-01 00:20:00+00');
INSERT INTO opai.task_history VALUES
  (NULL, md5('0_done1+0+retry'), 'done1', 0, 'worker', 'done1-worker-0', 0, '0_done1', 0, 'pod-1', 'retry',
   '{"kind": "Task", "status": {"state": "Completed", "attemptStatus": {"id": 0}}}', '2026-01-01 00:20:00+00');
INSERT INTO opai.pods VALUES
  (NULL, 'pod-1', 'done1', 0, 'worker', 0, 0, '{"kind": "Pod"}', '2026-01-01 00:20:00+00');
INSERT INTO opai.framework_events VALUES
  (NULL, 'ev-1', 'running1', 'pod-2', 'worker', 'running1-worker-0', 0, 'Normal', 'Started', 'Started container',
   '2026-01-01 00:00:05+00', '2026-01-01 00:00:06+00', 2, 'kubelet', 'node-1', '{"reason": "Started"}', '2026-01-01 00:00:06+00'),
  (NULL, 'ev-2', repeat('x', 64), NULL, NULL, NULL, NULL, 'Normal', 'Scheduled', NULL, NULL, NULL, NULL, NULL, NULL, NULL,
   '2026-01-01 00:00:06+00');
INSERT INTO opai.pod_events VALUES
  (NULL, 'pev-1', 'running1', 'pod-2', 'Normal', 'pulled', '{"reason": "Pulled"}', '2026-01-01 00:00:06+00');
INSERT INTO opai.tags VALUES
  (NULL, 'running1+nice', 'running1', 'nice', '2026-01-01 00:00:06+00'),
  (NULL, 'done1+old', 'done1', 'old', '2026-01-01 00:00:06+00'),
  (NULL, 'badjson1+x', 'badjson1', 'x', '2026-01-01 00:00:06+00');

-- Bad input: nothing happens, with a clear error.
SELECT * FROM openpai.import_database('nosuchschema');
SELECT * FROM openpai.import_database('paidb');
SELECT * FROM openpai.import_database(NULL);
CREATE SCHEMA notopenpai;
CREATE TABLE notopenpai.frameworks (name text);
SELECT * FROM openpai.import_database('notopenpai');
ALTER TABLE opai.tags RENAME COLUMN "frameworkName" TO fw;
SELECT * FROM openpai.import_database('opai');
ALTER TABLE opai.tags RENAME COLUMN fw TO "frameworkName";
SELECT (SELECT count(*) FROM paidb.framework) AS jobs, (SELECT count(*) FROM openpai.import_rejects) AS rejects;

-- The import.
SELECT * FROM openpai.import_database('opai');
SELECT relation, key, reason FROM openpai.import_rejects ORDER BY relation, key;

-- Every job as OpenPAI listed it, through the view.
SELECT name, "jobName", "userName", "virtualCluster", state, "subState", retries, "submissionTime",
       "creationTime", "launchTime", "completionTime", "appExitCode", "requestSynced", "apiServerDeleted",
       archived, "notificationAtRunning", "notifiedAtRunning", "notifiedAtRetried", "insertedAt", "updatedAt"
  FROM openpai.frameworks ORDER BY name;
-- field by field against OpenPAI's own rows: nothing differs
SELECT o.name, c.col FROM opai.frameworks o JOIN openpai.frameworks p USING (name),
  LATERAL (VALUES ('state', o.state IS DISTINCT FROM p.state),
                  ('retries', o.retries IS DISTINCT FROM p.retries),
                  ('userName', o."userName" IS DISTINCT FROM p."userName"),
                  ('jobName', o."jobName" IS DISTINCT FROM p."jobName"),
                  ('submissionTime', o."submissionTime" IS DISTINCT FROM p."submissionTime"),
                  ('requestSynced', o."requestSynced" IS DISTINCT FROM p."requestSynced"),
                  ('apiServerDeleted', o."apiServerDeleted" IS DISTINCT FROM p."apiServerDeleted"),
                  ('archived', o.archived IS DISTINCT FROM p.archived),
                  ('status', o.snapshot::jsonb -> 'status' IS DISTINCT FROM p.snapshot::jsonb -> 'status'
                             AND o.name <> 'compressed1'),
                  ('spec', o.snapshot::jsonb -> 'spec' IS DISTINCT FROM p.snapshot::jsonb -> 'spec')) c(col, differs)
 WHERE c.differs ORDER BY 1, 2;
-- what the workers will see: nothing to send for a synced job, the stored
-- request carries its generation (1 when OpenPAI's had none), secrets only
-- for jobs still in the API server, task role statuses decompressed
SELECT name, request_generation, paidb.snapshot(framework) #>> '{metadata,annotations,requestGeneration}' AS annotation,
       request_synced, sent_generation, resource_version, config_secret_def IS NOT NULL AS config_secret,
       docker_secret_def IS NOT NULL AS docker_secret,
       paidb.snapshot(framework) #> '{status,attemptStatus}' ? 'taskRoleStatusesCompressed' AS compressed,
       jsonb_array_length(paidb.snapshot(framework) #> '{status,attemptStatus,taskRoleStatuses}') AS task_roles
  FROM paidb.framework ORDER BY name;
-- the sync worker's work list: the unsynced job to create, the completed job to delete
SELECT name FROM paidb.framework WHERE NOT api_server_deleted AND (NOT request_synced OR sub_state = 'Completed')
 ORDER BY name;
-- history keeps its uids; tags, events, pods come along
SELECT uid = md5(framework_name || '+' || attempt_index || '+retry') AS openpai_uid, framework_name, attempt_index,
       paidb.snapshot(framework_history) #>> '{status,state}' AS state, inserted_at FROM paidb.framework_history ORDER BY framework_name, attempt_index;
SELECT framework_name, task_uid, task_attempt_index, uid = md5('0_done1+0+retry') AS openpai_uid FROM paidb.task_history;
SELECT uid, framework_name FROM paidb.pod;
SELECT uid, framework_name, type, reason, count, event FROM paidb.framework_event;
SELECT uid, framework_name, pod_uid, event FROM paidb.pod_event;
SELECT uid, framework_name, name FROM paidb.tag ORDER BY uid;

-- Idempotent: a second import changes nothing.
CREATE TEMP TABLE before AS
  SELECT 'framework' AS t, md5(string_agg(f::text, ',' ORDER BY name)) AS h FROM paidb.framework f
  UNION ALL SELECT 'history', md5(string_agg(h::text, ',' ORDER BY uid)) FROM paidb.framework_history h
  UNION ALL SELECT 'tag', md5(string_agg(t::text, ',' ORDER BY uid)) FROM paidb.tag t
  UNION ALL SELECT 'rejects', md5(string_agg(r::text, ',' ORDER BY relation, key)) FROM openpai.import_rejects r;
SELECT * FROM openpai.import_database('opai');
SELECT b.t, b.h = a.h AS unchanged FROM before b JOIN (
  SELECT 'framework' AS t, md5(string_agg(f::text, ',' ORDER BY name)) AS h FROM paidb.framework f
  UNION ALL SELECT 'history', md5(string_agg(h::text, ',' ORDER BY uid)) FROM paidb.framework_history h
  UNION ALL SELECT 'tag', md5(string_agg(t::text, ',' ORDER BY uid)) FROM paidb.tag t
  UNION ALL SELECT 'rejects', md5(string_agg(r::text, ',' ORDER BY relation, key)) FROM openpai.import_rejects r) a
  USING (t) ORDER BY 1;
-- a job fixed at the source is taken on the next run
UPDATE opai.frameworks SET snapshot = pg_temp.snap('badjson1', 'Completed', 0, 0, 1900) WHERE name = 'badjson1';
SELECT * FROM openpai.import_database('opai') WHERE relation IN ('frameworks', 'tags');
SELECT name, state FROM paidb.framework WHERE name = 'badjson1';
SELECT relation, key FROM openpai.import_rejects WHERE key LIKE 'badjson1%';
-- an older OpenPAI without the notification columns is OpenPAI's too
CREATE SCHEMA opai_old;
CREATE TABLE opai_old.frameworks AS SELECT name, "submissionTime", snapshot, "requestSynced", "apiServerDeleted",
  archived, "insertedAt", "updatedAt" FROM opai.frameworks WHERE name = 'running1';
UPDATE opai_old.frameworks SET name = 'oldrunning1', snapshot = pg_temp.snap('oldrunning1', 'AttemptRunning', NULL, 0, 2000);
CREATE TABLE opai_old.framework_history AS SELECT * FROM opai.framework_history WHERE false;
CREATE TABLE opai_old.task_history AS SELECT * FROM opai.task_history WHERE false;
CREATE TABLE opai_old.pods AS SELECT * FROM opai.pods WHERE false;
CREATE TABLE opai_old.framework_events AS SELECT * FROM opai.framework_events WHERE false;
CREATE TABLE opai_old.pod_events AS SELECT * FROM opai.pod_events WHERE false;
CREATE TABLE opai_old.tags AS SELECT * FROM opai.tags WHERE false;
SELECT * FROM openpai.import_database('opai_old');
SELECT name, state, notified_at_running, notified_at_retried, notification_at_running FROM paidb.framework
 WHERE name = 'oldrunning1';

-- Counts: the import folds its count deltas into paidb.job_count before it
-- returns (no count reads a million uncompacted deltas until the retention
-- worker's next run), and they are right.
SELECT count(*) AS deltas_left FROM paidb.job_count_delta;
SELECT (SELECT sum(n) FROM paidb.job_counts) = (SELECT count(*) FROM paidb.framework) AS total_right,
       (SELECT count(*) FROM (SELECT user_name, virtual_cluster, state, job_priority, archived, count(*) AS n
                                FROM paidb.framework GROUP BY 1, 2, 3, 4, 5
                              EXCEPT SELECT * FROM paidb.job_counts WHERE n > 0) x) AS groups_wrong;

-- JSON that the JSON lexer accepts but jsonb cannot hold (a number beyond
-- numeric's range), or nested deeper than the parser allows: NULL, never
-- an error; in any JSON column of the source the row is a reject and the
-- others are taken.
SELECT openpai.try_jsonb('{"a":1e200000}') IS NULL AS huge_number,
       openpai.try_jsonb(repeat('[', 100000) || repeat(']', 100000)) IS NULL AS too_deep,
       openpai.try_jsonb('{"a":1e2}') AS fine;
SELECT reason FROM openpai.import_snapshot('{"metadata": {"name": "x"}, "n": 1e200000}', 'x');
CREATE SCHEMA opai_num;
CREATE TABLE opai_num.frameworks (LIKE opai.frameworks INCLUDING ALL);
CREATE TABLE opai_num.framework_history (LIKE opai.framework_history INCLUDING ALL);
CREATE TABLE opai_num.task_history (LIKE opai.task_history INCLUDING ALL);
CREATE TABLE opai_num.pods (LIKE opai.pods INCLUDING ALL);
CREATE TABLE opai_num.framework_events (LIKE opai.framework_events INCLUDING ALL);
CREATE TABLE opai_num.pod_events (LIKE opai.pod_events INCLUDING ALL);
CREATE TABLE opai_num.tags (LIKE opai.tags INCLUDING ALL);
INSERT INTO opai_num.frameworks (name, "submissionTime", snapshot, "configSecretDef", "updatedAt") VALUES
  ('numok1', '2026-01-01 00:00:00+00', pg_temp.snap('numok1', 'AttemptRunning', NULL, 0, 3000), NULL, now()),
  ('numbad1', '2026-01-01 00:00:00+00',
   rtrim(pg_temp.snap('numbad1', 'AttemptRunning', NULL, 0, 3001), '}') || ', "x": 1e200000}', NULL, now()),
  ('numbad2', '2026-01-01 00:00:00+00', pg_temp.snap('numbad2', 'AttemptRunning', NULL, 0, 3002), '{"a":1e200000}', now());
INSERT INTO opai_num.framework_history (uid, "frameworkName", "attemptIndex", snapshot, "updatedAt") VALUES
  ('h-ok', 'numok1', 0, '{"n": 1}', now()), ('h-bad', 'numok1', 1, '{"n": 1e200000}', now());
INSERT INTO opai_num.task_history (uid, "frameworkName", "taskUid", snapshot, "updatedAt") VALUES
  ('t-ok', 'numok1', 'tu', '{"n": 1}', now()), ('t-bad', 'numok1', 'tu', '{"n": 1e200000}', now());
INSERT INTO opai_num.pods (uid, "frameworkName", snapshot, "updatedAt") VALUES
  ('p-ok', 'numok1', '{"n": 1}', now()), ('p-bad', 'numok1', '{"n": 1e200000}', now());
INSERT INTO opai_num.framework_events (uid, "frameworkName", type, event, "updatedAt") VALUES
  ('fe-ok', 'numok1', 'Normal', '{"n": 1}', now()), ('fe-bad', 'numok1', 'Normal', '{"n": 1e200000}', now());
INSERT INTO opai_num.pod_events (uid, "frameworkName", "podUid", type, event, "updatedAt") VALUES
  ('pe-ok', 'numok1', 'p-ok', 'Normal', '{"n": 1}', now()), ('pe-bad', 'numok1', 'p-ok', 'Normal', '{"n": 1e200000}', now());
SELECT * FROM openpai.import_database('opai_num');
SELECT relation, key, reason FROM openpai.import_rejects WHERE source_schema = 'opai_num' ORDER BY relation, key;
SELECT (SELECT count(*) FROM paidb.framework WHERE name LIKE 'num%') AS jobs,
       (SELECT count(*) FROM paidb.framework_history WHERE uid LIKE 'h-%') AS history,
       (SELECT count(*) FROM paidb.task_history WHERE uid LIKE 't-%') AS task_history,
       (SELECT count(*) FROM paidb.pod WHERE uid LIKE 'p-%') AS pods,
       (SELECT count(*) FROM paidb.framework_event WHERE uid LIKE 'fe-%') AS framework_events,
       (SELECT count(*) FROM paidb.pod_event WHERE uid LIKE 'pe-%') AS pod_events;

-- A source whose reading would run its owner's code with the import's
-- (superuser) rights is refused, and nothing is stored (issue 17 item 2):
-- a non-superuser owns schema evil, an enum with a cast to text that makes
-- him superuser, and the seven tables with frameworks.name of that enum.
SET client_min_messages = warning;
DROP ROLE IF EXISTS paidb_test_evil;
DROP ROLE IF EXISTS paidb_test_importer;
RESET client_min_messages;
CREATE ROLE paidb_test_evil;
CREATE ROLE paidb_test_importer IN ROLE paidb_writer;
GRANT EXECUTE ON FUNCTION openpai.import_database(name) TO paidb_test_importer;
CREATE SCHEMA evil AUTHORIZATION paidb_test_evil;
SET ROLE paidb_test_evil;
CREATE TYPE evil.ename AS ENUM ('evil1');
CREATE FUNCTION evil.to_text(evil.ename) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
  EXECUTE 'ALTER ROLE paidb_test_evil SUPERUSER';
  RETURN 'evil1';
END $$;
CREATE CAST (evil.ename AS text) WITH FUNCTION evil.to_text(evil.ename);
CREATE TABLE evil.frameworks ("insertedAt" timestamptz, name evil.ename PRIMARY KEY, "submissionTime" timestamptz NOT NULL,
  snapshot text, "requestSynced" boolean NOT NULL DEFAULT false, "apiServerDeleted" boolean NOT NULL DEFAULT false,
  archived boolean NOT NULL DEFAULT false, "updatedAt" timestamptz NOT NULL);
CREATE TABLE evil.framework_history ("insertedAt" timestamptz, uid varchar(36) PRIMARY KEY,
  "frameworkName" varchar(64) NOT NULL, "attemptIndex" int, "historyType" varchar(16) NOT NULL DEFAULT 'retry',
  snapshot text, "updatedAt" timestamptz NOT NULL);
CREATE TABLE evil.task_history ("insertedAt" timestamptz, uid varchar(36) PRIMARY KEY,
  "frameworkName" varchar(64) NOT NULL, "attemptIndex" int, "taskroleName" varchar(256), "taskName" varchar(256),
  "taskIndex" int, "taskUid" varchar(36) NOT NULL, "taskAttemptIndex" int, "podUid" varchar(36),
  "historyType" varchar(16) NOT NULL DEFAULT 'retry', snapshot text, "updatedAt" timestamptz NOT NULL);
CREATE TABLE evil.pods ("insertedAt" timestamptz, uid varchar(36) PRIMARY KEY, "frameworkName" varchar(64) NOT NULL,
  "attemptIndex" int, "taskroleName" varchar(256), "taskroleIndex" int, "taskAttemptIndex" int, snapshot text,
  "updatedAt" timestamptz NOT NULL);
CREATE TABLE evil.framework_events ("insertedAt" timestamptz, uid varchar(36) PRIMARY KEY,
  "frameworkName" varchar(64) NOT NULL, "podUid" varchar(36), "taskroleName" varchar(256), "taskName" varchar(256),
  "taskIndex" int, type varchar(32) NOT NULL, reason varchar(64), message text, "firstTimestamp" timestamptz,
  "lastTimestamp" timestamptz, count int, "sourceComponent" varchar(255), "sourceHost" varchar(255), event text,
  "updatedAt" timestamptz NOT NULL);
CREATE TABLE evil.pod_events ("insertedAt" timestamptz, uid varchar(36) PRIMARY KEY, "frameworkName" varchar(64) NOT NULL,
  "podUid" varchar(36) NOT NULL, type varchar(32) NOT NULL, message text, event text, "updatedAt" timestamptz NOT NULL);
CREATE TABLE evil.tags ("insertedAt" timestamptz, uid varchar(36) PRIMARY KEY, "frameworkName" varchar(64) NOT NULL,
  name varchar(512) NOT NULL, "updatedAt" timestamptz NOT NULL);
INSERT INTO evil.frameworks (name, "submissionTime", snapshot, "updatedAt")
  VALUES ('evil1', now(), pg_temp.snap('evil1', 'AttemptRunning', NULL, 0, 4000), now());
RESET ROLE;
CREATE TEMP TABLE before_evil AS SELECT (SELECT count(*) FROM paidb.framework) AS jobs,
                                        (SELECT count(*) FROM openpai.import_rejects) AS rejects;
-- the administrator imports it: refused
SELECT * FROM openpai.import_database('evil');
SELECT rolsuper AS evil_is_superuser FROM pg_roles WHERE rolname = 'paidb_test_evil';
SELECT (SELECT count(*) FROM paidb.framework) - jobs AS jobs_added,
       (SELECT count(*) FROM openpai.import_rejects) - rejects AS rejects_added FROM before_evil;
-- a domain over text is no better than the enum
SET ROLE paidb_test_evil;
DROP CAST (evil.ename AS text);
ALTER TABLE evil.frameworks ALTER COLUMN name TYPE varchar(64) USING name::text;
CREATE DOMAIN evil.dtext AS text;
ALTER TABLE evil.tags ALTER COLUMN name TYPE evil.dtext;
RESET ROLE;
SELECT * FROM openpai.import_database('evil');
-- built-in types, but row security (a policy's function would run as the importer)
SET ROLE paidb_test_evil;
ALTER TABLE evil.tags ALTER COLUMN name TYPE varchar(512);
CREATE FUNCTION evil.visible() RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN EXECUTE 'ALTER ROLE paidb_test_evil SUPERUSER'; RETURN true; END $$;
CREATE POLICY p ON evil.pods USING (evil.visible());
RESET ROLE;
SELECT * FROM openpai.import_database('evil');
SET ROLE paidb_test_evil;
DROP POLICY p ON evil.pods;
ALTER TABLE evil.pods ENABLE ROW LEVEL SECURITY;
RESET ROLE;
SELECT * FROM openpai.import_database('evil');
-- a view in place of a table
SET ROLE paidb_test_evil;
ALTER TABLE evil.pods DISABLE ROW LEVEL SECURITY;
ALTER TABLE evil.tags RENAME TO tags_table;
CREATE VIEW evil.tags AS SELECT * FROM evil.tags_table WHERE evil.visible();
RESET ROLE;
SELECT * FROM openpai.import_database('evil');
SELECT rolsuper AS evil_is_superuser FROM pg_roles WHERE rolname = 'paidb_test_evil';
SELECT (SELECT count(*) FROM paidb.framework) - jobs AS jobs_added,
       (SELECT count(*) FROM openpai.import_rejects) - rejects AS rejects_added FROM before_evil;
-- a caller who is not a member of the owner's role may not import it
SET ROLE paidb_test_evil;
DROP VIEW evil.tags;
ALTER TABLE evil.tags_table RENAME TO tags;
RESET ROLE;
SET ROLE paidb_test_importer;
SELECT * FROM openpai.import_database('evil');
RESET ROLE;
-- the same schema with nothing of its owner's left in the way imports,
-- run by a member of the owner's role
GRANT paidb_test_evil TO paidb_test_importer;
SET ROLE paidb_test_importer;
SELECT * FROM openpai.import_database('evil') WHERE relation = 'frameworks';
RESET ROLE;
SELECT name, state FROM paidb.framework WHERE name = 'evil1';
SELECT rolsuper AS evil_is_superuser FROM pg_roles WHERE rolname = 'paidb_test_evil';
DROP SCHEMA evil CASCADE;
REVOKE EXECUTE ON FUNCTION openpai.import_database(name) FROM paidb_test_importer;
DROP ROLE paidb_test_evil;
DROP ROLE paidb_test_importer;
