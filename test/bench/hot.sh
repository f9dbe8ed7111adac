#!/usr/bin/env bash
# test/bench/hot.sh — HOT updates over whole job lives, by fillfactor (issue
# 19: "the fillfactor chosen by measured HOT rates rather than a default").
# For each fillfactor of paidb.job_summary in BENCH_HOT_FILLFACTORS (100 90
# 80 70; paidb.framework keeps its own), a fresh database with paidb
# preloaded against kube-fake's simulated controller gets BENCH_HOT_JOBS
# (2,000) jobs that the controller takes through their lives (creation
# pending, preparing, running, completed: the framework watcher's events and
# the sync worker's writes, as in a cluster) until every one has completed.
# Printed per fillfactor and table: updates per job, the share that was HOT
# (a HOT update writes no index entry: of job_summary's 14 indexes, none),
# and the table's and its indexes' bytes per job after a VACUUM (what the
# dead versions left behind in the indexes, and what the free space costs
# the heap).  paidb.framework keeps its fillfactor (75) throughout: its
# line shows what its partial indexes' predicates let be HOT.
# Can run alone; run-bench.sh runs it.  Run as root.
#
#   BENCH_HOT_JOBS (2000)                   jobs per fillfactor
#   BENCH_HOT_FILLFACTORS ("100 90 80 70")  job_summary fillfactors to try
set -uo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
. "$ROOT/test/lib/common.sh"
. "$ROOT/test/bench/lib.sh"
[ "$(id -u)" = 0 ] || { echo "run as root" >&2; exit 2; }
JOBS=${BENCH_HOT_JOBS:-2000}
FILLFACTORS=${BENCH_HOT_FILLFACTORS:-100 90 80 70}
FAKE="$ROOT/test/kube-fake/kube-fake"

paidb_build_install "$ROOT" >/dev/null || { echo "hot: build failed" >&2; exit 1; }
W=$(mktemp -d /tmp/paidb-hot.XXXXXX)
chmod 755 "$W"; chown postgres "$W"
FAKE_PID=""
cleanup() {
    [ -n "$FAKE_PID" ] && kill "$FAKE_PID" 2>/dev/null && wait "$FAKE_PID" 2>/dev/null
    [ -d "$W/pg" ] && paidb_stop_pg "$W/pg"
    rm -rf "$W"
}
trap cleanup EXIT
export PGHOST=127.0.0.1 PGUSER=postgres PGDATABASE=postgres
q() { "$PG_BIN/psql" -X -At -v ON_ERROR_STOP=1 -c "$1"; }

# one FILLFACTOR: prints its lines
run() {
    local ff=$1 url
    rm -f "$W/fake.port"
    "$FAKE" --port 0 --port-file "$W/fake.port" --simulate-controller --history-size $((JOBS * 20)) >"$W/fake.out" 2>&1 &
    FAKE_PID=$!
    poll "test -s $W/fake.port" 0.1 30 || { echo "hot: kube-fake did not start" >&2; return 1; }
    url="http://127.0.0.1:$(cat "$W/fake.port")"
    PGPORT=$(paidb_free_port); export PGPORT
    paidb_start_pg "$W/pg" "$PGPORT" "shared_buffers = '256MB'" "autovacuum = off" \
        "shared_preload_libraries = 'paidb'" "paidb.k8s_api_server = '$url'" >/dev/null || return 1
    "$PG_BIN/psql" -X -q -v ON_ERROR_STOP=1 -f "$ROOT/test/bench/fixtures.sql" -c "CREATE EXTENSION paidb CASCADE" \
        -c "ALTER TABLE paidb.job_summary SET (fillfactor = $ff)" >/dev/null 2>&1 || return 1
    ready() { [ "$(q "SELECT bool_and(pid IS NOT NULL AND state NOT LIKE 'waiting%') FROM paidb.status()")" = t ]; }
    poll ready 0.2 60 || { echo "hot: the workers did not start" >&2; return 1; }
    q "SELECT pg_stat_reset()" >/dev/null
    q "SELECT count(*) FROM generate_series(1, $JOBS) i, paidb.put_framework_request(bench.request_3kb('h' || i))" >/dev/null || return 1
    completed() { [ "$(q "SELECT count(*) FROM paidb.framework WHERE NOT api_server_deleted")" = 0 ]; }
    poll completed 1 900 || { echo "hot: the jobs did not complete within 15 minutes" >&2; return 1; }
    sleep 1    # the workers' statistics reach the shared counters
    q "VACUUM paidb.framework, paidb.job_summary" >/dev/null
    q "SELECT s.relname, s.n_tup_upd, s.n_tup_hot_upd,
              pg_relation_size(s.relid), (SELECT sum(pg_relation_size(indexrelid)) FROM pg_index WHERE indrelid = s.relid),
              coalesce((SELECT option_value FROM pg_options_to_table(c.reloptions) WHERE option_name = 'fillfactor'), '100')
         FROM pg_stat_user_tables s JOIN pg_class c ON c.oid = s.relid
        WHERE s.schemaname = 'paidb' AND s.relname IN ('framework', 'job_summary') ORDER BY s.relname" |
        awk -F'|' -v n="$JOBS" '{printf "  %-12s fillfactor %3s: %5.1f updates/job, %5.1f%% HOT; heap %6.0f B/job, indexes %6.0f B/job\n",
                                 $1, $6, $2 / n, ($2 > 0) ? 100 * $3 / $2 : 0, $4 / n, $5 / n}'
    paidb_stop_pg "$W/pg"; rm -rf "$W/pg"
    kill "$FAKE_PID"; wait "$FAKE_PID" 2>/dev/null; FAKE_PID=""
}

echo "== HOT updates over $JOBS whole job lives (kube-fake's simulated controller), by job_summary's fillfactor"
for ff in $FILLFACTORS; do
    run "$ff" || exit 1
done
