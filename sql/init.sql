-- Installing, dropping and installing again; the upgrade path.
CREATE EXTENSION paidb CASCADE;
SELECT extversion FROM pg_extension WHERE extname = 'paidb';
SELECT count(*) AS tables FROM pg_tables WHERE schemaname = 'paidb';
DROP EXTENSION paidb;
-- PostgreSQL keeps a schema named by the control file, but nothing is left in it
SELECT count(*) AS objects_left FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = 'paidb';
SELECT count(*) AS functions_left FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace WHERE n.nspname = 'paidb';
CREATE EXTENSION paidb VERSION '0.1' CASCADE;
ALTER EXTENSION paidb UPDATE;
SELECT extversion, extrelocatable FROM pg_extension WHERE extname = 'paidb';
-- the extension lives in its own schema and cannot move
CREATE SCHEMA elsewhere;
ALTER EXTENSION paidb SET SCHEMA elsewhere;
DROP SCHEMA elsewhere;
-- works under a hostile search_path
SET search_path = pg_temp;
SELECT name, request_generation, created, changed
  FROM paidb.put_framework_request('{"metadata": {"name": "initjob"}, "spec": {"executionType": "Start"}}');
RESET search_path;
SELECT name, state, request_generation FROM paidb.framework;
-- one row per worker, whether or not paidb is preloaded here
SELECT worker, state IS NOT NULL AS has_state FROM paidb.status() ORDER BY worker;
