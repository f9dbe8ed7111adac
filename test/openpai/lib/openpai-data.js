'use strict';
// Deterministic OpenPAI jobs: job i of a cluster, with every row OpenPAI's
// components would have written for it (frameworks, framework_history,
// task_history, pods, framework_events, pod_events, tags) and, when the job
// is still in the API server, the framework object there.  Rows are derived
// from the snapshot the way OpenPAI's database-controller derived them, so
// the result is what an OpenPAI v1.2+ database holds, quirks included:
//  - snapshots without a requestGeneration annotation (legacy jobs);
//  - '' in the secret add-on columns of jobs deleted from the API server
//    (the write merger blanks them; priorityClassDef is kept);
//  - NULL notification columns in jobs from before those columns existed;
//  - a name of 64 characters, longer than a framework name may be (63) but
//    within OpenPAI's VARCHAR(64) (a legacy framework not named by the
//    rest-server, stored as it came);
//  - the mocked "permanently failed" status with its `phase` misspelling.

const crypto = require('crypto');

// Lower-case hex md5, as OpenPAI computed names and uids.
const md5 = (s) => crypto.createHash('md5').update(s).digest('hex');
// A UUID-shaped string derived from `s` (Kubernetes uids are 36 characters).
const uuid = (s) => {
  const h = md5(s);
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-4${h.slice(13, 16)}-a${h.slice(17, 20)}-${h.slice(20, 32)}`;
};
// An RFC 3339 time in whole seconds, as Kubernetes writes it.
const iso = (ms) => new Date(ms).toISOString().replace(/\.\d{3}Z$/, 'Z');

const BASE = Date.UTC(2020, 0, 1);
const MINUTE = 60 * 1000;

// The 20 kinds a cluster cycles through: job i is of kind KINDS[i % 20].
// Two of twenty (10%) have framework retry history.
const KINDS = [
  'running', 'running', 'running', 'running-task-retried',
  'waiting', 'waiting-unsynced',
  'succeeded', 'succeeded', 'succeeded', 'succeeded',
  'succeeded-retried', 'failed-retried', 'stopped', 'failed-permanent',
  'failed-in-api', 'succeeded-in-api', 'archived-succeeded', 'archived-failed',
  'stopping', 'stopped-notified',
];

// The name of a job whose framework name is longer than 63 characters.
const LONG_NAME = 'legacyframeworkimportedfromanolderclusterwithalongname0000000001'; // 64: fits OpenPAI's VARCHAR(64), not the CRD's 63

// The parameters of job i (user, names, kind, shape), before any state.
function jobParams(i) {
  const kind = KINDS[i % KINDS.length];
  const user = `user${i % 37}`;
  const jobName = `${['mnist', 'bert', 'resnet', 'cifar'][i % 4]}_${i}`;
  const long = i === 6; // a completed job, deleted from the API server
  const oldColumns = i % 9 === 4 && !/^(running|waiting|stopping)/.test(kind);
  const name = long ? LONG_NAME : md5(`${user}~${jobName}`);
  return {
    i,
    kind,
    user,
    jobName: long ? LONG_NAME : jobName,
    fullName: long ? LONG_NAME : `${user}~${jobName}`,
    name,
    vc: ['default', 'vc-a', 'vc-b'][i % 3],
    priority: [null, 'prod', 'test', null, 'oppo'][i % 5],
    // A finished job stored before the notification columns existed: they
    // are NULL, and its config (written then) asks for no notification.
    oldColumns,
    notify: oldColumns ? null : i % 3 === 0 ? { running: true, failed: true, stopped: true } : i % 3 === 1 ? { succeeded: true, retried: true } : null,
    legacy: i % 7 === 0, // no requestGeneration annotation
    generation: 1 + (i % 13 === 0 ? 1 : 0),
    roles: i % 2 === 0
      ? [{ name: 'worker', n: 1 + (i % 4), gpu: 1 }]
      : [{ name: 'worker', n: 1 + (i % 3), gpu: 1 }, { name: 'ps', n: 1, gpu: 0 }],
    maxRetry: kind.endsWith('retried') && kind !== 'running-task-retried' ? 2 : i % 5 === 0 ? 1 : 0,
    submitted: BASE + i * MINUTE,
  };
}

// The job protocol YAML the rest-server stores as annotation `config`.
function jobConfig(p) {
  const lines = [
    'protocolVersion: 2',
    `name: ${p.jobName}`,
    'type: job',
    `jobRetryCount: ${p.maxRetry}`,
    'prerequisites:',
    '  - type: dockerimage',
    '    uri: openpai/standard:python_3.6-pytorch_1.2.0-gpu',
    '    name: docker_image_0',
    'taskRoles:',
  ];
  for (const r of p.roles) {
    lines.push(
      `  ${r.name}:`,
      `    instances: ${r.n}`,
      '    completion:',
      '      minFailedInstances: 1',
      '    dockerImage: docker_image_0',
      '    resourcePerInstance:',
      `      gpu: ${r.gpu}`,
      '      cpu: 4',
      '      memoryMB: 8192',
      '    commands:',
      '      - git clone https://example.org/train.git',
      `      - cd train && python train.py --role ${r.name} --epochs 10`,
    );
  }
  lines.push('defaults:', `  virtualCluster: ${p.vc}`);
  if (p.priority || p.notify) {
    lines.push('extras:');
    if (p.priority) lines.push('  hivedScheduler:', `    jobPriorityClass: ${p.priority}`);
    if (p.notify) {
      lines.push('  jobStatusChangeNotification:');
      for (const [k, v] of Object.entries(p.notify)) lines.push(`    ${k}: ${v}`);
    }
  }
  return lines.join('\n') + '\n';
}

// The framework request the rest-server built for job p.
function frameworkRequest(p, { stop = false } = {}) {
  const annotations = {
    jobName: p.jobName,
    userName: p.user,
    virtualCluster: p.vc,
    totalGpuNumber: String(p.roles.reduce((s, r) => s + r.n * r.gpu, 0)),
    logPathInfix: p.name,
    config: jobConfig(p),
  };
  if (!p.legacy) annotations.requestGeneration = String(p.generation + (stop ? 1 : 0));
  return {
    apiVersion: 'frameworkcontroller.microsoft.com/v1',
    kind: 'Framework',
    metadata: {
      name: p.name,
      labels: { userName: p.user, virtualCluster: p.vc, jobName: p.jobName.slice(0, 63), type: 'kube-launcher' },
      annotations,
    },
    spec: {
      executionType: stop ? 'Stop' : 'Start',
      retryPolicy: { fancyRetryPolicy: true, maxRetryCount: p.maxRetry },
      taskRoles: p.roles.map((r) => ({
        name: r.name,
        taskNumber: r.n,
        frameworkAttemptCompletionPolicy: { minFailedTaskCount: 1, minSucceededTaskCount: -1 },
        task: {
          retryPolicy: { fancyRetryPolicy: false, maxRetryCount: 0 },
          podGracefulDeletionTimeoutSec: 1800,
          pod: {
            metadata: { labels: { userName: p.user, virtualCluster: p.vc, type: 'kube-launcher-task' } },
            spec: {
              restartPolicy: 'Never',
              serviceAccountName: 'runtime-account',
              containers: [{
                name: 'app',
                image: 'openpai/standard:python_3.6-pytorch_1.2.0-gpu',
                command: ['/usr/local/pai/runtime'],
                resources: { limits: { cpu: 4, memory: '8192Mi', 'nvidia.com/gpu': r.gpu } },
                env: [
                  { name: 'PAI_FRAMEWORK_NAME', value: p.name },
                  { name: 'PAI_JOB_NAME', value: p.fullName },
                  { name: 'PAI_USER_NAME', value: p.user },
                  { name: 'PAI_CURRENT_TASK_ROLE_NAME', value: r.name },
                ],
                volumeMounts: [
                  { name: 'dshm', mountPath: '/dev/shm' },
                  { name: 'host-log', subPath: `${p.name}/${r.name}`, mountPath: '/usr/local/pai/logs' },
                ],
              }],
              volumes: [
                { name: 'dshm', emptyDir: { medium: 'Memory' } },
                { name: 'host-log', hostPath: { path: '/var/log/pai' } },
              ],
            },
          },
        },
      })),
    },
  };
}

// A completion status as frameworkcontroller writes it.
function completion(code) {
  if (code === null) return null;
  const table = {
    0: ['Succeeded', 'Succeeded', []],
    1: ['ContainerFailed', 'Failed', ['Transient']],
    137: ['ContainerSigKilled', 'Failed', ['Transient']],
    '-210': ['FrameworkStopped', 'Stopped', ['Permanent']],
  };
  const [phrase, type, attributes] = table[code] || ['ContainerFailed', 'Failed', []];
  return {
    code,
    phrase,
    type: { name: type, attributes },
    diagnostics: `${phrase}: exit code ${code}`,
    trigger: code === -210 ? { message: 'Stop to complete current FrameworkAttempt', taskRoleName: null, taskIndex: null } : null,
  };
}

// The status of framework attempt `a` of job p: `state` its status.state,
// `code` the attempt's exit code (null while running); times from `t0`.
function frameworkStatus(p, a, state, code, t0, { taskRetried = false, retried = 0 } = {}) {
  const done = state === 'Completed' || state === 'AttemptCompleted';
  const ending = done || state.startsWith('AttemptDeletion') || state === 'AttemptDeleting';
  const running = state !== 'AttemptCreationPending' && state !== 'AttemptCreationRequested' && state !== 'AttemptPreparing';
  const start = iso(t0);
  const run = running ? iso(t0 + MINUTE) : null;
  const end = done ? iso(t0 + 60 * MINUTE) : null;
  const taskState = done ? 'Completed' : running ? 'TaskAttemptRunning' : 'TaskAttemptCreationPending';
  const fwUid = uuid(`fw ${p.name}`);
  return {
    state,
    startTime: iso(p.submitted + 1000),
    runTime: run,
    completionTime: state === 'Completed' ? end : null,
    transitionTime: end || run || start,
    retryPolicyStatus: { totalRetriedCount: retried, accountableRetriedCount: retried, retryDelaySec: null },
    attemptStatus: {
      id: a,
      instanceUID: `${a}_${fwUid}`,
      configMapName: `${p.name}-attempt`,
      configMapUID: uuid(`cm ${p.name} ${a}`),
      startTime: start,
      runTime: run,
      completionTime: end,
      completionStatus: ending ? completion(code) : null,
      taskRoleStatuses: p.roles.map((r) => ({
        name: r.name,
        podGracefulDeletionTimeoutSec: 1800,
        taskStatuses: Array.from({ length: r.n }, (_, k) => {
          const taskAttempt = taskRetried && r.name === 'worker' && k === 0 ? 1 : 0;
          const podUID = uuid(`pod ${p.name} ${a} ${r.name} ${k} ${taskAttempt}`);
          return {
            index: k,
            instanceUID: uuid(`task ${p.name} ${a} ${r.name} ${k}`),
            state: taskState,
            startTime: start,
            runTime: run,
            completionTime: end,
            transitionTime: end || run || start,
            deletionPending: false,
            retryPolicyStatus: { totalRetriedCount: taskAttempt, accountableRetriedCount: taskAttempt, retryDelaySec: null },
            attemptStatus: {
              id: taskAttempt,
              instanceUID: `${taskAttempt}_${podUID}`,
              startTime: start,
              runTime: run,
              completionTime: end,
              podName: `${p.name}-${r.name}-${k}`,
              podUID: running ? podUID : null,
              podNodeName: running ? `node-${(p.i + k) % 64}` : null,
              podIP: running ? `10.0.${p.i % 250}.${k + 1}` : null,
              podHostIP: running ? `192.168.0.${(p.i + k) % 64}` : null,
              completionStatus: done ? completion(code === 0 ? 0 : code) : null,
            },
          };
        }),
      })),
    },
  };
}

// OpenPAI's mocked status of a job that could never be created.
function permanentFailedStatus(t) {
  const d = iso(t);
  return {
    state: 'Completed',
    startTime: d,
    runTime: d,
    transitionTime: d,
    completionTime: d,
    attemptStatus: {
      completionStatus: {
        code: -1100,
        diagnostics: 'Job is submitted to database, but cannot be created in ApiServer due to permanent failures.',
        phase: 'CreateFrameworkPermanentFailed',
        type: { attributes: ['Permanent'], name: 'Failed' },
        id: 0,
        startTime: d,
        runTime: d,
        completionTime: d,
      },
      taskRoleStatuses: [],
    },
    retryPolicyStatus: { retryDelaySec: null, totalRetriedCount: 0, accountableRetriedCount: 0 },
  };
}

// What the database-controller's mock gives a request not yet in the API server.
function pendingStatus() {
  return {
    state: 'AttemptCreationPending',
    attemptStatus: { completionStatus: null, taskRoleStatuses: [] },
    retryPolicyStatus: { retryDelaySec: null, totalRetriedCount: 0, accountableRetriedCount: 0 },
  };
}

// OpenPAI's job state from a framework state and exit code.
function jobState(state, code) {
  switch (state) {
    case 'AttemptCreationPending': case 'AttemptCreationRequested': case 'AttemptPreparing':
      return 'WAITING';
    case 'AttemptRunning':
      return 'RUNNING';
    case 'AttemptDeletionPending': case 'AttemptDeletionRequested': case 'AttemptDeleting': case 'AttemptCompleted':
      return code === -210 || code === -220 ? 'STOPPING' : 'RUNNING';
    case 'Completed':
      return code === 0 ? 'SUCCEEDED' : code === -210 || code === -220 ? 'STOPPED' : 'FAILED';
    default:
      return 'UNKNOWN';
  }
}

// The "frameworks" row OpenPAI derived from `snap` (getRequestUpdate +
// getStatusUpdate of its database-controller).
function frameworkRow(p, snap, extra) {
  const st = snap.status;
  const cs = st.attemptStatus.completionStatus;
  const code = cs ? cs.code : null;
  const rps = st.retryPolicyStatus;
  const ann = snap.metadata.annotations;
  const n = p.notify || {};
  const row = {
    name: p.name,
    namespace: snap.metadata.namespace || null,
    jobName: ann.jobName,
    userName: snap.metadata.labels.userName,
    jobConfig: ann.config,
    executionType: snap.spec.executionType,
    creationTime: snap.metadata.creationTimestamp || null,
    launchTime: st.runTime || st.completionTime || null,
    virtualCluster: snap.metadata.labels.virtualCluster,
    jobPriority: p.priority,
    totalGpuNumber: Number(ann.totalGpuNumber),
    totalTaskNumber: snap.spec.taskRoles.reduce((s, r) => s + r.taskNumber, 0),
    totalTaskRoleNumber: snap.spec.taskRoles.length,
    logPathInfix: ann.logPathInfix,
    submissionTime: iso(p.submitted),
    dockerSecretDef: null,
    configSecretDef: null,
    userExtensionSecretDef: null,
    tokenSecretDef: null,
    priorityClassDef: null,
    retries: rps.totalRetriedCount,
    retryDelayTime: rps.retryDelaySec,
    platformRetries: rps.totalRetriedCount - rps.accountableRetriedCount,
    resourceRetries: 0,
    userRetries: rps.accountableRetriedCount,
    completionTime: st.completionTime || null,
    appExitCode: code,
    subState: st.state,
    state: jobState(st.state, code),
    snapshot: JSON.stringify(snap),
    requestSynced: true,
    apiServerDeleted: false,
    archived: false,
    notificationAtRunning: !!n.running,
    notifiedAtRunning: false,
    notificationAtSucceeded: !!n.succeeded,
    notifiedAtSucceeded: false,
    notificationAtFailed: !!n.failed,
    notifiedAtFailed: false,
    notificationAtStopped: !!n.stopped,
    notifiedAtStopped: false,
    notificationAtRetried: !!n.retried,
    notifiedAtRetried: 0,
    insertedAt: iso(p.submitted),
    updatedAt: iso(p.submitted + 61 * MINUTE),
    ...extra,
  };
  return row;
}

// The add-on definitions the rest-server generated for job p (JSON text).
function addOns(p) {
  const secret = (suffix, data) => JSON.stringify({
    apiVersion: 'v1', kind: 'Secret', metadata: { name: `${p.name}-${suffix}`, namespace: 'default' }, type: 'Opaque', data,
  });
  return {
    priorityClassDef: p.i % 2 === 0
      ? JSON.stringify({ apiVersion: 'scheduling.k8s.io/v1', kind: 'PriorityClass', metadata: { name: `${p.name}-priority` }, value: -(126 << 24) - (p.i % 1000), preemptionPolicy: 'PreemptLowerPriority', globalDefault: false })
      : null,
    dockerSecretDef: p.i % 4 === 0 ? secret('regcred', { '.dockerconfigjson': Buffer.from(`{"auths":{"registry.example.org":{"auth":"${p.user}"}}}`).toString('base64') }) : null,
    configSecretDef: p.i % 6 === 0 ? secret('configcred', { 'secrets.yaml': Buffer.from('password: hunter2\n').toString('base64') }) : null,
    userExtensionSecretDef: null,
    tokenSecretDef: null,
  };
}

// The Task object fluentd logged for a task attempt (task_history.snapshot).
function taskObject(p, a, role, taskStatus) {
  return {
    apiVersion: 'frameworkcontroller.microsoft.com/v1',
    kind: 'Task',
    metadata: {
      name: `${p.name}-${role}-${taskStatus.index}`,
      uid: taskStatus.instanceUID,
      annotations: {
        FC_FRAMEWORK_NAME: p.name,
        FC_FRAMEWORK_ATTEMPT_ID: String(a),
        FC_TASKROLE_NAME: role,
        FC_TASK_INDEX: String(taskStatus.index),
      },
    },
    status: taskStatus,
  };
}

// A task_history row for `taskStatus` of framework attempt a.
function taskHistoryRow(p, a, role, taskStatus, historyType, at) {
  const taskAttemptIndex = taskStatus.attemptStatus.id;
  return {
    uid: md5(`${taskStatus.instanceUID}+${taskAttemptIndex}+${historyType}`),
    frameworkName: p.name,
    attemptIndex: a,
    taskroleName: role,
    taskName: `${p.name}-${role}-${taskStatus.index}`,
    taskIndex: taskStatus.index,
    taskUid: taskStatus.instanceUID,
    taskAttemptIndex,
    podUid: taskStatus.attemptStatus.podUID,
    historyType,
    snapshot: JSON.stringify(taskObject(p, a, role, taskStatus)),
    insertedAt: iso(at),
    updatedAt: iso(at),
  };
}

// The pods row fluentd wrote when a task's pod was deleted.
function podRow(p, a, role, taskStatus, at) {
  const uid = taskStatus.attemptStatus.podUID;
  const pod = {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: {
      name: `${p.name}-${role}-${taskStatus.index}`,
      namespace: 'default',
      uid,
      annotations: {
        FC_FRAMEWORK_NAME: p.name,
        FC_FRAMEWORK_ATTEMPT_ID: String(a),
        FC_TASKROLE_NAME: role,
        FC_TASK_INDEX: String(taskStatus.index),
        FC_TASK_ATTEMPT_ID: String(taskStatus.attemptStatus.id),
      },
    },
    spec: { nodeName: taskStatus.attemptStatus.podNodeName },
    status: { phase: taskStatus.attemptStatus.completionStatus && taskStatus.attemptStatus.completionStatus.code === 0 ? 'Succeeded' : 'Failed', podIP: taskStatus.attemptStatus.podIP, hostIP: taskStatus.attemptStatus.podHostIP },
  };
  return {
    uid,
    frameworkName: p.name,
    attemptIndex: a,
    taskroleName: role,
    taskroleIndex: taskStatus.index,
    taskAttemptIndex: taskStatus.attemptStatus.id,
    snapshot: JSON.stringify(pod),
    insertedAt: iso(at),
    updatedAt: iso(at),
  };
}

// Cluster events about the first pod of job p, as the event watcher stored them.
function frameworkEvents(p, failed, at) {
  const out = [];
  const mk = (n, type, reason, message, component) => {
    const taskName = `${p.name}-worker-0`;
    const uid = uuid(`event ${p.name} ${n}`);
    const ev = {
      apiVersion: 'v1',
      kind: 'Event',
      metadata: { name: `${taskName}.${md5(uid).slice(0, 16)}`, namespace: 'default', uid },
      involvedObject: { kind: 'Pod', namespace: 'default', name: taskName, uid: uuid(`pod ${p.name} 0 worker 0 0`) },
      type,
      reason,
      message,
      source: { component, host: component === 'kubelet' ? `node-${p.i % 64}` : undefined },
      firstTimestamp: iso(at + n * 1000),
      lastTimestamp: iso(at + n * 2000),
      count: n + 1,
    };
    out.push({
      uid,
      frameworkName: p.name,
      podUid: ev.involvedObject.uid,
      taskroleName: 'worker',
      taskName,
      taskIndex: 0,
      type,
      reason,
      message,
      firstTimestamp: ev.firstTimestamp,
      lastTimestamp: ev.lastTimestamp,
      count: ev.count,
      sourceComponent: component,
      sourceHost: ev.source.host || null,
      event: JSON.stringify(ev),
      insertedAt: ev.firstTimestamp,
      updatedAt: ev.lastTimestamp,
    });
  };
  mk(0, 'Normal', 'Scheduled', `Successfully assigned default/${p.name}-worker-0 to node-${p.i % 64}`, 'default-scheduler');
  mk(1, 'Normal', 'Started', 'Started container app', 'kubelet');
  if (failed) mk(2, 'Warning', 'BackOff', 'Back-off restarting failed container', 'kubelet');
  return out;
}

// Every row of job i, and its API server object when it is still there.
function buildJob(i) {
  const p = jobParams(i);
  const kind = p.kind;
  const t0 = p.submitted + 1000;
  const rows = { frameworks: [], framework_history: [], task_history: [], pods: [], framework_events: [], pod_events: [], tags: [] };
  const defs = addOns(p);
  const blankSecrets = { configSecretDef: defs.configSecretDef === null ? null : '', userExtensionSecretDef: null, dockerSecretDef: defs.dockerSecretDef === null ? null : '', tokenSecretDef: null, priorityClassDef: defs.priorityClassDef };
  let snap;
  let extra = {};
  let inApi = true;
  let lastAttempt = 0;
  let retried = 0;
  let code = null;
  let state;
  const stop = kind === 'stopped' || kind === 'stopping' || kind === 'stopped-notified';
  const req = frameworkRequest(p, { stop });
  const meta = (m) => ({
    ...m,
    namespace: 'default',
    uid: uuid(`fw ${p.name}`),
    creationTimestamp: iso(p.submitted + 1000),
    resourceVersion: String(100000 + i * 7),
    generation: 3,
  });

  switch (kind) {
    case 'running': case 'running-task-retried': state = 'AttemptRunning'; break;
    case 'waiting': state = 'AttemptPreparing'; break;
    case 'waiting-unsynced': state = null; break;
    case 'succeeded': case 'succeeded-in-api': case 'archived-succeeded': state = 'Completed'; code = 0; break;
    case 'succeeded-retried': state = 'Completed'; code = 0; lastAttempt = 2; retried = 2; break;
    case 'failed-retried': state = 'Completed'; code = 1; lastAttempt = 2; retried = 2; break;
    case 'failed-in-api': case 'archived-failed': state = 'Completed'; code = 137; break;
    case 'stopped': case 'stopped-notified': state = 'Completed'; code = -210; break;
    case 'stopping': state = 'AttemptDeletionRequested'; code = -210; break;
    case 'failed-permanent': state = 'permanent'; break;
    default: throw new Error(`unknown kind ${kind}`);
  }

  if (state === null) {
    // Submitted, not yet created in the API server.
    snap = { ...req, status: pendingStatus() };
    extra = { requestSynced: false, ...defs, notifiedAtRunning: false };
    inApi = false;
  } else if (state === 'permanent') {
    snap = { ...req, status: permanentFailedStatus(t0) };
    extra = { ...defs };
    inApi = false;
  } else {
    const attemptT0 = t0 + lastAttempt * 61 * MINUTE;
    snap = { ...req, metadata: meta(req.metadata), status: frameworkStatus(p, lastAttempt, state, code, attemptT0, { taskRetried: kind === 'running-task-retried', retried }) };
    const completed = state === 'Completed';
    const deleted = completed && !kind.endsWith('-in-api');
    extra = deleted ? { ...blankSecrets, apiServerDeleted: true } : { ...defs };
    inApi = !deleted;
    if (kind.startsWith('archived')) extra.archived = true;
    if (kind === 'running' && p.notify && p.notify.running) extra.notifiedAtRunning = true;
    if (kind === 'stopped-notified') extra.notifiedAtStopped = true;
    if (kind === 'failed-retried' && p.notify && p.notify.retried) extra.notifiedAtRetried = 2;
    // Framework attempts that were retried: one history row each.
    for (let a = 0; a < lastAttempt; a++) {
      const hs = { ...req, metadata: meta(req.metadata), status: frameworkStatus(p, a, 'AttemptCompleted', 1, t0 + a * 61 * MINUTE, { retried: a }) };
      const at = t0 + a * 61 * MINUTE + 60 * MINUTE;
      rows.framework_history.push({
        uid: md5(`${p.name}+${a}+retry`),
        frameworkName: p.name,
        attemptIndex: a,
        historyType: 'retry',
        snapshot: JSON.stringify(hs),
        insertedAt: iso(at),
        updatedAt: iso(at),
      });
      const ts = hs.status.attemptStatus.taskRoleStatuses[0].taskStatuses[0];
      rows.task_history.push(taskHistoryRow(p, a, 'worker', ts, 'deletion', at));
      rows.pods.push(podRow(p, a, 'worker', ts, at));
    }
    // A task retried within the running attempt: its first attempt's record.
    if (kind === 'running-task-retried') {
      const cur = snap.status.attemptStatus.taskRoleStatuses[0].taskStatuses[0];
      const prevPod = uuid(`pod ${p.name} 0 worker 0 0`);
      const prev = {
        ...cur,
        state: 'TaskAttemptCompleted',
        completionTime: iso(t0 + 10 * MINUTE),
        retryPolicyStatus: { totalRetriedCount: 0, accountableRetriedCount: 0, retryDelaySec: null },
        attemptStatus: { ...cur.attemptStatus, id: 0, instanceUID: `0_${prevPod}`, podUID: prevPod, completionTime: iso(t0 + 10 * MINUTE), completionStatus: completion(1) },
      };
      rows.task_history.push(taskHistoryRow(p, 0, 'worker', prev, 'retry', t0 + 10 * MINUTE));
      rows.pods.push(podRow(p, 0, 'worker', prev, t0 + 10 * MINUTE));
    }
    if (deleted && i % 2 === 0) {
      const ts = snap.status.attemptStatus.taskRoleStatuses[0].taskStatuses[0];
      rows.pods.push(podRow(p, lastAttempt, 'worker', ts, attemptT0 + 60 * MINUTE));
    }
    if (i % 2 === 0 || code !== null && code !== 0) rows.framework_events.push(...frameworkEvents(p, code !== null && code !== 0 && code !== -210, attemptT0));
    if (i % 5 === 0) {
      const podUid = uuid(`pod ${p.name} ${lastAttempt} worker 0 0`);
      rows.pod_events.push({
        uid: uuid(`podevent ${p.name}`),
        frameworkName: p.name,
        podUid,
        type: 'MODIFIED',
        message: `pod ${p.name}-worker-0 is ${completed ? 'terminated' : 'running'}`,
        event: JSON.stringify({ type: 'MODIFIED', object: { kind: 'Pod', metadata: { name: `${p.name}-worker-0`, uid: podUid } } }),
        insertedAt: iso(attemptT0 + MINUTE),
        updatedAt: iso(attemptT0 + MINUTE),
      });
    }
  }
  if (kind === 'failed-permanent') {
    rows.framework_events.push({
      uid: uuid(`permanent ${p.name}`),
      frameworkName: p.name,
      podUid: null,
      taskroleName: null,
      taskName: null,
      taskIndex: null,
      type: 'Warning',
      reason: 'CreateFrameworkPermanentFailed',
      message: 'admission webhook denied the request',
      firstTimestamp: iso(t0),
      lastTimestamp: iso(t0),
      count: 1,
      sourceComponent: 'database-controller',
      sourceHost: null,
      event: null,
      insertedAt: iso(t0),
      updatedAt: iso(t0),
    });
  }

  const row = frameworkRow(p, snap, extra);
  if (p.oldColumns) {
    for (const k of Object.keys(row)) if (/^notifi(cation|ed)At/.test(k)) row[k] = null;
  }
  rows.frameworks.push(row);

  // Tags: under the uid the rest-server computes, and one stored under an
  // uid of an older scheme (adding it again must not fail).
  const tag = (name, uid) => rows.tags.push({ uid, frameworkName: p.name, name, insertedAt: iso(p.submitted + 5 * MINUTE), updatedAt: iso(p.submitted + 5 * MINUTE) });
  if (i % 3 === 0) tag('nightly', md5(`${p.fullName}+nightly`));
  if (i % 4 === 1) tag(`team-${i % 3}`, md5(`${p.fullName}+team-${i % 3}`));
  if (i % 11 === 0) tag('baseline', uuid(`legacy tag ${p.name}`));

  return { params: p, rows, apiObject: inApi ? snap : null };
}

module.exports = { buildJob, jobParams, frameworkRequest, jobState, md5, uuid, KINDS, LONG_NAME };
