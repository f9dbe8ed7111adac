"""A simulated frameworkcontroller.

It drives every Framework through frameworkcontroller's states by rewriting
the object's status (each step is one write: a MODIFIED event and a new
resourceVersion) and writes core v1 Events about the framework's pods.

One thread and one heap for all frameworks; per-framework cost is a small
record plus one parse/serialize of the object per step."""
import base64
import gzip
import heapq
import itertools
import json
import os
import queue
import sys
import threading
import time

from . import resources
from .util import new_uid, now_rfc3339

ANN = 'kube-fake/'
ANN_EXIT_CODES = ANN + 'exit-codes'
ANN_RUN_SECONDS = ANN + 'run-seconds'
ANN_STEP_SECONDS = ANN + 'step-seconds'
ANN_RETRY_DELAY = ANN + 'retry-delay-seconds'
ANN_HOLD_STATE = ANN + 'hold-state'
ANN_TASK_RETRIES = ANN + 'task-retries'

# completion codes of frameworkcontroller with their phrase and type
CODE_INFO = {
    0: ('Succeeded', 'Succeeded', []),
    200: ('ContainerTransientFailed', 'Failed', ['Transient']),
    201: ('ContainerTransientConflictFailed', 'Failed',
          ['Transient', 'Conflict']),
    210: ('ContainerPermanentFailed', 'Failed', ['Permanent']),
    -100: ('ConfigMapExternalDeleted', 'Failed', ['Transient']),
    -101: ('PodExternalDeleted', 'Failed', ['Transient']),
    -110: ('ConfigMapCreationTimeout', 'Failed', ['Transient']),
    -111: ('PodCreationTimeout', 'Failed', ['Transient']),
    -120: ('PodFailedWithoutFailedContainer', 'Failed', ['Transient']),
    -200: ('PodSpecInvalid', 'Failed', ['Permanent']),
    -210: ('StopFrameworkRequested', 'Failed', ['Permanent']),
    -220: ('FrameworkAttemptCompletion', 'Failed', ['Permanent']),
}
UNRECOGNIZED = ('ContainerUnrecognizedFailed', 'Failed', [])
STOP_CODE = -210
NO_RETRY_CODES = (-200, -210, -220)

PREPARING_STATES = ('AttemptCreationPending', 'AttemptCreationRequested',
                    'AttemptPreparing', 'AttemptRunning')
DELETION_STATES = ('AttemptDeletionPending', 'AttemptDeletionRequested',
                   'AttemptDeleting')


def completion_status(code, diagnostics, trigger=None):
    phrase, tname, attrs = CODE_INFO.get(code, UNRECOGNIZED)
    cs = {'code': code, 'phrase': phrase,
          'type': {'name': tname, 'attributes': list(attrs)},
          'diagnostics': diagnostics}
    if trigger is not None:
        cs['trigger'] = trigger
    return cs


def decompress_task_roles(att):
    if att.get('taskRoleStatuses') is None and \
            att.get('taskRoleStatusesCompressed'):
        return json.loads(gzip.decompress(
            base64.b64decode(att['taskRoleStatusesCompressed'])))
    return att.get('taskRoleStatuses') or []


class _Rec:
    __slots__ = ('uid', 'due', 'stop_seen')

    def __init__(self, uid):
        self.uid = uid
        self.due = None
        self.stop_seen = False


class Controller:
    def __init__(self, store, namespace_filter=None, run_seconds=0.3,
                 step_seconds=0.05, compress_threshold=20000,
                 pod_event_tasks=10, node_count=16, enabled=True):
        self.store = store
        self.rt = resources.BY_NAME['frameworks']
        self.ev_rt = resources.BY_NAME['events']
        self.run_seconds = run_seconds
        self.step_seconds = step_seconds
        self.compress_threshold = compress_threshold
        self.pod_event_tasks = pod_event_tasks
        self.node_count = node_count
        self.q = queue.SimpleQueue()
        self.heap = []
        self.seq = itertools.count()
        self.recs = {}
        self.running = threading.Event()
        if enabled:
            self.running.set()
        self.stopping = False
        self.steps = 0
        self.events_written = 0
        self.thread = threading.Thread(target=self._run, name='controller',
                                       daemon=True)
        self.thread_ident = None
        store.hooks.append(self._hook)

    # ---------------------------------------------------------- control
    def start(self):
        with self.store.cond:
            for key, e in self.store.objects['frameworks'].items():
                self.q.put((key, e.uid))
        self.thread.start()

    def pause(self):
        self.running.clear()
        self.q.put(None)

    def resume(self):
        self.running.set()
        self.q.put(None)

    def stop(self):
        self.stopping = True
        self.running.set()
        self.q.put(None)

    def info(self):
        return {'paused': not self.running.is_set(),
                'tracked': len(self.recs), 'scheduled': len(self.heap),
                'queued': self.q.qsize(), 'steps': self.steps,
                'eventsWritten': self.events_written}

    def _hook(self, ev):
        # called by the store with its lock held, for every change
        _, typ, e, _ = ev
        if e.rt is not self.rt:
            return
        if typ == 'DELETED':
            self.q.put((e.key, None))
            return
        if threading.get_ident() == self.thread_ident:
            return
        self.q.put((e.key, e.uid))

    # ---------------------------------------------------------- loop
    def _run(self):
        self.thread_ident = threading.get_ident()
        while not self.stopping:
            if not self.running.is_set():
                self.running.wait()
                continue
            now = time.monotonic()
            timeout = None
            if self.heap:
                timeout = max(0.0, self.heap[0][0] - now)
            try:
                item = self.q.get(timeout=timeout)
                self._notified(item)
                for _ in range(1000):        # drain a burst
                    item = self.q.get_nowait()
                    self._notified(item)
            except queue.Empty:
                pass
            if not self.running.is_set():
                continue
            now = time.monotonic()
            n = 0
            while self.heap and self.heap[0][0] <= now and n < 200 and \
                    self.running.is_set():
                due, _, key = heapq.heappop(self.heap)
                rec = self.recs.get(key)
                if rec is None or rec.due != due:
                    continue
                rec.due = None
                n += 1
                try:
                    self._step(key, rec)
                except Exception as ex:      # keep the controller alive
                    print('kube-fake: controller step for %s failed: %r'
                          % (key, ex), file=sys.stderr)
                    import traceback
                    traceback.print_exc()

    def _schedule(self, key, rec, after):
        due = time.monotonic() + after
        if rec.due is not None and rec.due <= due:
            return
        rec.due = due
        heapq.heappush(self.heap, (due, next(self.seq), key))

    def _notified(self, item):
        if item is None:
            return
        key, uid = item
        if uid is None:                      # deleted
            rec = self.recs.get(key)
            e = self.store.objects['frameworks'].get(key)
            if rec is not None and (e is None or e.uid != rec.uid):
                del self.recs[key]
            return
        e = self.store.objects['frameworks'].get(key)
        if e is None or e.uid != uid:
            return
        rec = self.recs.get(key)
        if rec is None or rec.uid != uid:
            obj = e.obj()
            st = obj.get('status') or {}
            if st.get('state') == 'Completed':
                self.recs.pop(key, None)
                return
            rec = self.recs[key] = _Rec(uid)
            self._schedule(key, rec, self._step_seconds(obj))
            return
        # a change by someone else: react to a stop request at once
        if not rec.stop_seen:
            obj = e.obj()
            if (obj.get('spec') or {}).get('executionType') == 'Stop':
                rec.stop_seen = True
                rec.due = None
                self._schedule(key, rec, self._step_seconds(obj))
            elif rec.due is None:
                self._schedule(key, rec, self._step_seconds(obj))
        elif rec.due is None:
            self._schedule(key, rec, 0)

    # ---------------------------------------------------------- annotations
    @staticmethod
    def _ann(obj):
        return (obj.get('metadata') or {}).get('annotations') or {}

    def _step_seconds(self, obj):
        v = self._ann(obj).get(ANN_STEP_SECONDS)
        try:
            return max(0.0, float(v)) if v is not None else self.step_seconds
        except ValueError:
            return self.step_seconds

    def _run_seconds(self, obj):
        v = self._ann(obj).get(ANN_RUN_SECONDS)
        try:
            return float(v) if v is not None else self.run_seconds
        except ValueError:
            return self.run_seconds

    def _retry_delay(self, obj):
        v = self._ann(obj).get(ANN_RETRY_DELAY)
        try:
            return max(0, int(float(v))) if v is not None else 0
        except ValueError:
            return 0

    def _exit_code(self, obj, attempt):
        v = self._ann(obj).get(ANN_EXIT_CODES)
        if not v:
            return 0
        try:
            codes = [int(x) for x in v.replace(' ', '').split(',') if x]
        except ValueError:
            return 0
        if not codes:
            return 0
        return codes[min(attempt, len(codes) - 1)]

    # ---------------------------------------------------------- one step
    def _step(self, key, rec):
        st = self.store
        with st.cond:
            e = st.objects['frameworks'].get(key)
            if e is None or e.uid != rec.uid:
                self.recs.pop(key, None)
                return
            obj = e.obj()
            if (obj['metadata']).get('deletionTimestamp'):
                # frameworkcontroller stops driving a deleting framework
                self.recs.pop(key, None)
                return
            now = time.time()
            result = self._transition(obj, now)
            if result is None:
                # nothing to do now (held state / waiting)
                return
            new_status, next_after, pod_events = result
            obj['status'] = new_status
            self.steps += 1
            st.update(self.rt, e.ns, e.name, lambda cur, _o: obj)
            for ev in pod_events:
                self._write_event(e.ns, ev)
        if new_status.get('state') == 'Completed':
            self.recs.pop(key, None)
        elif next_after is not None:
            self._schedule(key, rec, next_after)

    def _transition(self, obj, now):
        """Compute the next status: (status, seconds until next step, pod
        events) or None to wait."""
        name = obj['metadata']['name']
        spec = obj.get('spec') or {}
        stop = spec.get('executionType') == 'Stop'
        status = obj.get('status')
        step = self._step_seconds(obj)
        ts = now_rfc3339(now)
        hold = self._ann(obj).get(ANN_HOLD_STATE)
        if not status or not status.get('state'):
            status = {
                'startTime': ts, 'runTime': None, 'completionTime': None,
                'state': 'AttemptCreationPending', 'transitionTime': ts,
                'retryPolicyStatus': {'totalRetriedCount': 0,
                                      'accountableRetriedCount': 0,
                                      'retryDelaySec': None},
                'attemptStatus': self._new_attempt(obj, 0, ts)}
            return self._finish(status), step, []
        state = status['state']
        att = status.get('attemptStatus') or {}
        trs = decompress_task_roles(att)
        att['taskRoleStatuses'] = trs
        att.pop('taskRoleStatusesCompressed', None)
        status['attemptStatus'] = att
        events = []

        def go(new_state):
            status['state'] = new_state
            status['transitionTime'] = ts

        if state == 'Completed':
            return None
        if stop and att.get('completionStatus') is None:
            cs = completion_status(STOP_CODE,
                                   'User has requested to stop the Framework')
            att['completionStatus'] = cs
            for t in self._tasks(trs):
                if t['state'] != 'Completed':
                    self._complete_task(t, ts, completion_status(
                        STOP_CODE, 'User has requested to stop the '
                        'Framework'))
            if state == 'AttemptCreationPending':
                att['completionTime'] = ts
                go('AttemptCompleted')
            else:
                go('AttemptDeletionPending')
            return self._finish(status), step, events
        if hold and hold == state and not stop:
            return None
        if state == 'AttemptCreationPending':
            cm_uid = new_uid()
            att['configMapUID'] = cm_uid
            att['instanceUID'] = '%d_%s' % (att.get('id', 0), cm_uid)
            for tr, t in self._tasks_with_role(trs):
                puid = new_uid()
                t['state'] = 'AttemptCreationRequested'
                t['transitionTime'] = ts
                a = t['attemptStatus']
                a['podUID'] = puid
                a['instanceUID'] = '%d_%s' % (a.get('id', 0), puid)
                t['instanceUID'] = a['instanceUID']
            go('AttemptCreationRequested')
            return self._finish(status), step, events
        if state == 'AttemptCreationRequested':
            n = 0
            for tr, t in self._tasks_with_role(trs):
                idx = t['index']
                node = 'node-%d' % ((hash(name) + idx) % self.node_count)
                hostip = '10.0.%d.%d' % ((hash(name) + idx) % self.node_count,
                                         10)
                t['state'] = 'AttemptPreparing'
                t['transitionTime'] = ts
                a = t['attemptStatus']
                a['podNodeName'] = node
                a['podHostIP'] = hostip
                a['podIP'] = '172.16.%d.%d' % ((idx // 250) % 250,
                                               idx % 250 + 2)
                if n < self.pod_event_tasks:
                    n += 1
                    ns = obj['metadata'].get('namespace', 'default')
                    events.append(self._pod_event(
                        ns, a['podName'], a['podUID'], 'Scheduled',
                        'Successfully assigned %s/%s to %s'
                        % (ns, a['podName'], node),
                        {'component': 'default-scheduler'}, now))
            go('AttemptPreparing')
            return self._finish(status), step, events
        if state == 'AttemptPreparing':
            n = 0
            status['runTime'] = status.get('runTime') or ts
            att['runTime'] = ts
            for tr, t in self._tasks_with_role(trs):
                t['state'] = 'AttemptRunning'
                t['transitionTime'] = ts
                t['runTime'] = ts
                a = t['attemptStatus']
                a['runTime'] = ts
                if n < self.pod_event_tasks:
                    n += 1
                    ns = obj['metadata'].get('namespace', 'default')
                    events.append(self._pod_event(
                        ns, a['podName'], a['podUID'], 'Started',
                        'Started container %s' % tr,
                        {'component': 'kubelet',
                         'host': a.get('podNodeName') or 'node-0'}, now))
            go('AttemptRunning')
            run = self._run_seconds(obj)
            if run < 0 or run == float('inf'):
                return self._finish(status), None, events
            return self._finish(status), run, events
        if state == 'AttemptRunning':
            if self._retry_one_task(obj, trs, ts):
                return self._finish(status), step, events
            run = self._run_seconds(obj)
            if run < 0 or run == float('inf'):
                return None
            code = self._exit_code(obj, att.get('id', 0))
            tasks = list(self._tasks_with_role(trs))
            if code == 0:
                total = len(tasks)
                last_role = tasks[-1][0] if tasks else ''
                last_idx = tasks[-1][1]['index'] if tasks else -1
                for tr, t in tasks:
                    self._complete_task(t, ts, completion_status(
                        0, 'Container exited with code 0'))
                att['completionStatus'] = completion_status(
                    0, 'Succeeded', {
                        'message': 'All Tasks are succeeded: TotalTaskCount: '
                        '%d' % total, 'taskRoleName': last_role,
                        'taskIndex': last_idx})
            else:
                fail_role = tasks[0][0] if tasks else ''
                diag = ('PodPattern unmatched: {"containers":[{"name":"%s",'
                        '"reason":"Error","code":%d}]}' % (fail_role, code))
                for i, (tr, t) in enumerate(tasks):
                    if i == 0:
                        tcs = completion_status(code, diag)
                        tcs['pod'] = {'containers': [
                            {'name': tr, 'reason': 'Error', 'code': code}]}
                    else:
                        tcs = completion_status(
                            -220, 'Stop Task since its FrameworkAttempt is '
                            'completed')
                    self._complete_task(t, ts, tcs)
                att['completionStatus'] = completion_status(code, diag, {
                    'message': 'FailedTaskCount 1 has reached '
                    'MinFailedTaskCount 1 in the TaskRole',
                    'taskRoleName': fail_role, 'taskIndex': 0})
            go('AttemptDeletionPending')
            return self._finish(status), step, events
        if state == 'AttemptDeletionPending':
            go('AttemptDeletionRequested')
            return self._finish(status), step, events
        if state == 'AttemptDeletionRequested':
            go('AttemptDeleting')
            return self._finish(status), step, events
        if state == 'AttemptDeleting':
            att['completionTime'] = ts
            go('AttemptCompleted')
            retry, delay = self._retry_decision(obj, status)
            if retry:
                status['retryPolicyStatus']['retryDelaySec'] = delay
                return self._finish(status), max(step, delay), events
            return self._finish(status), step, events
        if state == 'AttemptCompleted':
            retry, _ = self._retry_decision(obj, status)
            if retry and not stop:
                rps = status['retryPolicyStatus']
                rps['totalRetriedCount'] = rps.get('totalRetriedCount', 0) + 1
                if self._accountable(obj, att.get('completionStatus')):
                    rps['accountableRetriedCount'] = \
                        rps.get('accountableRetriedCount', 0) + 1
                rps['retryDelaySec'] = None
                status['attemptStatus'] = self._new_attempt(
                    obj, att.get('id', 0) + 1, ts)
                go('AttemptCreationPending')
                return self._finish(status), step, events
            status['retryPolicyStatus']['retryDelaySec'] = None
            status['completionTime'] = ts
            go('Completed')
            return self._finish(status), None, events
        return None

    def _retry_one_task(self, obj, trs, ts):
        """Task retries (annotation kube-fake/task-retries): one step of
        one task; False when every task has been retried enough."""
        try:
            want = int(self._ann(obj).get(ANN_TASK_RETRIES) or 0)
        except ValueError:
            return False
        for t in self._tasks(trs):
            rps = t.setdefault('retryPolicyStatus', {})
            if rps.get('totalRetriedCount', 0) >= want:
                continue
            a = t['attemptStatus']
            if t.get('state') != 'AttemptCompleted':
                t['state'] = 'AttemptCompleted'
                t['transitionTime'] = ts
                a['completionTime'] = ts
                a['completionStatus'] = completion_status(
                    200, 'Container exited with code 200')
                return True
            # a new attempt of the same task instance
            puid = new_uid()
            aid = a.get('id', 0) + 1
            t['attemptStatus'] = {
                'id': aid, 'startTime': ts, 'runTime': ts,
                'completionTime': None, 'instanceUID': '%d_%s' % (aid, puid),
                'podName': a.get('podName'), 'podUID': puid,
                'podNodeName': a.get('podNodeName'), 'podIP': a.get('podIP'),
                'podHostIP': a.get('podHostIP'), 'completionStatus': None}
            t['state'] = 'AttemptRunning'
            t['transitionTime'] = ts
            rps['totalRetriedCount'] = rps.get('totalRetriedCount', 0) + 1
            rps['accountableRetriedCount'] = \
                rps.get('accountableRetriedCount', 0) + 1
            return True
        return False

    def _accountable(self, obj, cs):
        rp = (obj.get('spec') or {}).get('retryPolicy') or {}
        if rp.get('fancyRetryPolicy') and cs and \
                'Transient' in (cs.get('type') or {}).get('attributes', []):
            return False
        return True

    def _retry_decision(self, obj, status):
        """(retry?, delay seconds) for the completed attempt."""
        rp = (obj.get('spec') or {}).get('retryPolicy') or {}
        try:
            mx = int(rp.get('maxRetryCount') or 0)
        except (TypeError, ValueError):
            mx = 0
        fancy = bool(rp.get('fancyRetryPolicy'))
        cs = (status.get('attemptStatus') or {}).get('completionStatus') or {}
        code = cs.get('code')
        ctype = cs.get('type') or {}
        attrs = ctype.get('attributes') or []
        delay = self._retry_delay(obj)
        if code in NO_RETRY_CODES:
            return False, 0
        if mx == -2:
            return True, delay
        if ctype.get('name') == 'Succeeded':
            return False, 0
        if fancy and 'Transient' in attrs:
            return True, delay
        if fancy and 'Permanent' in attrs:
            return False, 0
        acc = (status.get('retryPolicyStatus') or {}).get(
            'accountableRetriedCount', 0)
        if mx == -1 or acc < mx:
            return True, delay
        return False, 0

    # ---------------------------------------------------------- helpers
    @staticmethod
    def _tasks(trs):
        for tr in trs:
            for t in tr.get('taskStatuses') or []:
                yield t

    @staticmethod
    def _tasks_with_role(trs):
        for tr in trs:
            for t in tr.get('taskStatuses') or []:
                yield tr.get('name', ''), t

    @staticmethod
    def _complete_task(t, ts, cs):
        t['state'] = 'Completed'
        t['transitionTime'] = ts
        t['completionTime'] = ts
        a = t['attemptStatus']
        a['completionTime'] = ts
        a['completionStatus'] = cs

    def _new_attempt(self, obj, attempt_id, ts):
        name = obj['metadata']['name']
        trs = []
        for tr in (obj.get('spec') or {}).get('taskRoles') or []:
            if not isinstance(tr, dict):
                continue
            rn = str(tr.get('name', ''))
            try:
                n = max(0, int(tr.get('taskNumber') or 0))
            except (TypeError, ValueError):
                n = 0
            tss = []
            for i in range(n):
                tss.append({
                    'index': i, 'instanceUID': None, 'startTime': ts,
                    'runTime': None, 'completionTime': None,
                    'state': 'AttemptCreationPending', 'transitionTime': ts,
                    'deletionPending': False,
                    'retryPolicyStatus': {'totalRetriedCount': 0,
                                          'accountableRetriedCount': 0,
                                          'retryDelaySec': None},
                    'attemptStatus': {
                        'id': 0, 'startTime': ts, 'runTime': None,
                        'completionTime': None, 'instanceUID': None,
                        'podName': '%s-%s-%d' % (name, rn, i),
                        'podUID': None, 'podNodeName': None, 'podIP': None,
                        'podHostIP': None, 'completionStatus': None}})
            trs.append({'name': rn, 'podGracefulDeletionTimeoutSec': None,
                        'taskStatuses': tss})
        return {'id': attempt_id, 'startTime': ts, 'runTime': None,
                'completionTime': None, 'instanceUID': None,
                'configMapName': name + '-attempt', 'configMapUID': None,
                'completionStatus': None, 'taskRoleStatuses': trs}

    def _finish(self, status):
        """Compress the task role statuses when they are large."""
        att = status.get('attemptStatus') or {}
        trs = att.get('taskRoleStatuses')
        if trs:
            raw = json.dumps(trs, separators=(',', ':')).encode()
            if len(raw) > self.compress_threshold:
                att['taskRoleStatuses'] = None
                att['taskRoleStatusesCompressed'] = base64.b64encode(
                    gzip.compress(raw, compresslevel=6, mtime=0)).decode()
        return status

    def _pod_event(self, ns, pod, pod_uid, reason, message, source, now):
        ts = now_rfc3339(now)
        comp = source.get('component', '')
        return {
            'metadata': {'name': '%s.%x' % (pod, int(now * 1e9) +
                                            int.from_bytes(os.urandom(2),
                                                           'big')),
                         'namespace': ns},
            'involvedObject': {'kind': 'Pod', 'namespace': ns, 'name': pod,
                               'uid': pod_uid, 'apiVersion': 'v1',
                               'resourceVersion': '',
                               'fieldPath': 'spec.containers{%s}' %
                               pod.rsplit('-', 2)[-2]
                               if reason == 'Started' else None},
            'reason': reason, 'message': message, 'source': source,
            'firstTimestamp': ts, 'lastTimestamp': ts, 'count': 1,
            'type': 'Normal', 'eventTime': None,
            'reportingComponent': comp,
            'reportingInstance': source.get('host', ''),
        }

    def _write_event(self, ns, ev):
        io = ev['involvedObject']
        if io.get('fieldPath') is None:
            del io['fieldPath']
        try:
            self.store.create(self.ev_rt, ns, ev)
            self.events_written += 1
        except Exception as ex:
            print('kube-fake: controller could not write event: %r' % ex,
                  file=sys.stderr)
