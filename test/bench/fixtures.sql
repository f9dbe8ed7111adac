-- Benchmark fixtures: a realistic ~3 KB OpenPAI framework request and a
-- ~600 KB snapshot of a 1,000-instance job.  Loaded into schema `bench`.
CREATE SCHEMA IF NOT EXISTS bench;

-- A framework request as OpenPAI's rest-server builds it (~3 KB).
CREATE OR REPLACE FUNCTION bench.request_3kb(name text DEFAULT 'b0a1c2d3e4f5a6b7c8d9e0f1a2b3c4d5')
RETURNS jsonb LANGUAGE sql IMMUTABLE AS $f$
SELECT jsonb_build_object(
  'apiVersion', 'frameworkcontroller.microsoft.com/v1',
  'kind', 'Framework',
  'metadata', jsonb_build_object(
    'name', name,
    'labels', jsonb_build_object('userName', 'alice', 'virtualCluster', 'default', 'jobName', 'mnist-train'),
    'annotations', jsonb_build_object(
      'jobName', 'mnist-train', 'userName', 'alice', 'virtualCluster', 'default',
      'totalGpuNumber', '4', 'logPathInfix', 'alice/mnist-train',
      'config', E'protocolVersion: 2\nname: mnist-train\ntype: job\njobRetryCount: 2\nprerequisites:\n  - type: dockerimage\n    uri: openpai/standard:python_3.6-pytorch_1.2.0-gpu\n    name: docker_image_0\ntaskRoles:\n  worker:\n    instances: 4\n    completion:\n      minFailedInstances: 1\n      minSucceededInstances: -1\n    dockerImage: docker_image_0\n    resourcePerInstance:\n      gpu: 1\n      cpu: 4\n      memoryMB: 8192\n    commands:\n      - git clone https://example.org/mnist.git\n      - cd mnist && python train.py --epochs 10 --batch-size 64\ndefaults:\n  virtualCluster: default\nextras:\n  hivedScheduler:\n    jobPriorityClass: prod\n  jobStatusChangeNotification:\n    running: true\n    failed: true\n')),
  'spec', jsonb_build_object(
    'executionType', 'Start',
    'retryPolicy', jsonb_build_object('fancyRetryPolicy', true, 'maxRetryCount', 2),
    'taskRoles', jsonb_build_array(jsonb_build_object(
      'name', 'worker', 'taskNumber', 4,
      'frameworkAttemptCompletionPolicy', jsonb_build_object('minFailedTaskCount', 1, 'minSucceededTaskCount', -1),
      'task', jsonb_build_object(
        'retryPolicy', jsonb_build_object('fancyRetryPolicy', false, 'maxRetryCount', 0),
        'podGracefulDeletionTimeoutSec', 1800,
        'pod', jsonb_build_object(
          'metadata', jsonb_build_object('labels', jsonb_build_object('userName', 'alice', 'virtualCluster', 'default', 'type', 'kube-launcher-task')),
          'spec', jsonb_build_object(
            'restartPolicy', 'Never', 'serviceAccountName', 'runtime-account',
            'imagePullSecrets', jsonb_build_array(jsonb_build_object('name', name || '-regcred')),
            'containers', jsonb_build_array(jsonb_build_object(
              'name', 'app', 'image', 'openpai/standard:python_3.6-pytorch_1.2.0-gpu',
              'command', jsonb_build_array('/usr/local/pai/runtime'),
              'resources', jsonb_build_object('limits', jsonb_build_object('cpu', 4, 'memory', '8192Mi', 'github.com/fuse', 1, 'hivedscheduler.microsoft.com/pod-scheduling-enable', 1)),
              'env', jsonb_build_array(
                jsonb_build_object('name', 'PAI_FRAMEWORK_NAME', 'value', name),
                jsonb_build_object('name', 'PAI_JOB_NAME', 'value', 'alice~mnist-train'),
                jsonb_build_object('name', 'PAI_USER_NAME', 'value', 'alice'),
                jsonb_build_object('name', 'PAI_CURRENT_TASK_ROLE_NAME', 'value', 'worker'),
                jsonb_build_object('name', 'GANG_ALLOCATION', 'value', 'true'),
                jsonb_build_object('name', 'PAI_TASK_ROLE_COUNT', 'value', '1')),
              'securityContext', jsonb_build_object('capabilities', jsonb_build_object('add', jsonb_build_array('SYS_ADMIN', 'IPC_LOCK', 'DAC_READ_SEARCH'))),
              'volumeMounts', jsonb_build_array(
                jsonb_build_object('name', 'dshm', 'mountPath', '/dev/shm'),
                jsonb_build_object('name', 'pai-vol', 'mountPath', '/usr/local/pai'),
                jsonb_build_object('name', 'host-log', 'subPath', 'alice/mnist-train/worker', 'mountPath', '/usr/local/pai/logs'),
                jsonb_build_object('name', 'job-ssh-secret-volume', 'readOnly', true, 'mountPath', '/usr/local/pai/ssh-secret')))),
            'volumes', jsonb_build_array(
              jsonb_build_object('name', 'dshm', 'emptyDir', jsonb_build_object('medium', 'Memory')),
              jsonb_build_object('name', 'pai-vol', 'emptyDir', '{}'::jsonb),
              jsonb_build_object('name', 'host-log', 'hostPath', jsonb_build_object('path', '/var/log/pai')),
              jsonb_build_object('name', 'job-ssh-secret-volume', 'secret', jsonb_build_object('secretName', 'job-ssh-secret'))))))))))
$f$;

-- The status of a 1,000-instance job (~600 KB as a snapshot).
CREATE OR REPLACE FUNCTION bench.snapshot_600kb(name text DEFAULT 'b0a1c2d3e4f5a6b7c8d9e0f1a2b3c4d5')
RETURNS jsonb LANGUAGE sql IMMUTABLE AS $f$
SELECT bench.request_3kb(name) || jsonb_build_object('status', jsonb_build_object(
  'state', 'AttemptRunning', 'startTime', '2020-08-01T10:00:00Z', 'runTime', '2020-08-01T10:01:00Z',
  'transitionTime', '2020-08-01T10:01:00Z',
  'retryPolicyStatus', jsonb_build_object('totalRetriedCount', 0, 'accountableRetriedCount', 0, 'retryDelaySec', null),
  'attemptStatus', jsonb_build_object('id', 0, 'startTime', '2020-08-01T10:00:00Z', 'runTime', '2020-08-01T10:01:00Z',
    'instanceUID', '0_6d7c1a44-1a2b-4c3d-9e8f-001122334455', 'configMapName', name || '-attempt',
    'completionStatus', null,
    'taskRoleStatuses', jsonb_build_array(jsonb_build_object('name', 'worker', 'podGracefulDeletionTimeoutSec', 1800,
      'taskStatuses', (SELECT jsonb_agg(jsonb_build_object(
        'index', i, 'instanceUID', '0_' || md5(name || i), 'state', 'TaskAttemptRunning',
        'startTime', '2020-08-01T10:00:00Z', 'runTime', '2020-08-01T10:01:00Z', 'transitionTime', '2020-08-01T10:01:00Z',
        'retryPolicyStatus', jsonb_build_object('totalRetriedCount', 0, 'accountableRetriedCount', 0, 'retryDelaySec', null),
        'attemptStatus', jsonb_build_object('id', 0, 'startTime', '2020-08-01T10:00:00Z', 'runTime', '2020-08-01T10:01:00Z',
          'podName', name || '-worker-' || i, 'podUID', md5('pod' || name || i),
          'podNodeName', 'node-' || (i % 64), 'podIP', '10.0.' || (i / 250) || '.' || (i % 250),
          'podHostIP', '192.168.0.' || (i % 64),
          'completionStatus', null)) ORDER BY i) FROM generate_series(0, 999) i))))))
$f$;

-- The request as text with a placeholder name, as a client would send it:
-- the benchmark then measures paidb, not the building of the fixture.
CREATE TABLE IF NOT EXISTS bench.template (t text NOT NULL);
TRUNCATE bench.template;
INSERT INTO bench.template SELECT bench.request_3kb('__name__')::text;
