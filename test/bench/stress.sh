#!/usr/bin/env bash
# test/bench/stress.sh — paidb end to end on this machine: 100,000 jobs
# submitted through SQL until created in the API server and confirmed
# synced, the commit-to-API-server latency at light load, the framework
# watcher's ingestion rate, and each worker's peak memory.  Every figure is
# printed next to its target and next to what the fake API server alone
# does in the same run.
#
# The API server is test/kube-fake WITHOUT its simulated frameworkcontroller:
# we measure paidb, not the fake's controller.  PostgreSQL is fresh, with
# paidb preloaded and fsync off (paidb_start_pg's default: we measure paidb's
# work, not this machine's disk; run-bench.sh measures submissions with fsync
# on).  Run as root (servers run as postgres); reads nothing from the user;
# takes ~3-5 minutes; cleans up its servers.
set -uo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
. "$ROOT/test/lib/common.sh"
. "$ROOT/test/bench/lib.sh"
[ "$(id -u)" = 0 ] || { echo "run as root" >&2; exit 2; }
HELPER="/usr/bin/python3 $ROOT/test/bench/stress/stress_helper.py"
FAKE="$ROOT/test/kube-fake/kube-fake"

JOBS=${STRESS_JOBS:-100000}
CLIENTS=8
LAT_N=200
WATCH_N=${STRESS_WATCH_N:-20000}
[ "$WATCH_N" -gt "$JOBS" ] && WATCH_N=$JOBS

paidb_build_install "$ROOT" >/dev/null || { echo "stress: build failed" >&2; exit 1; }

W=$(mktemp -d /tmp/paidb-stress.XXXXXX)
chmod 755 "$W"
chown postgres "$W"
PIDS_TO_KILL=()
FW_PID=""
cleanup() {
    local p
    [ -n "$FW_PID" ] && kill -CONT "$FW_PID" 2>/dev/null
    for p in "${PIDS_TO_KILL[@]}"; do kill "$p" 2>/dev/null; done
    for p in "${PIDS_TO_KILL[@]}"; do wait "$p" 2>/dev/null; done
    [ -d "$W/pg" ] && paidb_stop_pg "$W/pg"
    rm -rf "$W"
}
trap cleanup EXIT

since() { awk -v a="$1" -v b="$(now)" 'BEGIN {printf "%.1f", b - a}'; }
# CPU seconds used so far by a process (0 if it is gone)
cpu_secs() { awk -v hz="$(getconf CLK_TCK)" '{printf "%.1f", ($14 + $15) / hz}' "/proc/$1/stat" 2>/dev/null || echo 0; }
# busy and total jiffies of the whole machine
machine_cpu() { awk '/^cpu / {print $2 + $3 + $4 + $7 + $8, $2 + $3 + $4 + $5 + $6 + $7 + $8}' /proc/stat; }
verdict() { awk -v v="$1" -v t="$2" -v op="$3" 'BEGIN {ok = (op == "<") ? (v < t) : (v >= t); print ok ? "PASS" : "MISS"}'; }

# Start a kube-fake: start_fake NAME [args...]; sets FAKE_URL and FAKE_PID
start_fake() {
    local name=$1; shift
    rm -f "$W/$name.port"
    "$FAKE" --port 0 --port-file "$W/$name.port" "$@" >"$W/$name.out" 2>&1 &
    FAKE_PID=$!
    PIDS_TO_KILL+=("$FAKE_PID")
    local i
    for i in $(seq 300); do [ -s "$W/$name.port" ] && break; sleep 0.1; done
    [ -s "$W/$name.port" ] || { echo "stress: kube-fake did not start" >&2; cat "$W/$name.out" >&2; exit 1; }
    FAKE_URL="http://127.0.0.1:$(cat "$W/$name.port")"
}

echo "== stress: $JOBS jobs through SQL into the API server (kube-fake, simulated controller OFF)"
echo "machine: $(nproc) CPUs, $(awk '/MemTotal/ {printf "%.0f GB", $2 / 1048576}' /proc/meminfo) RAM; PostgreSQL fsync off (paidb_start_pg: this measures paidb, not the disk), shared_buffers 512MB"

# ------------------------------------------------------------------ servers
START=$(now)
start_fake main --history-size 400000 --bookmark-interval 1
MAIN_URL=$FAKE_URL
MAIN_PID=$FAKE_PID
PORT=$(paidb_free_port)
paidb_start_pg "$W/pg" "$PORT" "shared_buffers = '512MB'" "max_connections = 50" \
    "shared_preload_libraries = 'paidb'" "paidb.k8s_api_server = '$MAIN_URL'" || exit 1
export PGHOST=127.0.0.1 PGPORT=$PORT PGUSER=postgres PGDATABASE=postgres
PSQL="psql -X -q -v ON_ERROR_STOP=1"
q() { psql -X -At -c "$1"; }
$PSQL -f "$ROOT/test/bench/fixtures.sql" >/dev/null || exit 1
q "SELECT t FROM bench.template" > "$W/template.json"

# ------------------------------------------------------------------ the fake alone
# Its create capacity with the same ~3 KB requests and 8 clients: the floor
# no client of this fake can beat (paidb's workers still wait for CREATE
# EXTENSION, so nothing else runs).
start_fake cap --history-size 400000
CAP_PID=$FAKE_PID
read -r CAP_RATE CAP_SECS < <($HELPER create-rate --url "$FAKE_URL" --template "$W/template.json" --n 10000 --procs $CLIENTS)
kill "$CAP_PID"; wait "$CAP_PID" 2>/dev/null
CAP_100K=$(awk -v r="$CAP_RATE" -v n="$JOBS" 'BEGIN {printf "%.1f", n / r}')
echo "kube-fake alone: 10000 creates of ~3 KB by $CLIENTS clients in ${CAP_SECS} s = ${CAP_RATE}/s (=> $JOBS would take ${CAP_100K} s)"

# ------------------------------------------------------------------ paidb
FAKE_URL=$MAIN_URL
$PSQL -c "CREATE EXTENSION paidb CASCADE" || exit 1
workers_ready() { [ "$(q "SELECT bool_and(pid IS NOT NULL AND state NOT LIKE 'waiting%') FROM paidb.status()")" = t ]; }
poll workers_ready 0.2 60 || { echo "stress: the workers did not start" >&2; tail -20 "$W/pg.log" >&2; exit 1; }
declare -A WPID
while IFS='|' read -r w p; do WPID[$w]=$p; done < <(q "SELECT worker, pid FROM paidb.status()")

# memory: sample every worker's /proc status twice a second
(
    declare -A pid
    for w in "${!WPID[@]}"; do pid[$w]=${WPID[$w]}; done
    while :; do
        for w in "${!pid[@]}"; do
            if [ ! -r "/proc/${pid[$w]}/status" ]; then
                pid[$w]=$(q "SELECT coalesce(pid, 0) FROM paidb.status() WHERE worker = '$w'" 2>/dev/null || echo 0)
            fi
            awk -v w="$w" '/^(VmRSS|VmHWM|RssAnon|RssShmem):/ {v[$1] = $2}
                END {if (v["VmRSS:"] != "") printf "%s|%d|%d|%d|%d\n", w, v["VmRSS:"], v["VmHWM:"], v["RssAnon:"], v["RssShmem:"]}' \
                "/proc/${pid[$w]}/status" 2>/dev/null
        done
        sleep 0.5
    done
) > "$W/rss.log" &
SAMPLER=$!
PIDS_TO_KILL+=("$SAMPLER")

# ------------------------------------------------------------------ latency at light load
# 200 single submissions 10 ms apart; for each, the time from the last
# statement of its transaction (clock_timestamp() just before COMMIT, so
# the commit itself counts) to the framework appearing in the API server
# (a watch client's receipt of the ADDED event).
$HELPER arrivals --url "$FAKE_URL" --prefix lat --n $LAT_N --out "$W/arrivals" --ready "$W/arrivals.ready" &
ARR=$!
PIDS_TO_KILL+=("$ARR")
arrivals_ready() { [ -e "$W/arrivals.ready" ]; }
poll arrivals_ready 0.05 30 || { echo "stress: watch client did not start" >&2; exit 1; }
for i in $(seq $LAT_N); do
    echo "SELECT name || '|' || extract(epoch FROM clock_timestamp()) FROM paidb.put_framework_request(replace((SELECT t FROM bench.template), '__name__', 'lat$i')::jsonb);"
    echo "SELECT pg_sleep(0.01);"
done > "$W/lat.sql"
psql -X -At -f "$W/lat.sql" | grep '|' > "$W/committed"
all_arrived() { [ "$(wc -l < "$W/arrivals")" -ge $LAT_N ]; }
poll all_arrived 0.1 60 || echo "stress: only $(wc -l < "$W/arrivals") of $LAT_N jobs arrived"
kill "$ARR" 2>/dev/null
awk -F'|' 'NR == FNR {c[$1] = $2; next} ($1 in c) {printf "%.3f\n", ($2 - c[$1]) * 1000}' \
    "$W/committed" <(tr ' ' '|' < "$W/arrivals") | sort -n > "$W/latencies"
read -r LAT_N_OK P50 P99 PMAX < <(awk '{a[NR] = $1} END {i50 = int(NR * 0.50 + 0.5); i99 = int(NR * 0.99 + 0.5);
    if (i50 < 1) i50 = 1; if (i99 < 1) i99 = 1; printf "%d %.1f %.1f %.1f\n", NR, a[i50], a[i99], a[NR]}' "$W/latencies")
echo
echo "commit -> create in the API server, $LAT_N_OK single submissions 10 ms apart:"
echo "  p50 ${P50} ms (target < 20 ms: $(verdict "$P50" 20 '<'))   p99 ${P99} ms (target < 100 ms: $(verdict "$P99" 100 '<'))   max ${PMAX} ms"

# ------------------------------------------------------------------ 100,000 jobs
cat > "$W/submit.sql" <<'EOS'
SELECT 1 FROM paidb.put_framework_request(replace((SELECT t FROM bench.template), '__name__', 's' || nextval('bench.stress_seq'))::jsonb);
EOS
chmod 644 "$W/submit.sql"
$PSQL -c "CREATE SEQUENCE bench.stress_seq" || exit 1
PER_CLIENT=$((JOBS / CLIENTS))
JOBS=$((PER_CLIENT * CLIENTS))
UNSYNCED="SELECT count(*) FROM paidb.framework WHERE NOT api_server_deleted AND (NOT request_synced OR sub_state = 'Completed')"
$HELPER added --url "$FAKE_URL" --prefix s --n $JOBS --out "$W/added" --ready "$W/added.ready" &
ADDED=$!
PIDS_TO_KILL+=("$ADDED")
added_ready() { [ -e "$W/added.ready" ]; }
poll added_ready 0.05 30 || { echo "stress: watch client did not start" >&2; exit 1; }
declare -A CPU0
for w in "${!WPID[@]}"; do CPU0[$w]=$(cpu_secs "${WPID[$w]}"); done
CPU0[fake]=$(cpu_secs "$MAIN_PID")
read -r BUSY0 TOTAL0 < <(machine_cpu)
T0=$(now)
$PG_BIN/pgbench -n -h "$PGHOST" -p "$PGPORT" -U postgres -c $CLIENTS -j 2 -t $PER_CLIENT -f "$W/submit.sql" postgres > "$W/pgbench.log" 2>&1 \
    || { echo "stress: pgbench failed" >&2; cat "$W/pgbench.log" >&2; exit 1; }
T_SUB=$(since "$T0")
CREATED_AT_SUB=$(tail -1 "$W/added" 2>/dev/null | cut -d' ' -f1)
T_SYNCED=""
# poll the database (the partial index of the work list) until every job is
# confirmed, at most 6 minutes; the API server is not polled (a LIST of
# 100,000 objects would load the fake)
for i in $(seq 720); do
    if [ "$(q "$UNSYNCED")" = 0 ]; then
        T_SYNCED=$(since "$T0")
        break
    fi
    sleep 0.5
done
read -r BUSY1 TOTAL1 < <(machine_cpu)
CPU_LINE=""
for w in sync "framework watcher" "event watcher"; do
    CPU_LINE+="$w $(awk -v a="${CPU0[$w]}" -v b="$(cpu_secs "${WPID[$w]}")" 'BEGIN {printf "%.1f", b - a}') s, "
done
CPU_LINE+="kube-fake $(awk -v a="${CPU0[fake]}" -v b="$(cpu_secs "$MAIN_PID")" 'BEGIN {printf "%.1f", b - a}') s; "
CPU_LINE+="machine busy $(awk -v b0="$BUSY0" -v t0="$TOTAL0" -v b1="$BUSY1" -v t1="$TOTAL1" 'BEGIN {printf "%.0f", 100 * (b1 - b0) / (t1 - t0)}')% of $(nproc) CPUs"
T_CREATED=$(awk -v n=$JOBS -v t0="$T0" '$1 >= n {printf "%.1f", $2 - t0}' "$W/added")
kill "$ADDED" 2>/dev/null
IN_FAKE=$($HELPER count --url "$FAKE_URL")
SUB_RATE=$(awk -v n=$JOBS -v t="$T_SUB" 'BEGIN {printf "%.0f", n / t}')
echo
echo "$JOBS jobs submitted by pgbench ($CLIENTS clients, one ~3 KB put_framework_request per transaction):"
echo "  submitted in ${T_SUB} s (${SUB_RATE}/s); ${CREATED_AT_SUB:-0} of them created in the API server by then"
if [ -n "$T_CREATED" ]; then
    echo "  all created in the API server after ${T_CREATED} s" \
        "($(awk -v n=$JOBS -v c="${CREATED_AT_SUB:-0}" -v a="$T_CREATED" -v b="$T_SUB" 'BEGIN {if (a > b) printf "%.0f", (n - c) / (a - b); else print "-"}')/s after the submissions ended)"
else
    echo "  NOT all created in the API server (a watch client saw $(tail -1 "$W/added" | cut -d' ' -f1))"
fi
if [ -n "$T_SYNCED" ]; then
    echo "  all request_synced after ${T_SYNCED} s (target < 120 s: $(verdict "$T_SYNCED" 120 '<'));" \
        "kube-fake alone needs ${CAP_100K} s for the creates"
else
    echo "  NOT all request_synced within 6 minutes: $(q "$UNSYNCED") left (target < 120 s: MISS)"
fi
echo "  frameworks in the API server: $IN_FAKE (expected $((JOBS + LAT_N)))"
echo "  CPU used until all synced: $CPU_LINE"
read -r SENT ERRS < <(psql -X -At -F' ' -c "SELECT requests_sent, errors FROM paidb.status() WHERE worker = 'sync'")
echo "  sync worker: $SENT requests sent, $ERRS errors"

# ------------------------------------------------------------------ watch ingestion
# The framework watcher is stopped (SIGSTOP) while $WATCH_N frameworks get a
# running status in the API server, so that it then faces a backlog: the
# time from SIGCONT until it has applied them all is its ingestion rate.  A
# plain watch client reading the same backlog gives the fake's own delivery
# rate.
FW_PID=$(psql -X -At -c "SELECT pid FROM paidb.status() WHERE worker = 'framework watcher'")
EV0=$(psql -X -At -c "SELECT events_applied FROM paidb.status() WHERE worker = 'framework watcher'")
RV0=$(curl -s "$FAKE_URL/_fake/rv" | sed 's/.*"resourceVersion": *"\([0-9]*\)".*/\1/')
kill -STOP "$FW_PID"
read -r PATCH_RATE PATCH_SECS < <($HELPER patch-status --url "$FAKE_URL" --prefix s --first 1 --n "$WATCH_N" --procs 4)
read -r DELIVER_RATE DELIVER_SECS < <($HELPER watch-rate --url "$FAKE_URL" --from-rv "$RV0" --n "$WATCH_N")
FW_CPU0=$(cpu_secs "$FW_PID")
T0=$(now)
kill -CONT "$FW_PID"
ingested() { [ "$(q "SELECT events_applied FROM paidb.status() WHERE worker = 'framework watcher'")" -ge $((EV0 + WATCH_N)) ]; }
if poll ingested 0.05 300; then
    T_ING=$(since "$T0")
else
    T_ING=""
fi
RUNNING=$(psql -X -At -c "SELECT count(*) FROM paidb.framework WHERE sub_state = 'AttemptRunning' AND state = 'RUNNING'")
echo
echo "framework watcher ingestion, a backlog of $WATCH_N status events (~5 KB objects):"
if [ -n "$T_ING" ]; then
    ING_RATE=$(awk -v n="$WATCH_N" -v t="$T_ING" 'BEGIN {printf "%.0f", n / t}')
    echo "  applied in ${T_ING} s = ${ING_RATE} events/s (target >= 5000/s: $(verdict "$ING_RATE" 5000 '>='))"
    echo "  the framework watcher used $(awk -v a="$FW_CPU0" -v b="$(cpu_secs "$FW_PID")" -v n="$WATCH_N" \
        'BEGIN {printf "%.1f CPU s meanwhile (%.0f us per event)", b - a, (b - a) * 1e6 / n}')"
else
    echo "  NOT applied within 5 minutes (target >= 5000/s: MISS)"
fi
echo "  kube-fake delivering the same backlog to a plain watch client: ${DELIVER_RATE} events/s (${DELIVER_SECS} s)"
echo "  kube-fake applying the status patches (4 clients): ${PATCH_RATE}/s"
echo "  jobs RUNNING in the database: $RUNNING (expected $WATCH_N)"

# ------------------------------------------------------------------ memory
kill "$SAMPLER" 2>/dev/null; wait "$SAMPLER" 2>/dev/null
echo
echo "peak memory of each worker during the run (sampled twice a second; VmRSS counts the"
echo "shared buffers a process touched, which all backends share; RssAnon is its own memory):"
for w in sync "framework watcher" "event watcher"; do
    awk -F'|' -v w="$w" '$1 == w {if ($2 > rss) rss = $2; if ($3 > hwm) hwm = $3; if ($4 > anon) anon = $4; if ($5 > shm) shm = $5}
        END {printf "  %-17s VmHWM %6.1f MB  peak VmRSS %6.1f MB (shared buffers up to %6.1f MB)  peak RssAnon %5.1f MB (target < 64 MB: %s)\n",
             w, hwm / 1024, rss / 1024, shm / 1024, anon / 1024, (anon / 1024 < 64 ? "PASS" : "MISS")}' "$W/rss.log"
done
if grep -q "terminated by signal\|server process .* was terminated" "$W/pg.log"; then
    echo "  WARNING: a server process crashed during the run:"
    grep "terminated by signal" "$W/pg.log" | head -3
fi
echo "stress: done in $(since "$START") s"
