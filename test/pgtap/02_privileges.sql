-- pgTAP: roles and privileges of SPEC §3.
BEGIN;
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS pgtap;
DROP EXTENSION IF EXISTS paidb CASCADE;
CREATE EXTENSION paidb CASCADE;
SELECT plan(119);

SELECT has_role('paidb_writer');
SELECT has_role('paidb_reader');
CREATE ROLE paidb_test_writer IN ROLE paidb_writer;
CREATE ROLE paidb_test_reader IN ROLE paidb_reader;
CREATE ROLE paidb_test_nobody;

-- nobody but the owner writes the tables directly
SELECT ok(NOT has_table_privilege(r, 'paidb.' || t, p),
          format('%s cannot %s paidb.%s', r, p, t))
  FROM unnest(ARRAY['paidb_writer', 'paidb_reader', 'paidb_test_nobody']) r,
       unnest(ARRAY['framework', 'framework_history', 'orphan']) t,
       unnest(ARRAY['INSERT', 'UPDATE', 'DELETE']) p;

-- the reader sees everything but the add-on definitions (secrets)
SELECT ok(NOT has_column_privilege('paidb_reader', 'paidb.framework', c, 'SELECT'),
          'paidb_reader cannot read ' || c)
  FROM unnest(ARRAY['config_secret_def', 'user_extension_secret_def', 'priority_class_def',
                    'docker_secret_def', 'token_secret_def']) c;
SELECT ok(has_column_privilege('paidb_reader', 'paidb.framework', 'snapshot_packed', 'SELECT')
          AND has_column_privilege('paidb_reader', 'paidb.framework', 'job_config', 'SELECT'),
          'paidb_reader reads snapshots (paidb.unpack_snapshot(snapshot_packed, job_config))');
SELECT ok(has_column_privilege('paidb_writer', 'paidb.framework', 'docker_secret_def', 'SELECT'),
          'paidb_writer reads add-on definitions');
SELECT ok(NOT has_table_privilege('paidb_test_nobody', 'paidb.framework', 'SELECT'),
          'other roles cannot read jobs');

-- writing functions: the writer may, others may not
SELECT ok(has_function_privilege('paidb_writer', f, 'EXECUTE'), 'paidb_writer may call ' || f)
  FROM unnest(ARRAY['paidb.put_framework_request(jsonb, timestamptz, jsonb, text)',
                    'paidb.patch_framework_request(text, jsonb)', 'paidb.stop_framework(text)',
                    'paidb.apply_watch_event(text, jsonb)', 'paidb.import_frameworks(jsonb)',
                    'paidb.record_history(jsonb, text)', 'paidb.wakeup()', 'paidb.move_job(text, text, boolean)',
                    'paidb.record_task_history(jsonb, text, integer, text, text, integer, text, integer, text, text)']) f;
SELECT ok(NOT has_function_privilege(r, 'paidb.put_framework_request(jsonb, timestamptz, jsonb, text)', 'EXECUTE'),
          r || ' may not submit jobs')
  FROM unnest(ARRAY['paidb_reader', 'paidb_test_nobody']) r;
SELECT ok(NOT has_function_privilege('paidb_test_nobody', 'paidb.status()', 'EXECUTE'),
          'other roles cannot see worker status');

-- clusters (SPEC §11): only the owner writes them; paidb's roles read them
SELECT ok(has_table_privilege(r, t, 'SELECT'), r || ' reads ' || t)
  FROM unnest(ARRAY['paidb_writer', 'paidb_reader']) r,
       unnest(ARRAY['paidb.cluster', 'paidb.virtual_cluster_placement', 'paidb.cluster_status']) t;
SELECT ok(NOT has_table_privilege(r, t, p), r || ' may not ' || p || ' ' || t)
  FROM unnest(ARRAY['paidb_writer', 'paidb_reader', 'paidb_test_nobody']) r,
       unnest(ARRAY['paidb.cluster', 'paidb.virtual_cluster_placement']) t,
       unnest(ARRAY['INSERT', 'UPDATE', 'DELETE']) p;
SELECT ok(NOT has_table_privilege('paidb_test_nobody', 'paidb.cluster', 'SELECT'),
          'other roles cannot read clusters');
SELECT ok(NOT has_function_privilege(r, 'paidb.remove_cluster(text)', 'EXECUTE'),
          r || ' may not remove a cluster')
  FROM unnest(ARRAY['paidb_writer', 'paidb_reader', 'paidb_test_nobody']) r;

-- the life cycle (SPEC §10): the writer archives and deletes, the reader does not,
-- nobody but the owner runs a retention batch
SELECT ok(has_function_privilege('paidb_writer', f, 'EXECUTE'), 'paidb_writer may call ' || f)
  FROM unnest(ARRAY['paidb.archive_job(text, boolean)', 'paidb.delete_job(text)']) f;
SELECT ok(NOT has_function_privilege('paidb_reader', f, 'EXECUTE'), 'paidb_reader may not call ' || f)
  FROM unnest(ARRAY['paidb.archive_job(text, boolean)', 'paidb.delete_job(text)']) f;

-- SECURITY DEFINER functions pin search_path
SELECT is(array_agg(proname::text ORDER BY proname),
          ARRAY['_convert_snapshot_batch', '_finish_snapshot_conversion', 'apply_watch_event', 'archive_job', 'compact_job_counts', 'delete_job',
                'import_frameworks', 'move_job', 'patch_framework_request', 'put_framework_request',
                'record_history', 'record_task_history', 'retention_batch', 'stop_framework', 'wakeup'],
          'exactly the writing functions are SECURITY DEFINER')
  FROM pg_proc WHERE pronamespace = 'paidb'::regnamespace AND prosecdef;
SELECT ok(proconfig @> ARRAY['search_path=pg_catalog, paidb'], proname || ' pins search_path')
  FROM pg_proc WHERE pronamespace = 'paidb'::regnamespace AND prosecdef ORDER BY proname;

-- the conversion of 0.2's snapshots (docs/operations.md) is the owner's and
-- the workers' (granted by the operator, as retention_batch is)
SELECT ok(NOT has_function_privilege(r, f, 'EXECUTE'), r || ' may not call ' || f)
  FROM unnest(ARRAY['paidb_writer', 'paidb_reader']) r,
       unnest(ARRAY['paidb._convert_snapshot_batch(text, text, integer)',
                    'paidb._finish_snapshot_conversion()']) f;
SELECT ok(NOT has_function_privilege('paidb_writer', 'paidb.convert_snapshots(integer)', 'EXECUTE'),
          'paidb_writer may not call paidb.convert_snapshots');
-- an unknown table is refused, and with nothing left to convert a batch does nothing
SELECT throws_ok($$SELECT * FROM paidb._convert_snapshot_batch('tag', NULL, 10)$$, '22023', NULL,
                 '_convert_snapshot_batch refuses a table that is not a snapshot table');
SELECT is((SELECT row(converted, last_key)::text FROM paidb._convert_snapshot_batch('framework', NULL, 10)),
          '(0,)', 'with nothing to convert a batch packs nothing and ends');
-- the indexes the update leaves to build: none on a fresh install; one a
-- failed concurrent build left invalid is dropped and built again
SELECT is((SELECT count(*)::int FROM paidb._deferred_index_statements(true)), 0,
          'a fresh install has every index built');
UPDATE pg_index SET indisvalid = false WHERE indexrelid = 'paidb.framework_cluster_idx'::regclass;
SELECT is((SELECT array_agg(s ORDER BY n) FROM paidb._deferred_index_statements(true) WITH ORDINALITY d(s, n)),
          ARRAY['DROP INDEX CONCURRENTLY paidb.framework_cluster_idx',
                'CREATE INDEX CONCURRENTLY framework_cluster_idx ON paidb.framework (cluster, state)'],
          'an invalid index is dropped and built again');
SELECT is(paidb._finish_snapshot_conversion(), 'done', 'a fresh install has no conversion to finish');
UPDATE pg_index SET indisvalid = true WHERE indexrelid = 'paidb.framework_cluster_idx'::regclass;

-- as the writer: submitting works, touching tables directly does not
SET ROLE paidb_test_writer;
SELECT is((SELECT created FROM paidb.put_framework_request('{"metadata": {"name": "privjob"}}',
            now(), '{"dockerSecretDef": {"kind": "Secret", "metadata": {"name": "regcred"}}}')), true, 'the writer submits a job');
SELECT is((SELECT docker_secret_def->>'kind' FROM paidb.framework WHERE name = 'privjob'), 'Secret',
          'the writer reads add-on definitions');
SELECT throws_ok($$UPDATE paidb.framework SET request_synced = true$$, '42501', NULL,
                 'the writer cannot update the table directly');
SELECT throws_ok($$DELETE FROM paidb.framework$$, '42501', NULL, 'the writer cannot delete rows');
RESET ROLE;

-- as the reader
SET ROLE paidb_test_reader;
SELECT is((SELECT name FROM paidb.framework), 'privjob', 'the reader lists jobs');
SELECT throws_ok($$SELECT docker_secret_def FROM paidb.framework$$, '42501', NULL,
                 'the reader cannot read secrets');
SELECT throws_ok($$SELECT * FROM paidb.put_framework_request('{"metadata": {"name": "x"}}')$$, '42501', NULL,
                 'the reader cannot submit');
SELECT is((SELECT count(*)::int FROM paidb.status()), 4, 'the reader sees worker status');
SELECT is((SELECT cluster FROM paidb.cluster_status), 'default', 'the reader sees cluster status');
SELECT is((SELECT paidb.unpack_snapshot(snapshot_packed, job_config) #>> '{metadata,name}' FROM paidb.framework
            WHERE name = 'privjob'), 'privjob', 'the reader reads a snapshot (paidb.unpack_snapshot)');
SELECT throws_ok($$SELECT paidb.snapshot(f) FROM paidb.framework f$$, '42501', NULL,
                 'paidb.snapshot(f) reads the whole row, add-on secrets too: not the reader''s');
RESET ROLE;

-- a hostile search_path cannot redirect the definer functions
CREATE SCHEMA evil;
CREATE FUNCTION evil.jsonb_typeof(jsonb) RETURNS text LANGUAGE sql AS $$SELECT 'hijacked'$$;
SET search_path = evil, public;
SELECT is((SELECT changed FROM paidb.stop_framework('privjob')), true, 'functions work under a hostile search_path');
RESET search_path;

SELECT * FROM finish();
ROLLBACK;
