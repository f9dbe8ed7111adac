-- paidb_openpai 0.2 -> 0.3 (ALTER EXTENSION paidb_openpai UPDATE).  A fresh
-- install runs 0.2 and then this script, so both end equal
-- (test/t/034_schema_upgrade.pl compares their dumps).

\echo Use "ALTER EXTENSION paidb_openpai UPDATE TO '0.3'" to load this file. \quit
