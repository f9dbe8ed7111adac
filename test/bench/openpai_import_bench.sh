#!/usr/bin/env bash
# Benchmark of openpai.import_database: 100,000 OpenPAI jobs (a ~3 KB
# request and a status with 4 task statuses each, ~5 KB of JSON text; 10%
# retried, with two framework_history rows each; a tag on every fifth job)
# in OpenPAI's own tables, imported into an empty paidb.  Printed beside the
# floor: a plain INSERT ... SELECT of the same rows (the text parsed as
# jsonb, nothing derived, no checks) into keyed tables of the same shape,
# in the same run.  Medians of BENCH_RUNS (default 3) runs.
#
# Needs: PGHOST/PGPORT/PGUSER/PGDATABASE set, CREATE EXTENSION paidb CASCADE and
# test/bench/fixtures.sql loaded, no paidb workers (it empties paidb's
# tables).  BENCH_IMPORT_JOBS changes the number of jobs.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)

RUNS=${BENCH_RUNS:-3}
JOBS=${BENCH_IMPORT_JOBS:-100000}
export PGOPTIONS="${PGOPTIONS:-} -c client_min_messages=warning"
PSQL=(psql -X -q -v ON_ERROR_STOP=1)

echo "building an OpenPAI database of $JOBS jobs (schema bench_opai) ..."
# OpenPAI's tables as test/t/060 builds them: pg_dump -s of Sequelize's sync()
# (test/openpai/make-openpai-tables-sql.sh), the schema renamed here
"${PSQL[@]}" >/dev/null <<SQL
CREATE EXTENSION IF NOT EXISTS paidb_openpai;
DROP SCHEMA IF EXISTS bench_opai CASCADE;
SQL
sed -e 's/SCHEMA opai;/SCHEMA bench_opai;/' -e 's/\bopai\./bench_opai./g' "$ROOT/test/t/data/openpai-tables.sql" |
    "${PSQL[@]}" >/dev/null || exit 1
"${PSQL[@]}" >/dev/null <<SQL
-- A finished job's status: 4 task statuses, retried jobs in their third attempt.
CREATE OR REPLACE FUNCTION bench.openpai_snapshot(name text, attempt int, code int) RETURNS jsonb LANGUAGE sql AS \$f\$
SELECT bench.request_3kb(name) || jsonb_build_object(
  'metadata', (bench.request_3kb(name) -> 'metadata') || jsonb_build_object('uid', md5(name), 'resourceVersion', '12345',
     'creationTimestamp', '2020-08-01T10:00:00Z'),
  'status', jsonb_build_object('state', 'Completed', 'startTime', '2020-08-01T10:00:00Z', 'runTime', '2020-08-01T10:01:00Z',
     'completionTime', '2020-08-01T11:00:00Z', 'transitionTime', '2020-08-01T11:00:00Z',
     'retryPolicyStatus', jsonb_build_object('totalRetriedCount', attempt, 'accountableRetriedCount', attempt, 'retryDelaySec', null),
     'attemptStatus', jsonb_build_object('id', attempt, 'startTime', '2020-08-01T10:00:00Z', 'runTime', '2020-08-01T10:01:00Z',
        'completionTime', '2020-08-01T11:00:00Z', 'instanceUID', attempt || '_' || md5(name),
        'completionStatus', jsonb_build_object('code', code, 'phrase', 'Succeeded', 'type', jsonb_build_object('name', 'Succeeded', 'attributes', '[]'::jsonb)),
        'taskRoleStatuses', jsonb_build_array(jsonb_build_object('name', 'worker', 'taskStatuses',
           (SELECT jsonb_agg(jsonb_build_object('index', i, 'instanceUID', '0_' || md5(name || i), 'state', 'Completed',
              'startTime', '2020-08-01T10:00:00Z', 'runTime', '2020-08-01T10:01:00Z', 'completionTime', '2020-08-01T11:00:00Z',
              'retryPolicyStatus', jsonb_build_object('totalRetriedCount', 0, 'accountableRetriedCount', 0),
              'attemptStatus', jsonb_build_object('id', 0, 'podName', name || '-worker-' || i, 'podUID', md5(name || 'pod' || i),
                 'podNodeName', 'node-' || i, 'podIP', '10.0.0.' || i, 'podHostIP', '10.1.0.' || i,
                 'completionStatus', jsonb_build_object('code', code, 'phrase', 'Succeeded'))))
              FROM generate_series(0, 3) i))))))
\$f\$;

INSERT INTO bench_opai.frameworks ("insertedAt", name, namespace, "jobName", "userName", "virtualCluster",
    "submissionTime", retries, "subState", state, snapshot, "requestSynced", "apiServerDeleted",
    "configSecretDef", "notifiedAtRunning", "updatedAt")
SELECT now(), n, 'default', 'mnist-train', 'alice', 'default', now() - i * interval '1 minute',
       CASE WHEN i % 10 = 0 THEN 2 ELSE 0 END, 'Completed', 'SUCCEEDED',
       bench.openpai_snapshot(n, CASE WHEN i % 10 = 0 THEN 2 ELSE 0 END, 0)::text, true, true, '', true, now()
  FROM (SELECT i, md5('job' || i) AS n FROM generate_series(1, $JOBS) i) s;
INSERT INTO bench_opai.framework_history
SELECT now(), md5(n || '+' || a || '+retry'), n, a, 'retry', bench.openpai_snapshot(n, a, 1)::text, now()
  FROM (SELECT md5('job' || i) AS n FROM generate_series(10, $JOBS, 10) i) s, generate_series(0, 1) a;
INSERT INTO bench_opai.tags SELECT now(), md5(n || '+tag'), n, 'tag' || (i % 7), now()
  FROM (SELECT i, md5('job' || i) AS n FROM generate_series(5, $JOBS, 5) i) s;
ANALYZE bench_opai.frameworks, bench_opai.framework_history, bench_opai.tags;

DROP TABLE IF EXISTS bench.floor_framework, bench.floor_history, bench.floor_tag;
CREATE TABLE bench.floor_framework (LIKE paidb.framework INCLUDING DEFAULTS INCLUDING CONSTRAINTS INCLUDING INDEXES);
CREATE TABLE bench.floor_history (LIKE paidb.framework_history INCLUDING ALL);
CREATE TABLE bench.floor_tag (LIKE paidb.tag INCLUDING ALL);
SQL
"${PSQL[@]}" -At -c "SELECT 'source: ' || (SELECT count(*) FROM bench_opai.frameworks) || ' jobs, '
  || (SELECT count(*) FROM bench_opai.framework_history) || ' history rows, '
  || (SELECT count(*) FROM bench_opai.tags) || ' tags, '
  || pg_size_pretty(pg_total_relation_size('bench_opai.frameworks')) || ' of frameworks, '
  || (SELECT round(avg(length(snapshot))) FROM bench_opai.frameworks) || ' bytes per snapshot'"
ROWS=$("${PSQL[@]}" -At -c "SELECT (SELECT count(*) FROM bench_opai.frameworks) + (SELECT count(*) FROM bench_opai.framework_history) + (SELECT count(*) FROM bench_opai.tags)")

median() { sort -n | awk '{a[NR]=$1} END {if (NR % 2) print a[(NR+1)/2]; else printf "%.3f\n", (a[NR/2]+a[NR/2+1])/2}'; }

# Seconds one statement takes (after emptying the targets), read from psql's \timing.
timed() {
    "${PSQL[@]}" -c "TRUNCATE paidb.framework, paidb.job_summary, paidb.job_count, paidb.job_count_delta, paidb.framework_history, paidb.tag, openpai.import_rejects,
                     bench.floor_framework, bench.floor_history, bench.floor_tag" -c CHECKPOINT
    "${PSQL[@]}" -c '\timing on' -c "$1" | sed -n 's/^Time: \([0-9.]*\) ms.*/\1/p' | tail -1 | awk '{printf "%.3f\n", $1 / 1000}'
}

IMPORT="SELECT sum(imported) FROM openpai.import_database('bench_opai')"
FLOOR="WITH f AS (INSERT INTO bench.floor_framework (name, submission_time, snapshot_packed, request_generation, request_synced,
         api_server_deleted, state, sub_state, retries, job_name, user_name, virtual_cluster, inserted_at, updated_at)
       SELECT name, \"submissionTime\", paidb.pack_snapshot(snapshot::jsonb, \"jobConfig\"), 1, \"requestSynced\", \"apiServerDeleted\", state, \"subState\",
              retries, \"jobName\", \"userName\", \"virtualCluster\", \"insertedAt\", \"updatedAt\" FROM bench_opai.frameworks RETURNING 1),
     h AS (INSERT INTO bench.floor_history (uid, framework_name, attempt_index, history_type, snapshot_packed, inserted_at, updated_at)
       SELECT uid, \"frameworkName\", \"attemptIndex\", \"historyType\", paidb.pack_snapshot(snapshot::jsonb), \"insertedAt\", \"updatedAt\"
         FROM bench_opai.framework_history RETURNING 1),
     t AS (INSERT INTO bench.floor_tag (uid, framework_name, name, inserted_at, updated_at)
       SELECT uid, \"frameworkName\", name, \"insertedAt\", \"updatedAt\" FROM bench_opai.tags RETURNING 1)
SELECT (SELECT count(*) FROM f) + (SELECT count(*) FROM h) + (SELECT count(*) FROM t)"

a=(); b=()
for i in $(seq "$RUNS"); do
    a+=("$(timed "$IMPORT")")
    b+=("$(timed "$FLOOR")")
done
A=$(printf '%s\n' "${a[@]}" | median)
B=$(printf '%s\n' "${b[@]}" | median)
imported=$("${PSQL[@]}" -At -c "SELECT count(*) FROM paidb.framework")
# the last run was the floor's: import once more to check what it took
"${PSQL[@]}" -At -c "TRUNCATE paidb.framework, paidb.job_summary, paidb.job_count, paidb.job_count_delta, paidb.framework_history, paidb.tag, openpai.import_rejects" \
    -c "$IMPORT" >/dev/null
check=$("${PSQL[@]}" -At -c "SELECT (SELECT count(*) FROM paidb.framework) || ' jobs, ' || (SELECT count(*) FROM paidb.framework_history)
   || ' history rows, ' || (SELECT count(*) FROM paidb.tag) || ' tags, ' || (SELECT count(*) FROM openpai.import_rejects) || ' rejects'")
echo "imported: $check"
echo "openpai.import_database: $(awk -v r="$ROWS" -v s="$A" 'BEGIN {printf "%.0f", r / s}') rows/s ($ROWS rows in ${A}s, median; runs: ${a[*]})"
echo "floor, plain INSERT ... SELECT of the same rows (text parsed as jsonb): $(awk -v r="$ROWS" -v s="$B" 'BEGIN {printf "%.0f", r / s}') rows/s (${B}s; runs: ${b[*]})"
awk -v a="$A" -v b="$B" 'BEGIN {printf "ratio import/floor (rows/s): %.2f\n", b / a}'
"${PSQL[@]}" -c "DROP SCHEMA bench_opai CASCADE" -c "DROP TABLE bench.floor_framework, bench.floor_history, bench.floor_tag"
