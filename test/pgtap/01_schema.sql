-- pgTAP: the schema of SPEC §2.
BEGIN;
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS pgtap;
DROP EXTENSION IF EXISTS paidb CASCADE;
CREATE EXTENSION IF NOT EXISTS pg_trgm;
CREATE EXTENSION paidb CASCADE;
SELECT plan(90);

SELECT has_schema('paidb');
SELECT tables_are('paidb', ARRAY['framework', 'framework_history', 'task_history', 'pod',
    'framework_event', 'pod_event', 'tag', 'orphan', 'watch_state', 'installation',
    'job_summary', 'job_count', 'job_count_delta', 'cluster', 'virtual_cluster_placement']);

-- framework
SELECT col_is_pk('paidb', 'framework', 'name', 'framework is keyed by name');
SELECT col_type_is('paidb', 'framework', 'snapshot_packed', 'bytea', 'the snapshot is stored packed (bytea)');
SELECT hasnt_column('paidb', 'framework', 'snapshot', 'no snapshot column: paidb.snapshot(f) reads it');
SELECT function_returns('paidb', 'snapshot', ARRAY['paidb.framework'], 'jsonb',
                        'paidb.snapshot(f) reads a job''s snapshot as jsonb');
SELECT function_returns('paidb', 'snapshot', ARRAY['paidb.framework_history'], 'jsonb',
                        'paidb.snapshot(h) reads an attempt''s snapshot as jsonb');
SELECT is((SELECT attstorage::text FROM pg_attribute
            WHERE attrelid = 'paidb.framework'::regclass AND attname = 'snapshot_packed'),
          'e', 'snapshot_packed is STORAGE EXTERNAL: PostgreSQL does not compress it again');
SELECT col_type_is('paidb', 'framework', 'request_generation', 'bigint', 'request_generation is bigint');
SELECT col_not_null('paidb', 'framework', 'request_generation', 'request_generation is not null');
SELECT col_not_null('paidb', 'framework', 'submission_time', 'submission_time is not null');
SELECT col_type_is('paidb', 'framework', 'submission_time', 'timestamp with time zone', 'submission_time is timestamptz');
SELECT col_default_is('paidb', 'framework', 'request_synced', 'false', 'request_synced defaults to false');
SELECT col_not_null('paidb', 'framework', 'request_synced', 'request_synced is not null');
SELECT col_default_is('paidb', 'framework', 'api_server_deleted', 'false', 'api_server_deleted defaults to false');
SELECT col_not_null('paidb', 'framework', 'api_server_deleted', 'api_server_deleted is not null');
SELECT col_default_is('paidb', 'framework', 'archived', 'false', 'archived defaults to false');
SELECT col_type_is('paidb', 'framework', 'resource_version', 'bigint', 'resource_version is bigint');
SELECT col_type_is('paidb', 'framework', c, 'jsonb', c || ' is jsonb')
  FROM unnest(ARRAY['config_secret_def', 'user_extension_secret_def', 'priority_class_def',
                    'docker_secret_def', 'token_secret_def']) c;
SELECT has_column('paidb', 'framework', c, 'framework has ' || c)
  FROM unnest(ARRAY['namespace', 'job_name', 'user_name', 'job_config', 'execution_type',
    'virtual_cluster', 'job_priority', 'total_gpu_number', 'total_task_number',
    'total_task_role_number', 'log_path_infix', 'creation_time', 'launch_time',
    'completion_time', 'retries', 'retry_delay_time', 'platform_retries',
    'resource_retries', 'user_retries', 'app_exit_code', 'sub_state', 'state']) c;
SELECT is((SELECT count(*)::int FROM information_schema.columns
            WHERE table_schema = 'paidb' AND table_name = 'framework'
              AND column_name ~ '^(notification|notified)_at_(running|succeeded|failed|stopped|retried)$'),
          10, 'framework has the ten notification columns');
SELECT is((SELECT count(*)::int FROM information_schema.columns
            WHERE table_schema = 'paidb' AND column_name IN ('inserted_at', 'updated_at')
              AND table_name IN ('framework', 'framework_history', 'task_history', 'pod',
                                 'framework_event', 'pod_event', 'tag')),
          14, 'every OpenPAI table has inserted_at and updated_at');
SELECT throws_ok($$INSERT INTO paidb.framework (name, submission_time, snapshot_packed, request_generation)
                  VALUES ('bad-name', now(), paidb.pack_snapshot('{}'), 1)$$, '23514', NULL,
                 'the name check refuses names the API server refuses');

-- history and the others
SELECT col_is_pk('paidb', 'framework_history', 'uid', 'framework_history is keyed by uid');
SELECT col_default_is('paidb', 'framework_history', 'history_type', 'retry', 'history_type defaults to retry');
SELECT col_not_null('paidb', 'framework_history', 'history_type', 'history_type is not null');
SELECT col_is_pk('paidb', 'framework_event', 'uid', 'framework_event is keyed by the event uid');
SELECT col_is_unique('paidb', 'tag', ARRAY['framework_name', 'name'], 'tag is unique on (framework_name, name)');
-- each tag carries its job's submission time and user, for tag pages in
-- submission order (docs/queries.md)
SELECT col_not_null('paidb', 'tag', 'job_submission_time', 'a tag always carries its job''s submission time');
SELECT col_type_is('paidb', 'tag', 'job_user_name', 'text', 'a tag carries its job''s user');
SELECT is((SELECT array_agg(pg_get_indexdef(i.indexrelid) ORDER BY c.relname) FROM pg_index i
             JOIN pg_class c ON c.oid = i.indexrelid
            WHERE i.indrelid = 'paidb.tag'::regclass AND c.relname LIKE '%submission%'),
          ARRAY['CREATE INDEX tag_submission_idx ON paidb.tag USING btree (name, job_submission_time) INCLUDE (framework_name)',
                'CREATE INDEX tag_user_submission_idx ON paidb.tag USING btree (name, job_user_name, job_submission_time) INCLUDE (framework_name)'],
          'a tag''s jobs are indexed in submission order, also per user');
SELECT is((SELECT reloptions FROM pg_class WHERE oid = 'paidb.tag'::regclass),
          ARRAY['parallel_workers=0'], 'the tags are never scanned in parallel');
SELECT throws_ok($$INSERT INTO paidb.tag (framework_name, name) VALUES ('no-such-job', 'x')$$, '23503', NULL,
                 'a tag needs its job');
SELECT trigger_is('paidb', 'tag', 'tag_job_columns', 'paidb', 'tag_job_columns',
                  'a new tag takes its job''s columns');
SELECT col_is_pk('paidb', 'pod', 'uid', 'pod is keyed by uid');
SELECT col_is_pk('paidb', 'pod_event', 'uid', 'pod_event is keyed by uid');
SELECT col_is_pk('paidb', 'task_history', 'uid', 'task_history is keyed by uid');

-- indexes
SELECT has_index('paidb', 'framework', 'framework_needs_sync_idx', 'the work list has a partial index');
SELECT matches((SELECT pg_get_indexdef('paidb.framework_needs_sync_idx'::regclass)),
               'WHERE \(\(NOT api_server_deleted\) AND \(\(NOT request_synced\) OR \(state = ANY \(ARRAY\[''SUCCEEDED''::text, ''FAILED''::text, ''STOPPED''::text\]\)\)\)\)',
               'the partial index covers exactly the rows needing sync (completed: by the job state)');
SELECT matches((SELECT pg_get_indexdef('paidb.framework_expired_idx'::regclass)),
               '\(completion_time\) WHERE \(api_server_deleted AND \(state = ANY \(ARRAY\[''SUCCEEDED''::text, ''FAILED''::text, ''STOPPED''::text\]\)\)\)',
               'the expired jobs'' index covers the completed jobs gone from the API server');
-- a status update that changes only the sub state can be HOT: no index reads it
SELECT is((SELECT string_agg(c.relname, ', ') FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
            WHERE i.indrelid = 'paidb.framework'::regclass
              AND pg_get_indexdef(i.indexrelid) ~ 'sub_state'), NULL,
          'no index of paidb.framework reads sub_state');
SELECT has_index('paidb', 'job_summary', 'job_summary_submission_time_idx', 'jobs are listed by submission time');
SELECT is((SELECT reloptions FROM pg_class WHERE oid = 'paidb.job_summary'::regclass),
          ARRAY['parallel_workers=0', 'fillfactor=70'],
          'the job list is never scanned in parallel (pages pay the start-up) and leaves room for HOT updates');
-- keyword search: a trigram index per searched column, each with a small
-- GIN pending list (every search reads the whole list)
SELECT set_eq($$SELECT c.relname::text FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
                JOIN pg_am a ON a.oid = c.relam
               WHERE i.indrelid = 'paidb.job_summary'::regclass AND a.amname = 'gin'$$,
              ARRAY['job_summary_user_name_trgm_idx', 'job_summary_job_name_trgm_idx',
                    'job_summary_virtual_cluster_trgm_idx'],
              'with pg_trgm installed, user, job and virtual cluster names have trigram indexes');
SELECT is((SELECT count(*)::int FROM pg_class c JOIN pg_index i ON i.indexrelid = c.oid
            WHERE i.indrelid = 'paidb.job_summary'::regclass
              AND c.reloptions @> ARRAY['gin_pending_list_limit=512']), 3,
          'each trigram index keeps its pending list under 512 kB');
SELECT has_index('paidb', 'framework_history', 'framework_history_framework_name_idx', 'history is found by framework');
SELECT has_index('paidb', 'framework_event', 'framework_event_framework_name_idx', 'events are found by framework');

-- clusters (SPEC §11)
SELECT col_is_pk('paidb', 'cluster', 'name', 'cluster is keyed by name');
SELECT columns_are('paidb', 'cluster', ARRAY['name', 'api_server', 'namespace', 'token_file',
    'ca_file', 'retain_mode', 'state', 'inserted_at', 'updated_at'], 'cluster has the columns of SPEC §11');
SELECT col_default_is('paidb', 'cluster', 'state', 'active', 'a cluster is active by default');
SELECT results_eq($$SELECT name, api_server, namespace, token_file, ca_file, retain_mode, state FROM paidb.cluster$$,
                  $$VALUES ('default'::text, NULL::text, NULL::text, NULL::text, NULL::text, NULL::boolean, 'active'::text)$$,
                  'CREATE EXTENSION makes the cluster default, all settings');
SELECT col_not_null('paidb', 'framework', 'cluster', 'every job has a cluster');
SELECT fk_ok('paidb', 'framework', 'cluster', 'paidb', 'cluster', 'name');
SELECT fk_ok('paidb', 'framework', 'moving_from', 'paidb', 'cluster', 'name');
SELECT col_not_null('paidb', 'framework', 'placement', 'every job has a placement');
SELECT col_default_is('paidb', 'framework', 'placement', '1', 'placement starts at 1');
SELECT col_is_pk('paidb', 'virtual_cluster_placement', 'virtual_cluster', 'placements are keyed by virtual cluster');
SELECT fk_ok('paidb', 'virtual_cluster_placement', 'cluster', 'paidb', 'cluster', 'name');
SELECT col_is_pk('paidb', 'orphan', ARRAY['cluster', 'name'], 'orphans are per cluster');
SELECT columns_are('paidb', 'cluster_status', ARRAY['cluster', 'state', 'jobs', 'unsynced',
    'moving_out', 'last_contact', 'resource_version', 'workers', 'last_error'], 'cluster_status has the columns of SPEC §11');
SELECT col_type_is('paidb', 'cluster_status', 'jobs', 'jsonb', 'jobs per state is jsonb');
SELECT col_type_is('paidb', 'cluster_status', 'last_contact', 'timestamp with time zone', 'last_contact is timestamptz');
SELECT throws_ok($$INSERT INTO paidb.cluster (name) VALUES ('Not_A_Label')$$, '23514', NULL,
                 'a cluster name must be a DNS-1123 label');
SELECT throws_ok($$INSERT INTO paidb.cluster (name, api_server) VALUES ('x', 'ftp://host')$$, '23514', NULL,
                 'an API server must be an http(s) URL');
SELECT throws_ok($$INSERT INTO paidb.cluster (name, state) VALUES ('x', 'gone')$$, '23514', NULL,
                 'a cluster state is active, cordoned or removed');

SELECT * FROM finish();
ROLLBACK;
