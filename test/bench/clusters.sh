#!/usr/bin/env bash
# test/bench/clusters.sh — many clusters from one database (SPEC §11): what a
# broken cluster costs the healthy ones, whether the end-to-end rate holds up
# as the jobs are spread over more clusters, and what an idle cluster costs.
# Each figure is printed beside the goal it is compared with.  Every server
# is fresh (PostgreSQL with paidb preloaded, its `default` cluster removed,
# one kube-fake per cluster, without the simulated controller); the machine
# is small and shared, so rates are medians of BENCH_RUNS runs with the
# settings alternated from run to run.  Called by run-bench.sh; can run
# alone.  Run as root (PostgreSQL runs as postgres).
#
# 1. commit → create latency on three healthy clusters h1, h2, h3 (measured),
#    alone ("all healthy", the baseline) or beside a fourth cluster x that
#    is hung (its fake accepts every connection and never answers:
#    kube-fake's pause mode=hang), answers 500 to every request (a
#    kube-fake fault), or — for comparison only — is healthy too.  x holds
#    a backlog of unsynced jobs of its own before the measurement starts and
#    gets its share of the submissions during it (h1-h3 get the same rate
#    in every setting), so a broken x's sync worker is busy retrying all
#    along.  pgbench submits at a fixed rate, each job in its own transaction that also
#    records its name in bench.sub; the latency of a job is from that
#    transaction's commit (pg_xact_commit_timestamp, track_commit_timestamp
#    on) to the moment its fake received the framework's POST (the fake's
#    request log: completion time less the request's duration).  p50/p99 of
#    the jobs of h1..h3, median of the runs; goal p99(broken)/p99(all
#    healthy) <= 1.2.
# 2. jobs per second end to end with 1, 2, 4 and 8 clusters sharing
#    BENCH_CLUSTER_JOBS jobs, spread evenly by put_framework_request's
#    cluster argument: from the start of the submissions (8 pgbench clients)
#    until every job is request_synced — the framework watcher has seen the
#    framework the sync worker created — as compare-release.sh measures it.
#    Goal: rate(8 clusters)/rate(1 cluster) >= 0.8 (no collapse).
# 3. CPU of an idle registered cluster: one cluster, no jobs, its three
#    workers' utime+stime (/proc/<pid>/stat) over BENCH_CLUSTER_IDLE_SECONDS,
#    in BENCH_RUNS windows; goal < 1% of a core.
# 4. private memory of each worker kind: RssAnon (/proc/<pid>/status:
#    private anonymous memory, shared memory excluded) and Private_Dirty
#    (/proc/<pid>/smaps_rollup: also counts the pages of shared memory only
#    this process has touched), idle and after part 2's 1-cluster run.
#
#   BENCH_RUNS (3)                   runs per figure
#   BENCH_CLUSTER_JOBS (20000)       jobs of part 2 (rounded down to a multiple of 8)
#   BENCH_CLUSTER_LAT_RATE (40)      submissions/s of part 1 per cluster
#   BENCH_CLUSTER_LAT_SECONDS (30)   length of one latency run (paidb.k8s_timeout is 30 s)
#   BENCH_CLUSTER_BACKLOG (300)      unsynced jobs x holds before a latency run
#   BENCH_CLUSTER_IDLE_SECONDS (60)  part 3's window (60 s: one paidb.resync_interval)
#   BENCH_CLUSTER_PARTS (1234)       which parts to run
set -uo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
. "$ROOT/test/lib/common.sh"
. "$ROOT/test/bench/lib.sh"
[ "$(id -u)" = 0 ] || { echo "run as root" >&2; exit 2; }

JOBS=${BENCH_CLUSTER_JOBS:-20000}
LAT_RATE=${BENCH_CLUSTER_LAT_RATE:-40}
LAT_SECS=${BENCH_CLUSTER_LAT_SECONDS:-30}
BACKLOG=${BENCH_CLUSTER_BACKLOG:-300}
IDLE_SECS=${BENCH_CLUSTER_IDLE_SECONDS:-60}
PARTS=${BENCH_CLUSTER_PARTS:-1234}
CLIENTS=8
PER=$((JOBS / CLIENTS)); JOBS=$((PER * CLIENTS))
FAKE="$ROOT/test/kube-fake/kube-fake"
HZ=$(getconf CLK_TCK)

paidb_install_packages >/dev/null || exit 1
paidb_build_install "$ROOT" >/dev/null || { echo "clusters: build failed" >&2; exit 1; }

W=$(mktemp -d /tmp/paidb-clusters.XXXXXX)
chmod 755 "$W"
chown postgres "$W"
declare -A FPID FURL FADMIN
PG_UP=""
cleanup() {
    local n
    [ -n "$PG_UP" ] && paidb_stop_pg "$W/pg"
    for n in "${!FPID[@]}"; do kill "${FPID[$n]}" 2>/dev/null; done
    for n in "${!FPID[@]}"; do wait "${FPID[$n]}" 2>/dev/null; done
    rm -rf "$W"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

q() { psql -X -At -v ON_ERROR_STOP=1 -c "$1"; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN {printf "%.3f", b - a}'; }

# ------------------------------------------------------------------ servers
# start_fake NAME: a kube-fake with a request log (create lines name the
# framework) and an admin port; FURL[NAME], FADMIN[NAME]
start_fake() {
    local n=$1
    rm -f "$W/$n.port" "$W/$n.admin" "$W/$n.log"
    "$FAKE" --port 0 --port-file "$W/$n.port" --admin-port 0 --admin-port-file "$W/$n.admin" \
        --log "$W/$n.log" --log-name --history-size $((JOBS * 2 + 10000)) >"$W/$n.out" 2>&1 &
    FPID[$n]=$!
    for _ in $(seq 300); do [ -s "$W/$n.port" ] && [ -s "$W/$n.admin" ] && break; sleep 0.1; done
    [ -s "$W/$n.port" ] || { echo "clusters: kube-fake $n did not start" >&2; cat "$W/$n.out" >&2; return 1; }
    FURL[$n]="http://127.0.0.1:$(cat "$W/$n.port")"
    FADMIN[$n]="http://127.0.0.1:$(cat "$W/$n.admin")"
}
stop_fakes() {
    local n
    for n in "${!FPID[@]}"; do kill "${FPID[$n]}" 2>/dev/null; done
    for n in "${!FPID[@]}"; do wait "${FPID[$n]}" 2>/dev/null; done
    FPID=(); FURL=(); FADMIN=()
}

# start_pg: a fresh server with paidb preloaded, room for the launcher, the
# retention worker and 8 clusters (plus the `default` cluster's workers
# until it is removed), commit timestamps on; the extension, the fixtures,
# the `default` cluster removed (it has no API server here) and the
# bench.submit() of part 1.
start_pg() {
    PGPORT=$(paidb_free_port)
    export PGHOST=127.0.0.1 PGPORT PGUSER=postgres PGDATABASE=postgres
    paidb_start_pg "$W/pg" "$PGPORT" "shared_preload_libraries = 'paidb'" \
        "max_worker_processes = 40" "max_connections = 60" "shared_buffers = '512MB'" \
        "track_commit_timestamp = on" "log_min_messages = warning" || return 1
    PG_UP=1
    psql -X -q -v ON_ERROR_STOP=1 -c "SET client_min_messages = warning" -c "CREATE EXTENSION paidb CASCADE" \
        -f "$ROOT/test/bench/fixtures.sql" >/dev/null || return 1
    psql -X -q -v ON_ERROR_STOP=1 >/dev/null <<'SQL' || return 1
SELECT paidb.remove_cluster('default');
CREATE SEQUENCE bench.job_seq;
-- one job per call, in the caller's transaction; its name in bench.sub
-- (never updated: the row's xmin is the submitting transaction)
CREATE UNLOGGED TABLE bench.sub (name text PRIMARY KEY, cluster text NOT NULL);
CREATE FUNCTION bench.submit(cl text) RETURNS void LANGUAGE plpgsql AS $$
DECLARE n text := 'j' || nextval('bench.job_seq');
BEGIN
    PERFORM paidb.put_framework_request(replace((SELECT t FROM bench.template), '__name__', n)::jsonb,
                                        now(), '{}'::jsonb, cl);
    INSERT INTO bench.sub VALUES (n, cl);
END $$;
-- part 2: job n goes to cluster c(n % k + 1)
CREATE FUNCTION bench.submit_spread(k int) RETURNS void LANGUAGE plpgsql AS $$
DECLARE s bigint := nextval('bench.job_seq');
BEGIN
    PERFORM paidb.put_framework_request(replace((SELECT t FROM bench.template), '__name__', 'j' || s)::jsonb,
                                        now(), '{}'::jsonb, 'c' || (s % k + 1));
END $$;
SQL
}
stop_pg() { paidb_stop_pg "$W/pg"; PG_UP=""; rm -rf "$W/pg"; }

# register NAME...: rows in paidb.cluster pointing at the fakes of those names
register() {
    local n values=""
    for n in "$@"; do values+="${values:+, }('$n', '${FURL[$n]}')"; done
    q "INSERT INTO paidb.cluster (name, api_server) VALUES $values" >/dev/null
}
# wait_ready N HEALTHY...: N clusters have their three workers, and the
# watchers of the healthy ones watch
wait_ready() {
    local n=$1; shift
    local list watching=$(($# * 2))
    list=$(printf "'%s'," "$@"); list=${list%,}
    ready() {
        [ "$(q "SELECT count(*) FROM paidb.cluster_status WHERE workers = 3")" = "$n" ] &&
        [ "$(q "SELECT count(*) FROM paidb.status() WHERE cluster IN ($list) AND worker LIKE '%watcher' AND state = 'watching'")" = "$watching" ]
    }
    poll ready 0.2 60 || { echo "clusters: the workers did not start" >&2; q "SELECT * FROM paidb.status()" >&2; return 1; }
}
worker_pid() { q "SELECT pid FROM paidb.status() WHERE cluster = '$1' AND worker = '$2'"; }

# CPU ticks of a process (utime + stime), 0 when it is gone
ticks() { awk '{print $14 + $15}' "/proc/$1/stat" 2>/dev/null || echo 0; }
# memory of a process: "RSSANON_KB PRIVATE_DIRTY_KB"
mem_kb() {
    echo "$(awk '/^RssAnon:/ {print $2}' "/proc/$1/status" 2>/dev/null || echo 0)" \
         "$(awk '/^Private_Dirty:/ {print $2}' "/proc/$1/smaps_rollup" 2>/dev/null || echo 0)"
}
# mem_report LABEL CLUSTER: one line per worker kind of that cluster
mem_report() {
    local k pid
    for k in sync "framework watcher" "event watcher"; do
        pid=$(worker_pid "$2" "$k")
        read -r anon dirty <<<"$(mem_kb "$pid")"
        printf '  %-34s %-18s RssAnon %7.1f MB   Private_Dirty %7.1f MB\n' "$1" "$k" \
            "$(awk -v k="$anon" 'BEGIN {print k / 1024}')" "$(awk -v k="$dirty" 'BEGIN {print k / 1024}')"
    done
}

pct() {  # pct NUMERATOR DENOMINATOR: NUMERATOR/DENOMINATOR as a ratio, 3 decimals
    awk -v a="$1" -v b="$2" 'BEGIN {if (b > 0) printf "%.3f", a / b; else print "-"}'
}

echo "== many clusters (SPEC §11): medians of $RUNS runs; $(nproc) CPUs"

# ------------------------------------------------------------------ part 1
# One latency run: lat_run SETTING (none | healthy | hung | error: x absent
# or how it behaves); records P50[SETTING], P99[SETTING] and prints the
# run's figures.
declare -A P50 P99
lat_run() {
    local s=$1 c pid t0 n ncl=4
    [ "$s" = none ] && ncl=3
    for c in h1 h2 h3 x; do [ "$s" = none ] && [ $c = x ] && continue; start_fake "$c" || return 1; done
    case $s in
        hung)  curl -sf -X POST "${FADMIN[x]}/_fake/server/pause?mode=hang" >/dev/null || return 1 ;;
        error) curl -sf -X POST "${FADMIN[x]}/_fake/faults?status=500&count=-1" >/dev/null || return 1 ;;
    esac
    start_pg || return 1
    if [ "$s" = none ]; then
        register h1 h2 h3
        wait_ready 3 h1 h2 h3 || return 1
    else
        register h1 h2 h3 x
        wait_ready 4 h1 h2 h3 || return 1
        [ "$s" = healthy ] && { wait_ready 4 h1 h2 h3 x || return 1; }
        # x's own backlog, then a few seconds for its sync worker to be at it
        q "SELECT count(bench.submit('x')) FROM generate_series(1, $BACKLOG)" >/dev/null || return 1
    fi
    sleep 3
    cat > "$W/lat.sql" <<EOS
\\set c random(1, $ncl)
SELECT bench.submit(CASE WHEN :c = 4 THEN 'x' ELSE 'h' || :c END);
EOS
    chmod 644 "$W/lat.sql"
    nice "$PG_BIN/pgbench" -n -c 4 -j 2 -R $((LAT_RATE * ncl)) -T "$LAT_SECS" -f "$W/lat.sql" postgres >"$W/pgbench.log" 2>&1 ||
        { echo "clusters: pgbench failed" >&2; cat "$W/pgbench.log" >&2; return 1; }
    healthy_synced() { [ "$(q "SELECT count(*) FROM paidb.framework WHERE cluster <> 'x' AND NOT request_synced")" = 0 ]; }
    poll healthy_synced 0.2 120 || echo "clusters: $s: the healthy clusters' jobs not all synced within 2 minutes" >&2
    XUNS=$(q "SELECT coalesce((SELECT unsynced FROM paidb.cluster_status WHERE cluster = 'x'), 0)")
    XSTATE=$(q "SELECT state || coalesce(' / ' || left(last_error, 60), '') FROM paidb.status() WHERE cluster = 'x' AND worker = 'sync'")
    XREQ=$(q "SELECT requests_sent FROM paidb.status() WHERE cluster = 'x' AND worker = 'sync'")
    q "SELECT name, extract(epoch FROM pg_xact_commit_timestamp(xmin)) FROM bench.sub WHERE cluster <> 'x'" > "$W/commits.txt"
    read -r p50 p99 n miss < <(/usr/bin/python3 - "$W/commits.txt" "$W/h1.log" "$W/h2.log" "$W/h3.log" <<'PY'
import sys, datetime
commit = {}
for line in open(sys.argv[1]):
    name, t = line.rstrip('\n').split('|')
    commit[name] = float(t)
recv = {}
for f in sys.argv[2:]:
    for line in open(f):
        p = line.split()
        # TIME POST TARGET STATUS DURATIONms name=NAME
        if len(p) >= 6 and p[1] == 'POST' and '/frameworks' in p[2] and p[5].startswith('name='):
            name = p[5][5:]
            t = datetime.datetime.strptime(p[0], '%Y-%m-%dT%H:%M:%S.%fZ').replace(
                tzinfo=datetime.timezone.utc).timestamp() - float(p[4][:-2]) / 1000
            if name not in recv or t < recv[name]:
                recv[name] = t
lat = sorted((recv[n] - commit[n]) * 1000 for n in commit if n in recv)
miss = sum(1 for n in commit if n not in recv)
if not lat:
    print(0, 0, 0, miss)
else:
    pick = lambda q: lat[min(len(lat) - 1, int(q * len(lat)))]
    print('%.1f %.1f %d %d' % (pick(0.5), pick(0.99), len(lat), miss))
PY
)
    P50[$s]="${P50[$s]:-}${P50[$s]:+ }$p50"
    P99[$s]="${P99[$s]:-}${P99[$s]:+ }$p99"
    [ "$s" = none ] && XSTATE="-" && XREQ=0
    printf '  run %-8s p50 %7.1f ms  p99 %7.1f ms  (%s jobs of h1-h3, %s without a POST); x: %s unsynced at the end, sync worker %s, %s requests sent\n' \
        "$s" "$p50" "$p99" "$n" "$miss" "$XUNS" "'$XSTATE'" "$XREQ"
    stop_pg
    stop_fakes
}

if [[ $PARTS == *1* ]]; then
    echo
    echo "== 1. commit → create latency on healthy clusters h1-h3, $LAT_RATE submissions/s per cluster for ${LAT_SECS}s; x (when there) holds a backlog of $BACKLOG"
    SETTINGS=(none hung error healthy)
    for i in $(seq "$RUNS"); do
        for j in 0 1 2 3; do
            s=${SETTINGS[$(( (i - 1 + j) % 4 ))]}
            lat_run "$s" || exit 1
        done
    done
    declare -A LABEL1=([none]="all healthy (h1-h3 alone)" [healthy]="x healthy too (for comparison)" [hung]="x hung (accepts, never answers)" [error]="x answers 500 to everything")
    for s in "${SETTINGS[@]}"; do
        m50=$(tr ' ' '\n' <<<"${P50[$s]}" | median); m99=$(tr ' ' '\n' <<<"${P99[$s]}" | median)
        printf '%-40s p50 %7.1f ms  p99 %7.1f ms   (p99 runs: %s)\n' "${LABEL1[$s]}" "$m50" "$m99" "${P99[$s]}"
        declare "M99_$s=$m99"
    done
    declare -A SHORT1=([hung]="x hung" [error]="x 500")
    for s in hung error; do
        v=M99_$s
        awk -v b="${!v}" -v h="$M99_healthy" -v l="${SHORT1[$s]}" 'BEGIN {r = (h > 0) ? b / h : 0;
            printf "ratio p99(%s)/p99(all healthy): %.2fx; goal <= 1.2x: %s\n", l, r, (r <= 1.2 ? "PASS" : "MISS")}'
    done
    awk -v b="$M99_healthy" -v h="$M99_none" 'BEGIN {printf "(ratio p99(x healthy too)/p99(all healthy): %.2fx: what a fourth working cluster costs on this machine)\n", (h > 0) ? b / h : 0}'
fi

# ------------------------------------------------------------------ part 2
declare -A RATE
MEM_LOADED=""
e2e_run() {
    local k=$1 i names=() t0 el sw_ticks
    for i in $(seq "$k"); do start_fake "c$i" || return 1; names+=("c$i"); done
    start_pg || return 1
    register "${names[@]}"
    wait_ready "$k" "${names[@]}" || return 1
    echo "SELECT bench.submit_spread($k);" > "$W/spread.sql"
    chmod 644 "$W/spread.sql"
    declare -A t_sync t_fw t_fake
    for i in "${names[@]}"; do
        t_sync[$i]=$(ticks "$(worker_pid "$i" sync)")
        t_fw[$i]=$(ticks "$(worker_pid "$i" "framework watcher")")
        t_fake[$i]=$(ticks "${FPID[$i]}")
    done
    t0=$(now)
    nice "$PG_BIN/pgbench" -n -c $CLIENTS -j 2 -t $PER -f "$W/spread.sql" postgres >"$W/pgbench.log" 2>&1 ||
        { echo "clusters: pgbench failed" >&2; cat "$W/pgbench.log" >&2; return 1; }
    local submitted; submitted=$(since "$t0")
    all_synced() { [ "$(q "SELECT count(*) FROM paidb.framework WHERE NOT request_synced")" = 0 ]; }
    # a stall: jobs left unsynced 15 s after the last submission (seen with
    # some builds: they waited for paidb.resync_interval's rescan while the
    # sync worker used a core); say where they are and what the workers do
    if ! poll all_synced 0.2 15; then
        local a=0 b=0
        for i in "${names[@]}"; do a=$((a + $(ticks "$(worker_pid "$i" sync)"))); done
        sleep 2
        for i in "${names[@]}"; do b=$((b + $(ticks "$(worker_pid "$i" sync)"))); done
        echo "  stall: 15 s after the submissions, unsynced per cluster: $(q "SELECT string_agg(cluster || '=' || n, ' ') FROM (SELECT cluster, count(*) n FROM paidb.framework WHERE NOT request_synced GROUP BY 1 ORDER BY 1) s");" \
             "sync workers: $(q "SELECT string_agg(cluster || ' ' || state || ' sent ' || requests_sent || ' errors ' || errors, '; ' ORDER BY cluster) FROM paidb.status() WHERE worker = 'sync'")," \
             "using $(awk -v t=$((b - a)) -v hz="$HZ" 'BEGIN {printf "%.0f", 100 * t / hz / 2}')% of a core"
        for i in "${names[@]}"; do
            echo "    $i fake: $(awk '{print $2, $4}' "$W/$i.log" | sort | uniq -c | tr -s ' ' | paste -sd ',')"
        done
    fi
    if poll all_synced 0.2 600; then
        el=$(since "$t0")
    else
        echo "clusters: $k clusters: not all synced within 10 minutes" >&2; el=0
    fi
    # where the two cores went: paidb's sync workers and framework watchers,
    # and the fakes (the test rig, not paidb)
    local fw_ticks=0 fake_ticks=0
    sw_ticks=0
    for i in "${names[@]}"; do
        sw_ticks=$((sw_ticks + $(ticks "$(worker_pid "$i" sync)") - ${t_sync[$i]}))
        fw_ticks=$((fw_ticks + $(ticks "$(worker_pid "$i" "framework watcher")") - ${t_fw[$i]}))
        fake_ticks=$((fake_ticks + $(ticks "${FPID[$i]}") - ${t_fake[$i]}))
    done
    local r; r=$(awk -v n=$JOBS -v t="$el" 'BEGIN {printf "%.0f", (t > 0) ? n / t : 0}')
    RATE[$k]="${RATE[$k]:-}${RATE[$k]:+ }$r"
    printf '  run %d cluster(s): %6s jobs/s (submitted in %.1fs, all synced at %.1fs; CPU s: sync workers %.1f, framework watchers %.1f, fakes %.1f)\n' \
        "$k" "$r" "$submitted" "$el" "$(awk -v t=$sw_ticks -v hz="$HZ" 'BEGIN {print t / hz}')" \
        "$(awk -v t=$fw_ticks -v hz="$HZ" 'BEGIN {print t / hz}')" "$(awk -v t=$fake_ticks -v hz="$HZ" 'BEGIN {print t / hz}')"
    if [ "$k" = 1 ]; then MEM_LOADED=$(mem_report "after $JOBS jobs (1 cluster)" c1); fi
    stop_pg
    stop_fakes
}

if [[ $PARTS == *2* ]] && [ "$JOBS" -gt 0 ]; then
    echo
    echo "== 2. jobs/s end to end (submit by $CLIENTS clients → all request_synced), $JOBS jobs spread over 1, 2, 4, 8 clusters"
    KS=(1 2 4 8)
    for i in $(seq "$RUNS"); do
        for j in 0 1 2 3; do e2e_run "${KS[$(( (i - 1 + j) % 4 ))]}" || exit 1; done
    done
    for k in "${KS[@]}"; do
        printf '%d cluster(s): %6.0f jobs/s   (runs: %s)\n' "$k" "$(tr ' ' '\n' <<<"${RATE[$k]}" | median)" "${RATE[$k]}"
    done
    awk -v a="$(tr ' ' '\n' <<<"${RATE[8]}" | median)" -v b="$(tr ' ' '\n' <<<"${RATE[1]}" | median)" 'BEGIN {r = (b > 0) ? a / b : 0;
        printf "ratio 8 clusters / 1 cluster: %.2f; goal >= 0.8 (no collapse): %s\n", r, (r >= 0.8 ? "PASS" : "MISS")}'
fi

# ------------------------------------------------------------------ parts 3, 4
if [[ $PARTS == *3* || $PARTS == *4* ]]; then
    echo
    echo "== 3. CPU of an idle registered cluster (no jobs; its fake sends a BOOKMARK every 5 s), ${IDLE_SECS}s in $RUNS windows"
    start_fake idle || exit 1
    start_pg || exit 1
    register idle
    wait_ready 1 idle || exit 1
    sleep 5
    declare -A PIDK
    KINDS=(sync "framework watcher" "event watcher")
    for k in "${KINDS[@]}"; do PIDK[$k]=$(worker_pid idle "$k"); done
    PIDK[launcher]=$(q "SELECT pid FROM paidb.status() WHERE worker = 'launcher'")
    sum_ticks() { local t=0 k; for k in "${KINDS[@]}"; do t=$((t + $(ticks "${PIDK[$k]}"))); done; echo $t; }
    win=$(awk -v s="$IDLE_SECS" -v r="$RUNS" 'BEGIN {printf "%.3f", s / r}')
    declare -A T0
    for k in "${KINDS[@]}" launcher; do T0[$k]=$(ticks "${PIDK[$k]}"); done
    tall=$(now)
    WIN=()
    for i in $(seq "$RUNS"); do
        a=$(sum_ticks); t=$(now)
        sleep "$win"
        b=$(sum_ticks)
        WIN+=("$(awk -v a="$a" -v b="$b" -v hz="$HZ" -v s="$(since "$t")" 'BEGIN {printf "%.3f", 100 * (b - a) / hz / s}')")
    done
    el=$(since "$tall")
    for k in "${KINDS[@]}" launcher; do
        printf '  %-18s pid %-7s %6.3f%% of a core (%d ticks in %.0fs)\n' "$k" "${PIDK[$k]}" \
            "$(awk -v t=$(( $(ticks "${PIDK[$k]}") - T0[$k] )) -v hz="$HZ" -v s="$el" 'BEGIN {print 100 * t / hz / s}')" \
            $(( $(ticks "${PIDK[$k]}") - T0[$k] )) "$el"
    done
    tot=0; for k in "${KINDS[@]}"; do tot=$((tot + $(ticks "${PIDK[$k]}") - T0[$k])); done
    whole=$(awk -v t=$tot -v hz="$HZ" -v s="$el" 'BEGIN {printf "%.3f", 100 * t / hz / s}')
    med=$(printf '%s\n' "${WIN[@]}" | median)
    echo "idle cluster, its three workers: $whole% of a core over ${el%.*}s (median of $RUNS windows $med%; windows: ${WIN[*]})"
    awk -v w="$whole" -v m="$med" 'BEGIN {v = (w > m) ? w : m; printf "goal < 1%% of a core: %s\n", (v < 1 ? "PASS" : "MISS")}'
    echo
    echo "== 4. private memory per worker kind"
    mem_report "idle cluster (no jobs)" idle
    [ -n "$MEM_LOADED" ] && echo "$MEM_LOADED"
    for k in launcher retention; do
        pid=$(q "SELECT pid FROM paidb.status() WHERE worker = '$k'")
        read -r anon dirty <<<"$(mem_kb "$pid")"
        printf '  %-34s %-18s RssAnon %7.1f MB   Private_Dirty %7.1f MB\n' "(one per server)" "$k" \
            "$(awk -v k="$anon" 'BEGIN {print k / 1024}')" "$(awk -v k="$dirty" 'BEGIN {print k / 1024}')"
    done
    echo "  (RssAnon: private anonymous memory, shared memory excluded; Private_Dirty also counts shared-memory pages only this process touched)"
    stop_pg
    stop_fakes
fi
echo "machine: $(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg) at the end"
