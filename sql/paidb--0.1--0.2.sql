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

-------------------------------------------------------------------------------
-- §10 job queries and data life cycle
-------------------------------------------------------------------------------
