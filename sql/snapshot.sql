-- Columns derived from a snapshot (SPEC §2): one place computes them all.
DROP EXTENSION IF EXISTS paidb CASCADE;
CREATE EXTENSION paidb CASCADE;
SET timezone = 'UTC';

-- A realistic OpenPAI framework with a YAML config annotation.
CREATE TEMP TABLE fixture AS SELECT $json${"apiVersion": "frameworkcontroller.microsoft.com/v1", "kind": "Framework", "metadata": {"name": "b1a2c3", "namespace": "default", "creationTimestamp": "2020-08-01T10:00:00Z", "labels": {"userName": "alice", "virtualCluster": "vc1", "jobName": "mnist"}, "annotations": {"jobName": "mnist", "totalGpuNumber": "4", "logPathInfix": "alice/mnist", "requestGeneration": "3", "config": "protocolVersion: 2\nname: mnist\ntype: job\nextras:\n  hivedScheduler:\n    jobPriorityClass: prod\n  jobStatusChangeNotification:\n    running: true\n    failed: True\n    succeeded: false\n"}}, "spec": {"executionType": "Start", "retryPolicy": {"maxRetryCount": 2}, "taskRoles": [{"name": "worker", "taskNumber": 3}, {"name": "ps", "taskNumber": 1}]}, "status": {"state": "Completed", "runTime": "2020-08-01T10:01:00Z", "completionTime": "2020-08-01T10:05:00Z", "transitionTime": "2020-08-01T10:05:00Z", "attemptStatus": {"id": 2, "completionStatus": {"code": 1, "phrase": "ContainerFailed", "type": {"name": "Failed", "attributes": []}}, "taskRoleStatuses": []}, "retryPolicyStatus": {"totalRetriedCount": 2, "accountableRetriedCount": 1, "retryDelaySec": 5}}}$json$::jsonb AS fw;

SELECT c.* FROM fixture, paidb.snapshot_columns(fw) c \gx

-- launch time falls back to completion time; no status means no status columns
SELECT launch_time, completion_time, state
  FROM paidb.snapshot_columns('{"metadata": {"name": "a"}, "status": {"state": "Completed", "completionTime": "2020-01-01T00:00:00Z", "attemptStatus": {"completionStatus": {"code": 0}}}}');
SELECT sub_state, state, retries, attempt_index, namespace, total_task_number
  FROM paidb.snapshot_columns('{"metadata": {"name": "a", "namespace": "ns2"}, "spec": {"taskRoles": []}}');

-- a config that is not YAML never fails: the keys are simply absent
SELECT job_priority, notification_at_running, job_config
  FROM paidb.snapshot_columns('{"metadata": {"name": "a", "annotations": {"config": "extras: [unclosed\n  : : :"}}}');
-- flow style, quoting, comments and a null priority class
SELECT job_priority, notification_at_running, notification_at_stopped, notification_at_retried
  FROM paidb.snapshot_columns(jsonb_build_object('metadata', jsonb_build_object('name', 'a',
       'annotations', jsonb_build_object('config',
       E'# comment\nextras: {hivedScheduler: {jobPriorityClass: "test prio"}, jobStatusChangeNotification: {stopped: true, retried: yes}}\n'))));
SELECT job_priority FROM paidb.snapshot_columns(jsonb_build_object('metadata', jsonb_build_object('name', 'a',
       'annotations', jsonb_build_object('config', E'extras:\n  hivedScheduler:\n    jobPriorityClass: null\n'))));
-- keys at the wrong depth are not taken
SELECT job_priority, notification_at_running FROM paidb.snapshot_columns(jsonb_build_object('metadata', jsonb_build_object('name', 'a',
       'annotations', jsonb_build_object('config', E'hivedScheduler:\n  jobPriorityClass: wrong\njobStatusChangeNotification:\n  running: true\nextras:\n  other:\n    hivedScheduler:\n      jobPriorityClass: deeper\n'))));
-- malformed numbers and times are left NULL instead of failing
SELECT total_gpu_number, creation_time, retries, app_exit_code
  FROM paidb.snapshot_columns('{"metadata": {"name": "a", "creationTimestamp": "yesterday-ish", "annotations": {"totalGpuNumber": "many"}}, "status": {"retryPolicyStatus": {"totalRetriedCount": 1e20}, "attemptStatus": {"completionStatus": {"code": "x"}}}}');

-- taskRoleStatusesCompressed: base64 of gzip of the JSON array
SELECT paidb.decompress_snapshot(
  '{"status": {"attemptStatus": {"id": 0, "taskRoleStatuses": null, "taskRoleStatusesCompressed": "H4sIAAAAAAACA4uuVspLzE1VslJQKs8vyk4tUtJRUCpJLM4OLkksKS1OLQbKRMfWxgIAS4EZkygAAAA="}}}');
-- nothing to do returns the input
SELECT paidb.decompress_snapshot('{"status": {"attemptStatus": {"taskRoleStatuses": [1]}}}');
SELECT paidb.decompress_snapshot('{"metadata": {}}');
-- corrupt data is refused with a clear error
SELECT paidb.decompress_snapshot('{"status": {"attemptStatus": {"taskRoleStatusesCompressed": "not base64!"}}}');
SELECT paidb.decompress_snapshot('{"status": {"attemptStatus": {"taskRoleStatusesCompressed": "aGVsbG8="}}}');
-- the decompressed array is parsed into place as jsonb_in parses it
-- (whitespace, numbers, escapes, nesting), the other members kept
SELECT paidb.decompress_snapshot(s) #> '{status,attemptStatus,taskRoleStatuses}'
         = ' [{"name":"w","taskStatuses":[{"index":0,"state":"Completed","n":1.5e3,"u":"\u00e9\n","deep":{"a":[1,[2,{"b":null}]]}}]}, true, "x"] '::jsonb AS same_as_jsonb_in,
       paidb.decompress_snapshot(s) - 'status' = s - 'status' AS rest_kept,
       (paidb.decompress_snapshot(s) #> '{status,attemptStatus}') - 'taskRoleStatuses'
         = (s #> '{status,attemptStatus}') - 'taskRoleStatusesCompressed' AS attempt_kept,
       paidb.decompress_snapshot(s) #> '{status,state}' AS state
  FROM (SELECT '{"metadata": {"name": "a"}, "status": {"state": "AttemptCompleted", "attemptStatus": {"id": 3, "zz": 1, "taskRoleStatusesCompressed": "H4sIAAAAAAACAxXMsQoCMRCE4d6nCFMvklMs3NZHsLxLEckWYm49TIIHIe/u2s73M+7g5g6Nq4DxBaHG8rrXWFuRAjZ7apId7AnF5n92e69blirJcgVPx4ucCc1kad7LdVGDJLKBO6KdTDSfqOMB1pbzCGGMMMjVTxNy2BHcD/KnOG6HAAAA"}}}'::jsonb) AS t(s);
-- gzip of JSON that is not an array, of truncated JSON, of text, of JSON with trailing text
SELECT paidb.decompress_snapshot('{"status": {"attemptStatus": {"taskRoleStatusesCompressed": "H4sIAAAAAAACA6tWykvMTVWyUipXqgUAVPTdlQwAAAA="}}}');
SELECT paidb.decompress_snapshot('{"status": {"attemptStatus": {"taskRoleStatusesCompressed": "H4sIAAAAAAACA4uuVspLzE1VslJQKlfSAQByBfLrDgAAAA=="}}}');
SELECT paidb.decompress_snapshot('{"status": {"attemptStatus": {"taskRoleStatusesCompressed": "H4sIAAAAAAACA8vLL1HIKs7PAwBmy4zGCAAAAA=="}}}');
SELECT paidb.decompress_snapshot('{"status": {"attemptStatus": {"taskRoleStatusesCompressed": "H4sIAAAAAAACA4uuVspLzE1VslIqV6qNVSgpSszMycxLBwBxhMjEFwAAAA=="}}}');
