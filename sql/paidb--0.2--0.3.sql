-- paidb 0.2 -> 0.3 (ALTER EXTENSION paidb UPDATE).  Version 0.2 is
-- released: everything 0.3 changes in paidb's schema is here, and a fresh
-- install (0.1 -> 0.2 -> 0.3) runs it too, so both end equal
-- (test/t/034_schema_upgrade.pl compares their dumps).

\echo Use "ALTER EXTENSION paidb UPDATE TO '0.3'" to load this file. \quit
