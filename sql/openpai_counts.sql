-- rest-server's counts through openpai.frameworks answered from the count
-- table (SPEC §10, docs/queries.md): which shapes are rewritten, and that
-- every one returns what counting the jobs returns.
SET client_min_messages = warning;
DROP EXTENSION IF EXISTS paidb_openpai;
DROP EXTENSION IF EXISTS paidb CASCADE;
RESET client_min_messages;
CREATE EXTENSION paidb CASCADE;
CREATE EXTENSION paidb_openpai;
SET search_path = openpai, public;

-- 140 jobs over 5 users, 3 virtual clusters, 3 priorities (one NULL), in
-- 4 states; some archived, one with a NULL user
CREATE FUNCTION pg_temp.submit(n text, u text, vc text, p text) RETURNS text LANGUAGE sql AS $$
SELECT name FROM paidb.put_framework_request(jsonb_build_object(
  'apiVersion', 'frameworkcontroller.microsoft.com/v1', 'kind', 'Framework',
  'metadata', jsonb_build_object('name', n,
     'labels', jsonb_strip_nulls(jsonb_build_object('userName', u, 'virtualCluster', vc)),
     'annotations', jsonb_build_object('jobName', n || '-job',
        'config', CASE WHEN p IS NULL THEN '' ELSE E'extras:\n  hivedScheduler:\n    jobPriorityClass: ' || p || E'\n' END)),
  'spec', jsonb_build_object('executionType', 'Start')), '2020-08-01 10:00:00+00')
$$;
CREATE FUNCTION pg_temp.event(n text, st text, ex int) RETURNS text LANGUAGE sql AS $$
SELECT paidb.apply_watch_event('MODIFIED', jsonb_build_object(
  'metadata', jsonb_build_object('name', n, 'resourceVersion', '10', 'annotations', '{"requestGeneration": "1"}'::jsonb),
  'status', jsonb_build_object('state', st, 'completionTime', CASE WHEN ex IS NULL THEN NULL ELSE '2020-08-01T11:00:00Z' END,
     'attemptStatus', jsonb_build_object('id', 0, 'completionStatus',
        CASE WHEN ex IS NULL THEN NULL ELSE jsonb_build_object('code', ex, 'phrase', 'x') END),
     'retryPolicyStatus', '{"totalRetriedCount": 0, "accountableRetriedCount": 0}'::jsonb)))
$$;
SELECT count(pg_temp.submit('c' || i, CASE WHEN i = 140 THEN NULL ELSE 'u' || (i % 5) END,
                            (ARRAY['default', 'vc2', 'research'])[i % 3 + 1],
                            (ARRAY['prod', 'test', NULL])[i % 4 + 1]))
  FROM generate_series(1, 140) i;
SELECT count(pg_temp.event('c' || i, 'AttemptRunning', NULL)) FROM generate_series(1, 140) i WHERE i % 7 = 0;
SELECT count(pg_temp.event('c' || i, 'Completed', 0)) FROM generate_series(1, 140) i WHERE i % 7 = 1;
SELECT count(pg_temp.event('c' || i, 'Completed', 1)) FROM generate_series(1, 140) i WHERE i % 7 = 2;
SELECT count(paidb.archive_job('c' || i)) FROM generate_series(1, 140) i WHERE i % 14 = 1;
INSERT INTO paidb.tag (framework_name, name) VALUES ('c1', 't'), ('c2', 't'), ('c3', 'u'), ('c1', 'u');
SELECT state, count(*) FROM paidb.framework GROUP BY state ORDER BY state;

-- Each count with the rewrite and without it: whether the plan read the
-- counts, what it read (the counts, the job list, the tags), and whether
-- both gave the same number.
CREATE FUNCTION pg_temp.reads(q text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE line text; plan text := '';
BEGIN
    FOR line IN EXECUTE 'EXPLAIN (COSTS OFF) ' || q LOOP plan := plan || line || E'\n'; END LOOP;
    RETURN concat_ws('+', CASE WHEN plan LIKE '%job_count%' THEN 'counts' END,
                          CASE WHEN plan LIKE '%job_summary%' THEN 'list' END,
                          CASE WHEN plan ~ ' on tag( |\n)' THEN 'tags' END);
END $$;
CREATE FUNCTION pg_temp.reads_counts(q text) RETURNS boolean LANGUAGE sql AS $$
SELECT pg_temp.reads(q) LIKE '%counts%'
$$;
CREATE FUNCTION pg_temp.counted(q text, OUT rewritten boolean, OUT reads text, OUT same boolean, OUT n bigint)
LANGUAGE plpgsql AS $$
DECLARE without bigint;
BEGIN
    PERFORM set_config('paidb.openpai_count_rewrite', 'on', true);
    rewritten := pg_temp.reads_counts(q);
    reads := pg_temp.reads(q);
    EXECUTE q INTO n;
    PERFORM set_config('paidb.openpai_count_rewrite', 'off', true);
    EXECUTE q INTO without;
    PERFORM set_config('paidb.openpai_count_rewrite', 'on', true);
    same := n IS NOT DISTINCT FROM without;
END $$;

CREATE TEMP TABLE shapes (id int, q text);
INSERT INTO shapes VALUES
-- rest-server's filters on the count key: rewritten
 (1, $q$SELECT count(*) AS "count" FROM "frameworks" AS "framework"$q$),
 (2, $q$SELECT count(*) AS "count" FROM "frameworks" AS "framework" WHERE "framework"."userName" IN ('u1')$q$),
 (3, $q$SELECT count(*) AS "count" FROM "frameworks" AS "framework" WHERE "framework"."userName" IN ('u1', 'u2') AND "framework"."virtualCluster" IN ('vc2')$q$),
 (4, $q$SELECT count(*) AS "count" FROM "frameworks" AS "framework" WHERE "framework"."virtualCluster" IN ('default') AND "framework"."state" IN ('RUNNING', 'WAITING')$q$),
 (5, $q$SELECT count(*) AS "count" FROM "frameworks" AS "framework" WHERE "framework"."state" IN ('FAILED')$q$),
 (6, $q$SELECT count(*) AS "count" FROM "frameworks" AS "framework" WHERE "framework"."jobPriority" IN ('prod', 'test')$q$),
 (7, $q$SELECT count(*) AS "count" FROM "frameworks" AS "framework" WHERE ("framework"."jobPriority" IS NULL OR "framework"."jobPriority" IN ('prod'))$q$),
 (8, $q$SELECT count("framework"."name") AS "count" FROM "frameworks" AS "framework" WHERE "framework"."archived" = false$q$),
 (9, $q$SELECT count(*) FROM openpai.frameworks WHERE "userName" IS NULL$q$),
 (10, $q$SELECT count(*) FROM openpai.frameworks WHERE "userName" IN ('nobody')$q$),
-- any filter over those columns that cannot fail is exact too (LIKE with a
-- constant pattern; upper() is not leakproof, so 11 stays as written)
 (11, $q$SELECT count(*) FROM openpai.frameworks WHERE "userName" LIKE '%1%' OR upper(state) <> state$q$),
 (43, $q$SELECT count(*) FROM openpai.frameworks WHERE "userName" LIKE '%1%' OR state <> 'RUNNING'$q$),
 (12, $q$SELECT count(*) FROM openpai.frameworks WHERE NOT archived AND coalesce("jobPriority", 'none') = 'none'$q$),
-- tagsNotContain: the key count less the jobs of it carrying the tags
 (13, $q$SELECT count(*) AS "count" FROM "frameworks" AS "framework" WHERE "framework"."name" NOT IN (SELECT "frameworkName" FROM "tags" WHERE "tags"."name" IN ('t')) $q$),
 (14, $q$SELECT count(*) AS "count" FROM "frameworks" AS "framework" WHERE "framework"."userName" IN ('u1', 'u2') AND "framework"."name" NOT IN (SELECT "frameworkName" FROM "tags" WHERE "tags"."name" IN ('t', 'u')) $q$),
 (15, $q$SELECT count(*) FROM openpai.frameworks WHERE name NOT IN (SELECT "frameworkName" FROM openpai.tags) AND state <> 'RUNNING'$q$),
-- tagsContain and nothing else: the jobs carrying the tags, counted on the
-- tags (c1 carries both t and u: counted once); the complement of it above
-- (13) takes the carrying jobs from there too
 (16, $q$SELECT count(*) AS "count" FROM "frameworks" AS "framework" WHERE "framework"."name" IN (SELECT "frameworkName" FROM "tags" WHERE "tags"."name" IN ('t')) $q$),
 (17, $q$SELECT count(*) AS "count" FROM "frameworks" AS "framework" WHERE "framework"."name" IN (SELECT "frameworkName" FROM "tags" WHERE "tags"."name" IN ('t', 'u')) $q$),
 (18, $q$SELECT count(*) FROM openpai.frameworks WHERE name IN (SELECT "frameworkName" FROM openpai.tags WHERE name = 'nobody')$q$),
 (19, $q$SELECT count(name) FROM openpai.frameworks WHERE name IN (SELECT "frameworkName" FROM openpai.tags WHERE name IN ('t', 'u') AND "insertedAt" IS NOT NULL)$q$),
 (38, $q$SELECT count(*) FROM openpai.frameworks WHERE name IN (SELECT "frameworkName" FROM openpai.tags)$q$),
 (42, $q$SELECT count(*) FROM openpai.frameworks WHERE name IN (SELECT "frameworkName" FROM openpai.tags WHERE name IN ('u', 't') ORDER BY "frameworkName")$q$),
-- anything else: left alone
 (20, $q$SELECT count(*) FROM openpai.frameworks WHERE "jobName" LIKE '%c1%'$q$),
 (21, $q$SELECT count(*) FROM openpai.frameworks WHERE "userName" = 'u1' AND retries = 0$q$),
 (22, $q$SELECT count(*) FROM openpai.frameworks WHERE "userName" = 'u1' AND name IN (SELECT "frameworkName" FROM openpai.tags)$q$),
 (23, $q$SELECT count(*) FROM openpai.frameworks WHERE random() < 2 AND "userName" = 'u1'$q$),
 (24, $q$SELECT count("jobName") FROM openpai.frameworks$q$),
 (25, $q$SELECT count(DISTINCT "userName") FROM openpai.frameworks$q$),
 (26, $q$SELECT count(*) FROM openpai.frameworks f, openpai.tags t WHERE f.name = t."frameworkName"$q$),
 (27, $q$SELECT count(*) FILTER (WHERE "userName" = 'u1') FROM openpai.frameworks$q$),
 (28, $q$SELECT count(*) FROM openpai.frameworks WHERE frameworks IS NOT NULL$q$),
 (29, $q$SELECT count(*) FROM paidb.job_summary WHERE user_name = 'u1'$q$),
-- NOT IN sets that may hold a NULL (then NOT IN is never true), another
-- column, a correlated set, a keyword beside it, two of them
 (30, $q$SELECT count(*) FROM openpai.frameworks WHERE name NOT IN (SELECT NULL::text)$q$),
 (31, $q$SELECT count(*) FROM openpai.frameworks WHERE name NOT IN (SELECT b."frameworkName" FROM openpai.tags a LEFT JOIN openpai.tags b ON false)$q$),
 (32, $q$SELECT count(*) FROM openpai.frameworks WHERE "jobName" NOT IN (SELECT "frameworkName" FROM openpai.tags)$q$),
 (33, $q$SELECT count(*) FROM openpai.frameworks f WHERE name NOT IN (SELECT "frameworkName" FROM openpai.tags t WHERE t.name = f."userName")$q$),
 (34, $q$SELECT count(*) FROM openpai.frameworks WHERE "jobName" LIKE '%c1%' AND name NOT IN (SELECT "frameworkName" FROM openpai.tags)$q$),
 (35, $q$SELECT count(*) FROM openpai.frameworks WHERE name NOT IN (SELECT "frameworkName" FROM openpai.tags WHERE name = 't') AND name NOT IN (SELECT "frameworkName" FROM openpai.tags WHERE name = 'u')$q$),
 (36, $q$SELECT count(*) FROM openpai.frameworks WHERE name NOT IN (SELECT "frameworkName" FROM openpai.tags LIMIT 1)$q$),
 (37, $q$SELECT count(*) FROM openpai.frameworks WHERE name NOT IN (SELECT "frameworkName" FROM openpai.tags WHERE random() < 2)$q$),
-- a tags IN on another column, correlated, or with a LIMIT: left alone
 (39, $q$SELECT count(*) FROM openpai.frameworks WHERE "jobName" IN (SELECT "frameworkName" FROM openpai.tags)$q$),
 (40, $q$SELECT count(*) FROM openpai.frameworks f WHERE name IN (SELECT "frameworkName" FROM openpai.tags t WHERE t.name = f."userName")$q$),
 (41, $q$SELECT count(*) FROM openpai.frameworks WHERE name IN (SELECT "frameworkName" FROM openpai.tags ORDER BY 1 LIMIT 1)$q$);
SELECT id, (pg_temp.counted(q)).* FROM shapes ORDER BY id;

-- the count's name and type are the original's
CREATE TEMP TABLE total AS SELECT count(*) AS "count" FROM openpai.frameworks WHERE "userName" = 'u2';
SELECT attname, atttypid::regtype FROM pg_attribute WHERE attrelid = 'total'::regclass AND attnum > 0;

-- ... and so is the complement's
CREATE TEMP TABLE untagged AS SELECT count(*) AS "count" FROM openpai.frameworks WHERE name NOT IN (SELECT "frameworkName" FROM openpai.tags);
SELECT attname, atttypid::regtype FROM pg_attribute WHERE attrelid = 'untagged'::regclass AND attnum > 0;
SELECT "count" = (SELECT count(*) FROM paidb.job_summary s WHERE NOT EXISTS (SELECT FROM paidb.tag t WHERE t.framework_name = s.name)) AS exact FROM untagged;

-- bound parameters, as a driver's prepared statement sends them
PREPARE by_user(text) AS SELECT count(*) FROM openpai.frameworks WHERE "userName" = $1;
EXECUTE by_user('u3');
SELECT count(*) FROM paidb.job_summary WHERE user_name = 'u3';
SELECT pg_temp.reads_counts($$EXECUTE by_user('u3')$$) AS rewritten;
PREPARE untagged_of(text, text) AS SELECT count(*) FROM openpai.frameworks WHERE "userName" = $1
   AND name NOT IN (SELECT "frameworkName" FROM openpai.tags WHERE name IN ($2));
EXECUTE untagged_of('u1', 't');
SELECT count(*) FROM paidb.job_summary s WHERE user_name = 'u1'
   AND NOT EXISTS (SELECT FROM paidb.tag t WHERE t.framework_name = s.name AND t.name = 't');
SELECT pg_temp.reads_counts($$EXECUTE untagged_of('u1', 't')$$) AS rewritten;

PREPARE tagged(text) AS SELECT count(*) FROM openpai.frameworks
   WHERE name IN (SELECT "frameworkName" FROM openpai.tags WHERE name IN ($1));
EXECUTE tagged('t');
SELECT pg_temp.reads($$EXECUTE tagged('t')$$) AS reads;

-- a new job is counted at once (the counts change in its transaction)
EXECUTE untagged_of('u3', 't');
EXECUTE tagged('t');
BEGIN;
SELECT pg_temp.submit('c999', 'u3', 'vc2', NULL) IS NOT NULL AS submitted;
EXECUTE by_user('u3');
EXECUTE untagged_of('u3', 't');
INSERT INTO paidb.tag (framework_name, name) VALUES ('c999', 't');
EXECUTE untagged_of('u3', 't');
EXECUTE tagged('t');
ROLLBACK;
EXECUTE by_user('u3');
EXECUTE untagged_of('u3', 't');
EXECUTE tagged('t');

-- the rewrite never lends a privilege: a role that may not read the view
-- gets the same error either way
CREATE ROLE paidb_counts_nobody;
SET ROLE paidb_counts_nobody;
\set VERBOSITY terse
SELECT count(*) FROM openpai.frameworks;
SET paidb.openpai_count_rewrite = off;
SELECT count(*) FROM openpai.frameworks;
RESET paidb.openpai_count_rewrite;
\set VERBOSITY default
RESET ROLE;
DROP ROLE paidb_counts_nobody;

-- nor the tags: a role that may read the jobs' list and the counts but not
-- the tags, nor paidb.framework (which openpai.frameworks also reads), gets
-- the same error for every count either way (the rewrite keeps the checks
-- of the query as written; it once answered 140 here)
CREATE ROLE paidb_counts_untagged;
GRANT USAGE ON SCHEMA openpai, paidb TO paidb_counts_untagged;
GRANT SELECT ON openpai.frameworks, openpai.framework_counts, paidb.job_summary, paidb.job_count,
    paidb.job_count_delta, paidb.job_counts TO paidb_counts_untagged;
SET ROLE paidb_counts_untagged;
\set VERBOSITY terse
SELECT count(*) FROM openpai.frameworks;
SELECT count(*) FROM openpai.frameworks WHERE name IN (SELECT "frameworkName" FROM openpai.tags WHERE name = 't');
SELECT count(*) FROM openpai.frameworks WHERE name NOT IN (SELECT "frameworkName" FROM openpai.tags WHERE name = 't');
SET paidb.openpai_count_rewrite = off;
SELECT count(*) FROM openpai.frameworks;
SELECT count(*) FROM openpai.frameworks WHERE name IN (SELECT "frameworkName" FROM openpai.tags WHERE name = 't');
SELECT count(*) FROM openpai.frameworks WHERE name NOT IN (SELECT "frameworkName" FROM openpai.tags WHERE name = 't');
RESET paidb.openpai_count_rewrite;
\set VERBOSITY default
RESET ROLE;
REVOKE ALL ON openpai.frameworks, openpai.framework_counts, paidb.job_summary, paidb.job_count,
    paidb.job_count_delta, paidb.job_counts FROM paidb_counts_untagged;
REVOKE ALL ON SCHEMA openpai, paidb FROM paidb_counts_untagged;
DROP ROLE paidb_counts_untagged;
