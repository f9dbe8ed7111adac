#!/usr/bin/env bash
# make bench: paidb's performance figures, each printed next to the figure it
# is compared with, measured in the same run on this machine.  Medians of
# several runs; the machine is shared and noisy, so read ratios, not
# absolutes.  Run as root (servers run as postgres).
set -uo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
. "$ROOT/test/lib/common.sh"
[ "$(id -u)" = 0 ] || { echo "run as root" >&2; exit 2; }
paidb_install_packages || exit 1
paidb_build_install "$ROOT" || exit 1

BENCH=$(mktemp -d /tmp/paidb-bench.XXXXXX)
chmod 755 "$BENCH"
chown postgres "$BENCH"
PORT=$(paidb_free_port)
trap 'paidb_stop_pg "$BENCH/pg"' EXIT
# durable commits, as in production; shared_buffers sized for the 100k-job runs
paidb_start_pg "$BENCH/pg" "$PORT" "fsync = on" "shared_buffers = '512MB'" "max_connections = 50" || exit 1
export PGHOST=127.0.0.1 PGPORT=$PORT PGUSER=postgres PGDATABASE=postgres
psql -X -q -c "CREATE EXTENSION paidb CASCADE" -f "$ROOT/test/bench/fixtures.sql" >/dev/null || exit 1

RUNS=${BENCH_RUNS:-3}
SECS=${BENCH_SECONDS:-8}
# median, pgbench_tps, compare
. "$ROOT/test/bench/lib.sh"

echo "== jsonb_merge_patch"
if [ -x "$ROOT/test/bench/merge_patch_bench.sh" ] || [ -f "$ROOT/test/bench/merge_patch_bench.sh" ]; then
    bash "$ROOT/test/bench/merge_patch_bench.sh"
fi

echo
echo "== put_framework_request: new ~3 KB requests, 8 concurrent clients (pgbench, $RUNS x ${SECS}s each)"
# The request travels as JSON text with a fresh name, as rest-server sends it.
bench_put_sql > "$BENCH/put.sql"
cat > "$BENCH/floor.sql" <<'EOS'
INSERT INTO bench.raw (name, doc) SELECT n, replace(t, '__name__', n)::jsonb FROM bench.template, (SELECT 'p' || md5(random()::text || clock_timestamp()::text) AS n) s;
EOS
psql -X -q -c "CREATE TABLE bench.raw (name text PRIMARY KEY, doc jsonb NOT NULL, inserted_at timestamptz DEFAULT now())"
chmod 644 "$BENCH"/*.sql
# synchronous_commit off: what paidb itself costs; on: what this machine's
# disk allows for durable commits (the floor is bound by it just the same).
for sc in off on; do
    compare "$BENCH/put.sql" "$BENCH/floor.sql" $sc
    echo "synchronous_commit=$sc: put_framework_request $A submissions/s (median; runs: $A_RUNS)"
    echo "synchronous_commit=$sc: floor, plain INSERT of the same jsonb into a keyed table: $B/s (runs: $B_RUNS)"
    if [ "$sc" = off ]; then
        awk -v p="$A" -v f="$B" 'BEGIN {printf "ratio put/floor: %.2f; target >= 5000/s: %s\n", p/f, (p >= 5000 ? "PASS" : "MISS")}'
    else
        awk -v p="$A" -v f="$B" 'BEGIN {printf "ratio put/floor: %.2f (both bound by the disk'"'"'s commit rate)\n", p/f}'
    fi
done

echo
echo "== apply_watch_event: status updates of existing jobs, 8 clients"
bench_event_setup_sql | psql -X -q
bench_event_sql > "$BENCH/event.sql"
cat > "$BENCH/event_floor.sql" <<'EOS'
\set j random(1, 100)
UPDATE bench.raw_status SET doc = doc || jsonb_build_object('status', jsonb_build_object('state', 'AttemptRunning',
  'rv', nextval('bench.rv'), 'attemptStatus', jsonb_build_object('id', 0, 'completionStatus', null,
   'taskRoleStatuses', jsonb_build_array(jsonb_build_object('name', 'worker', 'taskStatuses', jsonb_build_array()))),
  'retryPolicyStatus', jsonb_build_object('totalRetriedCount', 0, 'accountableRetriedCount', 0)))
 WHERE name = 'w' || ((:client_id % 8) * 100 + :j);
EOS
chmod 644 "$BENCH"/*.sql
# updates and HOT updates per table so far (issue 19: a fillfactor chosen by
# measured HOT rates; a HOT update writes no index entry)
hot_counts() {
    psql -X -At -F ' ' -c "SELECT schemaname || '.' || relname, n_tup_upd, n_tup_hot_upd FROM pg_stat_user_tables
                           WHERE schemaname = 'paidb'" | LC_ALL=C sort
}
hot_counts > "$BENCH/hot.before"
compare "$BENCH/event.sql" "$BENCH/event_floor.sql" on
echo "apply_watch_event: $A status updates/s (median; runs: $A_RUNS)"
echo "floor, plain UPDATE of the same row with jsonb ||: $B/s (runs: $B_RUNS)"
awk -v p="$A" -v f="$B" 'BEGIN {printf "ratio apply/floor: %.2f\n", p/f}'
sleep 1    # the clients' statistics reach the shared counters when they exit
hot_counts | LC_ALL=C join - "$BENCH/hot.before" | awk '{ upd = $2 - $4; hot = $3 - $5;
    if (upd > 0) printf "  %-28s %8d updates, %5.1f%% HOT (fillfactor %s)\n", $1, upd, 100 * hot / upd, "see below" }' |
    while read -r line; do
        rel=$(awk '{print $1}' <<<"$line")
        ff=$(psql -X -At -c "SELECT coalesce((SELECT option_value FROM pg_options_to_table(reloptions) WHERE option_name = 'fillfactor'), '100') FROM pg_class WHERE oid = '$rel'::regclass")
        echo "${line/see below/$ff}"
    done

echo
bash "$ROOT/test/bench/hot.sh"

echo
echo "== openpai.import_database: 100,000 OpenPAI jobs, 10% with retry history"
bash "$ROOT/test/bench/openpai_import_bench.sh"

echo
echo "== the fake API server's capacity"
if [ -f "$ROOT/test/bench/bench_fake.py" ]; then
    /usr/bin/python3 "$ROOT/test/bench/bench_fake.py"
fi

echo
echo "== bytes per job by part and snapshot compressions (issue 19)"
bash "$ROOT/test/bench/footprint.sh"

if [ -f "$ROOT/test/bench/queries.sh" ]; then
    echo
    echo "== job queries and the data life cycle at ${PAIDB_BENCH_JOBS:-1000000} jobs (docs/queries.md)"
    bash "$ROOT/test/bench/queries.sh"
fi

if [ -f "$ROOT/test/bench/stress.sh" ]; then
    echo
    echo "== end to end: 100,000 jobs through SQL into the API server"
    bash "$ROOT/test/bench/stress.sh"
fi

echo
echo "== many clusters from one database (SPEC §11): a broken cluster's cost to the others, 1-8 clusters, an idle cluster"
bash "$ROOT/test/bench/clusters.sh"

echo
echo "== this tree against release 0.1 (issue 8: no figure regresses by more than 5%)"
bash "$ROOT/test/bench/compare-release.sh"

echo
echo "== this tree against release 0.2 (issue 19: no write path slower than 0.2; re-list and ingestion beside 0.2's)"
BENCH_RELEASE=acb8bb9 BENCH_RELEASE_LABEL=0.2 bash "$ROOT/test/bench/compare-release.sh"

echo
echo "== the framework watcher's re-list at ${BENCH_RELIST_JOBS:-1000000} jobs, beside 0.2 (issue 19: <= 60 s)"
bash "$ROOT/test/bench/relist.sh"

echo
echo "== the update from 0.2 at ${BENCH_UPGRADE_JOBS:-1000000} jobs under load (issue 19: no long exclusive lock; the conversion after it)"
bash "$ROOT/test/bench/upgrade.sh"
