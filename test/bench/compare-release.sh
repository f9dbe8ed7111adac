#!/usr/bin/env bash
# test/bench/compare-release.sh — this tree against release 0.1 (commit
# cd6809c), measured in the same run on this machine: each build installed
# into its own private PostgreSQL copy, one server each, runs alternated
# between the two (0.1 first, then now first, ...) so that drift of the
# machine's load falls on both alike.  Each figure is the median of
# BENCH_RUNS runs, printed for "0.1 (cd6809c)" and "now" with the ratio
# now/0.1 and PASS/MISS against issue 8's "within 5%" (ratio >= 0.95 for
# throughput).  The "without the job list's triggers" lines run this tree
# with issue 10's job-list triggers off, to tell their cost (issue 10's own
# budget) from everything else's.  Against 0.2, the submission, status
# update and end-to-end figures are measured again with 0.2's keyword
# (trigram) indexes made, which 0.3 always has.  Called by run-bench.sh; can
# run alone.
# Run as root.
#
#   BENCH_RUNS (3)            runs per figure and build
#   BENCH_SECONDS (8)         seconds per pgbench run
#   BENCH_E2E_JOBS (20000)    jobs of the end-to-end part (0 skips it)
#   BENCH_INSN_CALLS (200), BENCH_INSN_EVENTS (2000)
#                             calls and watch events counted in instructions
#   BENCH_PERF_DIR            if set: perf record of the sync worker while it
#                             creates, into DIR/sync-old.data, sync-new.data
#   BENCH_BEFORE_PG_ROOT, BENCH_AFTER_PG_ROOT
#                             private PostgreSQL copies (default: under the
#                             work directory, removed at the end)
#
# If the release commit is not in the checkout (a plain copy without .git,
# a shallow clone), it prints SKIP and exits 0.
set -uo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
# BENCH_RELEASE: the release to compare with (default 0.1, cd6809c; 0.2 is
# acb8bb9; BENCH_RELEASE_LABEL names it)
RELEASE=${BENCH_RELEASE:-cd6809c}
RELEASE_LABEL=${BENCH_RELEASE_LABEL:-0.1}
. "$ROOT/test/lib/common.sh"
. "$ROOT/test/bench/lib.sh"
[ "$(id -u)" = 0 ] || { echo "run as root" >&2; exit 2; }
HELPER="/usr/bin/python3 $ROOT/test/bench/stress/stress_helper.py"
FAKE="$ROOT/test/kube-fake/kube-fake"
E2E_JOBS=${BENCH_E2E_JOBS:-20000}
CLIENTS=8

echo "== this tree against release $RELEASE_LABEL ($RELEASE): medians of $RUNS alternated runs per build"
if ! git -C "$ROOT" cat-file -e "$RELEASE^{commit}" 2>/dev/null; then
    echo "SKIP: commit $RELEASE is not available in $ROOT (no .git or a shallow clone); nothing compared"
    exit 0
fi
paidb_install_packages >/dev/null || exit 1

W=$(mktemp -d /tmp/paidb-cmp.XXXXXX)
chmod 755 "$W"
chown postgres "$W"
BUILDS=(old new)
declare -A LABEL=([old]="$RELEASE_LABEL ($RELEASE)" [new]="now")
declare -A PGROOT=([old]=${BENCH_BEFORE_PG_ROOT:-$W/root-old} [new]=${BENCH_AFTER_PG_ROOT:-$W/root-new})
declare -A SRC=([old]=$W/src-old [new]=$ROOT)
declare -A PORTS
PIDS_TO_KILL=()
STOPPED_PID=""
cleanup() {
    local p b
    [ -n "$STOPPED_PID" ] && kill -CONT "$STOPPED_PID" 2>/dev/null
    for p in "${PIDS_TO_KILL[@]}"; do kill "$p" 2>/dev/null; done
    for p in "${PIDS_TO_KILL[@]}"; do wait "$p" 2>/dev/null; done
    for b in "${BUILDS[@]}"; do
        use_build "$b"
        [ -d "$W/pg-$b" ] && paidb_stop_pg "$W/pg-$b"
    done
    rm -rf "$W"
}
trap cleanup EXIT

# Point common.sh's helpers and psql/pgbench at one build: use_build old|new
use_build() {
    PAIDB_PG_ROOT=${PGROOT[$1]}
    PG_BIN=$PAIDB_PG_ROOT/usr/lib/postgresql/15/bin
    export PGHOST=127.0.0.1 PGUSER=postgres PGDATABASE=postgres
    # initdb and postgres read PGPORT too: set only once a server has a port
    if [ -n "${PORTS[$1]:-}" ]; then export PGPORT=${PORTS[$1]}; else unset PGPORT; fi
}

since() { awk -v a="$1" -v b="$(now)" 'BEGIN {printf "%.2f", b - a}'; }
q() { psql -X -At -c "$1"; }
# CPU seconds used so far by one process (0 if it is gone)
cpu_secs() { awk -v hz="$(getconf CLK_TCK)" '{printf "%.2f", ($14 + $15) / hz}' "/proc/$1/stat" 2>/dev/null || echo 0; }
# CPU seconds used so far by a server: the postmaster, its live children,
# and the children it has reaped (backends of finished connections)
server_cpu() {
    local pm
    pm=$(head -1 "$W/pg-$1/postmaster.pid")
    { awk '{print $14 + $15 + $16 + $17}' "/proc/$pm/stat"
      for c in $(cat "/proc/$pm/task/$pm/children" 2>/dev/null); do awk '{print $14 + $15}' "/proc/$c/stat" 2>/dev/null; done
    } | awk -v hz="$(getconf CLK_TCK)" '{t += $1} END {printf "%.2f", t / hz}'
}
# pgbench_cpu FIGURE BUILD SCRIPT SYNCHRONOUS_COMMIT: records FIGURE (tps)
# and FIGURE_cpu (transactions per CPU second of the server)
pgbench_cpu() {
    local c0 tps c1
    c0=$(server_cpu "$2")
    tps=$(pgbench_tps "$3" $CLIENTS "$4")
    sleep 0.3    # the backends exit and are reaped
    c1=$(server_cpu "$2")
    record "$1" "$2" "$(awk -v t="$tps" 'BEGIN {printf "%.0f", t}')"
    record "$1_cpu" "$2" "$(awk -v t="$tps" -v s="$SECS" -v c="$(awk -v a="$c0" -v b="$c1" 'BEGIN {print b - a}')" 'BEGIN {printf "%.0f", (c > 0) ? t * s / c : 0}')"
}

# ------------------------------------------------------------------ builds
mkdir -p "${SRC[old]}"
git -C "$ROOT" archive "$RELEASE" | tar -x -C "${SRC[old]}" || { echo "compare: git archive $RELEASE failed" >&2; exit 1; }
for b in "${BUILDS[@]}"; do
    use_build "$b"
    echo "building ${LABEL[$b]} into $PAIDB_PG_ROOT"
    paidb_private_pg || exit 1
    make -C "${SRC[$b]}" -s -j2 >/dev/null 2>"$W/make-$b.err" || { cat "$W/make-$b.err" >&2; exit 1; }
    make -C "${SRC[$b]}" -s install DESTDIR="$PAIDB_PG_ROOT" >/dev/null || exit 1
    grep -h "^default_version" "$PAIDB_PG_ROOT/usr/share/postgresql/15/extension/paidb.control"
done

# 0.3 requires pg_trgm and always keeps the job list's three keyword
# (trigram) indexes; 0.2 made them only where pg_trgm was installed, which
# its docs/queries.md asks for so that keyword searches use an index (SPEC
# §10), and CREATE EXTENSION paidb CASCADE installs 0.2 without them.  A
# release that can make them (KW=_kw) is measured a second time with them
# made: the same indexes written on both sides.
KW=""
grep -qs "FUNCTION paidb.create_keyword_indexes" "${SRC[old]}"/sql/paidb--*.sql && KW=_kw
# make_keyword_indexes: in the current build's database (the release's)
make_keyword_indexes() {
    q "CREATE EXTENSION IF NOT EXISTS pg_trgm" >/dev/null &&
        [ "$(q "SELECT paidb.create_keyword_indexes()")" = t ] ||
        { echo "compare: ${LABEL[old]}'s keyword indexes could not be made" >&2; return 1; }
}

# Start both servers: start_servers [postgresql.conf lines...]; a fresh
# data directory each time.  Ports in PORTS.
start_servers() {
    local b
    for b in "${BUILDS[@]}"; do
        PORTS[$b]=""
        use_build "$b"
        PORTS[$b]=$(paidb_free_port)
        paidb_start_pg "$W/pg-$b" "${PORTS[$b]}" "shared_buffers = '512MB'" "max_connections = 50" "$@" || exit 1
    done
}
stop_servers() {
    local b
    for b in "${BUILDS[@]}"; do use_build "$b"; paidb_stop_pg "$W/pg-$b"; rm -rf "$W/pg-$b"; done
}

# Build order of run $1: old new, new old, old new, ...
order() { if [ $(($1 % 2)) = 1 ]; then echo old new; else echo new old; fi; }

# job_list_triggers BUILD ENABLE|DISABLE: the job list's triggers of this
# tree on or off (0.1 has none)
job_list_triggers() {
    [ "$1" = new ] || return 0
    q "ALTER TABLE paidb.framework $2 TRIGGER framework_summary_insert_delete, $2 TRIGGER framework_summary_update" >/dev/null
}

# Results: R[figure,build] holds the runs, space-separated.
declare -A R
FIGURES=()
record() { R[$1,$2]="${R[$1,$2]:-}${R[$1,$2]:+ }$3"; }

# ------------------------------------------------------------------ SQL figures
# fsync on and no workers (not preloaded), as run-bench.sh measures them.
start_servers "fsync = on"
bench_put_sql > "$W/put.sql"
bench_event_sql > "$W/event.sql"
# The ~3.4 KB framework request of merge_patch_bench.sh, and its Stop patch.
awk '/^INSERT INTO bench.merge_patch_docs VALUES \(.request., \$json\$$/ {on = 1; next}
     on && /^\$json\$\);$/ {exit} on' "$ROOT/test/bench/merge_patch_bench.sh" > "$W/request.json"
chmod 644 "$W"/*.sql "$W/request.json"
for b in "${BUILDS[@]}"; do
    use_build "$b"
    { psql -X -q -v ON_ERROR_STOP=1 -c "CREATE EXTENSION paidb CASCADE" -f "$ROOT/test/bench/fixtures.sql" &&
      bench_event_setup_sql | psql -X -q -v ON_ERROR_STOP=1 &&
      psql -X -q -v ON_ERROR_STOP=1 -v doc="$(cat "$W/request.json")" <<'SQL'
CREATE TABLE bench.mp (doc jsonb, patch jsonb);
INSERT INTO bench.mp VALUES (:'doc', '{"spec":{"executionType":"Stop"},"metadata":{"annotations":{"requestGeneration":"2"}}}');
-- calls per second of jsonb_merge_patch: `calls` calls in one loop on
-- in-memory (detoasted) values, after a short warming-up
-- (calls per wall-clock second, calls per CPU second of this backend:
-- /proc/self/schedstat's first field is its time on a CPU in ns)
CREATE FUNCTION bench.mp_rate(calls int, OUT wall float8, OUT cpu float8) LANGUAGE plpgsql AS $$
DECLARE t jsonb; p jsonb; r jsonb; started timestamptz; ns0 float8;
BEGIN
    SELECT doc::text::jsonb, patch::text::jsonb INTO t, p FROM bench.mp;
    FOR i IN 1 .. calls / 10 LOOP r := paidb.jsonb_merge_patch(t, p); END LOOP;
    ns0 := split_part(pg_read_file('/proc/self/schedstat'), ' ', 1)::float8;
    started := clock_timestamp();
    FOR i IN 1 .. calls LOOP r := paidb.jsonb_merge_patch(t, p); END LOOP;
    wall := calls / extract(epoch FROM clock_timestamp() - started);
    cpu := calls / ((split_part(pg_read_file('/proc/self/schedstat'), ' ', 1)::float8 - ns0) / 1e9);
END $$;
SQL
    } >/dev/null || { echo "compare: setup of ${LABEL[$b]} failed" >&2; exit 1; }
done
use_build old
MP_BYTES=$(q "SELECT octet_length(doc::text) FROM bench.mp")

# The job list (issue 10: paidb.job_summary and the count deltas, kept by
# two triggers) has its own budget on the write path; put_nolist/event_nolist
# run the same scripts with those triggers off in this tree (0.1 has none:
# it runs them unchanged), which shows what everything else costs.
FIGURES+=(put put_cpu put_nolist put_nolist_cpu event event_cpu event_nolist event_nolist_cpu mp mp_cpu)
declare -A NAME=([put]="put_framework_request submissions/s (8 clients, synchronous_commit off)"
                 [put_cpu]="  the same, per CPU second of the server"
                 [put_nolist]="  the same, this tree without the job list's triggers (issue 10)"
                 [put_nolist_cpu]="    and per CPU second of the server"
                 [event]="apply_watch_event status updates/s (8 clients)"
                 [event_cpu]="  the same, per CPU second of the server"
                 [event_nolist]="  the same, this tree without the job list's triggers (issue 10)"
                 [event_nolist_cpu]="    and per CPU second of the server"
                 [mp]="jsonb_merge_patch calls/s (${MP_BYTES}-byte request, 200,000 calls a run)"
                 [mp_cpu]="  the same, per CPU second of the backend")
# write_runs I SUFFIX: run I of the submission and the status-update
# scripts, both builds in run I's order, recorded as putSUFFIX, eventSUFFIX
write_runs() {
    local b
    for b in $(order "$1"); do
        use_build "$b"
        pgbench_cpu "put$2" "$b" "$W/put.sql" off
    done
    for b in $(order "$1"); do
        use_build "$b"
        pgbench_cpu "event$2" "$b" "$W/event.sql" on
    done
}
for i in $(seq "$RUNS"); do
    write_runs "$i" ""
    for b in $(order "$i"); do
        use_build "$b"
        job_list_triggers "$b" DISABLE
        pgbench_cpu put_nolist "$b" "$W/put.sql" off
        pgbench_cpu event_nolist "$b" "$W/event.sql" on
        job_list_triggers "$b" ENABLE
    done
    for b in $(order "$i"); do
        use_build "$b"
        read -r wall cpu < <(q "SELECT round(r.wall) || ' ' || round(r.cpu) FROM bench.mp_rate(200000) r")
        record mp "$b" "$wall"; record mp_cpu "$b" "$cpu"
    done
done

# The write figures again with the release's keyword indexes made (KW)
if [ -n "$KW" ]; then
    use_build old
    make_keyword_indexes || exit 1
    FIGURES+=(put_kw put_kw_cpu event_kw event_kw_cpu)
    NAME[put_kw]="submissions/s as above, ${RELEASE_LABEL} with its keyword indexes (pg_trgm installed)"
    NAME[put_kw_cpu]="  the same, per CPU second of the server"
    NAME[event_kw]="status updates/s as above, ${RELEASE_LABEL} with its keyword indexes (pg_trgm installed)"
    NAME[event_kw_cpu]="  the same, per CPU second of the server"
    for i in $(seq "$RUNS"); do write_runs "$i" _kw; done
fi
stop_servers

# ------------------------------------------------------------------ instructions
# The same calls counted in instructions instead of time (issue 19): the
# time figures above spread by 20-80% on a shared machine, instruction
# counts do not.  Each build's postgres runs in single-user mode under
# callgrind (one backend, nothing else on it), counting what it executes
# from each statement's start to its commit (PortalRun and
# CommitTransactionCommand).  Per call: the difference between a run of
# INSN_CALLS + 50 calls and a run of 50, each on a copy of the same data
# directory, which cancels what a session does once (plans, caches).  The
# counts leave out what only concurrency costs (lock waits, the MultiXacts
# of a shared cluster row, WAL insertion contention) and I/O; the time
# figures above keep them.  Figures: calls per 10^9 instructions.
INSN_CALLS=${BENCH_INSN_CALLS:-200}
command -v valgrind >/dev/null 2>&1 || paidb_install_debs valgrind >/dev/null || true
# insn_event_sql STATE: one status event for the next job of bench.insn_job
# (each call a different one of the 800), as one line (single-user mode
# ends a statement at a newline)
insn_event_sql() {
    bench_event_sql | sed -e '/^\\set/d' -e "s/'w' || ((:client_id % 8) \* 100 + :j)/'w' || (s.n % 800 + 1)/" \
        -e "s/'state', 'AttemptRunning'/'state', '$1'/" -e '$ s/;$/ FROM (SELECT nextval('"'"'bench.insn_job'"'"') AS n) s;/' | tr '\n' ' '
    echo
}
# insn_datadir BUILD VARIANT: a stopped data directory with the bench set-up
# and every job running (VARIANT kw: the release's keyword indexes made)
insn_datadir() {
    PORTS[$1]=""
    use_build "$1"
    PORTS[$1]=$(paidb_free_port)
    paidb_start_pg "$W/insn-$1$2" "${PORTS[$1]}" || return 1
    use_build "$1"
    { psql -X -q -v ON_ERROR_STOP=1 -c "CREATE EXTENSION paidb CASCADE" -f "$ROOT/test/bench/fixtures.sql" &&
      bench_event_setup_sql | psql -X -q -v ON_ERROR_STOP=1 &&
      q "CREATE SEQUENCE bench.insn_job START 0 MINVALUE 0" &&
      for _ in $(seq 800); do cat "$W/insn-event-AttemptRunning.sql"; done | psql -X -q -v ON_ERROR_STOP=1 &&
      q "SELECT setval('bench.insn_job', 0, false)" && q "VACUUM ANALYZE" && q CHECKPOINT; } >/dev/null || return 1
    if [ "$2" = kw ]; then make_keyword_indexes || return 1; fi
    paidb_stop_pg "$W/insn-$1$2"
}
# insn_count BUILD VARIANT SCRIPT CALLS: instructions of CALLS calls
insn_count() {
    local d=$W/insn-run
    rm -rf "$d"; cp -a "$W/insn-$1$2" "$d" || return 1
    for _ in $(seq "$4"); do cat "$W/insn-$3.sql"; done > "$W/insn-in.sql"
    chmod 644 "$W/insn-in.sql"
    su postgres -c "valgrind --tool=callgrind --callgrind-out-file='$W/insn.cg' --collect-atstart=no \
        --toggle-collect=PortalRun --toggle-collect=CommitTransactionCommand \
        '$PG_BIN/postgres' --single -D '$d' -c synchronous_commit=off postgres < '$W/insn-in.sql' > '$W/insn.out' 2> '$W/insn.err'" ||
        { echo "compare: callgrind of ${LABEL[$1]} ($3) failed" >&2; tail -5 "$W/insn.err" >&2; return 1; }
    grep -q "ERROR" "$W/insn.out" "$W/insn.err" && { echo "compare: ${LABEL[$1]} ($3): $(grep -m1 ERROR "$W/insn.out" "$W/insn.err")" >&2; return 1; }
    awk '/^totals:/ {print $2}' "$W/insn.cg"
}
# insn_ingest BUILD N: instructions of the framework watcher applying N
# state changes.  The server runs normally while N jobs are submitted and
# created in a kube-fake, then stops; the fake gives every job a running
# status, and the server starts again under callgrind (following its
# forks), so that the watcher resumes its watch with the N events waiting.
# Prints the watcher's count (the largest of the processes').
INSN_EVENTS=${BENCH_INSN_EVENTS:-2000}
insn_ingest() {
    local b=$1 n=$2 fake_pid url d=$W/insn-ingest f t best=0
    rm -rf "$d"; mkdir -p "$d/cg"; chown postgres "$d/cg"
    "$FAKE" --port 0 --port-file "$d/port" --history-size $((n * 3 + 1000)) >"$d/fake.out" 2>&1 &
    fake_pid=$!
    PIDS_TO_KILL+=("$fake_pid")
    for _ in $(seq 300); do [ -s "$d/port" ] && break; sleep 0.1; done
    [ -s "$d/port" ] || { echo "compare: kube-fake did not start" >&2; return 1; }
    url="http://127.0.0.1:$(cat "$d/port")"
    PORTS[$b]=""
    use_build "$b"
    PORTS[$b]=$(paidb_free_port)
    paidb_start_pg "$d/pg" "${PORTS[$b]}" "shared_buffers = '512MB'" "shared_preload_libraries = 'paidb'" \
        "paidb.k8s_api_server = '$url'" || return 1
    use_build "$b"
    psql -X -q -v ON_ERROR_STOP=1 -f "$ROOT/test/bench/fixtures.sql" -c "CREATE EXTENSION paidb CASCADE" \
        -c "CREATE SEQUENCE bench.e2e_seq" >/dev/null 2>&1 || return 1
    workers_ready() { [ "$(q "SELECT bool_and(pid IS NOT NULL AND state NOT LIKE 'waiting%') FROM paidb.status()")" = t ]; }
    poll workers_ready 0.2 60 || { echo "compare: the workers of ${LABEL[$b]} did not start" >&2; return 1; }
    echo "SELECT 1 FROM paidb.put_framework_request(replace((SELECT t FROM bench.template), '__name__', 's' || nextval('bench.e2e_seq'))::jsonb);" > "$d/submit.sql"
    chmod 644 "$d/submit.sql"
    "$PG_BIN/pgbench" -n -c 8 -j 2 -t $((n / 8)) -f "$d/submit.sql" postgres > "$d/pgbench.log" 2>&1 ||
        { echo "compare: pgbench failed" >&2; cat "$d/pgbench.log" >&2; return 1; }
    all_synced() { [ "$(q "SELECT count(*) FROM paidb.framework WHERE NOT request_synced")" = 0 ]; }
    poll all_synced 0.2 300 || { echo "compare: ${LABEL[$b]}: not all synced within 5 minutes" >&2; return 1; }
    q CHECKPOINT >/dev/null
    paidb_stop_pg "$d/pg"
    $HELPER patch-status --url "$url" --prefix s --first 1 --n $((n / 8 * 8)) --procs 4 >/dev/null
    su postgres -c "valgrind --tool=callgrind --trace-children=yes --callgrind-out-file='$d/cg/cg.%p' \
        --collect-atstart=no --toggle-collect=apply_items --toggle-collect=k8s_watch_consume \
        '$PG_BIN/postgres' -D '$d/pg' > '$d/pg.vg.log' 2>&1 &"
    server_up() { q "SELECT 1" >/dev/null 2>&1; }
    stop_traced() { su postgres -c "'$PG_BIN/pg_ctl' -D '$d/pg' -m fast -w -t 300 stop" >/dev/null 2>&1; }
    poll server_up 1 300 || { echo "compare: ${LABEL[$b]} did not start under callgrind" >&2; stop_traced; return 1; }
    applied() { [ "$(q "SELECT count(*) FROM paidb.framework WHERE state = 'RUNNING'")" -ge $((n / 8 * 8)) ]; }
    poll applied 1 900 || { echo "compare: ${LABEL[$b]}: the backlog was not applied under callgrind" >&2; stop_traced; return 1; }
    stop_traced
    kill "$fake_pid"; wait "$fake_pid" 2>/dev/null
    for f in "$d"/cg/cg.*; do
        t=$(awk '/^totals:/ {print $2}' "$f")
        [ -n "$t" ] && [ "$t" -gt "$best" ] && best=$t
    done
    rm -rf "$d"
    [ "$best" -gt 0 ] || { echo "compare: ${LABEL[$b]}: no instructions counted in the watcher" >&2; return 1; }
    echo "$best"
}
if command -v valgrind >/dev/null 2>&1; then
    bench_put_sql > "$W/insn-put.sql"
    insn_event_sql AttemptRunning > "$W/insn-event-AttemptRunning.sql"
    cp "$W/insn-event-AttemptRunning.sql" "$W/insn-status.sql"
    insn_event_sql AttemptPreparing > "$W/insn-state.sql"
    chmod 644 "$W"/insn-*.sql
    FIGURES+=(insn_put insn_status insn_state)
    NAME[insn_put]="put_framework_request calls per 10^9 instructions (callgrind, one backend)"
    NAME[insn_status]="apply_watch_event status updates per 10^9 instructions (job running already)"
    NAME[insn_state]="apply_watch_event state changes per 10^9 instructions (running -> waiting)"
    variants=("")
    if [ -n "$KW" ]; then
        variants+=(kw)
        FIGURES+=(insn_put_kw insn_status_kw insn_state_kw)
        NAME[insn_put_kw]="  submissions as above, ${RELEASE_LABEL} with its keyword indexes"
        NAME[insn_status_kw]="  status updates as above, ${RELEASE_LABEL} with its keyword indexes"
        NAME[insn_state_kw]="  state changes as above, ${RELEASE_LABEL} with its keyword indexes"
    fi
    for v in "${variants[@]}"; do
        for b in "${BUILDS[@]}"; do
            # this tree always has the keyword indexes: its kw runs are its plain ones
            if [ "$v" = kw ] && [ "$b" = new ]; then
                for s in put status state; do record "insn_${s}_kw" new "$(tr ' ' '\n' <<<"${R[insn_$s,new]}" | median)"; done
                continue
            fi
            insn_datadir "$b" "$v" || exit 1
            for s in put status state; do
                short=$(insn_count "$b" "$v" "$s" 50) && long=$(insn_count "$b" "$v" "$s" $((INSN_CALLS + 50))) || exit 1
                record "insn_$s${v:+_$v}" "$b" "$(awk -v a="$short" -v b="$long" -v n="$INSN_CALLS" 'BEGIN {printf "%.0f", (b > a) ? 1e9 * n / (b - a) : 0}')"
                echo "instructions per call, ${LABEL[$b]}${v:+ with keyword indexes}, $s: $(awk -v a="$short" -v b="$long" -v n="$INSN_CALLS" 'BEGIN {printf "%.0f", (b - a) / n}')"
            done
            rm -rf "$W/insn-$b$v" "$W/insn-run"
        done
    done
    # The framework watcher's ingestion of a backlog of state changes
    # (waiting -> running), counted in the watcher: everything it executes
    # applying the batches (apply_items) and cutting the stream into events
    # (k8s_watch_consume); the batches' commits are left out.  Per event:
    # the difference between a backlog of 400 + INSN_EVENTS and one of 400.
    FIGURES+=(insn_ingest)
    NAME[insn_ingest]="framework watcher events applied per 10^9 instructions (a backlog of state changes)"
    for b in "${BUILDS[@]}"; do
        short=$(insn_ingest "$b" 400) && long=$(insn_ingest "$b" $((400 + INSN_EVENTS))) || exit 1
        record insn_ingest "$b" "$(awk -v a="$short" -v b="$long" -v n="$INSN_EVENTS" 'BEGIN {printf "%.0f", (b > a) ? 1e9 * n / (b - a) : 0}')"
        echo "instructions per event ingested, ${LABEL[$b]}: $(awk -v a="$short" -v b="$long" -v n="$INSN_EVENTS" 'BEGIN {printf "%.0f", (b - a) / n}')"
    done
else
    echo "compare: valgrind is not installed: no instruction counts"
fi

# ------------------------------------------------------------------ end to end
# Both builds preloaded, each against its own kube-fake (this tree's fake,
# without its simulated controller), fsync off as in stress.sh; one build at
# a time, alternated.  A run: E2E_JOBS submissions by pgbench, the time from
# their start until the sync worker has created them all (request_synced,
# polled in the database) gives the create rate; then the framework watcher
# is stopped (SIGSTOP) while every one of them gets a running status in the
# fake, and the time from SIGCONT until it has applied them all gives its
# ingestion rate.
e2e_run() {
    local b=$1 suffix=${2:-} fake_pid fake_url t0 fw ev0 per sw sw0 fw0 perf_pid
    rm -f "$W/fake-$b.port"
    "$FAKE" --port 0 --port-file "$W/fake-$b.port" --history-size $((E2E_JOBS * 3 + 1000)) >"$W/fake-$b.out" 2>&1 &
    fake_pid=$!
    PIDS_TO_KILL+=("$fake_pid")
    for _ in $(seq 300); do [ -s "$W/fake-$b.port" ] && break; sleep 0.1; done
    [ -s "$W/fake-$b.port" ] || { echo "compare: kube-fake did not start" >&2; cat "$W/fake-$b.out" >&2; return 1; }
    fake_url="http://127.0.0.1:$(cat "$W/fake-$b.port")"
    PORTS[$b]=""
    use_build "$b"
    PORTS[$b]=$(paidb_free_port)
    paidb_start_pg "$W/pg-$b" "${PORTS[$b]}" "shared_buffers = '512MB'" "max_connections = 50" \
        "shared_preload_libraries = 'paidb'" "paidb.k8s_api_server = '$fake_url'" || return 1
    use_build "$b"
    psql -X -q -v ON_ERROR_STOP=1 -f "$ROOT/test/bench/fixtures.sql" -c "CREATE EXTENSION paidb CASCADE" -c "CREATE SEQUENCE bench.e2e_seq" >/dev/null || return 1
    [ "$suffix" = _nolist ] && job_list_triggers "$b" DISABLE
    if [ "$suffix" = _kw ] && [ "$b" = old ]; then make_keyword_indexes || return 1; fi
    workers_ready() { [ "$(q "SELECT bool_and(pid IS NOT NULL AND state NOT LIKE 'waiting%') FROM paidb.status()")" = t ]; }
    poll workers_ready 0.2 60 || { echo "compare: the workers of ${LABEL[$b]} did not start" >&2; return 1; }
    echo "SELECT 1 FROM paidb.put_framework_request(replace((SELECT t FROM bench.template), '__name__', 's' || nextval('bench.e2e_seq'))::jsonb);" > "$W/submit.sql"
    chmod 644 "$W/submit.sql"
    per=$((E2E_JOBS / CLIENTS))
    all_synced() { [ "$(q "SELECT count(*) FROM paidb.framework WHERE NOT request_synced")" = 0 ]; }
    sw=$(q "SELECT pid FROM paidb.status() WHERE worker = 'sync'")
    sw0=$(cpu_secs "$sw")
    perf_pid=""
    if [ -n "${BENCH_PERF_DIR:-}" ]; then
        perf record -q -o "$BENCH_PERF_DIR/sync-$b$suffix.data" -p "$sw" >/dev/null 2>&1 &
        perf_pid=$!
    fi
    t0=$(now)
    nice "$PG_BIN/pgbench" -n -c $CLIENTS -j 2 -t $per -f "$W/submit.sql" postgres > "$W/pgbench-$b.log" 2>&1 \
        || { echo "compare: pgbench failed" >&2; cat "$W/pgbench-$b.log" >&2; return 1; }
    if poll all_synced 0.2 300; then
        record create$suffix "$b" "$(awk -v n=$((per * CLIENTS)) -v t="$(since "$t0")" 'BEGIN {printf "%.0f", n / t}')"
        record create_cpu$suffix "$b" "$(awk -v n=$((per * CLIENTS)) -v a="$sw0" -v b="$(cpu_secs "$sw")" 'BEGIN {printf "%.0f", (b > a) ? n / (b - a) : 0}')"
    else
        echo "compare: ${LABEL[$b]}: not all synced within 5 minutes" >&2; record create$suffix "$b" 0; record create_cpu$suffix "$b" 0
    fi
    [ -n "$perf_pid" ] && { kill -INT "$perf_pid"; wait "$perf_pid"; }
    fw=$(q "SELECT pid FROM paidb.status() WHERE worker = 'framework watcher'")
    ev0=$(q "SELECT events_applied FROM paidb.status() WHERE worker = 'framework watcher'")
    kill -STOP "$fw"; STOPPED_PID=$fw
    nice $HELPER patch-status --url "$fake_url" --prefix s --first 1 --n $((per * CLIENTS)) --procs 4 >/dev/null
    ingested() { [ "$(q "SELECT events_applied FROM paidb.status() WHERE worker = 'framework watcher'")" -ge $((ev0 + per * CLIENTS)) ]; }
    fw0=$(cpu_secs "$fw")
    t0=$(now)
    kill -CONT "$fw"; STOPPED_PID=""
    if poll ingested 0.05 300; then
        record ingest$suffix "$b" "$(awk -v n=$((per * CLIENTS)) -v t="$(since "$t0")" 'BEGIN {printf "%.0f", n / t}')"
        record ingest_cpu$suffix "$b" "$(awk -v n=$((per * CLIENTS)) -v a="$fw0" -v b="$(cpu_secs "$fw")" 'BEGIN {printf "%.0f", (b > a) ? n / (b - a) : 0}')"
    else
        echo "compare: ${LABEL[$b]}: backlog not applied within 5 minutes" >&2; record ingest$suffix "$b" 0; record ingest_cpu$suffix "$b" 0
    fi
    # A re-list of the same jobs, unchanged since they were applied (issue
    # 19): the watch is ended and the next one gets a 410 ERROR event; the
    # time until the LIST is applied (listed_at).
    if [ -z "$suffix" ]; then
        local mark
        mark=$(q "SELECT now()")
        fw0=$(cpu_secs "$fw")
        t0=$(now)
        curl -s -X POST -H 'Content-Type: application/json' \
            -d '{"status": 410, "verb": "watch", "resource": "frameworks", "inStream": true, "count": 1}' \
            "$fake_url/_fake/faults" >/dev/null
        curl -s -X POST -H 'Content-Type: application/json' -d '{"mode": "end", "resource": "frameworks"}' \
            "$fake_url/_fake/watches/cut" >/dev/null
        relisted() { [ "$(q "SELECT coalesce(listed_at > '$mark', false) FROM paidb.watch_state WHERE watcher = 'frameworks'")" = t ]; }
        if poll relisted 0.05 300; then
            record relist "$b" "$(awk -v n=$((per * CLIENTS)) -v t="$(since "$t0")" 'BEGIN {printf "%.0f", n / t}')"
            record relist_cpu "$b" "$(awk -v n=$((per * CLIENTS)) -v a="$fw0" -v b="$(cpu_secs "$fw")" 'BEGIN {printf "%.0f", (b > a) ? n / (b - a) : 0}')"
        else
            echo "compare: ${LABEL[$b]}: re-list not applied within 5 minutes" >&2; record relist "$b" 0; record relist_cpu "$b" 0
        fi
    fi
    paidb_stop_pg "$W/pg-$b"; rm -rf "$W/pg-$b"
    kill "$fake_pid"; wait "$fake_pid" 2>/dev/null
}
if [ "$E2E_JOBS" -gt 0 ]; then
    FIGURES+=(create create_cpu ingest ingest_cpu relist relist_cpu)
    NAME[relist]="framework watcher re-list jobs/s ($E2E_JOBS listed, unchanged; the fake's LIST included)"
    NAME[relist_cpu]="  the same, per CPU second of the framework watcher"
    NAME[create_cpu]="  the same, per CPU second of the sync worker"
    NAME[ingest_cpu]="  the same, per CPU second of the framework watcher"
    NAME[create]="sync worker creates/s in the API server ($E2E_JOBS jobs, submit to all synced)"
    NAME[ingest]="framework watcher ingestion events/s (backlog of $E2E_JOBS status events)"
    # and again with this tree's job-list triggers off (issue 10's budget),
    # since the submissions' extra work competes with the sync worker for CPUs
    FIGURES+=(create_nolist create_cpu_nolist ingest_nolist ingest_cpu_nolist)
    NAME[create_nolist]="  creates/s, this tree without the job list's triggers (issue 10)"
    NAME[create_cpu_nolist]="    and per CPU second of the sync worker"
    NAME[ingest_nolist]="  ingestion events/s, this tree without the job list's triggers (issue 10)"
    NAME[ingest_cpu_nolist]="    and per CPU second of the framework watcher"
    # and with the release's keyword indexes made, as for the SQL figures
    if [ -n "$KW" ]; then
        FIGURES+=(create_kw create_cpu_kw ingest_kw ingest_cpu_kw)
        NAME[create_kw]="  creates/s, ${RELEASE_LABEL} with its keyword indexes (pg_trgm installed)"
        NAME[create_cpu_kw]="    and per CPU second of the sync worker"
        NAME[ingest_kw]="  ingestion events/s, ${RELEASE_LABEL} with its keyword indexes (pg_trgm installed)"
        NAME[ingest_cpu_kw]="    and per CPU second of the framework watcher"
    fi
    for i in $(seq "$RUNS"); do
        for b in $(order "$i"); do e2e_run "$b" || exit 1; done
        for b in $(order "$i"); do e2e_run "$b" _nolist || exit 1; done
        [ -n "$KW" ] && for b in $(order "$i"); do e2e_run "$b" _kw || exit 1; done
    done
fi

# ------------------------------------------------------------------ report
echo
# ratio: of the two medians; paired: the median of each run's now/0.1 (the
# two measured back to back), which cancels drift between runs better;
# spread: the larger of the two builds' (max - min) / median.
printf '%-78s %13s %9s %6s %6s %6s  %s\n' "figure (median of $RUNS runs)" "${LABEL[old]}" "${LABEL[new]}" "ratio" "paired" "spread" "within 5%"
for f in "${FIGURES[@]}"; do
    mo=$(tr ' ' '\n' <<<"${R[$f,old]}" | median)
    mn=$(tr ' ' '\n' <<<"${R[$f,new]}" | median)
    paired=$(paste -d' ' <(tr ' ' '\n' <<<"${R[$f,old]}") <(tr ' ' '\n' <<<"${R[$f,new]}") |
        awk '$1 > 0 {printf "%.4f\n", $2 / $1}' | median)
    so=$(tr ' ' '\n' <<<"${R[$f,old]}" | spread_pct)
    sn=$(tr ' ' '\n' <<<"${R[$f,new]}" | spread_pct)
    awk -v n="${NAME[$f]}" -v o="$mo" -v c="$mn" -v p="${paired:-0}" -v so="$so" -v sn="$sn" 'BEGIN {r = (o > 0) ? c / o : 0;
        sp = (so + 0 > sn + 0) ? so : sn;
        printf "%-78s %13.0f %9.0f %6.3f %6.3f %5s%%  %s\n", n, o, c, r, p, sp, (r >= 0.95 ? "PASS" : "MISS")}'
done
echo
echo "runs (in run order; run i of both builds back to back):"
for f in "${FIGURES[@]}"; do
    for b in old new; do
        printf '  %-10s %-14s %s  (spread %s%%)\n' "$f" "${LABEL[$b]}" "${R[$f,$b]}" "$(tr ' ' '\n' <<<"${R[$f,$b]}" | spread_pct)"
    done
done
echo "machine: $(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg) at the end (shared with other work: read ratios)"
