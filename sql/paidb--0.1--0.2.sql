-- paidb 0.1 -> 0.2.  A fresh CREATE EXTENSION paidb runs paidb--0.1.sql and
-- then this script (PostgreSQL follows the update path when a version has no
-- install script of its own), so a fresh install and an upgraded one run the
-- very same statements; test/t/034_schema_upgrade.pl compares the two.
-- Safe under any search_path: every name is schema-qualified.

\echo Use "ALTER EXTENSION paidb UPDATE TO '0.2'" to load this file. \quit

-------------------------------------------------------------------------------
-- §8 trust boundaries (hardening)
-------------------------------------------------------------------------------

-- The first-run import belongs to one target (API server URL, namespace):
-- from 0.2 on, paidb.installation's 'initial_import_done' holds the
-- fingerprint of the target that was imported (the 'watch_source.frameworks'
-- value), and a watcher whose target differs imports again instead of
-- deleting that target's frameworks as orphans.  0.1 stored the list's
-- resourceVersion there; it imported the target it recorded in the same
-- transaction, so that target is carried over: an upgraded database neither
-- imports again nor loses its watch position.
UPDATE paidb.installation AS done
   SET value = source.value, updated_at = pg_catalog.now()
  FROM paidb.installation AS source
 WHERE done.key OPERATOR(pg_catalog.=) 'initial_import_done'
   AND source.key OPERATOR(pg_catalog.=) 'watch_source.frameworks';

-- A fresh install must not hand its privileges to roles it did not create
-- (paidb--0.1.sql grants to paidb_writer/paidb_reader if they exist).  This
-- script runs in the same transaction as a fresh install's, so raising here
-- rolls CREATE EXTENSION back.  A role that existed before is accepted only
-- if it looks like one paidb made: NOLOGIN, no special attribute, owning
-- nothing, and either without members or already holding privileges in
-- another database (paidb installed there first).  An upgrade of an
-- installed 0.1 is not checked: its roles are the ones it made.
CREATE FUNCTION paidb._created_in_this_transaction(catalog pg_catalog.regclass, object pg_catalog.oid)
RETURNS boolean AS 'MODULE_PATHNAME', 'paidb_created_in_this_transaction'
LANGUAGE C STRICT;

DO $roles$
DECLARE
    r record;
    why text;
BEGIN
    IF NOT paidb._created_in_this_transaction('pg_catalog.pg_class'::pg_catalog.regclass,
                                              'paidb.framework'::pg_catalog.regclass::pg_catalog.oid) THEN
        RETURN;                 -- ALTER EXTENSION paidb UPDATE
    END IF;
    FOR r IN SELECT a.oid, a.rolname, a.rolcanlogin, a.rolsuper, a.rolcreaterole, a.rolcreatedb,
                    a.rolreplication, a.rolbypassrls
               FROM pg_catalog.pg_roles a
              WHERE a.rolname OPERATOR(pg_catalog.=) ANY (ARRAY['paidb_writer', 'paidb_reader']::pg_catalog.name[])
    LOOP
        CONTINUE WHEN paidb._created_in_this_transaction('pg_catalog.pg_authid'::pg_catalog.regclass, r.oid);
        why := NULL;
        IF r.rolcanlogin OR r.rolsuper OR r.rolcreaterole OR r.rolcreatedb OR r.rolreplication OR r.rolbypassrls THEN
            why := 'it can log in or has a special attribute (SUPERUSER, CREATEROLE, CREATEDB, REPLICATION, BYPASSRLS)';
        ELSIF EXISTS (SELECT 1 FROM pg_catalog.pg_shdepend d
                       WHERE d.refclassid OPERATOR(pg_catalog.=) 'pg_catalog.pg_authid'::pg_catalog.regclass
                         AND d.refobjid OPERATOR(pg_catalog.=) r.oid
                         AND d.deptype OPERATOR(pg_catalog.=) 'o') THEN
            why := 'it owns objects';
        ELSIF EXISTS (SELECT 1 FROM pg_catalog.pg_auth_members m WHERE m.roleid OPERATOR(pg_catalog.=) r.oid)
              AND NOT EXISTS (SELECT 1 FROM pg_catalog.pg_shdepend d
                               WHERE d.refclassid OPERATOR(pg_catalog.=) 'pg_catalog.pg_authid'::pg_catalog.regclass
                                 AND d.refobjid OPERATOR(pg_catalog.=) r.oid
                                 AND d.deptype OPERATOR(pg_catalog.=) 'a'
                                 AND d.dbid OPERATOR(pg_catalog.<>) (SELECT db.oid FROM pg_catalog.pg_database db
                                                                    WHERE db.datname OPERATOR(pg_catalog.=) pg_catalog.current_database())) THEN
            why := 'it has members but holds no privileges from a paidb install in another database';
        END IF;
        IF why IS NOT NULL THEN
            RAISE EXCEPTION 'role "%" exists already and was not created by paidb', r.rolname
                USING ERRCODE = '42710',
                      DETAIL = 'CREATE EXTENSION paidb would grant it privileges on paidb''s objects, but ' || why || '.',
                      HINT = 'Drop or rename the role, or make it a NOLOGIN role without members, then install again.';
        END IF;
    END LOOP;
END
$roles$;

DROP FUNCTION paidb._created_in_this_transaction(pg_catalog.regclass, pg_catalog.oid);

-- Orphans are frameworks the database does not know; a name no framework
-- can have is never queued (handle_orphan refuses it), and none is left.
DELETE FROM paidb.orphan WHERE NOT (name OPERATOR(pg_catalog.~) '^[a-z0-9]{1,63}$');
ALTER TABLE paidb.orphan
    ADD CONSTRAINT orphan_name_valid CHECK (name OPERATOR(pg_catalog.~) '^[a-z0-9]{1,63}$');

-------------------------------------------------------------------------------
-- §9 OpenPAI compatibility (task history)
-------------------------------------------------------------------------------

-- Idempotent insert into task_history under OpenPAI's uid
-- md5(task_uid + '+' + task_attempt_index + '+' + history_type); the
-- framework watcher's writer, also behind openpai.task_history's INSERT.
CREATE FUNCTION paidb.record_task_history(snapshot jsonb, framework_name text,
    attempt_index integer, taskrole_name text, task_name text, task_index integer,
    task_uid text, task_attempt_index integer, pod_uid text,
    history_type text DEFAULT 'retry')
RETURNS text
AS 'MODULE_PATHNAME', 'paidb_record_task_history'
LANGUAGE C VOLATILE
SECURITY DEFINER SET search_path = pg_catalog, paidb;
REVOKE ALL ON FUNCTION paidb.record_task_history(jsonb, text, integer, text, text, integer,
    text, integer, text, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION paidb.record_task_history(jsonb, text, integer, text, text, integer,
    text, integer, text, text) TO paidb_writer;

-------------------------------------------------------------------------------
-- §10 job queries and data life cycle
-------------------------------------------------------------------------------

-- Writers wait while this section copies paidb.framework into the new
-- structures and installs the trigger that keeps them, so that no write
-- falls between the copy and the trigger.
LOCK TABLE paidb.framework IN SHARE ROW EXCLUSIVE MODE;

-- Exact job counts (docs/queries.md).  Every write to paidb.framework that
-- adds, removes or re-keys a job appends a +1/-1 row to job_count_delta:
-- insert-only, so concurrent submissions never wait on each other for a
-- counter row.  paidb.compact_job_counts() (the retention worker calls it
-- every cycle) folds the deltas into job_count in one transaction, so
-- job_counts (the sum of both) is exact under any snapshot.
CREATE TABLE paidb.job_count (
    user_name text,
    virtual_cluster text,
    state text,
    job_priority text,
    archived boolean NOT NULL,
    n bigint NOT NULL,
    CONSTRAINT job_count_key UNIQUE NULLS NOT DISTINCT
        (user_name, virtual_cluster, state, job_priority, archived)
);
COMMENT ON TABLE paidb.job_count IS 'Jobs per (user, virtual cluster, state, priority, archived), as of the last compaction';

CREATE TABLE paidb.job_count_delta (
    user_name text,
    virtual_cluster text,
    state text,
    job_priority text,
    archived boolean NOT NULL,
    n integer NOT NULL
);
COMMENT ON TABLE paidb.job_count_delta IS 'Changes to paidb.job_count not yet compacted';

-- The counts as of now: what the web portal's totals are computed from.
CREATE VIEW paidb.job_counts AS
SELECT user_name, virtual_cluster, state, job_priority, archived,
       pg_catalog.sum(n)::bigint AS n
  FROM (SELECT user_name, virtual_cluster, state, job_priority, archived, n FROM paidb.job_count
        UNION ALL
        SELECT user_name, virtual_cluster, state, job_priority, archived, n FROM paidb.job_count_delta) c
 GROUP BY user_name, virtual_cluster, state, job_priority, archived
HAVING pg_catalog.sum(n) OPERATOR(pg_catalog.<>) 0;

-- The job list (docs/queries.md): the columns rest-server lists, one narrow
-- row per job, kept by the trigger below.  paidb.framework rows are wide
-- (the snapshot stays inline for cheap status updates), so counting,
-- sorting and deep offsets over them read gigabytes; here they read a
-- table of ~200 bytes a job and its indexes.  The openpai.frameworks view
-- LEFT JOINs paidb.framework on the primary key, a join PostgreSQL removes
-- when a query (every list and count) uses only these columns.
CREATE TABLE paidb.job_summary (
    name text PRIMARY KEY,
    job_name text,
    user_name text,
    execution_type text,
    submission_time timestamptz NOT NULL,
    creation_time timestamptz,
    launch_time timestamptz,
    virtual_cluster text,
    total_gpu_number integer,
    total_task_number integer,
    total_task_role_number integer,
    job_priority text,
    retries integer,
    retry_delay_time integer,
    platform_retries integer,
    resource_retries integer,
    user_retries integer,
    completion_time timestamptz,
    app_exit_code integer,
    sub_state text,
    state text,
    archived boolean NOT NULL
);
COMMENT ON TABLE paidb.job_summary IS 'The listed columns of paidb.framework, one narrow row per job (kept by a trigger)';
-- No parallel plans over the job list: it is read a page at a time, and a
-- parallel walk of an index for a 20-row page (which the planner picks for
-- a user's page with a tag) paid 20-40 ms of worker start-up for a page that
-- takes 14 ms alone; the keyword count was faster serial too (62 vs 88 ms
-- at a million jobs on two cores).
ALTER TABLE paidb.job_summary SET (parallel_workers = 0);

INSERT INTO paidb.job_summary
SELECT name, job_name, user_name, execution_type, submission_time, creation_time, launch_time,
       virtual_cluster, total_gpu_number, total_task_number, total_task_role_number, job_priority,
       retries, retry_delay_time, platform_retries, resource_retries, user_retries, completion_time,
       app_exit_code, sub_state, state, archived
  FROM paidb.framework;

-- Every filter and every sortable column of rest-server's list (each index
-- also serves ORDER BY its first column, both directions, NULLS as
-- rest-server asks); built after the backfill above.  The filter indexes
-- INCLUDE name: through the openpai views the planner removes the join but
-- still asks the scan for name (the join's key), and only an index holding
-- it lets a count be an index-only scan (39 ms -> 2 ms for one user's
-- count at 200,000 jobs).
CREATE INDEX job_summary_submission_time_idx ON paidb.job_summary (submission_time);
CREATE INDEX job_summary_user_name_idx ON paidb.job_summary (user_name, submission_time) INCLUDE (name);
CREATE INDEX job_summary_virtual_cluster_idx ON paidb.job_summary (virtual_cluster, state, submission_time) INCLUDE (name);
CREATE INDEX job_summary_state_idx ON paidb.job_summary (state, submission_time) INCLUDE (name);
CREATE INDEX job_summary_job_priority_idx ON paidb.job_summary (job_priority, submission_time) INCLUDE (name);
CREATE INDEX job_summary_job_name_idx ON paidb.job_summary (job_name);
CREATE INDEX job_summary_retries_idx ON paidb.job_summary (retries);
CREATE INDEX job_summary_total_task_number_idx ON paidb.job_summary (total_task_number);
CREATE INDEX job_summary_total_gpu_number_idx ON paidb.job_summary (total_gpu_number);
CREATE INDEX job_summary_completion_time_idx ON paidb.job_summary (completion_time);

-- Listing is job_summary's work now: 0.1's two listing indexes on the wide
-- table would only make every submission pay twice.
DROP INDEX paidb.framework_submission_time_idx;
DROP INDEX paidb.framework_user_name_idx;

-- Trigger (src/job_list.c): keep job_summary and the count deltas in step
-- with paidb.framework.
CREATE FUNCTION paidb.framework_summary_trigger()
RETURNS trigger
AS 'MODULE_PATHNAME', 'paidb_framework_summary_trigger'
LANGUAGE C;

CREATE TRIGGER framework_summary_insert_delete AFTER INSERT OR DELETE ON paidb.framework
    FOR EACH ROW EXECUTE FUNCTION paidb.framework_summary_trigger();
-- Updates fire it BEFORE the row, and it compares the listed columns
-- itself: most are status updates that change none of them, and a WHEN
-- here (which the executor rebuilds from its text for every statement)
-- cost apply_watch_event a seventh of its throughput.  The primary key
-- never changes (no writer updates a name).
CREATE TRIGGER framework_summary_update BEFORE UPDATE ON paidb.framework
    FOR EACH ROW EXECUTE FUNCTION paidb.framework_summary_trigger();

-- Keyword search (LIKE '%kw%' over user, job and virtual cluster names)
-- needs pg_trgm's GIN operator class.  paidb does not require pg_trgm (a
-- `requires` would make CREATE EXTENSION paidb fail without CASCADE, and
-- ALTER EXTENSION paidb UPDATE fail outright): the indexes are made here
-- when pg_trgm is installed, or later by calling this function after
-- CREATE EXTENSION pg_trgm.  Returns whether the indexes exist.
CREATE FUNCTION paidb.create_keyword_indexes(quiet boolean DEFAULT false)
RETURNS boolean
LANGUAGE plpgsql
SET search_path = pg_catalog, paidb
AS $fn$
DECLARE
    trgm name;
    col text;
BEGIN
    SELECT n.nspname INTO trgm FROM pg_catalog.pg_extension e
      JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) e.extnamespace
     WHERE e.extname OPERATOR(pg_catalog.=) 'pg_trgm';
    IF trgm IS NULL THEN
        IF quiet THEN
            RETURN false;
        END IF;
        RAISE NOTICE 'pg_trgm is not installed: keyword searches scan paidb.job_summary'
            USING HINT = 'Run CREATE EXTENSION pg_trgm, then SELECT paidb.create_keyword_indexes().';
        RETURN false;
    END IF;
    -- A small pending list (512 kB, not 4 MB): every search reads all of
    -- it, and at a million jobs autovacuum empties it only every 200,000
    -- inserts, so a full 4 MB list added ~30 ms to each keyword search.
    -- Submissions flush it more often, at no cost measurable in make bench.
    FOREACH col IN ARRAY ARRAY['user_name', 'job_name', 'virtual_cluster'] LOOP
        EXECUTE pg_catalog.format('CREATE INDEX IF NOT EXISTS %I ON paidb.job_summary USING gin (%I %I.gin_trgm_ops) '
                                  'WITH (gin_pending_list_limit = 512)',
                                  'job_summary_' || col || '_trgm_idx', col, trgm);
    END LOOP;
    RETURN true;
END
$fn$;
SELECT paidb.create_keyword_indexes(quiet => true);

-- Fold the deltas into job_count; returns the number of delta rows folded.
CREATE FUNCTION paidb.compact_job_counts()
RETURNS bigint
LANGUAGE sql
SECURITY DEFINER SET search_path = pg_catalog, paidb
AS $fn$
    WITH d AS (DELETE FROM paidb.job_count_delta
               RETURNING user_name, virtual_cluster, state, job_priority, archived, n),
         s AS (SELECT user_name, virtual_cluster, state, job_priority, archived,
                      pg_catalog.sum(n) AS n, pg_catalog.count(*) AS rows
                 FROM d GROUP BY user_name, virtual_cluster, state, job_priority, archived),
         u AS (INSERT INTO paidb.job_count AS c (user_name, virtual_cluster, state, job_priority, archived, n)
               SELECT user_name, virtual_cluster, state, job_priority, archived, n FROM s
               ON CONFLICT ON CONSTRAINT job_count_key DO UPDATE SET n = c.n OPERATOR(pg_catalog.+) EXCLUDED.n)
    SELECT COALESCE(pg_catalog.sum(rows), 0)::bigint FROM s;
$fn$;

-- The counts of the jobs that exist when this script runs (an upgrade).
INSERT INTO paidb.job_count (user_name, virtual_cluster, state, job_priority, archived, n)
SELECT user_name, virtual_cluster, state, job_priority, archived, pg_catalog.count(*)
  FROM paidb.framework
 GROUP BY user_name, virtual_cluster, state, job_priority, archived;

-- Hide a job from the default listings (OpenPAI's `archived`), or show it
-- again; nothing else changes.  Returns whether the flag changed.
CREATE FUNCTION paidb.archive_job(name text, archived boolean DEFAULT true)
RETURNS boolean
LANGUAGE plpgsql
SECURITY DEFINER SET search_path = pg_catalog, paidb
AS $fn$
DECLARE
    was boolean;
BEGIN
    IF archive_job.name IS NULL OR archive_job.archived IS NULL THEN
        RAISE EXCEPTION 'name and archived must not be null' USING ERRCODE = '22004';
    END IF;
    SELECT f.archived INTO was FROM paidb.framework f WHERE f.name = archive_job.name FOR NO KEY UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'job "%" does not exist', archive_job.name USING ERRCODE = 'P0002';
    END IF;
    IF was = archive_job.archived THEN
        RETURN false;
    END IF;
    UPDATE paidb.framework f SET archived = archive_job.archived, updated_at = pg_catalog.now()
     WHERE f.name = archive_job.name;
    RETURN true;
END
$fn$;

-- The rows of one job in every table; the job row must be locked already.
CREATE FUNCTION paidb.delete_job_rows(name text)
RETURNS void
LANGUAGE sql
SET search_path = pg_catalog, paidb
AS $fn$
    DELETE FROM paidb.framework_history WHERE framework_name = delete_job_rows.name;
    DELETE FROM paidb.task_history WHERE framework_name = delete_job_rows.name;
    DELETE FROM paidb.pod WHERE framework_name = delete_job_rows.name;
    DELETE FROM paidb.framework_event WHERE framework_name = delete_job_rows.name;
    DELETE FROM paidb.pod_event WHERE framework_name = delete_job_rows.name;
    DELETE FROM paidb.tag WHERE framework_name = delete_job_rows.name;
    DELETE FROM paidb.framework WHERE framework.name = delete_job_rows.name;
$fn$;

-- Remove a job that is completed and gone from the API server, with its
-- history, task history, pods, events and tags.
CREATE FUNCTION paidb.delete_job(name text)
RETURNS void
LANGUAGE plpgsql
SECURITY DEFINER SET search_path = pg_catalog, paidb
AS $fn$
DECLARE
    f record;
BEGIN
    IF delete_job.name IS NULL THEN
        RAISE EXCEPTION 'name must not be null' USING ERRCODE = '22004';
    END IF;
    -- the same row lock a watch event takes: no event is merged half-way
    SELECT j.sub_state, j.state, j.api_server_deleted INTO f
      FROM paidb.framework j WHERE j.name = delete_job.name FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'job "%" does not exist', delete_job.name USING ERRCODE = 'P0002';
    END IF;
    IF f.sub_state IS DISTINCT FROM 'Completed' OR NOT f.api_server_deleted THEN
        RAISE EXCEPTION 'job "%" cannot be deleted', delete_job.name
            USING ERRCODE = '55000',
                  DETAIL = pg_catalog.format('The job is %s and %s.', COALESCE(f.state, 'UNKNOWN'),
                      CASE WHEN f.api_server_deleted THEN 'gone from the API server'
                           ELSE 'still in the API server' END),
                  HINT = 'Only a completed job that the API server has deleted can be deleted; stop it first.';
    END IF;
    PERFORM paidb.delete_job_rows(delete_job.name);
END
$fn$;

-- One retention batch (the retention worker's unit of work): delete up to
-- `batch` jobs that completed before now() - job_age and are gone from the
-- API server, then up to `batch` events last seen before now() - event_age.
-- NULL ages skip that part.  Jobs locked by someone else are skipped, never
-- waited for.  Returns what was deleted.
CREATE FUNCTION paidb.retention_batch(job_age interval, event_age interval, batch integer DEFAULT 100,
    OUT jobs_deleted bigint, OUT events_deleted bigint)
RETURNS record
LANGUAGE plpgsql
SECURITY DEFINER SET search_path = pg_catalog, paidb
AS $fn$
DECLARE
    victim text;
    n bigint;
BEGIN
    jobs_deleted := 0;
    events_deleted := 0;
    IF job_age IS NOT NULL THEN
        FOR victim IN
            SELECT f.name FROM paidb.framework f
             WHERE f.api_server_deleted AND f.sub_state = 'Completed'
               AND f.completion_time OPERATOR(pg_catalog.<) (pg_catalog.now() OPERATOR(pg_catalog.-) job_age)
             ORDER BY f.completion_time
             LIMIT batch
             FOR UPDATE SKIP LOCKED
        LOOP
            PERFORM paidb.delete_job_rows(victim);
            jobs_deleted := jobs_deleted OPERATOR(pg_catalog.+) 1;
        END LOOP;
    END IF;
    IF event_age IS NOT NULL THEN
        DELETE FROM paidb.framework_event e
         WHERE e.ctid = ANY (ARRAY(
            SELECT x.ctid FROM paidb.framework_event x
             WHERE x.updated_at OPERATOR(pg_catalog.<) (pg_catalog.now() OPERATOR(pg_catalog.-) event_age)
             LIMIT batch FOR UPDATE SKIP LOCKED));
        GET DIAGNOSTICS n = ROW_COUNT;
        events_deleted := n;
        DELETE FROM paidb.pod_event e
         WHERE e.ctid = ANY (ARRAY(
            SELECT x.ctid FROM paidb.pod_event x
             WHERE x.updated_at OPERATOR(pg_catalog.<) (pg_catalog.now() OPERATOR(pg_catalog.-) event_age)
             LIMIT batch FOR UPDATE SKIP LOCKED));
        GET DIAGNOSTICS n = ROW_COUNT;
        events_deleted := events_deleted OPERATOR(pg_catalog.+) n;
    END IF;
END
$fn$;

-- Indexes the life cycle needs: expired jobs, expired events.
-- (not on updated_at: an index on it would make every status update non-HOT)
CREATE INDEX framework_expired_idx ON paidb.framework (completion_time)
    WHERE api_server_deleted AND sub_state = 'Completed';
-- Events expire by when paidb last wrote them (updated_at), not by the
-- event's own timestamps: an old event the API server still lists is
-- written again and kept, instead of being deleted and re-listed forever.
CREATE INDEX framework_event_updated_at_idx ON paidb.framework_event (updated_at);
CREATE INDEX pod_event_updated_at_idx ON paidb.pod_event (updated_at);
CREATE INDEX tag_name_idx ON paidb.tag (name, framework_name);

-- Tags in submission order.  "The newest jobs with tag X" (rest-server's
-- tagsContain page) otherwise walks every job newest first and probes the
-- tags for each: its cost grows with the recent jobs that lack the tag (a
-- page took 2.7 s after 100,000 untagged submissions).  Each tag carries
-- its job's submission time and user, which never change once the job is
-- in the list (and job_list.c copies them if they do), so an index on the
-- tags gives that page in order; src/openpai_tags.c points rest-server's
-- query at it.  A tag without its job has nothing to carry: paidb refuses
-- one, as OpenPAI's foreign key did, and the upgrade drops those 0.1 kept.
DO $orphans$
DECLARE
    n bigint;
BEGIN
    DELETE FROM paidb.tag t
     WHERE NOT EXISTS (SELECT 1 FROM paidb.framework f WHERE f.name OPERATOR(pg_catalog.=) t.framework_name);
    GET DIAGNOSTICS n = ROW_COUNT;
    IF n OPERATOR(pg_catalog.>) 0 THEN
        RAISE NOTICE 'dropped % tags of jobs that are not in paidb.framework', n;
    END IF;
END
$orphans$;
ALTER TABLE paidb.tag ADD COLUMN job_submission_time timestamptz, ADD COLUMN job_user_name text;
COMMENT ON COLUMN paidb.tag.job_submission_time IS 'The job''s submission_time (kept by paidb)';
COMMENT ON COLUMN paidb.tag.job_user_name IS 'The job''s user_name (kept by paidb)';
UPDATE paidb.tag t SET job_submission_time = f.submission_time, job_user_name = f.user_name
  FROM paidb.framework f WHERE f.name OPERATOR(pg_catalog.=) t.framework_name;
ALTER TABLE paidb.tag ALTER COLUMN job_submission_time SET NOT NULL;
-- a tag page is a short walk: never worth parallel workers' start-up
ALTER TABLE paidb.tag SET (parallel_workers = 0);
CREATE INDEX tag_submission_idx ON paidb.tag (name, job_submission_time) INCLUDE (framework_name);
CREATE INDEX tag_user_submission_idx ON paidb.tag (name, job_user_name, job_submission_time) INCLUDE (framework_name);

-- A new tag (or one moved to another job) takes its job's columns; no job,
-- no tag.  Not on other updates: job_list.c sets the columns from inside
-- the job's own update, when paidb.framework still shows the old row.
CREATE FUNCTION paidb.tag_job_columns()
RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, paidb
AS $fn$
BEGIN
    -- Key-share, as a foreign key's check locks the row it refers to:
    -- delete_job and retention lock the job FOR UPDATE first, so a delete
    -- waits for this transaction and then deletes the tag too (retention
    -- skips the job), and a tag for a job being deleted waits for the
    -- delete and then finds no job.  Without it the delete missed the
    -- uncommitted tag and left it without its job.
    SELECT f.submission_time, f.user_name INTO NEW.job_submission_time, NEW.job_user_name
      FROM paidb.framework f WHERE f.name OPERATOR(pg_catalog.=) NEW.framework_name
       FOR KEY SHARE OF f;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'job "%" does not exist', NEW.framework_name
            USING ERRCODE = 'foreign_key_violation',
                  HINT = 'A tag belongs to a job in paidb.framework.';
    END IF;
    RETURN NEW;
END
$fn$;
CREATE TRIGGER tag_job_columns BEFORE INSERT OR UPDATE OF framework_name ON paidb.tag
    FOR EACH ROW EXECUTE FUNCTION paidb.tag_job_columns();

REVOKE ALL ON paidb.job_summary, paidb.job_count, paidb.job_count_delta, paidb.job_counts FROM PUBLIC;
GRANT SELECT ON paidb.job_summary, paidb.job_count, paidb.job_count_delta, paidb.job_counts
    TO paidb_writer, paidb_reader;
REVOKE ALL ON FUNCTION
    paidb.framework_summary_trigger(),
    paidb.tag_job_columns(),
    paidb.create_keyword_indexes(boolean),
    paidb.compact_job_counts(),
    paidb.archive_job(text, boolean),
    paidb.delete_job_rows(text),
    paidb.delete_job(text),
    paidb.retention_batch(interval, interval, integer)
    FROM PUBLIC;
GRANT EXECUTE ON FUNCTION
    paidb.compact_job_counts(),
    paidb.archive_job(text, boolean),
    paidb.delete_job(text)
    TO paidb_writer;
