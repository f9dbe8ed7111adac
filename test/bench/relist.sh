#!/usr/bin/env bash
# test/bench/relist.sh — the framework watcher's re-list at scale, this tree
# beside release 0.2 (commit acb8bb9) in the same run (issue 19: "a re-list
# of 1,000,000 unchanged jobs in <= 60 s").  For each build, one after the
# other (a private PostgreSQL copy each, fsync on, workers preloaded): a
# kube-fake is loaded with BENCH_RELIST_JOBS running frameworks (its admin
# /_fake/load: ~5 KB objects with a 4-task running status, as a restore from
# an etcd backup would hold them), paidb is created and its framework
# watcher's first run imports them all (time: the import); then the fake
# ends the watch and answers the next with 410 Gone, and the watcher lists
# again the same, unchanged frameworks (time: from the 410 until the list's
# position is stored, paidb.watch_state.listed_at; the fake's LIST
# included).  Prints each time, jobs/s, the watcher's CPU per job, and the
# figure against the target; checks that every job is in paidb.framework.
# Can run alone; run-bench.sh runs it.  Run as root.
#
#   BENCH_RELIST_JOBS (1000000)   frameworks in the API server
#   BENCH_RELIST_TIMEOUT (3600)   seconds to wait for an import or a re-list
set -uo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
RELEASE=acb8bb9
. "$ROOT/test/lib/common.sh"
. "$ROOT/test/bench/lib.sh"
[ "$(id -u)" = 0 ] || { echo "run as root" >&2; exit 2; }
JOBS=${BENCH_RELIST_JOBS:-1000000}
TIMEOUT=${BENCH_RELIST_TIMEOUT:-3600}
TARGET_SECS=60
CHUNK=100000
FAKE="$ROOT/test/kube-fake/kube-fake"
git -C "$ROOT" cat-file -e "$RELEASE^{commit}" 2>/dev/null || { echo "SKIP: commit $RELEASE is not in $ROOT"; exit 0; }
paidb_install_packages >/dev/null || exit 1

W=$(mktemp -d /tmp/paidb-relist.XXXXXX)
chmod 755 "$W"; chown postgres "$W"
FAKE_PID=""
cleanup() {
    [ -n "$FAKE_PID" ] && kill "$FAKE_PID" 2>/dev/null && wait "$FAKE_PID" 2>/dev/null
    for b in old new; do
        PG_BIN=$W/root-$b/usr/lib/postgresql/15/bin
        [ -d "$W/pg-$b" ] && paidb_stop_pg "$W/pg-$b"
    done
    rm -rf "$W"
}
trap cleanup EXIT
since() { awk -v a="$1" -v b="$(now)" 'BEGIN {printf "%.1f", b - a}'; }
cpu_secs() { awk -v hz="$(getconf CLK_TCK)" '{printf "%.2f", ($14 + $15) / hz}' "/proc/$1/stat" 2>/dev/null || echo 0; }

# ------------------------------------------------------------------ builds
echo "== the framework watcher's import and re-list of $JOBS frameworks: 0.2 ($RELEASE) and this tree"
declare -A LABEL=([old]="0.2 ($RELEASE)" [new]="now")
mkdir -p "$W/src-old" "$W/src-new" && git -C "$ROOT" archive "$RELEASE" | tar -x -C "$W/src-old" || exit 1
# this tree as it is now (untracked sources too), without build products
(cd "$ROOT" && git ls-files -z -co --exclude-standard | tar --null -T - --ignore-failed-read -cf - 2>/dev/null) | tar -x -C "$W/src-new"
for b in old new; do
    PAIDB_PG_ROOT=$W/root-$b
    PG_BIN=$PAIDB_PG_ROOT/usr/lib/postgresql/15/bin
    paidb_private_pg || exit 1
    nice make -C "$W/src-$b" -s -j2 >/dev/null 2>"$W/make-$b.err" || { echo "build of $b failed:" >&2; cat "$W/make-$b.err" >&2; exit 1; }
    make -C "$W/src-$b" -s install DESTDIR="$PAIDB_PG_ROOT" >/dev/null || exit 1
done

# The frameworks: bench.request_3kb (fixtures.sql) with the running status
# of the stress helper (4 tasks), names r1..rN.
template() {
    "$PG_BIN/psql" -X -At -c "SELECT t FROM bench.template" |
        /usr/bin/python3 -c '
import json, sys
sys.path.insert(0, sys.argv[1])
from stress_helper import running_status
obj = json.loads(sys.stdin.read())
obj.update(running_status("__name__"))
print(json.dumps(obj))' "$ROOT/test/bench/stress"
}

# run BUILD: sets IMPORT_S, IMPORT_CPU, RELIST_S, RELIST_CPU (CPU: watcher us per job)
run() {
    local b=$1 url port t0 fw c0 mark i n
    PAIDB_PG_ROOT=$W/root-$b
    PG_BIN=$PAIDB_PG_ROOT/usr/lib/postgresql/15/bin
    q() { "$PG_BIN/psql" -X -At -v ON_ERROR_STOP=1 -c "$1"; }
    rm -f "$W/fake.port"
    "$FAKE" --port 0 --port-file "$W/fake.port" --history-size 10000 >"$W/fake-$b.out" 2>&1 &
    FAKE_PID=$!
    poll "test -s $W/fake.port" 0.1 30 || { echo "kube-fake did not start" >&2; cat "$W/fake-$b.out" >&2; return 1; }
    url="http://127.0.0.1:$(cat "$W/fake.port")"
    port=$(paidb_free_port)
    export PGHOST=127.0.0.1 PGUSER=postgres PGDATABASE=postgres PGPORT=$port
    paidb_start_pg "$W/pg-$b" "$port" "fsync = on" "shared_buffers = '512MB'" "max_connections = 50" \
        "max_wal_size = '4GB'" "shared_preload_libraries = 'paidb'" "paidb.k8s_api_server = '$url'" || return 1
    # the template first (the workers wait for CREATE EXTENSION paidb)
    "$PG_BIN/psql" -X -q -v ON_ERROR_STOP=1 -f "$ROOT/test/bench/fixtures.sql" >/dev/null || return 1
    template > "$W/template.json" || return 1
    t0=$(now)
    for ((i = 1; i <= JOBS; i += CHUNK)); do
        n=$((JOBS - i + 1 < CHUNK ? JOBS - i + 1 : CHUNK))
        /usr/bin/python3 -c 'import json, sys; print(json.dumps({"resource": "frameworks", "template": open(sys.argv[1]).read().strip(),
            "prefix": "r", "first": int(sys.argv[2]), "n": int(sys.argv[3])}))' "$W/template.json" "$i" "$n" > "$W/load.json"
        curl -sf -X POST -H 'Content-Type: application/json' --data-binary @"$W/load.json" "$url/_fake/load" >/dev/null \
            || { echo "loading the fake failed at r$i" >&2; return 1; }
    done
    echo "  ${LABEL[$b]}: the fake holds $JOBS frameworks (loaded in $(since "$t0") s)"

    t0=$(now)
    q "CREATE EXTENSION paidb CASCADE" >/dev/null || return 1
    listed() { [ "$(q "SELECT coalesce(bool_and(listed_at IS NOT NULL), false) FROM paidb.watch_state WHERE watcher = 'frameworks'")" = t ]; }
    poll listed 0.5 "$TIMEOUT" || { echo "${LABEL[$b]}: the import did not end within $TIMEOUT s" >&2; return 1; }
    IMPORT_S=$(since "$t0")
    fw=$(q "SELECT pid FROM paidb.status() WHERE worker = 'framework watcher'")
    n=$(q "SELECT count(*) FROM paidb.framework")
    [ "$n" = "$JOBS" ] || { echo "${LABEL[$b]}: $n jobs imported, not $JOBS" >&2; return 1; }
    IMPORT_CPU=$(awk -v c="$(cpu_secs "$fw")" -v n="$JOBS" 'BEGIN {printf "%.0f", c * 1e6 / n}')
    q "CHECKPOINT" >/dev/null

    mark=$(q "SELECT max(listed_at) FROM paidb.watch_state WHERE watcher = 'frameworks'")
    c0=$(cpu_secs "$fw")
    t0=$(now)
    curl -sf -X POST -H 'Content-Type: application/json' \
        -d '{"status": 410, "verb": "watch", "resource": "frameworks", "inStream": true, "count": 1}' "$url/_fake/faults" >/dev/null &&
    curl -sf -X POST -H 'Content-Type: application/json' -d '{"mode": "end", "resource": "frameworks"}' \
        "$url/_fake/watches/cut" >/dev/null || return 1
    relisted() { [ "$(q "SELECT coalesce(bool_and(listed_at > '$mark'), false) FROM paidb.watch_state WHERE watcher = 'frameworks'")" = t ]; }
    poll relisted 0.2 "$TIMEOUT" || { echo "${LABEL[$b]}: the re-list did not end within $TIMEOUT s" >&2; return 1; }
    RELIST_S=$(since "$t0")
    RELIST_CPU=$(awk -v a="$c0" -v c="$(cpu_secs "$fw")" -v n="$JOBS" 'BEGIN {printf "%.0f", (c - a) * 1e6 / n}')
    n=$(q "SELECT count(*) FROM paidb.framework WHERE NOT api_server_deleted")
    [ "$n" = "$JOBS" ] || { echo "${LABEL[$b]}: $n live jobs after the re-list, not $JOBS" >&2; return 1; }
    paidb_stop_pg "$W/pg-$b"; rm -rf "$W/pg-$b"
    kill "$FAKE_PID"; wait "$FAKE_PID" 2>/dev/null; FAKE_PID=""
}

declare -A IMP IMPC REL RELC
for b in old new; do
    run "$b" || exit 1
    IMP[$b]=$IMPORT_S; IMPC[$b]=$IMPORT_CPU; REL[$b]=$RELIST_S; RELC[$b]=$RELIST_CPU
done
rate() { awk -v n="$JOBS" -v t="$1" 'BEGIN {printf "%.0f", (t > 0) ? n / t : 0}'; }
printf '  %-44s %12s %12s %8s\n' "" "${LABEL[old]}" "${LABEL[new]}" "now/0.2"
printf '  %-44s %11ss %11ss %8s\n' "first-run import of $JOBS frameworks" "${IMP[old]}" "${IMP[new]}" \
    "$(awk -v a="${IMP[old]}" -v b="${IMP[new]}" 'BEGIN {printf "%.2f", b / a}')"
printf '  %-44s %12s %12s\n' "  jobs/s" "$(rate "${IMP[old]}")" "$(rate "${IMP[new]}")"
printf '  %-44s %12s %12s\n' "  framework watcher CPU us per job" "${IMPC[old]}" "${IMPC[new]}"
printf '  %-44s %11ss %11ss %8s\n' "re-list of the same $JOBS, unchanged" "${REL[old]}" "${REL[new]}" \
    "$(awk -v a="${REL[old]}" -v b="${REL[new]}" 'BEGIN {printf "%.2f", b / a}')"
printf '  %-44s %12s %12s\n' "  jobs/s" "$(rate "${REL[old]}")" "$(rate "${REL[new]}")"
printf '  %-44s %12s %12s\n' "  framework watcher CPU us per job" "${RELC[old]}" "${RELC[new]}"
if [ "$JOBS" -ge 1000000 ]; then
    echo "  re-list of $JOBS unchanged jobs (target <= ${TARGET_SECS} s): ${REL[new]} s: $(awk -v t="${REL[new]}" -v m="$TARGET_SECS" 'BEGIN {print (t <= m) ? "PASS" : "MISS"}')"
else
    echo "  (the target is for 1,000,000 jobs: BENCH_RELIST_JOBS=$JOBS measures no verdict)"
fi
