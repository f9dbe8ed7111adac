#!/usr/bin/env bash
# Regenerate test/t/data/openpai-tables.sql: OpenPAI's tables created by
# Sequelize 5.21.3's sync() of lib/models.js (make-openpai-db.js --jobs 0)
# in schema opai of the database the PG* environment names, then dumped
# with pg_dump -s.  Needs `npm ci` here and pg_dump on the PATH; drops and
# recreates schema opai there.  test/fixture-ddl.test.js checks that the
# file still matches what sync() creates.
#
#   PGHOST=... PGPORT=... PGUSER=postgres PGDATABASE=scratch \
#       bash test/openpai/make-openpai-tables-sql.sh
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
OUT=$HERE/../t/data/openpai-tables.sql

node "$HERE/make-openpai-db.js" --schema opai --jobs 0 --drop --quiet
{
    cat <<'HEAD'
-- OpenPAI v1.2+'s tables in schema opai, as OpenPAI's Sequelize models
-- (test/openpai/lib/models.js, from the openpaidbsdk's documented schema)
-- create them: Sequelize 5.21.3's sync(), dumped with pg_dump -s.  Generated
-- by test/openpai/make-openpai-tables-sql.sh; do not edit by hand
-- (test/openpai/test/fixture-ddl.test.js compares it with sync()).  Used by
-- test/t/060_openpai_migration.pl, and by test/bench/openpai_import_bench.sh
-- and test/bench/queries.sh, which rename the schema with sed.
HEAD
    # \restrict carries a random key and needs psql 15.14+; the version lines vary.
    pg_dump -s -n opai --no-owner --no-privileges |
        grep -vE '^\\(un)?restrict |^-- Dumped (from|by) '
} > "$OUT.tmp"
mv "$OUT.tmp" "$OUT"
echo "wrote $OUT"
