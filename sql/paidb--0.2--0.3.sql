-- paidb 0.2 -> 0.3 (ALTER EXTENSION paidb UPDATE).  Version 0.2 is
-- released: everything 0.3 changes in paidb's schema is here, and a fresh
-- install (0.1 -> 0.2 -> 0.3) runs it too, so both end equal
-- (test/t/034_schema_upgrade.pl compares their dumps).

\echo Use "ALTER EXTENSION paidb UPDATE TO '0.3'" to load this file. \quit

-- A tag never outlives its job, enforced (SPEC §10): the tag counts of the
-- openpai rewrites count tags for jobs, and are exact only if every tag has
-- its job.  0.2 kept that by convention (delete_job deleted the tags
-- first); a job row deleted any other way left its tags.  Tags whose job is
-- already gone are dropped first, and counted in a NOTICE.
DO $do$
DECLARE
    n bigint;
BEGIN
    DELETE FROM paidb.tag t
     WHERE NOT EXISTS (SELECT 1 FROM paidb.framework f
                        WHERE f.name OPERATOR(pg_catalog.=) t.framework_name);
    GET DIAGNOSTICS n = ROW_COUNT;
    IF n OPERATOR(pg_catalog.>) 0 THEN
        RAISE NOTICE 'dropped % tags of jobs that are not in paidb.framework', n;
    END IF;
END
$do$;
-- (the unique key (framework_name, name) serves the cascade's look-ups)
ALTER TABLE paidb.tag ADD CONSTRAINT tag_framework_name_fkey
    FOREIGN KEY (framework_name) REFERENCES paidb.framework (name) ON DELETE CASCADE;

-- pg_trgm is required from 0.3 on (paidb.control: CREATE EXTENSION paidb
-- CASCADE brings it), so the keyword indexes exist on every install and
-- upgrade; a 0.2 database made without pg_trgm gets them here.
SELECT paidb.create_keyword_indexes();

-- rest-server's keyword search beside a user (`... LIKE '%kw%' ... AND
-- "userName" IN (u)`) read every job of the user from the table to test the
-- keyword: 53-83 ms for its count at a million jobs.  The user's index
-- carries the searched columns, so the count (and the page) read the index
-- alone: 0.5 ms at 100,000 jobs where the table took 116 ms, for ~18 more
-- bytes per job.
DROP INDEX paidb.job_summary_user_name_idx;
CREATE INDEX job_summary_user_name_idx ON paidb.job_summary (user_name, submission_time)
    INCLUDE (name, job_name, virtual_cluster);
