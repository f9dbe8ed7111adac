-- paidb 0.1 -> 0.2.  A fresh CREATE EXTENSION paidb runs paidb--0.1.sql and
-- then this script (PostgreSQL follows the update path when a version has no
-- install script of its own), so a fresh install and an upgraded one run the
-- very same statements; test/t/034_schema_upgrade.pl compares the two.
-- Safe under any search_path: every name is schema-qualified.

\echo Use "ALTER EXTENSION paidb UPDATE TO '0.2'" to load this file. \quit

-------------------------------------------------------------------------------
-- §8 trust boundaries (hardening)
-------------------------------------------------------------------------------

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
