#!/usr/bin/env bash
# test/bench/queries.sh — job queries and the data life cycle at scale
# (issue 10, docs/queries.md).  On one fresh PostgreSQL:
#
#   1. PAIDB_BENCH_JOBS (default 1,000,000) realistic jobs, built set-based
#      (queries_data.sql) in a database at paidb 0.1, then ALTER EXTENSION
#      paidb UPDATE (which builds the job list and counts from them: timed);
#      the same jobs copied into OpenPAI's own schema (its Sequelize models'
#      tables and indexes, TEXT snapshots: test/t/data/openpai-tables.sql,
#      the dump the migration test loads, without its schema name);
#   2. every job-list shape of rest-server (queries_shapes.sql, the SQL
#      Sequelize 5.21.3 emits) through the openpai views, on paidb's own
#      tables, and on OpenPAI's schema: p50/p99 side by side, with the
#      targets (page <= 5 ms, count and keyword <= 50 ms, the common
#      keyword's count <= 150 ms and 4x OpenPAI's schema, offset 100,000
#      <= 50 ms) and the counts each returned (they must agree);
#   3. put_framework_request and apply_watch_event throughput with and
#      without the write path's new work (the job-list trigger), alternating;
#   4. submissions while retention deletes >= 100,000 expired jobs, beside
#      submissions without it;
#   (bytes per job: test/bench/footprint.sh.)
#
# Run as root (servers run as postgres), niced.  PAIDB_BENCH_JOBS=100000 for
# a quick try; BENCH_QUERY_RUNS (default 21) timed runs per shape on paidb,
# BENCH_BASELINE_RUNS (default 5) on OpenPAI's schema; BENCH_SECONDS per
# throughput run, BENCH_PAIRS alternated pairs of them; BENCH_KEEP=1 keeps
# the data directory (~26 GB at a million jobs) after the run.
set -uo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
. "$ROOT/test/lib/common.sh"
[ "$(id -u)" = 0 ] || { echo "run as root" >&2; exit 2; }

JOBS=${PAIDB_BENCH_JOBS:-1000000}
RUNS=${BENCH_QUERY_RUNS:-21}
BASE_RUNS=${BENCH_BASELINE_RUNS:-5}
SECS=${BENCH_SECONDS:-8}
HERE="$ROOT/test/bench"

paidb_build_install "$ROOT" >/dev/null || { echo "queries bench: build failed" >&2; exit 1; }
W=$(mktemp -d /tmp/paidb-qbench.XXXXXX)
chmod 755 "$W"
chown postgres "$W"
PORT=$(paidb_free_port)
# a million jobs take ~26 GB: removed on exit unless BENCH_KEEP=1
trap 'paidb_stop_pg "$W/pg"; [ "${BENCH_KEEP:-0}" = 1 ] || rm -rf "$W"' EXIT
# fsync off (paidb_start_pg's default): we measure paidb's work, not the
# disk; paidb preloaded as in production (its count rewrite needs the library
# in every session), without workers
paidb_start_pg "$W/pg" "$PORT" "shared_preload_libraries = 'paidb'" "paidb.enabled = off" \
    "shared_buffers = '2GB'" "work_mem = '16MB'" \
    "maintenance_work_mem = '512MB'" "max_wal_size = '8GB'" "random_page_cost = 1.1" \
    "effective_cache_size = '8GB'" "max_connections = 50" || exit 1
export PGHOST=127.0.0.1 PGPORT=$PORT PGUSER=postgres PGDATABASE=jobs
PSQL="nice psql -X -q -v ON_ERROR_STOP=1"
cp "$HERE"/*.sql "$W/" || exit 1
# OpenPAI's tables in whatever schema is first on search_path
sed -e '/^CREATE SCHEMA opai;$/d' -e "/set_config('search_path'/d" -e 's/\bopai\.//g' \
    "$ROOT/test/t/data/openpai-tables.sql" > "$W/openpai_schema.sql" || exit 1
chmod 644 "$W"/*.sql

ms_since() { echo $(( ($(date +%s%N) - $1) / 1000000 )); }

echo "== building $JOBS jobs (paidb 0.1), then ALTER EXTENSION paidb UPDATE"
psql -X -q -d postgres -c "CREATE DATABASE jobs" || exit 1
$PSQL -c "CREATE EXTENSION pg_trgm" -c "CREATE EXTENSION paidb VERSION '0.1' CASCADE" -f "$W/fixtures.sql" >/dev/null || exit 1
t0=$(date +%s%N)
$PSQL -v jobs="$JOBS" -f "$W/queries_data.sql" || exit 1
echo "built $JOBS jobs in $(( $(ms_since $t0) / 1000 )) s"
t0=$(date +%s%N)
$PSQL -c "ALTER EXTENSION paidb UPDATE" || exit 1
echo "ALTER EXTENSION paidb UPDATE (job list, counts and indexes from $JOBS jobs): $(( $(ms_since $t0) / 1000 )) s"
# 0.3 on: the snapshots packed and 0.3's indexes built (what the retention
# worker does after an update, here with no workers), and the job list
# rewritten as 0.3 writes it (fillfactor 70) rather than as the update from
# 0.1 left it (full pages)
t0=$(date +%s%N)
$PSQL -c "CALL paidb.convert_snapshots(5000)" -c "VACUUM FULL paidb.job_summary" -c "VACUUM FULL paidb.framework" || exit 1
echo "CALL paidb.convert_snapshots() and VACUUM FULL of the job list and jobs: $(( $(ms_since $t0) / 1000 )) s"
$PSQL -f "$W/queries_bench.sql" -c "VACUUM ANALYZE" || exit 1

echo "== the same jobs in OpenPAI's own schema (its Sequelize models' tables and indexes)"
t0=$(date +%s%N)
$PSQL <<EOS || exit 1
CREATE SCHEMA openpai_db;
SET search_path = openpai_db;
\i $W/openpai_schema.sql
RESET search_path;
\i $W/footprint.sql
DO \$\$ BEGIN PERFORM bench.copy_to_openpai(); END \$\$;
VACUUM ANALYZE openpai_db.frameworks, openpai_db.tags, openpai_db.framework_history;
EOS
echo "copied in $(( $(ms_since $t0) / 1000 )) s"

$PSQL -c "CREATE EXTENSION paidb_openpai" || exit 1

echo
echo "== job-list queries at $JOBS jobs: p50 / p99 ms ($RUNS runs; OpenPAI's schema $BASE_RUNS runs)"
/usr/bin/python3 "$HERE/queries_shapes.py" "$W/queries_shapes.sql" "$RUNS" "$BASE_RUNS" > "$W/timing.sql"
$PSQL -f "$W/timing.sql" > "$W/timing.out" || { cat "$W/timing.out"; exit 1; }
# the common keyword's count: <= 150 ms and 4x OpenPAI's schema in the same
# run (issue 17; its 50 ms target was withdrawn, docs/queries.md)
awk -F'|' '
function target(s) { if (s ~ /^offset_100000/) return 50; if (s == "keyword_count") return 150; if (s ~ /_count$/ || s ~ /keyword/) return 50; return 5 }
{ k = $1; if (!(k in seen)) { seen[k] = 1; order[++n] = k }
  p50[k, $2] = $3; p99[k, $2] = $4; res[k, $2] = $5 }
END {
  printf "%-34s %17s %17s %19s  %6s  %s\n", "shape", "openpai views", "paidb tables", "OpenPAI schema", "target", "result"
  miss = 0; bad = 0
  for (i = 1; i <= n; i++) {
    k = order[i]; t = target(k)
    worst = p50[k, "view"] + 0; if (p50[k, "paidb"] + 0 > worst) worst = p50[k, "paidb"] + 0
    ok = (worst <= t) ? "PASS" : "MISS"
    if (k == "keyword_count" && !(worst > 0 && p50[k, "openpai"] / worst >= 4)) ok = "MISS (< 4x OpenPAI)"
    if (ok != "PASS") miss++
    same = (k ~ /_count$/ && (res[k, "view"] != res[k, "paidb"] || res[k, "view"] != res[k, "openpai"])) ? " COUNTS DIFFER" : ""
    if (same != "") bad++
    printf "%-34s %7.2f / %7.2f %7.2f / %7.2f %8.2f / %8.2f  %4d ms  %s%s\n", k, p50[k, "view"], p99[k, "view"],
      p50[k, "paidb"], p99[k, "paidb"], p50[k, "openpai"], p99[k, "openpai"], t, ok, same
  }
  printf "%d shapes, %d over target (p50 of the slower paidb path), %d with counts that differ\n", n, miss, bad
  # the rewrites against the same query as written (rewrites off): never
  # slower, within the noise of this machine (20%, or 0.3 ms)
  printf "\nrewritten (openpai views) against as written (rewrites off), p50 ms:\n"
  slower = 0
  for (i = 1; i <= n; i++) {
    k = order[i]; if (!((k, "written") in p50)) continue
    v = p50[k, "view"] + 0; w = p50[k, "written"] + 0
    ok = (v <= w * 1.2 || v <= w + 0.3) ? "no slower" : "SLOWER"
    # a shape the rewrites leave alone is the same query twice: not judged
    if (res[k, "fired"] != "t") ok = "not rewritten"
    if (ok == "SLOWER") slower++
    printf "%-34s %8.2f %8.2f  x%-6.2f %s%s\n", k, v, w, (v > 0 ? w / v : 0), ok,
      (k ~ /_count$/ && res[k, "written"] != res[k, "view"]) ? " COUNTS DIFFER" : ""
  }
  printf "%d rewritten shapes slower than as written (\"not rewritten\": the plan is the same either way)\n", slower
}' "$W/timing.out"

echo
echo "== write path: with and without the job-list trigger, 8 clients, alternating ($SECS s each, ${BENCH_PAIRS:-5} pairs)"
cat > "$W/put.sql" <<'EOS'
SELECT p.name FROM bench.template, paidb.put_framework_request(replace(t, '__name__', 'p' || md5(random()::text || clock_timestamp()::text))::jsonb) p;
EOS
$PSQL <<'EOS' || exit 1
SELECT count(*) FROM generate_series(1, 800) i, paidb.put_framework_request(bench.request_3kb('w' || i));
CREATE SEQUENCE bench.rv START 1000;
EOS
# status updates that change no listed column (most events): the trigger's
# WHEN is false; and events that move the job between WAITING and RUNNING
# each time (the trigger fires on every one: the worst case)
for kind in same change; do
    if [ $kind = same ]; then st="'AttemptRunning'"; else st="CASE WHEN r % 2 = 0 THEN 'AttemptRunning' ELSE 'AttemptPreparing' END"; fi
    cat > "$W/event_$kind.sql" <<EOS
\set j random(1, 100)
SELECT paidb.apply_watch_event('MODIFIED', jsonb_build_object(
  'apiVersion', 'frameworkcontroller.microsoft.com/v1', 'kind', 'Framework',
  'metadata', jsonb_build_object('name', 'w' || ((:client_id % 8) * 100 + :j), 'resourceVersion', r::text,
                                 'annotations', jsonb_build_object('requestGeneration', '1')),
  'status', jsonb_build_object('state', $st,
     'attemptStatus', jsonb_build_object('id', 0, 'completionStatus', null,
        'taskRoleStatuses', jsonb_build_array(jsonb_build_object('name', 'worker', 'taskStatuses', jsonb_build_array()))),
     'retryPolicyStatus', jsonb_build_object('totalRetriedCount', 0, 'accountableRetriedCount', 0))))
  FROM nextval('bench.rv') r;
EOS
done
chmod 644 "$W"/*.sql
tps() {
    su postgres -c "PGOPTIONS='-c synchronous_commit=${2:-off}' nice pgbench -n -h $PGHOST -p $PGPORT -c 8 -j 2 -T $SECS -f $1 jobs" 2>&1 |
        sed -n 's/^tps = \([0-9.]*\) .*/\1/p' | head -1
}
median() { sort -n | awk '{a[NR]=$1} END {if (NR % 2) print a[(NR+1)/2]; else printf "%.3f\n", (a[NR/2]+a[NR/2+1])/2}'; }
trig() { $PSQL -c "ALTER TABLE paidb.framework $1 TRIGGER framework_summary_insert_delete" \
               -c "ALTER TABLE paidb.framework $1 TRIGGER framework_summary_update"; }
# The machine is shared: a neighbour's load moves both sides of a pair
# alike but can halve one run, so each run with the job list is paired
# with the run without it right after, and the figure is the median of the
# pairs' ratios (BENCH_PAIRS pairs, default 5).
PAIRS=${BENCH_PAIRS:-5}
for what in "put off" "put on" "event_same off" "event_change off"; do
    set -- $what
    with=(); without=(); ratios=()
    for i in $(seq "$PAIRS"); do
        trig ENABLE; x=$(tps "$W/$1.sql" $2); with+=("$x")
        trig DISABLE; y=$(tps "$W/$1.sql" $2); without+=("$y")
        ratios+=("$(awk -v a="$x" -v b="$y" 'BEGIN {printf "%.3f", (b > 0 ? a / b : 0)}')")
    done
    trig ENABLE
    a=$(printf '%s\n' "${with[@]}" | median); b=$(printf '%s\n' "${without[@]}" | median)
    r=$(printf '%s\n' "${ratios[@]}" | median)
    case $1 in
        put) name="put_framework_request (new ~3 KB jobs), synchronous_commit=$2";;
        event_same) name="apply_watch_event (status updates, no listed column changes)";;
        event_change) name="apply_watch_event (every event changes the job's state)";;
    esac
    echo "$name: $a/s with the job list (runs: ${with[*]}), $b/s without (runs: ${without[*]})"
    awk -v r="$r" -v p="${ratios[*]}" 'BEGIN {printf "  ratio %.2f (median of the pairs: %s); the cost of keeping the job list in the writer'"'"'s transaction (SPEC §10 decisions; issue 10'"'"'s 0.90 target withdrawn)\n", r, p}'
done
# the jobs the throughput runs added would otherwise skew the rest
$PSQL -c "SELECT paidb.compact_job_counts()" >/dev/null

echo
echo "== retention: submissions while >= 100,000 expired jobs are deleted (batches of 100, paced as the worker does)"
AGE=$($PSQL -At -c "SELECT ceil(extract(epoch FROM now() - completion_time) / 86400) - 1 || ' days' FROM paidb.framework
   WHERE api_server_deleted AND sub_state = 'Completed' ORDER BY completion_time LIMIT 1 OFFSET 99999")
[ -n "$AGE" ] || AGE='0 days'
EXPIRED=$($PSQL -At -c "SELECT count(*) FROM paidb.framework WHERE api_server_deleted AND sub_state = 'Completed' AND completion_time < now() - interval '$AGE'")
echo "paidb.retention = '$AGE': $EXPIRED expired jobs"
before=$(tps "$W/put.sql" off)
cat > "$W/retention.sql" <<EOS
DO \$\$
DECLARE r record; t0 timestamptz := clock_timestamp(); b0 timestamptz; total bigint := 0; batches int := 0;
BEGIN
  LOOP
    b0 := clock_timestamp();
    SELECT * INTO r FROM paidb.retention_batch('$AGE', NULL, 100);
    total := total + r.jobs_deleted; batches := batches + 1;
    COMMIT;
    EXIT WHEN r.jobs_deleted < 100;
    -- the worker's pause (src/worker_retention.c): 20 ms, or three times
    -- as long as the batch took if longer
    PERFORM pg_sleep(greatest(0.02, 3 * extract(epoch FROM clock_timestamp() - b0)));
  END LOOP;
  RAISE NOTICE 'retention deleted % jobs in % batches, % s', total, batches,
    round(extract(epoch FROM clock_timestamp() - t0)::numeric, 1);
END \$\$;
EOS
chmod 644 "$W/retention.sql"
t0=$(date +%s%N)
nice psql -X -q -f "$W/retention.sql" > "$W/retention.out" 2>&1 &
RPID=$!
during=()
while kill -0 $RPID 2>/dev/null && [ ${#during[@]} -lt 20 ]; do during+=("$(tps "$W/put.sql" off)"); done
wait $RPID
after=$(tps "$W/put.sql" off)
sed -n 's/.*NOTICE: *//p' "$W/retention.out"
d=$(printf '%s\n' "${during[@]}" | median)
echo "put_framework_request: $d/s while retention ran (runs: ${during[*]}); $before/s before, $after/s after"
awk -v d="$d" -v b="$before" -v a="$after" 'BEGIN {m = (a + b) / 2; printf "  ratio %.2f of the mean without; target >= 0.80: %s\n", d/m, (d/m >= 0.8 ? "PASS" : "MISS")}'
$PSQL -At -c "SELECT 'left: ' || count(*) || ' expired jobs' FROM paidb.framework WHERE api_server_deleted AND sub_state = 'Completed' AND completion_time < now() - interval '$AGE'"

