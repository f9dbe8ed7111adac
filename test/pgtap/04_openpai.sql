-- pgTAP: paidb_openpai's views, their privileges and the writes each role may make (SPEC §9).
BEGIN;
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS pgtap;
DROP EXTENSION IF EXISTS paidb CASCADE;
CREATE EXTENSION paidb CASCADE;
CREATE EXTENSION paidb_openpai;
SELECT plan(73);

SELECT has_schema('openpai');
SELECT views_are('openpai', ARRAY['frameworks', 'framework_counts', 'framework_history', 'task_history', 'pods',
    'framework_events', 'pod_events', 'tags']);
SELECT has_function('openpai', 'sum_counts', ARRAY['bigint'], 'the counts'' aggregate exists');
SELECT tables_are('openpai', ARRAY['import_rejects'], 'openpai holds no tables but the import''s rejects');
SELECT col_type_is('openpai', 'frameworks', c, t, format('frameworks.%s is %s', c, t))
  FROM (VALUES ('snapshot', 'text'), ('submissionTime', 'timestamp with time zone'),
               ('retries', 'integer'), ('notifiedAtRetried', 'integer'),
               ('requestSynced', 'boolean'), ('configSecretDef', 'text')) v(c, t);

-- Every view reads with the caller's rights, so no view widens a grant.
SELECT ok((SELECT bool_and(c.reloptions @> ARRAY['security_invoker=true'])
             FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
            WHERE n.nspname = 'openpai' AND c.relkind = 'v'),
          'every openpai view is security_invoker');
-- Every function that writes is SECURITY DEFINER with a fixed search_path.
SELECT ok((SELECT bool_and(p.prosecdef AND p.proconfig @> ARRAY['search_path=pg_catalog, paidb'])
             FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
            WHERE n.nspname = 'openpai'
              AND ((p.prorettype = 'trigger'::regtype AND p.proname <> 'refuse_write')
                   OR p.proname = 'import_database')),
          'openpai''s writing functions are SECURITY DEFINER with search_path pg_catalog, paidb');

CREATE ROLE paidb_test_writer IN ROLE paidb_writer;
CREATE ROLE paidb_test_reader IN ROLE paidb_reader;
CREATE ROLE paidb_test_nobody;

SELECT ok(has_table_privilege(r, 'openpai.' || v, 'SELECT'), format('%s reads openpai.%s', r, v))
  FROM unnest(ARRAY['paidb_writer', 'paidb_reader']) r,
       unnest(ARRAY['frameworks', 'framework_counts', 'framework_history', 'task_history', 'pods',
                    'framework_events', 'pod_events', 'tags']) v;
SELECT ok(NOT has_table_privilege('paidb_test_nobody', 'openpai.frameworks', 'SELECT'),
          'other roles cannot read openpai.frameworks');

-- A job with secrets.
SELECT lives_ok($$SELECT paidb.put_framework_request(
    '{"metadata": {"name": "tapjob", "labels": {"userName": "u"}}, "spec": {"executionType": "Start"}}',
    now(), '{"configSecretDef": {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "tapjob-c"}, "data": {"x": "c2VjcmV0"}},
             "tokenSecretDef": {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "tapjob-t"}, "data": {"t": "dG9rZW4="}}}')$$,
    'a job with add-on definitions');

-- The reader: reads every view, never a secret, writes nothing.
SET ROLE paidb_test_reader;
SELECT lives_ok('SELECT * FROM openpai.frameworks', 'the reader can SELECT * from frameworks');
SELECT is((SELECT row("dockerSecretDef", "configSecretDef", "userExtensionSecretDef",
                      "tokenSecretDef", "priorityClassDef")::text FROM openpai.frameworks WHERE name = 'tapjob'),
          '(,,,,)', 'the reader sees no add-on definition through the view');
SELECT is((SELECT count(*)::int FROM openpai.frameworks WHERE snapshot::text LIKE '%c2VjcmV0%'
                                                            OR "jobConfig" LIKE '%c2VjcmV0%'),
          0, 'no secret shows up in any other column');
SELECT throws_ok('SELECT config_secret_def FROM paidb.framework', '42501', NULL,
                 'the reader still cannot read the add-on columns of the table');
SELECT throws_ok($$INSERT INTO openpai.tags ("uid", "frameworkName", "name") VALUES ('r', 'tapjob', 'r')$$,
                 '42501', NULL, 'the reader cannot add tags');
SELECT throws_ok($$DELETE FROM openpai.tags$$, '42501', NULL, 'the reader cannot delete tags');
SELECT throws_ok($$UPDATE openpai.frameworks SET "notifiedAtRunning" = true$$, '42501', NULL,
                 'the reader cannot update notifications');
SELECT throws_ok($$INSERT INTO openpai.framework_history ("frameworkName", "snapshot")
                   VALUES ('tapjob', '{"metadata": {"name": "tapjob"}, "status": {"attemptStatus": {"id": 0}}}')$$,
                 '42501', NULL, 'the reader cannot write framework history');
SELECT throws_ok($$INSERT INTO openpai.task_history ("frameworkName", "taskUid", "snapshot") VALUES ('tapjob', 't', '{}')$$,
                 '42501', NULL, 'the reader cannot write task history');
SELECT throws_ok($$INSERT INTO openpai.pods ("uid", "frameworkName", "snapshot") VALUES ('p', 'tapjob', '{}')$$,
                 '42501', NULL, 'the reader cannot write pods');
RESET ROLE;

-- Other roles: nothing.
SET ROLE paidb_test_nobody;
SELECT throws_ok('SELECT name FROM openpai.frameworks', '42501', NULL, 'other roles cannot read the views');
SELECT throws_ok('SELECT count(*) FROM openpai.frameworks', '42501', NULL, 'nor count through them');
RESET ROLE;
-- The count rewrite lends no privilege: a role that may read the view and
-- the counts but not the job list still cannot count.
GRANT USAGE ON SCHEMA openpai, paidb TO paidb_test_nobody;
GRANT SELECT ON openpai.frameworks, openpai.framework_counts, paidb.job_count, paidb.job_count_delta TO paidb_test_nobody;
SET ROLE paidb_test_nobody;
SELECT throws_ok('SELECT count(*) FROM openpai.frameworks WHERE "userName" = ''u''', '42501', NULL,
                 'a count through the view needs what the view reads, rewritten or not');
RESET ROLE;
REVOKE ALL ON openpai.frameworks, openpai.framework_counts, paidb.job_count, paidb.job_count_delta FROM paidb_test_nobody;
REVOKE ALL ON SCHEMA openpai, paidb FROM paidb_test_nobody;
SET ROLE paidb_test_nobody;
SELECT throws_ok($$INSERT INTO openpai.tags ("uid", "frameworkName", "name") VALUES ('n', 'tapjob', 'n')$$,
                 '42501', NULL, 'other roles cannot add tags');
RESET ROLE;

-- The writer: exactly the writes of SPEC §9.
SET ROLE paidb_test_writer;
SELECT lives_ok('SELECT * FROM openpai.frameworks', 'the writer reads frameworks');
SELECT is((SELECT "configSecretDef" FROM openpai.frameworks WHERE name = 'tapjob'), NULL,
          'the add-on columns are NULL for the writer too');
SELECT lives_ok($$INSERT INTO openpai.tags ("uid", "frameworkName", "name") VALUES ('tapjob+a', 'tapjob', 'a')$$,
                'the writer adds a tag');
SELECT lives_ok($$INSERT INTO openpai.tags ("uid", "frameworkName", "name") VALUES ('other-uid', 'tapjob', 'a')$$,
                'the writer adds the same tag under another uid: no error');
SELECT is((SELECT count(*)::int FROM openpai.tags WHERE "frameworkName" = 'tapjob'), 1, 'stored once');
SELECT lives_ok($$DELETE FROM openpai.tags WHERE "frameworkName" = 'tapjob' AND name = 'a'$$,
                'the writer removes a tag');
SELECT is((SELECT count(*)::int FROM openpai.tags), 0, 'the tag is gone');
SELECT lives_ok($$UPDATE openpai.frameworks SET "notifiedAtRunning" = true, "notifiedAtRetried" = 2,
                  "updatedAt" = now() WHERE name = 'tapjob'$$, 'the writer updates notifications');
SELECT is((SELECT row("notifiedAtRunning", "notifiedAtRetried")::text FROM openpai.frameworks WHERE name = 'tapjob'),
          '(t,2)', 'notifications are stored');
SELECT throws_ok($$UPDATE openpai.frameworks SET state = 'SUCCEEDED' WHERE name = 'tapjob'$$, '42501', NULL,
                 'the writer cannot update other columns of frameworks');
SELECT throws_ok($$UPDATE openpai.frameworks SET "configSecretDef" = '{}' WHERE name = 'tapjob'$$, '42501', NULL,
                 'the writer cannot set add-on definitions through the view');
SELECT throws_ok($$DELETE FROM openpai.frameworks WHERE name = 'tapjob'$$, '42501', NULL,
                 'the writer cannot delete jobs through the view');
SELECT throws_ok($$INSERT INTO openpai.frameworks (name, "submissionTime") VALUES ('x', now())$$, '42501', NULL,
                 'the writer cannot insert jobs through the view');
SELECT throws_ok($$UPDATE openpai.tags SET name = 'b'$$, '42501', NULL, 'the writer cannot rename tags');
SELECT throws_ok($$INSERT INTO openpai.framework_events ("uid", "frameworkName", "type") VALUES ('e', 'tapjob', 'Normal')$$,
                 '42501', NULL, 'the writer cannot write events');
SELECT throws_ok($$DELETE FROM openpai.framework_history$$, '42501', NULL, 'the writer cannot delete history');
SELECT lives_ok($$INSERT INTO openpai.framework_history ("uid", "frameworkName", "attemptIndex", "historyType", "snapshot")
                  VALUES (md5('tapjob+0+retry'), 'tapjob', 0, 'retry',
                          '{"metadata": {"name": "tapjob"}, "status": {"attemptStatus": {"id": 0}}}')$$,
                'the writer inserts framework history (fluentd)');
SELECT lives_ok($$INSERT INTO openpai.task_history ("uid", "frameworkName", "taskUid", "taskAttemptIndex", "historyType", "snapshot")
                  VALUES (md5('t1+0+retry'), 'tapjob', 't1', 0, 'retry', '{"status": {"state": "Completed"}}')$$,
                'the writer inserts task history (fluentd)');
SELECT lives_ok($$INSERT INTO openpai.pods ("uid", "frameworkName", "snapshot") VALUES ('p1', 'tapjob', '{}')$$,
                'the writer inserts pods (fluentd)');
RESET ROLE;
SELECT is((SELECT count(*)::int FROM paidb.framework_history), 1, 'the history row is in paidb');
SELECT is((SELECT count(*)::int FROM paidb.task_history), 1, 'the task history row is in paidb');
SELECT is((SELECT count(*)::int FROM paidb.pod), 1, 'the pod row is in paidb');
SELECT is((SELECT state FROM paidb.framework WHERE name = 'tapjob'), 'WAITING', 'the job is unchanged');

-- The import is for the database owner only.
SELECT ok(NOT has_function_privilege(r, 'openpai.import_database(name)', 'EXECUTE'),
          r || ' cannot run the import')
  FROM unnest(ARRAY['paidb_writer', 'paidb_reader', 'paidb_test_nobody']) r;
SELECT ok(has_table_privilege('paidb_writer', 'openpai.import_rejects', 'SELECT')
          AND NOT has_table_privilege('paidb_writer', 'openpai.import_rejects', 'INSERT')
          AND NOT has_table_privilege('paidb_reader', 'openpai.import_rejects', 'SELECT'),
          'the writer reads the import''s rejects, nobody writes them');

-- Even the owner gets a clear refusal for writes OpenPAI never made.
SELECT throws_ok($$DELETE FROM openpai.frameworks$$, '0A000', NULL, 'no delete of jobs through the view');
SELECT throws_ok($$UPDATE openpai.framework_history SET "attemptIndex" = 5$$, '0A000', NULL,
                 'no update of history through the view');

SELECT * FROM finish();
ROLLBACK;
