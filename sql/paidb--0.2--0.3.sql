-- paidb 0.2 -> 0.3 (ALTER EXTENSION paidb UPDATE).  Version 0.2 is
-- released: everything 0.3 changes in paidb's schema is here, and a fresh
-- install (0.1 -> 0.2 -> 0.3) runs it too, so both end equal
-- (test/t/034_schema_upgrade.pl compares their dumps).

\echo Use "ALTER EXTENSION paidb UPDATE TO '0.3'" to load this file. \quit

-- Every table this update changes, locked at once at the start, the job
-- table first as every write takes it first: taken as the script goes (a
-- weaker lock early, a stronger one later on the same table), the update
-- deadlocked with submissions running meanwhile
-- (test/t/068_snapshot_conversion.pl).  The update is short: the stored
-- snapshots are converted after it, in batches.
LOCK TABLE paidb.framework, paidb.tag, paidb.framework_history, paidb.orphan, paidb.job_summary
    IN ACCESS EXCLUSIVE MODE;
-- The index builds below are what the update's lock lasts (a second for
-- each 200,000 jobs: test/bench/upgrade.sh): sort in memory.
SET LOCAL maintenance_work_mem = '256MB';

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
-- (the unique key (framework_name, name) serves the cascade's look-ups;
-- validated after the update, with paidb.framework's foreign keys)
ALTER TABLE paidb.tag ADD CONSTRAINT tag_framework_name_fkey
    FOREIGN KEY (framework_name) REFERENCES paidb.framework (name) ON DELETE CASCADE NOT VALID;

-- pg_trgm is required from 0.3 on (paidb.control: CREATE EXTENSION paidb
-- CASCADE brings it), so the keyword indexes exist on every install and
-- upgrade; a 0.2 database made without pg_trgm gets them here.
SELECT paidb.create_keyword_indexes();

-- rest-server's keyword search beside a user (`... LIKE '%kw%' ... AND
-- "userName" IN (u)`) read every job of the user from the table to test the
-- keyword: 53-83 ms for its count at a million jobs.  The user's index
-- carries the searched columns, so the count (and the page) read the index
-- alone: 0.5 ms at 100,000 jobs where the table took 116 ms, for ~18 more
-- bytes per job.  Built after the update (paidb._deferred_index_statements
-- below); 0.2's serves until then.
ALTER INDEX paidb.job_summary_user_name_idx RENAME TO job_summary_user_name_0_2_idx;

-------------------------------------------------------------------------------
-- Many clusters from one database (SPEC §11)
-------------------------------------------------------------------------------

-- The clusters paidb drives.  NULL columns fall back to the paidb.k8s_* and
-- paidb.retain_mode settings, so the row 'default' (all NULL) is exactly
-- 0.2's single API server.  Credentials stay in the files the row names.
-- The launcher reads this table every second: inserting a row starts the
-- cluster's workers, changing its address or credential files restarts
-- them, and 'removed' (or deleting the row) stops them.
CREATE TABLE paidb.cluster (
    name text PRIMARY KEY
        CONSTRAINT cluster_name_check
        CHECK (name OPERATOR(pg_catalog.~) '^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$'),
    api_server text
        CONSTRAINT cluster_api_server_check
        CHECK (api_server OPERATOR(pg_catalog.~*) '^https?://[^[:space:]]+$'
               AND pg_catalog.octet_length(api_server) OPERATOR(pg_catalog.<) 1024),
    namespace text
        CONSTRAINT cluster_namespace_check
        CHECK (namespace OPERATOR(pg_catalog.~) '^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$'),
    token_file text
        CONSTRAINT cluster_token_file_check
        CHECK (token_file OPERATOR(pg_catalog.<>) ''
               AND pg_catalog.octet_length(token_file) OPERATOR(pg_catalog.<) 1024),
    ca_file text
        CONSTRAINT cluster_ca_file_check
        CHECK (ca_file OPERATOR(pg_catalog.<>) ''
               AND pg_catalog.octet_length(ca_file) OPERATOR(pg_catalog.<) 1024),
    retain_mode boolean,
    state text NOT NULL DEFAULT 'active'
        CONSTRAINT cluster_state_check
        CHECK (state OPERATOR(pg_catalog.=) ANY (ARRAY['active', 'cordoned', 'removed'])),
    inserted_at timestamptz NOT NULL DEFAULT pg_catalog.now(),
    updated_at timestamptz NOT NULL DEFAULT pg_catalog.now()
);
INSERT INTO paidb.cluster (name) VALUES ('default');

CREATE FUNCTION paidb.cluster_updated_at()
RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, paidb
AS $fn$
BEGIN
    NEW.updated_at := pg_catalog.now();
    RETURN NEW;
END
$fn$;
CREATE TRIGGER cluster_updated_at BEFORE UPDATE ON paidb.cluster
    FOR EACH ROW EXECUTE FUNCTION paidb.cluster_updated_at();

-- A new job of a virtual cluster without a cluster argument goes here.
CREATE TABLE paidb.virtual_cluster_placement (
    virtual_cluster text PRIMARY KEY,
    cluster text NOT NULL REFERENCES paidb.cluster (name)
);

-- Every job belongs to one cluster; 0.2's jobs to 'default'.  A constant
-- default adds the column without rewriting the table; the foreign keys
-- and the check are validated after the update
-- (paidb._finish_snapshot_conversion), by a scan that blocks no write.
ALTER TABLE paidb.framework
    ADD COLUMN cluster text NOT NULL DEFAULT 'default',
    ADD COLUMN placement integer NOT NULL DEFAULT 1,
    ADD COLUMN moving_from text;
ALTER TABLE paidb.framework
    ADD CONSTRAINT framework_cluster_fkey FOREIGN KEY (cluster) REFERENCES paidb.cluster (name) NOT VALID,
    ADD CONSTRAINT framework_moving_from_fkey FOREIGN KEY (moving_from) REFERENCES paidb.cluster (name) NOT VALID,
    ADD CONSTRAINT framework_placement_check CHECK (placement OPERATOR(pg_catalog.>=) 1) NOT VALID;
-- The name rule of SPEC §2 (^[a-z0-9]{1,63}$) as one call of C: PostgreSQL
-- checks every constraint on every insert and update of a job, reading its
-- expression again for each statement, and its regex engine unrolls the
-- bounded repetition (~11 us a row; put_framework_request's checks 32 us
-- with the regex, 18 with a cheaper regex, less with this).  The same
-- rule, so 0.2's rows need no fix; validated after the update like the rest.
CREATE FUNCTION paidb._framework_name_valid(name text) RETURNS boolean
LANGUAGE c IMMUTABLE STRICT PARALLEL SAFE
AS 'MODULE_PATHNAME', 'paidb_framework_name_valid';
ALTER TABLE paidb.framework
    DROP CONSTRAINT framework_name_valid,
    ADD CONSTRAINT framework_name_valid CHECK (paidb._framework_name_valid(name)) NOT VALID;
-- The indexes 0.3 adds or changes on the job tables read every job to
-- build: at a million jobs they were most of the update's lock (a second
-- for each 200,000 jobs; test/bench/upgrade.sh).  They are built after the
-- update -- by the retention worker CONCURRENTLY, by
-- paidb.convert_snapshots() plainly, and at once where there are no jobs
-- (a fresh install) -- from these statements; 0.2's indexes serve meanwhile
-- (renamed *_0_2_idx, dropped once the new ones are valid).  An index a
-- failed concurrent build left invalid is dropped and built again.
--   framework_moving_from_idx: jobs moving out of a cluster (few at any time)
--   framework_cluster_idx: a cluster's jobs (remove_cluster, cluster_status,
--     a re-list): few distinct values, which a deduplicated b-tree keeps small
--   framework_needs_sync_idx: the sync worker's work list, per cluster: one
--     cluster's due rows never stand in front of another's.  NULL (due now)
--     sorts as -infinity, so "due by now" is a range of the index: a claim
--     reads the due rows only, not every row sent and not yet confirmed by
--     the watch (0.2 read them all)
--   framework_needs_sync_idx and framework_expired_idx say "completed" with
--     the job state (SUCCEEDED, FAILED or STOPPED: exactly the rows whose
--     sub_state is Completed, src/job_state.c) instead of sub_state.  Nearly
--     every status update changes sub_state, and an update that changes a
--     column an index reads (in its predicate too) is never HOT; the job
--     state changes two or three times in a job's life (test/bench/hot.sh).
--     Their queries name both, so 0.2's indexes serve until the new ones
--     are built.
ALTER INDEX paidb.framework_needs_sync_idx RENAME TO framework_needs_sync_0_2_idx;
ALTER INDEX paidb.framework_expired_idx RENAME TO framework_expired_0_2_idx;
-- The expired jobs, as 0.2 found them, and in the job state that
-- framework_expired_idx's predicate reads (the same rows).
CREATE OR REPLACE FUNCTION paidb.retention_batch(job_age interval, event_age interval, batch integer DEFAULT 100,
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
               AND f.state IN ('SUCCEEDED', 'FAILED', 'STOPPED')
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
CREATE FUNCTION paidb._deferred_index_statements(concurrent boolean)
RETURNS SETOF text
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, paidb
AS $fn$
DECLARE
    how text := CASE WHEN concurrent THEN 'CONCURRENTLY ' ELSE '' END;
    ix record;
    valid boolean;
BEGIN
    FOR ix IN SELECT * FROM (VALUES
        (1, 'framework_moving_from_idx', 'paidb.framework (moving_from) WHERE moving_from IS NOT NULL', NULL),
        (2, 'framework_needs_sync_idx', 'paidb.framework (cluster, '
            || '(COALESCE(next_sync_at, ''-infinity''::timestamptz)), name) '
            || 'WHERE NOT api_server_deleted '
            || 'AND (NOT request_synced OR state IN (''SUCCEEDED'', ''FAILED'', ''STOPPED''))',
            'framework_needs_sync_0_2_idx'),
        (3, 'framework_cluster_idx', 'paidb.framework (cluster, state)', NULL),
        (4, 'job_summary_user_name_idx', 'paidb.job_summary (user_name, submission_time) '
            || 'INCLUDE (name, job_name, virtual_cluster)', 'job_summary_user_name_0_2_idx'),
        (5, 'framework_expired_idx', 'paidb.framework (completion_time) '
            || 'WHERE api_server_deleted AND state IN (''SUCCEEDED'', ''FAILED'', ''STOPPED'')',
            'framework_expired_0_2_idx'))
        v(n, name, def, replaces) ORDER BY n
    LOOP
        valid := (SELECT i.indisvalid FROM pg_index i
                   WHERE i.indexrelid OPERATOR(pg_catalog.=) pg_catalog.to_regclass('paidb.' || ix.name));
        IF NOT valid THEN
            RETURN NEXT 'DROP INDEX ' || how || 'paidb.' || ix.name;
        END IF;
        IF valid IS NOT TRUE THEN
            RETURN NEXT 'CREATE INDEX ' || how || ix.name || ' ON ' || ix.def;
        END IF;
        IF ix.replaces IS NOT NULL AND pg_catalog.to_regclass('paidb.' || ix.replaces) IS NOT NULL THEN
            RETURN NEXT 'DROP INDEX ' || how || 'paidb.' || ix.replaces;
        END IF;
    END LOOP;
END
$fn$;
REVOKE ALL ON FUNCTION paidb._deferred_index_statements(boolean) FROM PUBLIC;
GRANT SELECT (cluster, placement, moving_from) ON paidb.framework TO paidb_reader;

-- Orphans are per cluster: the same name may be one in two clusters.
ALTER TABLE paidb.orphan
    ADD COLUMN cluster text NOT NULL DEFAULT 'default'
        REFERENCES paidb.cluster (name) ON DELETE CASCADE;
ALTER TABLE paidb.orphan DROP CONSTRAINT orphan_pkey;
ALTER TABLE paidb.orphan ADD CONSTRAINT orphan_pkey PRIMARY KEY (cluster, name);

REVOKE ALL ON paidb.cluster, paidb.virtual_cluster_placement FROM PUBLIC;
GRANT SELECT ON paidb.cluster, paidb.virtual_cluster_placement TO paidb_writer, paidb_reader;

-- put_framework_request gains the cluster of a new job.
DROP FUNCTION paidb.put_framework_request(jsonb, timestamptz, jsonb);
CREATE FUNCTION paidb.put_framework_request(request jsonb,
    submission_time timestamptz DEFAULT pg_catalog.now(),
    add_ons jsonb DEFAULT '{}',
    cluster text DEFAULT NULL)
RETURNS TABLE (name text, request_generation bigint, created boolean, changed boolean)
AS 'MODULE_PATHNAME', 'paidb_put_framework_request'
LANGUAGE C VOLATILE
SECURITY DEFINER SET search_path = pg_catalog, paidb;
REVOKE ALL ON FUNCTION paidb.put_framework_request(jsonb, timestamptz, jsonb, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION paidb.put_framework_request(jsonb, timestamptz, jsonb, text) TO paidb_writer;

-- Move a waiting job to another active cluster: the new cluster creates it
-- only once the old one has confirmed its framework gone, unless force.
CREATE FUNCTION paidb.move_job(name text, cluster text, force boolean DEFAULT false)
RETURNS boolean
AS 'MODULE_PATHNAME', 'paidb_move_job'
LANGUAGE C VOLATILE
SECURITY DEFINER SET search_path = pg_catalog, paidb;
REVOKE ALL ON FUNCTION paidb.move_job(text, text, boolean) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION paidb.move_job(text, text, boolean) TO paidb_writer;

-- A cluster stops taking part: refused while it has a job that is not
-- completed and gone from its API server (cordon it first and let them
-- finish).  The row itself can be deleted once no job refers to it.
CREATE FUNCTION paidb.remove_cluster(name text)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, paidb
AS $fn$
DECLARE
    live bigint;
BEGIN
    IF remove_cluster.name IS NULL THEN
        RAISE EXCEPTION 'name must not be null' USING ERRCODE = '22004';
    END IF;
    -- waits for submissions placing a job in it (they hold FOR KEY SHARE)
    PERFORM 1 FROM paidb.cluster c WHERE c.name = remove_cluster.name FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'cluster "%" does not exist', remove_cluster.name USING ERRCODE = '22023';
    END IF;
    SELECT pg_catalog.count(*) INTO live
      FROM paidb.framework f
     WHERE (f.cluster = remove_cluster.name OR f.moving_from = remove_cluster.name)
       AND NOT (f.sub_state IS NOT DISTINCT FROM 'Completed' AND f.api_server_deleted);
    IF live > 0 THEN
        RAISE EXCEPTION 'cluster "%" has % jobs that are not completed and deleted', remove_cluster.name, live
            USING ERRCODE = '55000',
                  HINT = 'Cordon it (UPDATE paidb.cluster SET state = ''cordoned''), let its jobs finish, then remove it.';
    END IF;
    UPDATE paidb.cluster c SET state = 'removed' WHERE c.name = remove_cluster.name;
END
$fn$;
REVOKE ALL ON FUNCTION paidb.remove_cluster(text) FROM PUBLIC;

-- status() gains each worker's cluster.
DROP FUNCTION paidb.status();
CREATE FUNCTION paidb.status(
    OUT worker text, OUT pid integer, OUT state text,
    OUT started_at timestamptz, OUT last_activity timestamptz,
    OUT resource_version text, OUT events_applied bigint,
    OUT requests_sent bigint, OUT errors bigint, OUT last_error text,
    OUT cluster text)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'paidb_status'
LANGUAGE C VOLATILE;
REVOKE ALL ON FUNCTION paidb.status() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION paidb.status() TO paidb_writer, paidb_reader;

-- What the running workers know of each cluster (shared memory).
CREATE FUNCTION paidb._cluster_workers(
    OUT cluster text, OUT workers integer, OUT last_contact timestamptz,
    OUT resource_version text, OUT last_error text)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'paidb_cluster_workers'
LANGUAGE C VOLATILE;
REVOKE ALL ON FUNCTION paidb._cluster_workers() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION paidb._cluster_workers() TO paidb_writer, paidb_reader;

-- One row per cluster: its jobs by state, what is left to sync, and how
-- its workers and API server are doing.
CREATE VIEW paidb.cluster_status AS
SELECT c.name AS cluster,
       c.state,
       COALESCE((SELECT pg_catalog.jsonb_object_agg(s.state, s.n)
                   FROM (SELECT f.state, pg_catalog.count(*) AS n
                           FROM paidb.framework f
                          WHERE f.cluster = c.name
                          GROUP BY f.state) s), '{}'::jsonb) AS jobs,
       (SELECT pg_catalog.count(*) FROM paidb.framework f
         WHERE f.cluster = c.name AND NOT f.api_server_deleted
           AND (NOT f.request_synced OR f.sub_state = 'Completed')) AS unsynced,
       (SELECT pg_catalog.count(*) FROM paidb.framework f
         WHERE f.moving_from = c.name) AS moving_out,
       w.last_contact,
       w.resource_version,
       COALESCE(w.workers, 0) AS workers,
       w.last_error
  FROM paidb.cluster c
  LEFT JOIN paidb._cluster_workers() w ON w.cluster = c.name;
REVOKE ALL ON paidb.cluster_status FROM PUBLIC;
GRANT SELECT ON paidb.cluster_status TO paidb_writer, paidb_reader;

-- Stored snapshots (issue 19; docs/design.md "Stored snapshots"): a
-- snapshot is kept packed -- its JSON text compressed by zstd against a
-- dictionary of what every OpenPAI framework carries, without the job
-- config the row holds in job_config -- in snapshot_packed (STORAGE
-- EXTERNAL: PostgreSQL does not compress it again).  SQL reads it as jsonb
-- as before through paidb.snapshot(row): f.snapshot for a row f of
-- paidb.framework or paidb.framework_history (inlined, so the planner reads
-- the two columns only).  Roles granted columns, not the whole row
-- (paidb_reader), call paidb.unpack_snapshot(snapshot_packed, job_config).
-- pack_snapshot's as_job_row: packed as a job row stores it (lz4 until the
-- framework has completed, zstd after); by default zstd, as history is.
CREATE FUNCTION paidb.pack_snapshot(snapshot jsonb, job_config text DEFAULT NULL, as_job_row boolean DEFAULT false)
RETURNS bytea
AS 'MODULE_PATHNAME', 'paidb_snapshot_pack'
LANGUAGE C IMMUTABLE PARALLEL SAFE;
CREATE FUNCTION paidb.unpack_snapshot(packed bytea, job_config text DEFAULT NULL)
RETURNS jsonb
AS 'MODULE_PATHNAME', 'paidb_snapshot_unpack'
LANGUAGE C IMMUTABLE PARALLEL SAFE;

-- Converting (docs/operations.md, "From 0.2 to 0.3"): the update itself only
-- adds snapshot_packed and renames 0.2's column to snapshot_0_2, so that
-- it holds paidb.framework's lock for no longer than the index builds
-- below.  The retention worker then packs the rows in batches of short
-- transactions (paidb._convert_snapshot_batch; CALL paidb.convert_snapshots()
-- does the same in the foreground) and, once every row is packed, drops
-- snapshot_0_2 (paidb._finish_snapshot_conversion).  Meanwhile
-- paidb.snapshot(row) reads whichever column holds the row's snapshot, and
-- every write stores it packed.  A database without rows finishes here.
ALTER TABLE paidb.framework ADD COLUMN snapshot_packed bytea;
ALTER TABLE paidb.framework ALTER COLUMN snapshot_packed SET STORAGE EXTERNAL;
ALTER TABLE paidb.framework ALTER COLUMN snapshot DROP NOT NULL;
ALTER TABLE paidb.framework RENAME COLUMN snapshot TO snapshot_0_2;
ALTER TABLE paidb.framework_history ADD COLUMN snapshot_packed bytea;
ALTER TABLE paidb.framework_history ALTER COLUMN snapshot_packed SET STORAGE EXTERNAL;
ALTER TABLE paidb.framework_history RENAME COLUMN snapshot TO snapshot_0_2;
-- Rows are now ~1-1.5 KB: the default TOAST target keeps them whole, with
-- room on the page for HOT updates (fillfactor 75).
ALTER TABLE paidb.framework RESET (toast_tuple_target);

CREATE FUNCTION paidb.snapshot(f paidb.framework) RETURNS jsonb
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN COALESCE(paidb.unpack_snapshot(f.snapshot_packed, f.job_config), f.snapshot_0_2);
COMMENT ON FUNCTION paidb.snapshot(paidb.framework) IS
    'The job''s snapshot as jsonb: f.snapshot for a row f of paidb.framework';
CREATE FUNCTION paidb.snapshot(h paidb.framework_history) RETURNS jsonb
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN COALESCE(paidb.unpack_snapshot(h.snapshot_packed, NULL), h.snapshot_0_2);
COMMENT ON FUNCTION paidb.snapshot(paidb.framework_history) IS
    'The attempt''s snapshot as jsonb: h.snapshot for a row h of paidb.framework_history';

-- One batch: pack the snapshots of up to batch_size rows of tab
-- ('framework' or 'framework_history') whose key is after `after` (NULL:
-- from the start), in key order.  Rows another transaction holds are
-- skipped (a write stores its row packed anyway; the sweep at the end finds
-- any left).  Returns the rows packed and the last key read, NULL at the
-- end of the table.
CREATE FUNCTION paidb._convert_snapshot_batch(tab text, after text, batch_size integer,
                                              OUT converted bigint, OUT last_key text)
LANGUAGE plpgsql
SECURITY DEFINER SET search_path = pg_catalog, paidb
AS $fn$
DECLARE
    key text := CASE tab WHEN 'framework' THEN 'name' WHEN 'framework_history' THEN 'uid' END;
    config text := CASE tab WHEN 'framework' THEN 't.job_config' ELSE 'NULL' END;
BEGIN
    IF key IS NULL THEN
        RAISE EXCEPTION 'paidb._convert_snapshot_batch: unknown table "%"', tab
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    converted := 0;
    IF NOT EXISTS (SELECT 1 FROM pg_attribute
                    WHERE attrelid = pg_catalog.format('paidb.%I', tab)::regclass
                      AND attname = 'snapshot_0_2' AND NOT attisdropped) THEN
        RETURN;     -- nothing to convert (last_key NULL)
    END IF;
    EXECUTE pg_catalog.format($q$
        WITH keys AS (SELECT %1$I AS k, snapshot_0_2 IS NOT NULL AS todo FROM paidb.%2$I
                       WHERE %1$I > $1 ORDER BY %1$I LIMIT $2),
             locked AS (SELECT t.%1$I AS k FROM paidb.%2$I t JOIN keys ON keys.k = t.%1$I
                         WHERE keys.todo FOR UPDATE OF t SKIP LOCKED),
             packed AS (UPDATE paidb.%2$I t
                           SET snapshot_packed = COALESCE(t.snapshot_packed,
                                                          paidb.pack_snapshot(t.snapshot_0_2, %3$s)),
                               snapshot_0_2 = NULL
                          FROM locked WHERE t.%1$I = locked.k AND t.snapshot_0_2 IS NOT NULL
                        RETURNING 1)
        SELECT (SELECT count(*) FROM packed), (SELECT max(k) FROM keys)$q$, key, tab, config)
      INTO converted, last_key
      USING COALESCE(after, ''), batch_size;
END
$fn$;

-- The end of the conversion, one step per call, each in the caller's
-- transaction: 'rows left' while a row is still to pack, 'indexes left'
-- while paidb._deferred_index_statements has any (the caller runs them:
-- a function cannot build an index CONCURRENTLY); then, once each,
-- a NOT VALID check that snapshot_packed is set ('checking'), its
-- validation with the foreign keys the update added NOT VALID (a scan that
-- blocks no write: 'validated'), and the swap ('done'): the final
-- paidb.snapshot(row), paidb_openpai's views, the old columns dropped and
-- snapshot_packed NOT NULL (proved by the check, so no scan).  The steps
-- that take paidb.framework's exclusive lock wait for it at most a second
-- and answer 'busy' rather than queue submissions behind them; 'kept' when
-- other views still read snapshot_0_2.
CREATE FUNCTION paidb._finish_snapshot_conversion() RETURNS text
LANGUAGE plpgsql
SECURITY DEFINER SET search_path = pg_catalog, paidb
AS $fn$
DECLARE
    has_check boolean;
    checked boolean;
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_attribute
                    WHERE attrelid IN ('paidb.framework'::regclass, 'paidb.framework_history'::regclass)
                      AND attname = 'snapshot_0_2' AND NOT attisdropped) THEN
        RETURN 'done';
    END IF;
    IF EXISTS (SELECT 1 FROM paidb.framework WHERE snapshot_0_2 IS NOT NULL)
       OR EXISTS (SELECT 1 FROM paidb.framework_history WHERE snapshot_0_2 IS NOT NULL) THEN
        RETURN 'rows left';
    END IF;
    IF EXISTS (SELECT 1 FROM paidb._deferred_index_statements(false)) THEN
        RETURN 'indexes left';
    END IF;
    SELECT true, convalidated INTO has_check, checked FROM pg_constraint
     WHERE conrelid = 'paidb.framework'::regclass AND conname = 'framework_snapshot_packed_check';
    BEGIN
        PERFORM pg_catalog.set_config('lock_timeout', '1s', true);
        IF has_check IS NULL THEN
            ALTER TABLE paidb.framework ADD CONSTRAINT framework_snapshot_packed_check
                CHECK (snapshot_packed IS NOT NULL) NOT VALID;
            RETURN 'checking';
        ELSIF NOT checked THEN
            ALTER TABLE paidb.framework VALIDATE CONSTRAINT framework_snapshot_packed_check;
            ALTER TABLE paidb.framework VALIDATE CONSTRAINT framework_cluster_fkey;
            ALTER TABLE paidb.framework VALIDATE CONSTRAINT framework_moving_from_fkey;
            ALTER TABLE paidb.framework VALIDATE CONSTRAINT framework_placement_check;
            ALTER TABLE paidb.framework VALIDATE CONSTRAINT framework_name_valid;
            ALTER TABLE paidb.tag VALIDATE CONSTRAINT tag_framework_name_fkey;
            RETURN 'validated';
        END IF;
        CREATE OR REPLACE FUNCTION paidb.snapshot(f paidb.framework) RETURNS jsonb
        LANGUAGE sql IMMUTABLE PARALLEL SAFE
        RETURN paidb.unpack_snapshot(f.snapshot_packed, f.job_config);
        CREATE OR REPLACE FUNCTION paidb.snapshot(h paidb.framework_history) RETURNS jsonb
        LANGUAGE sql IMMUTABLE PARALLEL SAFE
        RETURN paidb.unpack_snapshot(h.snapshot_packed, NULL);
        IF pg_catalog.to_regprocedure('openpai._define_snapshot_views(boolean)') IS NOT NULL THEN
            EXECUTE 'SELECT openpai._define_snapshot_views(false)';
        END IF;
        ALTER TABLE paidb.framework DROP COLUMN snapshot_0_2;
        ALTER TABLE paidb.framework_history DROP COLUMN snapshot_0_2;
        ALTER TABLE paidb.framework ALTER COLUMN snapshot_packed SET NOT NULL;
        ALTER TABLE paidb.framework DROP CONSTRAINT framework_snapshot_packed_check;
        RETURN 'done';
    EXCEPTION
        WHEN lock_not_available THEN
            RETURN 'busy';
        WHEN dependent_objects_still_exist THEN
            RAISE NOTICE 'paidb.framework.snapshot_0_2 (emptied) is kept while other views read it'
                USING HINT = 'Make them read paidb.snapshot(row) instead; the column is dropped then.';
            RETURN 'kept';
    END;
END
$fn$;

-- Every batch in the foreground, with a commit after each (CALL it outside
-- a transaction block); what the retention worker does on its own.
CREATE PROCEDURE paidb.convert_snapshots(batch_size integer DEFAULT 500)
LANGUAGE plpgsql
AS $fn$
DECLARE
    tab text;
    after text;
    state text;
    stmt text;
BEGIN
    LOOP
        FOR stmt IN SELECT * FROM paidb._deferred_index_statements(false) LOOP
            EXECUTE stmt;
            COMMIT;
        END LOOP;
        FOREACH tab IN ARRAY ARRAY['framework', 'framework_history'] LOOP
            after := NULL;
            LOOP
                SELECT b.last_key INTO after FROM paidb._convert_snapshot_batch(tab, after, batch_size) b;
                COMMIT;
                EXIT WHEN after IS NULL;
            END LOOP;
        END LOOP;
        LOOP
            state := paidb._finish_snapshot_conversion();
            COMMIT;
            EXIT WHEN state NOT IN ('checking', 'validated', 'busy');
            IF state = 'busy' THEN
                PERFORM pg_catalog.pg_sleep(1);
            END IF;
        END LOOP;
        EXIT WHEN state IN ('done', 'kept');
    END LOOP;
END
$fn$;

REVOKE ALL ON FUNCTION paidb._convert_snapshot_batch(text, text, integer),
    paidb._finish_snapshot_conversion() FROM PUBLIC;
REVOKE ALL ON PROCEDURE paidb.convert_snapshots(integer) FROM PUBLIC;

-- The job list's rows change 9 times in a job's life (test/bench/hot.sh,
-- the simulated controller's lives); most changes touch no indexed column
-- (sub_state, launch_time, exit code) and are HOT when the page has room.
-- Measured HOT share and bytes per job after the lives and a VACUUM: full
-- pages (0.2) 52%, 627 B heap + 2,949 B indexes; fillfactor 70: 70%
-- (nearly every change that can be), 422 + 2,310 B.  Rows written from now
-- on leave the room; existing pages stay as they are.
ALTER TABLE paidb.job_summary SET (fillfactor = 70);

-- no jobs (a fresh install): the indexes and the end, now
DO $do$
DECLARE
    stmt text;
BEGIN
    IF NOT EXISTS (SELECT 1 FROM paidb.framework) THEN
        FOR stmt IN SELECT * FROM paidb._deferred_index_statements(false) LOOP
            EXECUTE stmt;
        END LOOP;
    END IF;
    WHILE paidb._finish_snapshot_conversion() IN ('checking', 'validated') LOOP
    END LOOP;
END
$do$;
GRANT SELECT (snapshot_packed) ON paidb.framework TO paidb_reader;
