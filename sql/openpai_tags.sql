-- rest-server's tagsContain pages through openpai.frameworks (SPEC §10,
-- docs/queries.md): the has-a-tag test Sequelize adds beside the tags IN
-- is dropped where the IN implies it, and only there; a page in submission
-- order reads the tags' own index in that order (with the user, beside a
-- single-user filter); every page returns the same rows either way.
SET client_min_messages = warning;
DROP EXTENSION IF EXISTS paidb_openpai;
DROP EXTENSION IF EXISTS paidb CASCADE;
RESET client_min_messages;
CREATE EXTENSION paidb CASCADE;
CREATE EXTENSION paidb_openpai;
SET search_path = openpai, public;

-- 30 jobs of 3 users; tags: t on every third, u on every fifth (some
-- carry both), v on c7 only, none on the rest
CREATE FUNCTION pg_temp.submit(n text, u text, minute int) RETURNS text LANGUAGE sql AS $$
SELECT name FROM paidb.put_framework_request(jsonb_build_object(
  'apiVersion', 'frameworkcontroller.microsoft.com/v1', 'kind', 'Framework',
  'metadata', jsonb_build_object('name', n, 'labels', jsonb_build_object('userName', u, 'virtualCluster', 'default'),
     'annotations', jsonb_build_object('jobName', n || '-job')),
  'spec', jsonb_build_object('executionType', 'Start')), '2020-08-01 10:00:00+00'::timestamptz + minute * interval '1 minute')
$$;
SELECT count(pg_temp.submit('c' || i, 'u' || (i % 3), i)) FROM generate_series(1, 30) i;
-- c31 has no user; c32 and c33 were submitted in the same minute
SELECT paidb.put_framework_request(jsonb_build_object(
  'apiVersion', 'frameworkcontroller.microsoft.com/v1', 'kind', 'Framework',
  'metadata', jsonb_build_object('name', 'c31'), 'spec', jsonb_build_object('executionType', 'Start')),
  '2020-08-01 10:31:00+00') IS NOT NULL AS submitted;
SELECT count(pg_temp.submit('c' || i, 'u1', 40)) FROM generate_series(32, 33) i;
INSERT INTO paidb.tag (framework_name, name)
SELECT 'c' || i, 't' FROM generate_series(1, 30) i WHERE i % 3 = 0
UNION ALL SELECT 'c' || i, 'u' FROM generate_series(1, 30) i WHERE i % 5 = 0
UNION ALL SELECT 'c7', 'v'
UNION ALL SELECT 'c31', 't'
UNION ALL SELECT 'c' || i, 'w' FROM generate_series(32, 33) i;

-- Whether the plan still tests the correlated sub-select (IS NOT NULL, or
-- IS NULL), and whether the page is the same with and without the
-- rewrite.
CREATE FUNCTION pg_temp.tests_some_tag(q text) RETURNS boolean LANGUAGE plpgsql AS $$
DECLARE line text; plan text := '';
BEGIN
    FOR line IN EXECUTE 'EXPLAIN (COSTS OFF) ' || q LOOP plan := plan || line || E'\n'; END LOOP;
    RETURN plan ~ 'SubPlan \d+\) IS (NOT )?NULL';
END $$;
-- whether the plan matches jobs to paidb.tag's copies of their submission
-- time ('time') and user ('time+user'): the rewrite that lets it walk the
-- tags in submission order (test/t/051_job_list_plans.pl checks the walk
-- on enough jobs for the planner to choose it); ', bounded' where the
-- tags (one or several) of a page of nothing but tags (and a user) are read
-- only from the newest (oldest) of their n-th times on, as an array of
-- names (a join with them was estimated at one row and hashed every tag
-- row of a common tag)
CREATE FUNCTION pg_temp.tag_order(q text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE line text; plan text := '';
BEGIN
    FOR line IN EXECUTE 'EXPLAIN (COSTS OFF) ' || q LOOP plan := plan || line || E'\n'; END LOOP;
    RETURN CASE WHEN plan ~ 'job_user_name' THEN 'time+user' WHEN plan ~ 'job_submission_time' THEN 'time' END
        || CASE WHEN plan ~ '(GREATEST|LEAST)\(' THEN ', bounded' ELSE '' END;
END $$;
CREATE FUNCTION pg_temp.paged(q text, OUT kept boolean, OUT ordered text, OUT same boolean, OUT names text)
LANGUAGE plpgsql AS $$
DECLARE without text;
BEGIN
    PERFORM set_config('paidb.openpai_tag_rewrite', 'on', true);
    kept := pg_temp.tests_some_tag(q);
    ordered := pg_temp.tag_order(q);
    EXECUTE 'SELECT string_agg(name, '','' ORDER BY ord) FROM (SELECT name, row_number() OVER () AS ord FROM ('
            || q || ') p) o' INTO names;
    PERFORM set_config('paidb.openpai_tag_rewrite', 'off', true);
    EXECUTE 'SELECT string_agg(name, '','' ORDER BY ord) FROM (SELECT name, row_number() OVER () AS ord FROM ('
            || q || ') p) o' INTO without;
    PERFORM set_config('paidb.openpai_tag_rewrite', 'on', true);
    same := names IS NOT DISTINCT FROM without;
END $$;

CREATE TEMP TABLE pages (id int, q text);
INSERT INTO pages VALUES
-- rest-server's tagsContain page, as Sequelize 5.21.3 writes it: dropped
 (1, $q$SELECT "framework".*, "tags"."uid" AS "tags.uid", "tags"."name" AS "tags.name" FROM (SELECT "framework"."name", "framework"."jobName", "framework"."submissionTime" FROM "frameworks" AS "framework" WHERE "framework"."name" IN (SELECT "frameworkName" FROM "tags" WHERE "tags"."name" IN ('t')) AND ( SELECT "frameworkName" FROM "tags" AS "tags" WHERE ("tags"."frameworkName" = "framework"."name") LIMIT 1 ) IS NOT NULL ORDER BY "framework"."submissionTime" DESC LIMIT 5 OFFSET 0) AS "framework" INNER JOIN "tags" AS "tags" ON "framework"."name" = "tags"."frameworkName" ORDER BY "framework"."submissionTime" DESC, "tags"."name"$q$),
-- with a user and two tags, and on page 2
 (2, $q$SELECT "framework".*, "tags"."name" AS "tags.name" FROM (SELECT "framework"."name", "framework"."submissionTime" FROM "frameworks" AS "framework" WHERE "framework"."userName" IN ('u0') AND "framework"."name" IN (SELECT "frameworkName" FROM "tags" WHERE "tags"."name" IN ('t', 'u')) AND ( SELECT "frameworkName" FROM "tags" AS "tags" WHERE ("tags"."frameworkName" = "framework"."name") LIMIT 1 ) IS NOT NULL ORDER BY "framework"."submissionTime" DESC LIMIT 3 OFFSET 3) AS "framework" INNER JOIN "tags" AS "tags" ON "framework"."name" = "tags"."frameworkName" ORDER BY "framework"."submissionTime" DESC, "tags"."name"$q$),
-- the same tests alone, either order, the equality either way round:
-- dropped, but not with LIMIT 2 (a job with two tags makes that test fail
-- with 21000, which dropping it would hide)
 (3, $q$SELECT name FROM frameworks f WHERE (SELECT "frameworkName" FROM tags WHERE f.name = "frameworkName" LIMIT 2) IS NOT NULL AND name IN (SELECT "frameworkName" FROM tags WHERE tags.name = 'v') ORDER BY name$q$),
-- a tag that no job carries: dropped, and the page is empty
 (4, $q$SELECT name FROM frameworks f WHERE name IN (SELECT "frameworkName" FROM tags WHERE tags.name = 'nobody') AND (SELECT "frameworkName" FROM tags WHERE "frameworkName" = f.name LIMIT 1) IS NOT NULL$q$),
-- tests the IN does not imply: kept
-- the sub-select asks for a particular tag
 (5, $q$SELECT name FROM frameworks f WHERE name IN (SELECT "frameworkName" FROM tags WHERE tags.name = 't') AND (SELECT "frameworkName" FROM tags WHERE "frameworkName" = f.name AND tags.name = 'u' LIMIT 1) IS NOT NULL ORDER BY name$q$),
-- LIMIT 0 (never a row) and an OFFSET (skips the only row)
 (6, $q$SELECT name FROM frameworks f WHERE name IN (SELECT "frameworkName" FROM tags WHERE tags.name = 't') AND (SELECT "frameworkName" FROM tags WHERE "frameworkName" = f.name LIMIT 0) IS NOT NULL ORDER BY name$q$),
 (7, $q$SELECT name FROM frameworks f WHERE name IN (SELECT "frameworkName" FROM tags WHERE tags.name = 'v') AND (SELECT "frameworkName" FROM tags WHERE "frameworkName" = f.name ORDER BY name LIMIT 1 OFFSET 1) IS NOT NULL ORDER BY name$q$),
-- IS NULL, and the IN under an OR or a NOT (not beside the test)
 (8, $q$SELECT name FROM frameworks f WHERE name IN (SELECT "frameworkName" FROM tags WHERE tags.name = 't') AND (SELECT "frameworkName" FROM tags WHERE "frameworkName" = f.name LIMIT 1) IS NULL ORDER BY name$q$),
 (9, $q$SELECT name FROM frameworks f WHERE (name IN (SELECT "frameworkName" FROM tags WHERE tags.name = 'v') OR "userName" = 'u1') AND (SELECT "frameworkName" FROM tags WHERE "frameworkName" = f.name LIMIT 1) IS NOT NULL ORDER BY name$q$),
 (10, $q$SELECT name FROM frameworks f WHERE name NOT IN (SELECT "frameworkName" FROM tags WHERE tags.name = 't') AND (SELECT "frameworkName" FROM tags WHERE "frameworkName" = f.name LIMIT 1) IS NOT NULL ORDER BY name$q$),
-- another job than the IN's: the other side of a self-join
 (11, $q$SELECT f.name FROM frameworks f JOIN frameworks g ON g."jobName" = f."jobName" WHERE f.name IN (SELECT "frameworkName" FROM tags WHERE tags.name = 't') AND (SELECT "frameworkName" FROM tags WHERE "frameworkName" = g.name LIMIT 1) IS NOT NULL ORDER BY 1$q$),
-- another column: the test is on the job name
 (12, $q$SELECT name FROM frameworks f WHERE name IN (SELECT "frameworkName" FROM tags WHERE tags.name = 't') AND (SELECT "frameworkName" FROM tags WHERE "frameworkName" = f."jobName" LIMIT 1) IS NOT NULL ORDER BY name$q$),
-- the IN reads another relation, or has a LIMIT, or the test reads uid
 (13, $q$SELECT name FROM frameworks f WHERE name IN (SELECT name FROM frameworks WHERE "userName" = 'u1') AND (SELECT "frameworkName" FROM tags WHERE "frameworkName" = f.name LIMIT 1) IS NOT NULL ORDER BY name$q$),
 (14, $q$SELECT name FROM frameworks f WHERE name IN (SELECT "frameworkName" FROM tags WHERE tags.name = 't' LIMIT 2) AND (SELECT "frameworkName" FROM tags WHERE "frameworkName" = f.name LIMIT 1) IS NOT NULL ORDER BY name$q$),
 (15, $q$SELECT name FROM frameworks f WHERE name IN (SELECT "frameworkName" FROM tags WHERE tags.name = 't') AND (SELECT uid FROM tags WHERE "frameworkName" = f.name LIMIT 1) IS NOT NULL ORDER BY name$q$),
-- paidb's own tables, not the views: left alone
 (16, $q$SELECT name FROM paidb.job_summary s WHERE name IN (SELECT framework_name FROM paidb.tag WHERE tag.name = 't') AND (SELECT framework_name FROM paidb.tag WHERE framework_name = s.name LIMIT 1) IS NOT NULL ORDER BY name$q$),
-- pages in submission order read the tags' index in that order:
-- rest-server's page for one user and a tag (the user's index)
 (17, $q$SELECT "framework".*, "tags"."name" AS "tags.name" FROM (SELECT "framework"."name", "framework"."submissionTime" FROM "frameworks" AS "framework" WHERE "framework"."userName" IN ('u0') AND "framework"."name" IN (SELECT "frameworkName" FROM "tags" WHERE "tags"."name" IN ('t')) AND ( SELECT "frameworkName" FROM "tags" AS "tags" WHERE ("tags"."frameworkName" = "framework"."name") LIMIT 1 ) IS NOT NULL ORDER BY "framework"."submissionTime" DESC LIMIT 3 OFFSET 0) AS "framework" INNER JOIN "tags" AS "tags" ON "framework"."name" = "tags"."frameworkName" ORDER BY "framework"."submissionTime" DESC, "tags"."name"$q$),
-- oldest first, page 2; the job without a user (c31) is on it
 (18, $q$SELECT name FROM frameworks f WHERE name IN (SELECT "frameworkName" FROM tags WHERE tags.name = 't') ORDER BY "submissionTime" DESC LIMIT 4 OFFSET 1$q$),
-- two tags and one user (the user's index); two tags alone: as written
 (19, $q$SELECT name FROM frameworks f WHERE "userName" = 'u0' AND name IN (SELECT "frameworkName" FROM tags WHERE tags.name IN ('t', 'u')) ORDER BY "submissionTime" LIMIT 4$q$),
 (20, $q$SELECT name FROM frameworks f WHERE name IN (SELECT "frameworkName" FROM tags WHERE tags.name IN ('t', 'u')) ORDER BY "submissionTime" LIMIT 4$q$),
-- two users: the tag's index without them
 (21, $q$SELECT name FROM frameworks f WHERE "userName" IN ('u0', 'u2') AND name IN (SELECT "frameworkName" FROM tags WHERE tags.name = 't') ORDER BY "submissionTime" DESC LIMIT 4$q$),
-- a tag condition on another column, beside a user
 (22, $q$SELECT name FROM frameworks f WHERE "userName" = 'u1' AND name IN (SELECT "frameworkName" FROM tags WHERE tags.name IN ('t', 'u') AND tags."insertedAt" IS NOT NULL) ORDER BY "submissionTime" DESC LIMIT 4$q$),
-- two jobs submitted together: each comes once, with its own tag
 (23, $q$SELECT name FROM frameworks f WHERE name IN (SELECT "frameworkName" FROM tags WHERE tags.name = 'w') ORDER BY "submissionTime" DESC, name LIMIT 5$q$),
-- not in submission order, or no LIMIT, or the IN under an OR: as written
 (24, $q$SELECT name FROM frameworks f WHERE "userName" = 'u0' AND name IN (SELECT "frameworkName" FROM tags WHERE tags.name = 't') ORDER BY "jobName" LIMIT 3$q$),
 (25, $q$SELECT name FROM frameworks f WHERE name IN (SELECT "frameworkName" FROM tags WHERE tags.name = 't') ORDER BY "submissionTime" DESC$q$),
 (26, $q$SELECT name FROM frameworks f WHERE (name IN (SELECT "frameworkName" FROM tags WHERE tags.name = 'v') OR "userName" = 'u2') ORDER BY "submissionTime" DESC LIMIT 3$q$),
 (27, $q$SELECT name FROM paidb.job_summary s WHERE name IN (SELECT framework_name FROM paidb.tag WHERE tag.name = 't') ORDER BY submission_time DESC LIMIT 3$q$),
-- one tag or several and nothing else (or a user): bounded by the tags' n-th
-- times.  Page 2 of rest-server's two-tag page; oldest first, with the job
-- without a user; a tag with fewer jobs than the page and one with none;
-- tags that all have fewer (no bound: every row of theirs); the same tag
-- twice; the jobs submitted together, ordered by name after the time
 (28, $q$SELECT "framework".*, "tags"."name" AS "tags.name" FROM (SELECT "framework"."name", "framework"."submissionTime" FROM "frameworks" AS "framework" WHERE "framework"."name" IN (SELECT "frameworkName" FROM "tags" WHERE "tags"."name" IN ('t', 'u')) AND ( SELECT "frameworkName" FROM "tags" AS "tags" WHERE ("tags"."frameworkName" = "framework"."name") LIMIT 1 ) IS NOT NULL ORDER BY "framework"."submissionTime" DESC LIMIT 3 OFFSET 3) AS "framework" INNER JOIN "tags" AS "tags" ON "framework"."name" = "tags"."frameworkName" ORDER BY "framework"."submissionTime" DESC, "tags"."name"$q$),
 (29, $q$SELECT name FROM frameworks f WHERE name IN (SELECT "frameworkName" FROM tags WHERE tags.name IN ('u', 't')) ORDER BY "submissionTime" DESC LIMIT 2 OFFSET 1$q$),
 (30, $q$SELECT name FROM frameworks f WHERE name IN (SELECT "frameworkName" FROM tags WHERE tags.name IN ('v', 'u', 'nobody')) ORDER BY "submissionTime" LIMIT 3$q$),
 (31, $q$SELECT name FROM frameworks f WHERE name IN (SELECT "frameworkName" FROM tags WHERE tags.name IN ('v', 'w')) ORDER BY "submissionTime" DESC LIMIT 20$q$),
 (32, $q$SELECT name FROM frameworks f WHERE name IN (SELECT "frameworkName" FROM tags WHERE tags.name IN ('t', 't')) ORDER BY "submissionTime" DESC LIMIT 4$q$),
 (33, $q$SELECT name FROM frameworks f WHERE name IN (SELECT "frameworkName" FROM tags WHERE tags.name IN ('w', 'u')) ORDER BY "submissionTime" DESC, name LIMIT 1$q$),
 (34, $q$SELECT name FROM frameworks f WHERE "userName" = 'u1' AND name IN (SELECT "frameworkName" FROM tags WHERE tags.name IN ('w', 't')) ORDER BY "submissionTime" DESC LIMIT 2$q$),
-- several tags beside another filter, with a LIMIT that is a sub-select,
-- WITH TIES, or a window over the page: not bounded (the tags' n-th times
-- say nothing of what these read), and without a user as written
 (35, $q$SELECT name FROM frameworks f WHERE name IN (SELECT "frameworkName" FROM tags WHERE tags.name IN ('t', 'u')) AND "jobName" <> 'c30-job' ORDER BY "submissionTime" DESC LIMIT 2$q$),
 (36, $q$SELECT name FROM frameworks f WHERE name IN (SELECT "frameworkName" FROM tags WHERE tags.name IN ('t', 'u')) ORDER BY "submissionTime" DESC LIMIT (SELECT 2)$q$),
 (37, $q$SELECT name FROM frameworks f WHERE name IN (SELECT "frameworkName" FROM tags WHERE tags.name IN ('w', 'u')) ORDER BY "submissionTime" DESC FETCH FIRST 1 ROWS WITH TIES$q$),
 (38, $q$SELECT name || '/' || count(*) OVER () AS name FROM frameworks f WHERE name IN (SELECT "frameworkName" FROM tags WHERE tags.name IN ('t', 'u')) ORDER BY "submissionTime" DESC LIMIT 2$q$);

SELECT id, (pg_temp.paged(q)).* FROM pages ORDER BY id;

-- the user as a bound parameter (a prepared page)
PREPARE user_page(text) AS SELECT name FROM frameworks f WHERE "userName" = $1 AND name IN (SELECT "frameworkName" FROM tags WHERE tags.name = 't') ORDER BY "submissionTime" DESC LIMIT 3;
EXECUTE user_page('u0');
SELECT pg_temp.tag_order('EXECUTE user_page(''u0'')');
DEALLOCATE user_page;

-- the rewrite needs no privilege the query did not: a role that may not
-- read the tags gets the same error either way
CREATE ROLE paidb_tags_nobody;
GRANT USAGE ON SCHEMA openpai TO paidb_tags_nobody;
GRANT SELECT ON openpai.frameworks TO paidb_tags_nobody;
SET ROLE paidb_tags_nobody;
SELECT name FROM frameworks f WHERE name IN (SELECT "frameworkName" FROM tags WHERE tags.name = 't') AND (SELECT "frameworkName" FROM tags WHERE "frameworkName" = f.name LIMIT 1) IS NOT NULL;
SET paidb.openpai_tag_rewrite = off;
SELECT name FROM frameworks f WHERE name IN (SELECT "frameworkName" FROM tags WHERE tags.name = 't') AND (SELECT "frameworkName" FROM tags WHERE "frameworkName" = f.name LIMIT 1) IS NOT NULL;
RESET paidb.openpai_tag_rewrite;
RESET ROLE;
-- nor when it reads paidb.tag directly: a page in submission order, with
-- the rewrite and without, as rows or the error
CREATE FUNCTION pg_temp.tagged_page_both_ways(OUT rewritten text, OUT as_written text)
LANGUAGE plpgsql AS $$
DECLARE q text := $q$SELECT string_agg(name, ',') FROM (SELECT name FROM openpai.frameworks f WHERE name IN (SELECT "frameworkName" FROM openpai.tags WHERE tags.name = 't') ORDER BY "submissionTime" DESC LIMIT 2) p$q$;
BEGIN
    BEGIN EXECUTE q INTO rewritten; EXCEPTION WHEN insufficient_privilege THEN rewritten := SQLERRM; END;
    PERFORM set_config('paidb.openpai_tag_rewrite', 'off', true);
    BEGIN EXECUTE q INTO as_written; EXCEPTION WHEN insufficient_privilege THEN as_written := SQLERRM; END;
    PERFORM set_config('paidb.openpai_tag_rewrite', 'on', true);
END $$;
-- a role that may read the tables but not the tags view
GRANT USAGE ON SCHEMA paidb TO paidb_tags_nobody;
GRANT SELECT ON paidb.job_summary, paidb.framework, paidb.tag TO paidb_tags_nobody;
SET ROLE paidb_tags_nobody;
SELECT * FROM pg_temp.tagged_page_both_ways();
RESET ROLE;
-- and with the view too: the page, rewritten
GRANT SELECT ON openpai.tags TO paidb_tags_nobody;
SET ROLE paidb_tags_nobody;
SELECT * FROM pg_temp.tagged_page_both_ways();
SELECT pg_temp.tag_order($$SELECT name FROM frameworks f WHERE name IN (SELECT "frameworkName" FROM tags WHERE tags.name = 't') ORDER BY "submissionTime" DESC LIMIT 2$$);
RESET ROLE;
-- a role that may read the views and not paidb.tag: no rewrite, the error
-- the view gives anyway
REVOKE SELECT ON paidb.tag FROM paidb_tags_nobody;
SET ROLE paidb_tags_nobody;
SELECT * FROM pg_temp.tagged_page_both_ways();
RESET ROLE;
REVOKE ALL ON SCHEMA openpai, paidb FROM paidb_tags_nobody;
REVOKE ALL ON openpai.frameworks, openpai.tags, paidb.job_summary, paidb.framework FROM paidb_tags_nobody;
DROP ROLE paidb_tags_nobody;

-- a prepared page keeps the form it was analyzed in; a tag added later is
-- seen by both forms
PREPARE tagged(text) AS SELECT name FROM frameworks f WHERE name IN (SELECT "frameworkName" FROM tags WHERE tags.name = $1) AND (SELECT "frameworkName" FROM tags WHERE "frameworkName" = f.name LIMIT 1) IS NOT NULL ORDER BY name;
EXECUTE tagged('v');
INSERT INTO paidb.tag (framework_name, name) VALUES ('c8', 'v');
EXECUTE tagged('v');
SELECT pg_temp.tests_some_tag('EXECUTE tagged(''v'')') AS kept;
DEALLOCATE tagged;

-- a tag belongs to a job that exists, and carries its submission time and
-- user, also when the job's change (paidb.framework_summary_trigger)
INSERT INTO paidb.tag (framework_name, name) VALUES ('no-such-job', 't');
UPDATE paidb.framework SET user_name = 'u9', submission_time = submission_time - interval '1 day' WHERE name = 'c3';
SELECT t.name, t.job_user_name, t.job_submission_time = f.submission_time AS same_time
  FROM paidb.tag t JOIN paidb.framework f ON f.name = t.framework_name WHERE t.framework_name = 'c3';
SELECT count(*) AS tags_out_of_step FROM paidb.tag t JOIN paidb.framework f ON f.name = t.framework_name
 WHERE t.job_submission_time IS DISTINCT FROM f.submission_time OR t.job_user_name IS DISTINCT FROM f.user_name;
-- c3 is now u9's oldest tagged job
SELECT name FROM frameworks f WHERE "userName" = 'u9' AND name IN (SELECT "frameworkName" FROM tags WHERE tags.name = 't') ORDER BY "submissionTime" LIMIT 2;
SELECT name FROM frameworks f WHERE name IN (SELECT "frameworkName" FROM tags WHERE tags.name = 't') ORDER BY "submissionTime" LIMIT 1;
-- moving a tag to another job takes that job's columns
UPDATE paidb.tag SET framework_name = 'c4' WHERE framework_name = 'c7' AND name = 'v';
SELECT framework_name, job_user_name FROM paidb.tag WHERE name = 'v' ORDER BY 1;
