#!/usr/bin/env bash
# test/bench/footprint.sh — where a job's bytes go (issue 19).  On one fresh
# PostgreSQL, paidb's tables and OpenPAI's own schema (its Sequelize models'
# tables, TEXT snapshots) hold the same jobs:
#
#   typical      FOOTPRINT_JOBS (default 10,000) jobs of queries_data.sql:
#                4 instances, tags on a third, 10% retried 1-3 times;
#   retried      100 jobs retried 10 times: 10 attempts in the history and
#                one task retry in each (task history);
#   1,000-task   20 jobs of 1,000 instances (a ~600 KB snapshot) with one
#                retried attempt.
#
# For each: bytes per job split by part (job row, snapshot, job config, job
# indexes, history, task history, job list, counts, tags; "row" is the job
# table's heap and TOAST less the snapshot and job config as stored), then
# the snapshot under PostgreSQL's own compressions and under those the
# application could apply (test/bench/compression.py: zlib and zstd, with
# and without a preset dictionary).  Run as root (servers run as postgres).
set -uo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
. "$ROOT/test/lib/common.sh"
[ "$(id -u)" = 0 ] || { echo "run as root" >&2; exit 2; }

TYPICAL=${FOOTPRINT_JOBS:-10000}
RETRIED=100
BIG=20
HERE="$ROOT/test/bench"

paidb_build_install "$ROOT" >/dev/null || { echo "footprint: build failed" >&2; exit 1; }
W=$(mktemp -d /tmp/paidb-footprint.XXXXXX)
chmod 755 "$W"
chown postgres "$W"
PORT=$(paidb_free_port)
trap 'paidb_stop_pg "$W/pg"; rm -rf "$W"' EXIT
paidb_start_pg "$W/pg" "$PORT" "shared_preload_libraries = 'paidb'" "paidb.enabled = off" \
    "shared_buffers = '512MB'" "max_wal_size = '4GB'" || exit 1
export PGHOST=127.0.0.1 PGPORT=$PORT PGUSER=postgres PGDATABASE=footprint
PSQL="psql -X -q -v ON_ERROR_STOP=1"
cp "$HERE"/fixtures.sql "$HERE"/queries_data.sql "$HERE"/footprint.sql "$W/" || exit 1
sed -e '/^CREATE SCHEMA opai;$/d' -e "/set_config('search_path'/d" -e 's/\bopai\.//g' \
    "$ROOT/test/t/data/openpai-tables.sql" > "$W/openpai_schema.sql" || exit 1
chmod 644 "$W"/*.sql

psql -X -q -d postgres -c "CREATE DATABASE footprint" || exit 1
$PSQL -c "SET client_min_messages = warning" -c "CREATE EXTENSION paidb CASCADE" -f "$W/fixtures.sql" >/dev/null || exit 1
$PSQL -c "CREATE SCHEMA openpai_db" -c "SET search_path = openpai_db" -f "$W/openpai_schema.sql" >/dev/null || exit 1
$PSQL -f "$W/footprint.sql" >/dev/null || exit 1

# A reading of both schemas into table bench.<name>, after the counts are
# compacted, OpenPAI's tables refilled and everything vacuumed.
reading() {
    $PSQL -c "SET client_min_messages = warning" -c "SELECT paidb.compact_job_counts(), bench.copy_to_openpai()" >/dev/null || exit 1
    $PSQL -c "VACUUM ANALYZE" || exit 1
    $PSQL -c "CREATE TABLE bench.$1 AS SELECT * FROM bench.footprint_reading()" || exit 1
}

# Bytes per job of the jobs added between two readings, by part.
report() {  # report LABEL BEFORE AFTER JOBS TARGET
    $PSQL -At -F '|' -c "SELECT a.part, (a.paidb - b.paidb) / $4, (a.openpai - b.openpai) / $4
                           FROM bench.$3 a JOIN bench.$2 b USING (part) ORDER BY a.part" |
    awk -F'|' -v label="$1" -v target="$5" '
        BEGIN { printf "%s: bytes per job\n  %-22s %10s %10s\n", label, "part", "paidb", "OpenPAI" }
        { sub(/^[0-9]+ /, "", $1); printf "  %-22s %10d %10d\n", $1, $2, $3; p += $2; o += $3 }
        END { printf "  %-22s %10d %10d   paidb/OpenPAI %.2f (%s)\n", "total", p, o, p / o, target }'
}

echo "== bytes per job by part, paidb beside OpenPAI's schema holding the same jobs"
reading empty
$PSQL -v jobs="$TYPICAL" -f "$W/queries_data.sql" >/dev/null || exit 1
reading typical
$PSQL -c "SELECT bench.add_retried_jobs($RETRIED, 10)" >/dev/null || exit 1
reading retried
$PSQL -c "SELECT bench.add_big_jobs($BIG)" >/dev/null || exit 1
reading big
report "typical job (of $TYPICAL: 4 instances, tags on a third, 10% retried)" empty typical "$TYPICAL" \
    "target <= 1.0, goal 0.8"
report "job retried 10 times (of $RETRIED: 10 attempts and 10 task retries in the history)" typical retried "$RETRIED" \
    "target <= 1.0"
report "1,000-instance job with one retried attempt (of $BIG)" retried big "$BIG" "target <= 1.0"

echo
echo "== one snapshot as PostgreSQL stores it (median bytes)"
for k in "typical:^[0-9a-f]{32}\$:200" "retried (attempt 10):^r:50" "1,000-instance:^big:$BIG"; do
    IFS=: read -r label pattern n <<<"$k"
    echo "$label"
    $PSQL -At -F '|' -c "SELECT * FROM bench.snapshot_stored('$pattern', $n)" |
        awk -F'|' '{printf "  %-34s %9.0f\n", $1, $2}'
done

echo
echo "== one snapshot compressed by the application (median bytes; test/bench/compression.py)"
mkdir -p "$W/snap" || exit 1
$PSQL -At -F $'\t' -c "SELECT name, paidb.snapshot(framework)::text FROM paidb.framework WHERE name ~ '^[0-9a-f]{32}\$' ORDER BY name LIMIT 200" > "$W/snap/typical.tsv" || exit 1
$PSQL -At -F $'\t' -c "SELECT name, paidb.snapshot(framework)::text FROM paidb.framework WHERE name ~ '^[0-9a-f]{32}\$' ORDER BY name OFFSET 200 LIMIT 1000" > "$W/snap/train.tsv" || exit 1
$PSQL -At -F $'\t' -c "SELECT name, paidb.snapshot(framework)::text FROM paidb.framework WHERE name ~ '^big' ORDER BY name LIMIT 5" > "$W/snap/big.tsv" || exit 1
# jsonb's binary form, as stored uncompressed in a TOAST table (each value
# one chunk_id, assigned in insertion order)
$PSQL -c "CREATE TABLE bench.binary (v jsonb) WITH (toast_tuple_target = 128)" \
      -c "ALTER TABLE bench.binary ALTER v SET STORAGE EXTERNAL" \
      -c "INSERT INTO bench.binary SELECT paidb.snapshot(framework)::text::jsonb FROM paidb.framework WHERE name ~ '^[0-9a-f]{32}\$' ORDER BY name LIMIT 200" || exit 1
toast=$($PSQL -At -c "SELECT reltoastrelid::regclass FROM pg_class WHERE oid = 'bench.binary'::regclass") || exit 1
$PSQL -At -F $'\t' -c "SELECT chunk_id, encode(string_agg(chunk_data, ''::bytea ORDER BY chunk_seq), 'hex') FROM $toast GROUP BY chunk_id ORDER BY chunk_id" > "$W/snap/typical-binary.tsv" || exit 1
/usr/bin/python3 "$HERE/compression.py" "$W/snap" || exit 1
