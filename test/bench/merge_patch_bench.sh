#!/usr/bin/env bash
# Benchmark of paidb.jsonb_merge_patch against a plain PL/pgSQL RFC 7396
# implementation (test/bench/plpgsql_merge_patch.sql) and against jsonb ||,
# the cheapest thing that rebuilds a jsonb value.
#
# Needs: PGHOST/PGPORT/PGUSER/PGDATABASE set, CREATE EXTENSION paidb CASCADE done.
# Creates/replaces the scratch schema "bench" (left in place).
#
# Two documents:
#   * a ~3 KB OpenPAI framework request (2 task roles, job protocol YAML in
#     the config annotation), patched the way stop_framework and the
#     write-merger patch it: {"spec":{"executionType":"Stop"}} plus a change
#     of metadata.annotations.requestGeneration;
#   * a ~600 KB snapshot of a 1,000-instance job (request + status with 1,000
#     taskStatuses), patched the same way.
# Each figure is the median of BENCH_RUNS (default 7) runs; a run is a fixed
# number of calls in one PL/pgSQL loop timed with clock_timestamp(), on
# in-memory (detoasted) values.  Targets are printed as PASS/MISS; the exit
# status is 0 unless the benchmark itself could not run.
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
RUNS=${BENCH_RUNS:-7}
export PGOPTIONS="${PGOPTIONS:-} -c client_min_messages=warning"
PSQL=(psql -X -q -v ON_ERROR_STOP=1)

"${PSQL[@]}" -f "$HERE/plpgsql_merge_patch.sql" >/dev/null

"${PSQL[@]}" >/dev/null <<'SQL'
DROP TABLE IF EXISTS bench.merge_patch_docs;
CREATE TABLE bench.merge_patch_docs (name text PRIMARY KEY, doc jsonb NOT NULL);

-- A framework request as OpenPAI's rest-server writes it.
INSERT INTO bench.merge_patch_docs VALUES ('request', $json$
{
  "apiVersion": "frameworkcontroller.microsoft.com/v1",
  "kind": "Framework",
  "metadata": {
    "name": "5f3c2a0e9b8d47c1a6e2f0d4b7c9e1a3",
    "labels": {
      "userName": "alice",
      "virtualCluster": "vc-research",
      "jobName": "mnist-distributed-0712"
    },
    "annotations": {
      "jobName": "alice~mnist-distributed-0712",
      "config": "protocolVersion: 2\nname: mnist-distributed-0712\ntype: job\njobRetryCount: 2\nprerequisites:\n  - type: dockerimage\n    uri: 'openpai/standard:python_3.6-pytorch_1.2.0-gpu'\n    name: docker_image_0\ntaskRoles:\n  ps:\n    instances: 1\n    dockerImage: docker_image_0\n    resourcePerInstance: {gpu: 0, cpu: 4, memoryMB: 8192}\n    commands:\n      - python dist_mnist.py --job_name=ps\n  worker:\n    instances: 2\n    completion:\n      minFailedInstances: 1\n    dockerImage: docker_image_0\n    resourcePerInstance: {gpu: 2, cpu: 8, memoryMB: 32768}\n    commands:\n      - python dist_mnist.py --job_name=worker\ndefaults:\n  virtualCluster: vc-research\nextras:\n  com.microsoft.pai.runtimeplugin:\n    - plugin: ssh\n      parameters:\n        jobssh: true\n  hivedScheduler:\n    jobPriorityClass: prod\n",
      "totalGpuNumber": "4",
      "logPathInfix": "alice/5f3c2a0e9b8d47c1a6e2f0d4b7c9e1a3",
      "requestGeneration": "1"
    }
  },
  "spec": {
    "executionType": "Start",
    "retryPolicy": {"fancyRetryPolicy": true, "maxRetryCount": 2},
    "taskRoles": [
      {
        "name": "ps",
        "taskNumber": 1,
        "frameworkAttemptCompletionPolicy": {"minFailedTaskCount": 1, "minSucceededTaskCount": -1},
        "task": {
          "retryPolicy": {"fancyRetryPolicy": false, "maxRetryCount": 0},
          "podGracefulDeletionTimeoutSec": 1800,
          "pod": {
            "spec": {
              "restartPolicy": "Never",
              "serviceAccountName": "runtime-account",
              "schedulerName": "hivedscheduler",
              "containers": [{
                "name": "app",
                "image": "openpai/standard:python_3.6-pytorch_1.2.0-gpu",
                "command": ["/usr/local/pai/runtime"],
                "resources": {"limits": {"cpu": 4, "memory": "8192Mi", "github.com/fuse": 1}},
                "env": [
                  {"name": "PAI_FRAMEWORK_NAME", "value": "5f3c2a0e9b8d47c1a6e2f0d4b7c9e1a3"},
                  {"name": "PAI_CURRENT_TASK_ROLE_NAME", "value": "ps"},
                  {"name": "GANG_ALLOCATION", "value": "true"}
                ]
              }],
              "imagePullSecrets": [{"name": "5f3c2a0e9b8d47c1a6e2f0d4b7c9e1a3-regcred"}]
            }
          }
        }
      },
      {
        "name": "worker",
        "taskNumber": 2,
        "frameworkAttemptCompletionPolicy": {"minFailedTaskCount": 1, "minSucceededTaskCount": -1},
        "task": {
          "retryPolicy": {"fancyRetryPolicy": false, "maxRetryCount": 0},
          "podGracefulDeletionTimeoutSec": 1800,
          "pod": {
            "metadata": {"labels": {"userName": "alice", "virtualCluster": "vc-research", "type": "kube-launcher-task"}},
            "spec": {
              "restartPolicy": "Never",
              "serviceAccountName": "runtime-account",
              "schedulerName": "hivedscheduler",
              "priorityClassName": "5f3c2a0e9b8d47c1a6e2f0d4b7c9e1a3-priority",
              "containers": [{
                "name": "app",
                "image": "openpai/standard:python_3.6-pytorch_1.2.0-gpu",
                "command": ["/usr/local/pai/runtime"],
                "resources": {"limits": {"nvidia.com/gpu": 2, "cpu": 8, "memory": "32768Mi", "github.com/fuse": 1}},
                "env": [
                  {"name": "PAI_FRAMEWORK_NAME", "value": "5f3c2a0e9b8d47c1a6e2f0d4b7c9e1a3"},
                  {"name": "PAI_JOB_NAME", "value": "alice~mnist-distributed-0712"},
                  {"name": "PAI_USER_NAME", "value": "alice"},
                  {"name": "PAI_CURRENT_TASK_ROLE_NAME", "value": "worker"},
                  {"name": "GANG_ALLOCATION", "value": "true"}
                ],
                "volumeMounts": [{"name": "pai-vol", "mountPath": "/usr/local/pai"}]
              }],
              "volumes": [{"name": "pai-vol", "emptyDir": {}}],
              "imagePullSecrets": [{"name": "5f3c2a0e9b8d47c1a6e2f0d4b7c9e1a3-regcred"}]
            }
          }
        }
      }
    ]
  }
}
$json$);

-- A 1,000-instance job: the request (worker scaled to 1,000) plus the status
-- frameworkcontroller reports for it.
INSERT INTO bench.merge_patch_docs
SELECT 'snapshot',
       jsonb_set(r.doc, '{spec,taskRoles,1,taskNumber}', '1000')
       || jsonb_build_object('status', jsonb_build_object(
            'startTime', '2020-07-12T08:00:00Z',
            'transitionTime', '2020-07-12T08:04:31Z',
            'state', 'AttemptRunning',
            'completionTime', NULL,
            'retryPolicyStatus', jsonb_build_object('totalRetriedCount', 0, 'accountableRetriedCount', 0,
                                                    'retryDelaySec', NULL),
            'attemptStatus', jsonb_build_object(
                'id', 0,
                'startTime', '2020-07-12T08:00:02Z',
                'runTime', '2020-07-12T08:04:31Z',
                'completionTime', NULL,
                'instanceUID', '0_6c1d7e2a-7f3b-4c3e-9d51-0a8e2b4f6c01',
                'configMapName', '5f3c2a0e9b8d47c1a6e2f0d4b7c9e1a3-attempt',
                'configMapUID', '6c1d7e2a-7f3b-4c3e-9d51-0a8e2b4f6c01',
                'completionStatus', NULL,
                'taskRoleStatuses', jsonb_build_array(
                    jsonb_build_object('name', 'worker', 'podGracefulDeletionTimeoutSec', 1800,
                                       'taskStatuses', ts.tasks)))))
FROM bench.merge_patch_docs r,
     (SELECT jsonb_agg(jsonb_build_object(
                'index', i,
                'instanceUID', format('%s_%s', i, md5('task' || i)::uuid),
                'startTime', '2020-07-12T08:00:03Z',
                'runTime', '2020-07-12T08:03:' || lpad((i % 60)::text, 2, '0') || 'Z',
                'completionTime', NULL,
                'state', 'TaskAttemptRunning',
                'transitionTime', '2020-07-12T08:03:' || lpad((i % 60)::text, 2, '0') || 'Z',
                'retryPolicyStatus', jsonb_build_object('totalRetriedCount', 0, 'accountableRetriedCount', 0,
                                                        'retryDelaySec', NULL),
                'attemptStatus', jsonb_build_object(
                    'id', 0,
                    'startTime', '2020-07-12T08:00:03Z',
                    'runTime', '2020-07-12T08:03:' || lpad((i % 60)::text, 2, '0') || 'Z',
                    'completionTime', NULL,
                    'instanceUID', format('0_%s', md5('pod' || i)::uuid),
                    'podName', '5f3c2a0e9b8d47c1a6e2f0d4b7c9e1a3-worker-' || i,
                    'podUID', md5('pod' || i)::uuid,
                    'podNodeName', 'gpu-node-' || (i / 4),
                    'podIP', format('10.%s.%s.%s', 200 + i / 65536, (i / 256) % 256, i % 256),
                    'podHostIP', format('10.151.%s.%s', (i / 4) / 256, (i / 4) % 256),
                    'completionStatus', NULL)) ORDER BY i) AS tasks
      FROM generate_series(0, 999) AS i) AS ts
WHERE r.name = 'request';

INSERT INTO bench.merge_patch_docs VALUES
    ('patch', '{"spec":{"executionType":"Stop"},"metadata":{"annotations":{"requestGeneration":"2"}}}');

-- Seconds per call of one implementation: `calls` calls in one loop, on
-- values held in memory (the ::text::jsonb round trip leaves them detoasted).
CREATE OR REPLACE FUNCTION bench.merge_patch_seconds_per_call(impl text, target_name text, calls int)
RETURNS float8 LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    t jsonb;
    p jsonb;
    r jsonb;
    started timestamptz;
BEGIN
    SELECT doc::text::jsonb INTO t FROM bench.merge_patch_docs WHERE name = target_name;
    SELECT doc::text::jsonb INTO p FROM bench.merge_patch_docs WHERE name = 'patch';
    started := clock_timestamp();
    IF impl = 'paidb' THEN
        FOR i IN 1 .. calls LOOP
            r := paidb.jsonb_merge_patch(t, p);
        END LOOP;
    ELSIF impl = 'plpgsql' THEN
        FOR i IN 1 .. calls LOOP
            r := bench.plpgsql_merge_patch(t, p);
        END LOOP;
    ELSIF impl = 'concat' THEN
        FOR i IN 1 .. calls LOOP
            r := t || p;
        END LOOP;
    ELSIF impl = 'loop' THEN
        FOR i IN 1 .. calls LOOP
            r := t;
        END LOOP;
    ELSE
        RAISE EXCEPTION 'unknown implementation %', impl;
    END IF;
    RETURN extract(epoch FROM clock_timestamp() - started) / calls;
END
$$;

-- Median over runs, after one short warming-up run.
CREATE OR REPLACE FUNCTION bench.merge_patch_median(impl text, target_name text, calls int, runs int)
RETURNS float8 LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    times float8[] := '{}';
BEGIN
    PERFORM bench.merge_patch_seconds_per_call(impl, target_name, greatest(calls / 10, 1));
    FOR run IN 1 .. runs LOOP
        times := times || bench.merge_patch_seconds_per_call(impl, target_name, calls);
    END LOOP;
    RETURN (SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY x) FROM unnest(times) AS x);
END
$$;
SQL

# The three implementations must agree before they are timed.
"${PSQL[@]}" -At <<'SQL' | grep -qx t || { echo "merge_patch bench: implementations disagree" >&2; exit 1; }
SELECT bool_and(paidb.jsonb_merge_patch(d.doc, p.doc) = bench.plpgsql_merge_patch(d.doc, p.doc)
                AND paidb.jsonb_merge_patch(d.doc, p.doc) #>> '{spec,executionType}' = 'Stop'
                AND paidb.jsonb_merge_patch(d.doc, p.doc) - 'metadata' - 'spec' = d.doc - 'metadata' - 'spec')
FROM bench.merge_patch_docs d, bench.merge_patch_docs p
WHERE d.name IN ('request', 'snapshot') AND p.name = 'patch';
SQL

"${PSQL[@]}" -At -v runs="$RUNS" <<'SQL'
WITH sizes AS (
    SELECT max(octet_length(doc::text)) FILTER (WHERE name = 'request') AS request_bytes,
           max(octet_length(doc::text)) FILTER (WHERE name = 'snapshot') AS snapshot_bytes
    FROM bench.merge_patch_docs
), small AS (
    SELECT bench.merge_patch_median('paidb', 'request', 20000, :runs) AS paidb,
           bench.merge_patch_median('plpgsql', 'request', 2000, :runs) AS plpgsql,
           bench.merge_patch_median('concat', 'request', 20000, :runs) AS concat,
           bench.merge_patch_median('loop', 'request', 20000, :runs) AS loop
), large AS (
    SELECT bench.merge_patch_median('paidb', 'snapshot', 200, :runs) AS paidb,
           bench.merge_patch_median('concat', 'snapshot', 50, :runs) AS concat,
           bench.merge_patch_median('plpgsql', 'snapshot', 20, :runs) AS plpgsql
)
SELECT format('merge_patch documents: request %s bytes, snapshot %s bytes (JSON text); median of %s runs',
              request_bytes, snapshot_bytes, :runs) FROM sizes
UNION ALL
SELECT format('merge_patch 3KB: paidb %s calls/s, plpgsql %s calls/s, ratio %sx (target >= 10x) %s',
              round(1 / paidb), round(1 / plpgsql), round((plpgsql / paidb)::numeric, 1),
              CASE WHEN plpgsql / paidb >= 10 THEN 'PASS' ELSE 'MISS' END) FROM small
UNION ALL
SELECT format('merge_patch 3KB: jsonb || %s calls/s (floor); PL/pgSQL loop overhead %s us/call, included in every figure',
              round(1 / concat), round((loop * 1e6)::numeric, 2)) FROM small
UNION ALL
SELECT format('merge_patch 600KB: paidb %s ms/call, || %s ms/call, ratio %s (target <= 1.5) %s',
              round((paidb * 1e3)::numeric, 3), round((concat * 1e3)::numeric, 3),
              round((paidb / concat)::numeric, 2),
              CASE WHEN paidb / concat <= 1.5 THEN 'PASS' ELSE 'MISS' END) FROM large
UNION ALL
SELECT format('merge_patch 600KB: plpgsql %s ms/call (for reference)',
              round((plpgsql * 1e3)::numeric, 3)) FROM large;
SQL
