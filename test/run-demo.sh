#!/usr/bin/env bash
# paidb demo: build, install and run paidb on a throwaway PostgreSQL with the
# bundled fake Kubernetes API server and its simulated frameworkcontroller,
# then show jobs going through their lives: one that succeeds, one that
# fails with retries (and its retry history), one that is stopped.
#
# Run as root on Debian 12.  Options:
#   --keep     leave PostgreSQL and the fake API server running at the end
# To use a real cluster instead of the fake, set PAIDB_K8S_API_SERVER (and
# PAIDB_K8S_TOKEN_FILE, PAIDB_K8S_CA_FILE, PAIDB_K8S_NAMESPACE as needed);
# see docs/real-cluster.md.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
. "$ROOT/test/lib/common.sh"

KEEP=0
[ "${1:-}" = "--keep" ] && KEEP=1
[ "$(id -u)" = 0 ] || { echo "run as root (PostgreSQL itself runs as the postgres user)" >&2; exit 2; }

paidb_install_packages
paidb_build_install "$ROOT"

DEMO=/tmp/paidb-demo
rm -rf "$DEMO"
mkdir -p "$DEMO"
chown postgres "$DEMO"
FAKE_PID=
cleanup() {
    [ "$KEEP" = 1 ] && return
    paidb_stop_pg "$DEMO/pg"
    [ -n "$FAKE_PID" ] && kill "$FAKE_PID" 2>/dev/null || true
}
trap cleanup EXIT

if [ -n "${PAIDB_K8S_API_SERVER:-}" ]; then
    API=$PAIDB_K8S_API_SERVER
    echo "== using the API server at $API"
else
    echo "== starting the fake API server with a simulated frameworkcontroller"
    /usr/bin/python3 "$ROOT/test/kube-fake/kube-fake" --port 0 --port-file "$DEMO/fake.port" \
        --simulate-controller --run-seconds 2 --step-seconds 0.3 --log "$DEMO/fake-requests.log" \
        > "$DEMO/fake.log" 2>&1 &
    FAKE_PID=$!
    for _ in $(seq 100); do [ -s "$DEMO/fake.port" ] && break; sleep 0.1; done
    API="http://127.0.0.1:$(cat "$DEMO/fake.port")"
    echo "   $API"
fi

PORT=$(paidb_free_port)
echo "== starting PostgreSQL with shared_preload_libraries = 'paidb' on port $PORT"
paidb_start_pg "$DEMO/pg" "$PORT" \
    "shared_preload_libraries = 'paidb'" \
    "paidb.database = 'postgres'" \
    "paidb.k8s_api_server = '$API'" \
    "paidb.k8s_namespace = '${PAIDB_K8S_NAMESPACE:-default}'" \
    "paidb.k8s_token_file = '${PAIDB_K8S_TOKEN_FILE:-}'" \
    "paidb.k8s_ca_file = '${PAIDB_K8S_CA_FILE:-}'" \
    "paidb.resync_interval = '10s'"

psql_() { su postgres -c "psql -X -q -h 127.0.0.1 -p $PORT -d postgres -v ON_ERROR_STOP=1 $*"; }
psql_ "-c 'CREATE EXTENSION paidb CASCADE'"

# An OpenPAI-style framework request: the name is md5(user~job), as OpenPAI makes it.
submit() {  # job exit-codes max-retries run-seconds
    local job=$1 codes=$2 retries=$3 run=$4
    psql_ -At <<EOF
SELECT name FROM paidb.put_framework_request(jsonb_build_object(
  'apiVersion', 'frameworkcontroller.microsoft.com/v1', 'kind', 'Framework',
  'metadata', jsonb_build_object('name', md5('alice~$job'),
     'labels', jsonb_build_object('userName', 'alice', 'virtualCluster', 'default', 'jobName', '$job'),
     'annotations', jsonb_build_object('jobName', '$job', 'userName', 'alice', 'totalGpuNumber', '1',
        'config', E'protocolVersion: 2\nname: $job\ntype: job\nextras:\n  jobStatusChangeNotification:\n    running: true\n',
        'kube-fake/exit-codes', '$codes', 'kube-fake/run-seconds', '$run')),
  'spec', jsonb_build_object('executionType', 'Start',
     'retryPolicy', jsonb_build_object('fancyRetryPolicy', true, 'maxRetryCount', $retries),
     'taskRoles', jsonb_build_array(jsonb_build_object('name', 'worker', 'taskNumber', 1,
        'task', jsonb_build_object('pod', jsonb_build_object('spec', jsonb_build_object(
           'containers', jsonb_build_array(jsonb_build_object('name', 'main', 'image', 'ubuntu:20.04'))))))))))
EOF
}

# Print each state change of a job until it reaches one of the final states.
follow() {  # job final-states... 
    local job=$1; shift
    local last="" state deadline=$((SECONDS + 120))
    while [ $SECONDS -lt $deadline ]; do
        state=$(psql_ -At -c "\"SELECT state || ' (' || coalesce(sub_state, '-') || ', attempt ' || coalesce(snapshot->'status'->'attemptStatus'->>'id', '-') || ', synced ' || request_synced || ')' FROM paidb.framework WHERE job_name = '$job'\"")
        if [ "$state" != "$last" ]; then
            printf '   %-10s %s\n' "$job" "$state"
            last=$state
        fi
        for f in "$@"; do [[ "$state" == "$f "* ]] && return 0; done
        sleep 0.2
    done
    echo "   $job did not finish in time" >&2
    return 1
}

echo
echo "== a job that succeeds"
submit hello 0 0 2 >/dev/null
follow hello SUCCEEDED FAILED

echo
echo "== a job that fails (exit 1) and is retried twice"
submit flaky 1 2 1 >/dev/null
follow flaky SUCCEEDED FAILED
echo "   its retry history (paidb.framework_history):"
psql_ -c "\"SELECT h.attempt_index, h.snapshot->'status'->'attemptStatus'->'completionStatus'->>'code' AS exit_code, h.snapshot->'status'->'attemptStatus'->'completionStatus'->>'phrase' AS phrase FROM paidb.framework_history h JOIN paidb.framework f ON f.name = h.framework_name WHERE f.job_name = 'flaky' ORDER BY 1\""

echo
echo "== a long job that is stopped"
submit sleeper 0 0 3600 >/dev/null
follow sleeper RUNNING
psql_ -c "\"SELECT * FROM paidb.stop_framework(md5('alice~sleeper'))\""
follow sleeper STOPPED FAILED SUCCEEDED

echo
echo "== the jobs, as rest-server sees them"
psql_ -c "\"SELECT job_name, user_name, state, retries, app_exit_code, request_generation AS gen, request_synced AS synced, api_server_deleted AS deleted FROM paidb.framework ORDER BY submission_time\""
echo "== the workers (paidb.status())"
psql_ -c "\"SELECT worker, pid, state, resource_version, events_applied, requests_sent, errors FROM paidb.status()\""

if [ "$KEEP" = 1 ]; then
    echo "PostgreSQL: psql -h 127.0.0.1 -p $PORT -U postgres   (data in $DEMO/pg)"
    echo "API server: $API"
fi
echo "demo finished"
