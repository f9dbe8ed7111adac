#!/usr/bin/python3
"""Writes src/snapshot_dict.h: the preset dictionary of packed snapshot
formats 1 and 2 (src/snapshot_pack.c).

The dictionary is what every OpenPAI framework carries whatever its user:
the keys and constant values of the request rest-server writes
(src/rest-server/src/models/v2/job/k8s.js and runtime-env.js of OpenPAI
v1.8) and of the status frameworkcontroller writes, as jsonb prints them
(keys in jsonb's order, ", " and ": ").  User values are blanked.  Stored
snapshots are compressed against these bytes, so they never change:
a different dictionary is a new format number.  Run from the checkout:
    python3 src/snapshot_dict.py > src/snapshot_dict.h
"""
import json


def jsonb_order(v):
    """v with object keys in jsonb's order: shorter first, then bytewise."""
    if isinstance(v, dict):
        keys = sorted(v, key=lambda k: (len(k.encode()), k.encode()))
        return {k: jsonb_order(v[k]) for k in keys}
    if isinstance(v, list):
        return [jsonb_order(x) for x in v]
    return v


def text(v):
    return json.dumps(jsonb_order(v), ensure_ascii=False)


def env(name, value=''):
    return {'name': name, 'value': value}


def env_field(name, path):
    return {'name': name, 'valueFrom': {'fieldRef': {'fieldPath': path}}}


TASK_INDEX = "metadata.annotations['FC_TASK_INDEX']"
framework_env = [env(n) for n in (
    'PAI_FRAMEWORK_NAME', 'PAI_JOB_NAME', 'PAI_USER_NAME', 'PAI_DEFAULT_FS_URI',
    'PAI_TASK_ROLE_COUNT', 'PAI_TASK_ROLE_LIST', 'PAI_VIRTUAL_CLUSTER',
    'PAI_TASK_ROLE_TASK_COUNT_', 'PAI_RESOURCE_', 'PAI_MIN_FAILED_TASK_COUNT_',
    'PAI_MIN_SUCCEEDED_TASK_COUNT_', 'PAI_USERNAME', 'PAI_TASKS_NUM',
    'PAI_JOB_TASK_COUNT', 'PAI_TASK_ROLES_NUM', 'PAI_JOB_TASK_ROLE_COUNT',
    'PAI_JOB_TASK_ROLE_LIST')]
task_role_env = [env('PAI_CURRENT_TASK_ROLE_NAME', ''),
                 env_field('PAI_CURRENT_TASK_ROLE_CURRENT_TASK_INDEX', TASK_INDEX)]

task_role = {
    'name': '',
    'taskNumber': 1,
    'frameworkAttemptCompletionPolicy': {'minFailedTaskCount': 1, 'minSucceededTaskCount': 1},
    'task': {
        'retryPolicy': {'fancyRetryPolicy': False, 'maxRetryCount': 0},
        'podGracefulDeletionTimeoutSec': 1800,
        'pod': {
            'metadata': {
                'labels': {'userName': '', 'virtualCluster': '', 'type': 'kube-launcher-task'},
                'annotations': {
                    'container.apparmor.security.beta.kubernetes.io/app': 'unconfined',
                    'rest-server/port-scheduling-spec': '',
                    'hivedscheduler.microsoft.com/pod-scheduling-spec': '',
                },
            },
            'spec': {
                'privileged': False,
                'restartPolicy': 'Never',
                'serviceAccountName': 'runtime-account',
                'schedulerName': '',
                'priorityClassName': 'pai-job-minimal-priority',
                'hostNetwork': True,
                'initContainers': [{
                    'name': 'init', 'imagePullPolicy': 'Always', 'image': '',
                    'env': [env('USER_CMD'), env('KUBE_APISERVER_ADDRESS'), env('REST_SERVER_URI'),
                            env('GANG_ALLOCATION', 'true')] + framework_env + task_role_env,
                    'volumeMounts': [
                        {'name': 'pai-vol', 'mountPath': '/usr/local/pai'},
                        {'name': 'host-log', 'subPath': '', 'mountPath': '/usr/local/pai/logs'},
                        {'name': 'job-exit-spec', 'mountPath': '/usr/local/pai-config'},
                    ],
                }],
                'containers': [{
                    'name': 'app', 'imagePullPolicy': 'Always', 'image': '',
                    'command': ['/usr/local/pai/runtime'],
                    'resources': {'limits': {
                        'cpu': 1, 'memory': 'Mi', 'github.com/fuse': 1, 'nvidia.com/gpu': 1,
                        'hivedscheduler.microsoft.com/pod-scheduling-enable': 1}},
                    'env': framework_env + task_role_env + [
                        env_field('PAI_TASK_INDEX', TASK_INDEX),
                        env_field('NVIDIA_VISIBLE_DEVICES',
                                  "metadata.annotations['hivedscheduler.microsoft.com/pod-leaf-cell-isolation']")],
                    'securityContext': {'capabilities': {'add': ['SYS_ADMIN', 'IPC_LOCK', 'DAC_READ_SEARCH'],
                                                         'drop': ['MKNOD']}},
                    'terminationMessagePath': '/tmp/pai-termination-log',
                    'volumeMounts': [
                        {'name': 'dshm', 'mountPath': '/dev/shm'},
                        {'name': 'pai-vol', 'mountPath': '/usr/local/pai'},
                        {'name': 'host-log', 'subPath': '', 'mountPath': '/usr/local/pai/logs'},
                        {'name': 'job-ssh-secret-volume', 'readOnly': True, 'mountPath': '/usr/local/pai/ssh-secret'},
                        {'name': 'job-secrets', 'mountPath': '/usr/local/pai/secrets'},
                        {'name': 'token-secrets', 'mountPath': '/usr/local/pai/token-secrets'},
                    ],
                }],
                'volumes': [
                    {'name': 'dshm', 'emptyDir': {'medium': 'Memory', 'sizeLimit': 'Mi'}},
                    {'name': 'pai-vol', 'emptyDir': {}},
                    {'name': 'host-log', 'hostPath': {'path': '/var/log/pai'}},
                    {'name': 'job-exit-spec', 'configMap': {'name': 'runtime-exit-spec-configuration'}},
                    {'name': 'job-ssh-secret-volume', 'secret': {'secretName': 'job-ssh-secret'}},
                    {'name': 'job-secrets', 'secret': {'secretName': '-configcred'}},
                    {'name': 'token-secrets', 'secret': {'secretName': '-tokencred'}},
                ],
                'affinity': {'nodeAffinity': {'requiredDuringSchedulingIgnoredDuringExecution': {
                    'nodeSelectorTerms': [{'matchExpressions': [
                        {'key': 'pai-worker', 'operator': 'In', 'values': ['true']}]}]}}},
                'imagePullSecrets': [{'name': 'pai-secret'}, {'name': '-regcred'}],
            },
        },
    },
}

completion = {'code': 0, 'phrase': 'Succeeded', 'type': {'name': 'Succeeded', 'attributes': []},
              'diagnostics': '', 'pod': {'containers': [{'name': 'app', 'code': 0, 'reason': 'Completed',
                                                         'message': ''}]}}

task_status = {
    'index': 0, 'instanceUID': '0_', 'state': 'TaskAttemptRunning',
    'startTime': '2020-01-01T00:00:00Z', 'runTime': '2020-01-01T00:00:00Z',
    'completionTime': None, 'transitionTime': '2020-01-01T00:00:00Z', 'deletionPending': False,
    'retryPolicyStatus': {'totalRetriedCount': 0, 'accountableRetriedCount': 0, 'retryDelaySec': None},
    'attemptStatus': {'id': 0, 'startTime': '2020-01-01T00:00:00Z', 'runTime': '2020-01-01T00:00:00Z',
                      'completionTime': None, 'instanceUID': '0_', 'podName': '-0', 'podUID': '',
                      'podNodeName': '', 'podIP': '', 'podHostIP': '', 'completionStatus': None},
}

framework = {
    'apiVersion': 'frameworkcontroller.microsoft.com/v1',
    'kind': 'Framework',
    'metadata': {
        'name': '', 'namespace': 'default', 'uid': '', 'resourceVersion': '', 'generation': 1,
        'creationTimestamp': '2020-01-01T00:00:00Z',
        'labels': {'userName': '', 'virtualCluster': '', 'jobName': '', 'paidb.io/placement': '1'},
        'annotations': {'jobName': '', 'userName': '', 'virtualCluster': '', 'totalGpuNumber': '0',
                        'logPathInfix': '', 'requestGeneration': '1'},
    },
    'spec': {
        'executionType': 'Start',
        'retryPolicy': {'fancyRetryPolicy': True, 'maxRetryCount': 0},
        'taskRoles': [task_role],
    },
    'status': {
        'state': 'AttemptRunning', 'startTime': '2020-01-01T00:00:00Z', 'runTime': '2020-01-01T00:00:00Z',
        'completionTime': None, 'transitionTime': '2020-01-01T00:00:00Z',
        'retryPolicyStatus': {'totalRetriedCount': 0, 'accountableRetriedCount': 0, 'retryDelaySec': None},
        'attemptStatus': {
            'id': 0, 'startTime': '2020-01-01T00:00:00Z', 'runTime': '2020-01-01T00:00:00Z',
            'completionTime': None, 'instanceUID': '0_', 'configMapName': '-attempt', 'configMapUID': '',
            'completionStatus': completion,
            'taskRoleStatuses': [{'name': '', 'podGracefulDeletionTimeoutSec': 1800,
                                  'taskStatuses': [task_status]}],
        },
    },
}

# Most repeated last: a task status recurs once per instance.
DICT = text(framework) + text(task_status) + text(task_status)


def c_literal(s):
    out = []
    for i in range(0, len(s), 72):
        chunk = s[i:i + 72].replace('\\', '\\\\').replace('"', '\\"')
        out.append('\t"%s"' % chunk)
    return '\n'.join(out)


print('/* Generated by src/snapshot_dict.py: do not edit (see there). */')
print('#ifndef PAIDB_SNAPSHOT_DICT_H')
print('#define PAIDB_SNAPSHOT_DICT_H')
print()
print('/* The preset dictionary of packed snapshot formats 1 and 2 (%d bytes). */' % len(DICT.encode()))
print('static const char paidb_snapshot_dict_v1[] =')
print(c_literal(DICT) + ';')
print()
print('#endif\t\t\t\t\t\t\t/* PAIDB_SNAPSHOT_DICT_H */')
