# test/bench/lib.sh — helpers shared by the benchmark scripts (sourced).
# pgbench_tps and compare read RUNS and SECS and the server from PGHOST and
# PGPORT at call time, so a caller can point them at several servers in turn.

RUNS=${RUNS:-${BENCH_RUNS:-3}}
SECS=${SECS:-${BENCH_SECONDS:-8}}

# Seconds since the epoch, with nanoseconds.
now() { date +%s.%N; }

# Poll a command every $2 seconds for at most $3 seconds; true if it succeeded
poll() {
    local cond=$1 every=$2 max=$3 t0
    t0=$(now)
    while ! $cond; do
        awk -v a="$t0" -v b="$(now)" -v m="$max" 'BEGIN {exit !(b - a > m)}' && return 1
        sleep "$every"
    done
    return 0
}

# Median of the numbers on stdin, one a line.
median() { sort -n | awk '{a[NR]=$1} END {if (NR % 2) print a[(NR+1)/2]; else printf "%.1f\n", (a[NR/2]+a[NR/2+1])/2}'; }

# Spread of the numbers on stdin: (max - min) / median, in percent.
spread_pct() { sort -n | awk '{a[NR]=$1} END {m = (NR % 2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2;
    if (NR == 0 || m == 0) print "-"; else printf "%.0f\n", 100 * (a[NR] - a[1]) / m}'; }

# tps of a pgbench script: pgbench_tps FILE CLIENTS [SYNCHRONOUS_COMMIT]
pgbench_tps() {
    su postgres -c "PGOPTIONS='-c synchronous_commit=${3:-on}' pgbench -n -h $PGHOST -p $PGPORT -c $2 -j 2 -T $SECS -f $1 postgres" 2>&1 |
        sed -n 's/^tps = \([0-9.]*\) .*/\1/p' | head -1
}

# RUNS alternating runs of a script and of its floor; sets A and B (medians)
# and A_RUNS, B_RUNS.  compare SCRIPT FLOOR_SCRIPT SYNCHRONOUS_COMMIT
compare() {
    local a=() b=() i
    for i in $(seq "$RUNS"); do
        a+=("$(pgbench_tps "$1" 8 "$3")")
        b+=("$(pgbench_tps "$2" 8 "$3")")
    done
    A=$(printf '%s\n' "${a[@]}" | median); A_RUNS=${a[*]}
    B=$(printf '%s\n' "${b[@]}" | median); B_RUNS=${b[*]}
}

# The put_framework_request pgbench script: a ~3 KB request as JSON text with
# a fresh name, as rest-server sends it (needs fixtures.sql).
bench_put_sql() {
    cat <<'EOS'
SELECT p.name FROM bench.template, paidb.put_framework_request(replace(t, '__name__', 'p' || md5(random()::text || clock_timestamp()::text))::jsonb) p;
EOS
}

# 800 jobs whose status bench_event_sql updates (needs fixtures.sql).
bench_event_setup_sql() {
    cat <<'EOS'
SELECT count(*) FROM generate_series(1, 800) i,
  paidb.put_framework_request(bench.request_3kb('w' || i));
CREATE SEQUENCE bench.rv START 1000;
CREATE TABLE bench.raw_status (name text PRIMARY KEY, doc jsonb);
INSERT INTO bench.raw_status SELECT 'w' || i, bench.request_3kb('w' || i) FROM generate_series(1, 800) i;
EOS
}

# The apply_watch_event pgbench script: a MODIFIED status of an existing job.
bench_event_sql() {
    cat <<'EOS'
\set j random(1, 100)
SELECT paidb.apply_watch_event('MODIFIED', jsonb_build_object(
  'apiVersion', 'frameworkcontroller.microsoft.com/v1', 'kind', 'Framework',
  'metadata', jsonb_build_object('name', 'w' || ((:client_id % 8) * 100 + :j), 'resourceVersion', nextval('bench.rv')::text,
                                 'annotations', jsonb_build_object('requestGeneration', '1')),
  'status', jsonb_build_object('state', 'AttemptRunning', 'runTime', '2020-08-01T10:01:00Z',
     'attemptStatus', jsonb_build_object('id', 0, 'completionStatus', null,
        'taskRoleStatuses', jsonb_build_array(jsonb_build_object('name', 'worker', 'taskStatuses', jsonb_build_array()))),
     'retryPolicyStatus', jsonb_build_object('totalRetriedCount', 0, 'accountableRetriedCount', 0))));
EOS
}
