-- test/differential/setup.sql — the data and roles the differential test
-- of the openpai rewrites queries (test/differential/diff.py runs it, as
-- postgres, in a new database).  Deterministic: the queries' expected
-- answers are never written down, only compared between the two sessions.
SET client_min_messages = warning;
CREATE EXTENSION paidb CASCADE;
CREATE EXTENSION paidb_openpai CASCADE;
RESET client_min_messages;

-- 140 jobs c1..c140 one minute apart over 5 users (c140: no user), 3
-- virtual clusters, 3 priorities (one NULL)
CREATE FUNCTION pg_temp.submit(n text, u text, vc text, p text, minute int) RETURNS text LANGUAGE sql AS $$
SELECT name FROM paidb.put_framework_request(jsonb_build_object(
  'apiVersion', 'frameworkcontroller.microsoft.com/v1', 'kind', 'Framework',
  'metadata', jsonb_build_object('name', n,
     'labels', jsonb_strip_nulls(jsonb_build_object('userName', u, 'virtualCluster', vc)),
     'annotations', jsonb_build_object('jobName', n || '-job',
        'config', CASE WHEN p IS NULL THEN '' ELSE E'extras:\n  hivedScheduler:\n    jobPriorityClass: ' || p || E'\n' END)),
  'spec', jsonb_build_object('executionType', 'Start')),
  '2020-08-01 10:00:00+00'::timestamptz + minute * interval '1 minute')
$$;
CREATE FUNCTION pg_temp.event(n text, st text, ex int) RETURNS text LANGUAGE sql AS $$
SELECT paidb.apply_watch_event('MODIFIED', jsonb_build_object(
  'metadata', jsonb_build_object('name', n, 'resourceVersion', '10', 'annotations', '{"requestGeneration": "1"}'::jsonb),
  'status', jsonb_build_object('state', st, 'completionTime', CASE WHEN ex IS NULL THEN NULL ELSE '2020-08-01T13:00:00Z' END,
     'attemptStatus', jsonb_build_object('id', 0, 'completionStatus',
        CASE WHEN ex IS NULL THEN NULL ELSE jsonb_build_object('code', ex, 'phrase', 'x') END),
     'retryPolicyStatus', '{"totalRetriedCount": 0, "accountableRetriedCount": 0}'::jsonb)))
$$;
SELECT count(pg_temp.submit('c' || i, CASE WHEN i = 140 THEN NULL ELSE 'du' || (i % 5) END,
                            (ARRAY['default', 'vc2', 'research'])[i % 3 + 1],
                            (ARRAY['prod', 'test', NULL])[i % 4 + 1], i))
  FROM generate_series(1, 140) i;
SELECT count(pg_temp.event('c' || i, 'AttemptRunning', NULL)) FROM generate_series(1, 140) i WHERE i % 7 = 0;
SELECT count(pg_temp.event('c' || i, 'Completed', 0)) FROM generate_series(1, 140) i WHERE i % 7 = 1;
-- the counts so far folded into paidb.job_count; what follows stays in
-- paidb.job_count_delta
SELECT paidb.compact_job_counts() >= 0 AS compacted;
SELECT count(pg_temp.event('c' || i, 'Completed', 1)) FROM generate_series(1, 140) i WHERE i % 7 = 2;
SELECT count(paidb.archive_job('c' || i)) FROM generate_series(1, 140) i WHERE i % 14 = 1;
-- tags: a on every third job, b on every fifth (c15, c30, ... carry both)
INSERT INTO paidb.tag (framework_name, name)
SELECT 'c' || i, 'a' FROM generate_series(1, 140) i WHERE i % 3 = 0
UNION ALL SELECT 'c' || i, 'b' FROM generate_series(1, 140) i WHERE i % 5 = 0;
-- c7 moved to user zz and back: its +1/-1 rows stay in job_count_delta,
-- a key whose count is zero (and whose userName no job has)
UPDATE paidb.framework SET user_name = 'zz' WHERE name = 'c7';
UPDATE paidb.framework SET user_name = 'du2' WHERE name = 'c7';

-- roles (cluster-wide; dropped and made again by every run)
DO $$
DECLARE r text;
BEGIN
    FOREACH r IN ARRAY ARRAY['diff_all', 'diff_noframework', 'diff_notag', 'du0', 'du1', 'du2', 'du3', 'du4', 'zz'] LOOP
        IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = r) THEN
            EXECUTE format('CREATE ROLE %I', r);
        END IF;
    END LOOP;
END $$;
-- every SELECT
GRANT paidb_reader TO diff_all, du0, du1, du2, du3, du4, zz;
-- the views and paidb's job list and counts, not paidb.framework
GRANT USAGE ON SCHEMA openpai, paidb TO diff_noframework, diff_notag;
GRANT SELECT ON openpai.frameworks, openpai.framework_counts, openpai.tags, paidb.job_summary,
    paidb.job_count, paidb.job_count_delta, paidb.job_counts, paidb.tag TO diff_noframework;
-- everything but paidb.tag
GRANT SELECT ON openpai.frameworks, openpai.framework_counts, openpai.tags, paidb.job_summary,
    paidb.job_count, paidb.job_count_delta, paidb.job_counts, paidb.framework TO diff_notag;

-- row security: a job user sees their own jobs, counts and tags (enabled
-- per phase by diff.py)
CREATE POLICY diff_own ON paidb.job_summary FOR SELECT USING (user_name = current_user);
CREATE POLICY diff_own ON paidb.job_count FOR SELECT USING (user_name = current_user);
CREATE POLICY diff_own ON paidb.job_count_delta FOR SELECT USING (user_name = current_user);
CREATE POLICY diff_own ON paidb.tag FOR SELECT USING (job_user_name = current_user);
CREATE POLICY diff_own ON paidb.framework FOR SELECT USING (user_name = current_user);
-- vacuumed and analyzed once: autovacuum has nothing left to change the
-- plans with while the two sessions run
VACUUM ANALYZE;
SELECT state, count(*) FROM paidb.job_summary GROUP BY 1 ORDER BY 1;
SELECT count(*) AS delta_rows, count(*) FILTER (WHERE user_name = 'zz') AS zz_rows FROM paidb.job_count_delta;
