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

-------------------------------------------------------------------------------
-- §9 OpenPAI compatibility (task history)
-------------------------------------------------------------------------------

-------------------------------------------------------------------------------
-- §10 job queries and data life cycle
-------------------------------------------------------------------------------
