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
