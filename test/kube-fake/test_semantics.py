"""API semantics of kube-fake, checked with plain HTTP (stdlib only).

Run: python3 -m unittest discover -s test/kube-fake -p 'test_*.py' -v
"""
import base64
import gzip
import json
import os
import re
import socket
import sys
import threading
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from kube_fake_harness import (EVENT_PATH, FW_PATH, PC_PATH,  # noqa: E402
                               SECRET_PATH, KubeFake, wait_for)

NS = 'default'
FWS = FW_PATH % NS
SECS = SECRET_PATH % NS


def names(items):
    return [i['metadata']['name'] for i in items]


def secret(name, labels=None, owner=None, data=None):
    md = {'name': name}
    if labels:
        md['labels'] = labels
    if owner:
        md['ownerReferences'] = [{
            'apiVersion': owner['apiVersion'], 'kind': owner['kind'],
            'name': owner['metadata']['name'],
            'uid': owner['metadata']['uid'], 'blockOwnerDeletion': True,
            'controller': True}]
    return {'apiVersion': 'v1', 'kind': 'Secret', 'metadata': md,
            'type': 'Opaque',
            'data': data or {'k': base64.b64encode(b'v').decode()}}


class ApiSemantics(unittest.TestCase):
    """Without the controller: nothing writes but the test."""

    @classmethod
    def setUpClass(cls):
        cls.kf = KubeFake(token='tok-semantics', admin_port=True,
                          extra_args=['--bookmark-interval', '0.2',
                                      '--gc-delay', '0.05',
                                      '--namespace', 'other']).start()

    @classmethod
    def tearDownClass(cls):
        rc = cls.kf.stop()
        assert rc == 0, 'kube-fake did not exit cleanly on SIGTERM: %s' % rc

    def tearDown(self):
        self.kf.admin('DELETE', '/_fake/faults')
        self.kf.admin('DELETE', '/_fake/latency')

    def mk_secret(self, name, **kw):
        code, obj = self.kf.request('POST', SECS, secret(name, **kw))
        self.assertEqual(code, 201, obj)
        return obj

    # -------------------------------------------------------------- basics
    def test_resource_version_is_global_and_monotonic(self):
        kf = self.kf
        rvs = []
        start = kf.rv()
        for i in range(5):
            o = self.mk_secret('rv-s%d' % i)
            rvs.append(int(o['metadata']['resourceVersion']))
            f = kf.create_framework('rvfw%d' % i)
            rvs.append(int(f['metadata']['resourceVersion']))
            code, p = kf.request('POST', PC_PATH, {
                'apiVersion': 'scheduling.k8s.io/v1', 'kind': 'PriorityClass',
                'metadata': {'name': 'rv-pc%d' % i}, 'value': 100 + i})
            self.assertEqual(code, 201, p)
            rvs.append(int(p['metadata']['resourceVersion']))
        self.assertEqual(rvs, sorted(rvs))
        self.assertEqual(len(set(rvs)), len(rvs))
        self.assertGreater(rvs[0], start)
        self.assertEqual(kf.rv(), rvs[-1])
        code, lst = kf.request('GET', SECS)
        self.assertEqual(lst['kind'], 'SecretList')
        self.assertEqual(lst['apiVersion'], 'v1')
        self.assertEqual(int(lst['metadata']['resourceVersion']), rvs[-1])
        # built-in list items carry no kind/apiVersion, CRD items do
        self.assertNotIn('kind', lst['items'][0])
        code, fl = kf.request('GET', FWS)
        self.assertEqual(fl['kind'], 'FrameworkList')
        self.assertEqual(fl['items'][0]['kind'], 'Framework')
        # metadata basics
        f = kf.get_framework('rvfw0')
        md = f['metadata']
        self.assertEqual(md['generation'], 1)
        self.assertEqual(md['namespace'], NS)
        self.assertRegex(md['creationTimestamp'],
                         r'^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$')
        self.assertRegex(md['uid'], r'^[0-9a-f-]{36}$')
        code, pc = kf.request('GET', PC_PATH + '/rv-pc0')
        self.assertNotIn('namespace', pc['metadata'])
        self.assertEqual(pc['preemptionPolicy'], 'PreemptLowerPriority')

    def test_generation_and_noop_patch(self):
        kf = self.kf
        f = kf.create_framework('genfw')
        rv0 = f['metadata']['resourceVersion']
        code, f2 = kf.request('PATCH', FWS + '/genfw',
                              {'metadata': {'labels': {'a': 'b'}}})
        self.assertEqual(code, 200, f2)
        self.assertEqual(f2['metadata']['generation'], 1)  # metadata only
        self.assertNotEqual(f2['metadata']['resourceVersion'], rv0)
        code, f3 = kf.request('PATCH', FWS + '/genfw',
                              {'spec': {'executionType': 'Stop'}})
        self.assertEqual(f3['metadata']['generation'], 2)
        code, f4 = kf.request('PATCH', FWS + '/genfw',
                              {'status': {'state': 'AttemptRunning'}})
        self.assertEqual(f4['metadata']['generation'], 3)  # no subresource
        # a patch that changes nothing writes nothing
        before = kf.rv()
        code, f5 = kf.request('PATCH', FWS + '/genfw',
                              {'spec': {'executionType': 'Stop'}})
        self.assertEqual(code, 200)
        self.assertEqual(f5['metadata']['resourceVersion'],
                         f4['metadata']['resourceVersion'])
        self.assertEqual(kf.rv(), before)

    def test_errors(self):
        kf = self.kf
        kf.create_framework('errfw')
        code, st = kf.request('POST', FWS, {
            'apiVersion': 'frameworkcontroller.microsoft.com/v1',
            'kind': 'Framework', 'metadata': {'name': 'errfw'}})
        self.assertEqual(code, 409)
        self.assertEqual(st['reason'], 'AlreadyExists')
        self.assertEqual(st['kind'], 'Status')
        self.assertEqual(st['status'], 'Failure')
        self.assertEqual(st['code'], 409)
        code, st = kf.request('GET', FWS + '/nosuchfw')
        self.assertEqual(code, 404)
        self.assertEqual(st['reason'], 'NotFound')
        self.assertEqual(st['details'], {
            'name': 'nosuchfw', 'group': 'frameworkcontroller.microsoft.com',
            'kind': 'frameworks'})
        self.assertEqual(st['message'], 'frameworks.frameworkcontroller.'
                         'microsoft.com "nosuchfw" not found')
        for bad in ('a-b', 'Abc', 'a.b', 'x' * 64):
            code, st = kf.request('POST', FWS, {
                'apiVersion': 'frameworkcontroller.microsoft.com/v1',
                'kind': 'Framework', 'metadata': {'name': bad}})
            self.assertEqual(code, 422, bad)
            self.assertEqual(st['reason'], 'Invalid')
            self.assertEqual(st['details']['causes'][0]['field'],
                             'metadata.name')
        # other kinds take DNS-1123 subdomains
        self.mk_secret('a-b.c')
        code, st = kf.request('POST', SECS, secret('Bad_Name'))
        self.assertEqual(code, 422)
        code, st = kf.request('POST', FWS, b'{"metadata": ')
        self.assertEqual(code, 400)
        self.assertEqual(st['reason'], 'BadRequest')
        code, st = kf.request('POST', SECS, secret('huge', data={
            'k': base64.b64encode(b'x' * (3 * 1024 * 1024)).decode()}))
        self.assertEqual(code, 413)
        self.assertEqual(st['reason'], 'RequestEntityTooLarge')
        code, st = kf.request(
            'PATCH', FWS + '/errfw', {'spec': {'x': 1}},
            content_type='application/strategic-merge-patch+json')
        self.assertEqual(code, 415)
        self.assertEqual(st['reason'], 'UnsupportedMediaType')
        code, st = kf.request('GET', SECS + '/nope')
        self.assertEqual(st['details'], {'name': 'nope', 'kind': 'secrets'})
        code, st = kf.request('DELETE', FWS + '/nosuchfw')
        self.assertEqual(code, 404)
        code, st = kf.request('POST', '/api/v1/namespaces/absent/secrets',
                              secret('x'))
        self.assertEqual(code, 404)

    def test_generate_name(self):
        code, obj = self.kf.request('POST', SECS, {
            'metadata': {'generateName': 'gen-'}, 'data': {}})
        self.assertEqual(code, 201, obj)
        self.assertRegex(obj['metadata']['name'], r'^gen-[a-z0-9]{5}$')

    def test_patch_and_put_preconditions(self):
        kf = self.kf
        f = kf.create_framework('prefw')
        rv = f['metadata']['resourceVersion']
        code, f2 = kf.request('PATCH', FWS + '/prefw', {
            'metadata': {'resourceVersion': rv,
                         'annotations': {'x': '1'}}})
        self.assertEqual(code, 200, f2)
        code, st = kf.request('PATCH', FWS + '/prefw', {
            'metadata': {'resourceVersion': rv, 'annotations': {'x': '2'}}})
        self.assertEqual(code, 409)
        self.assertEqual(st['reason'], 'Conflict')
        # merge patch null deletes
        code, f3 = kf.request('PATCH', FWS + '/prefw', {
            'metadata': {'annotations': {'x': None, 'y': 'z'}}})
        self.assertEqual(f3['metadata']['annotations'], {'y': 'z'})
        # json patch
        code, f4 = kf.request('PATCH', FWS + '/prefw', [
            {'op': 'test', 'path': '/metadata/annotations/y', 'value': 'z'},
            {'op': 'add', 'path': '/spec/taskRoles/-',
             'value': {'name': 'ps', 'taskNumber': 2}}],
            content_type='application/json-patch+json')
        self.assertEqual(code, 200, f4)
        self.assertEqual(f4['spec']['taskRoles'][-1]['name'], 'ps')
        code, st = kf.request('PATCH', FWS + '/prefw', [
            {'op': 'test', 'path': '/metadata/annotations/y', 'value': 'no'}],
            content_type='application/json-patch+json')
        self.assertEqual(code, 422)
        # PUT with a stale resourceVersion
        f4['spec']['executionType'] = 'Stop'
        stale = dict(f4, metadata=dict(f4['metadata'], resourceVersion=rv))
        code, st = kf.request('PUT', FWS + '/prefw', stale)
        self.assertEqual(code, 409)
        code, f5 = kf.request('PUT', FWS + '/prefw', f4)
        self.assertEqual(code, 200, f5)
        self.assertEqual(f5['spec']['executionType'], 'Stop')
        self.assertEqual(f5['metadata']['uid'], f['metadata']['uid'])
        self.assertEqual(f5['metadata']['creationTimestamp'],
                         f['metadata']['creationTimestamp'])
        # strategic merge patch is a merge patch for built-in kinds
        self.mk_secret('smp')
        code, s = kf.request(
            'PATCH', SECS + '/smp', {'metadata': {'labels': {'a': 'b'}}},
            content_type='application/strategic-merge-patch+json')
        self.assertEqual(code, 200, s)
        self.assertEqual(s['metadata']['labels'], {'a': 'b'})

    def test_auth(self):
        kf = self.kf
        code, st = kf.request('GET', SECS, token='wrong')
        self.assertEqual(code, 401)
        self.assertEqual(st['reason'], 'Unauthorized')
        code, st = kf.request('GET', SECS, token='')
        self.assertEqual(code, 401)
        code, _ = kf.request('GET', '/version', token='wrong')
        self.assertEqual(code, 401)
        code, _ = kf.request('GET', '/healthz', token='')
        self.assertEqual(code, 200)

    def test_selectors(self):
        kf = self.kf
        self.mk_secret('sel-a', labels={'app': 'x', 'tier': 'db'})
        self.mk_secret('sel-b', labels={'app': 'x'})
        self.mk_secret('sel-c', labels={'app': 'y'})
        code, l = kf.request('GET', SECS, query={'labelSelector': 'app=x'})
        self.assertEqual(names(l['items']), ['sel-a', 'sel-b'])
        code, l = kf.request('GET', SECS,
                             query={'labelSelector': 'app in (x,y),!tier'})
        self.assertEqual(names(l['items']), ['sel-b', 'sel-c'])
        code, l = kf.request('GET', SECS,
                             query={'fieldSelector': 'metadata.name=sel-c'})
        self.assertEqual(names(l['items']), ['sel-c'])
        code, st = kf.request('GET', SECS, query={'fieldSelector': 'spec.x=1'})
        self.assertEqual(code, 400)

    # -------------------------------------------------------------- paging
    def test_paging_is_a_consistent_snapshot(self):
        kf = self.kf
        ns = 'other'
        path = FW_PATH % ns
        for i in range(7):
            kf.create_framework('page%d' % i, ns=ns)
        code, p1 = kf.request('GET', path, query={'limit': 3})
        self.assertEqual(code, 200)
        self.assertEqual(names(p1['items']), ['page0', 'page1', 'page2'])
        self.assertEqual(p1['metadata']['remainingItemCount'], 4)
        snap_rv = p1['metadata']['resourceVersion']
        snap = {i['metadata']['name']: i['metadata']['resourceVersion']
                for i in kf.request('GET', path)[1]['items']}
        # change the world between pages
        kf.request('DELETE', path + '/page4')
        kf.request('PATCH', path + '/page5', {'metadata': {'labels':
                                                           {'x': 'y'}}})
        kf.create_framework('page3a', ns=ns)
        got = list(p1['items'])
        cont = p1['metadata']['continue']
        while cont:
            code, p = kf.request('GET', path, query={'limit': 3,
                                                     'continue': cont})
            self.assertEqual(code, 200, p)
            self.assertEqual(p['metadata']['resourceVersion'], snap_rv)
            got += p['items']
            cont = p['metadata'].get('continue')
        self.assertEqual(
            {i['metadata']['name']: i['metadata']['resourceVersion']
             for i in got}, snap)
        self.assertEqual(names(got), sorted(snap))

    def test_expired_continue_gives_410(self):
        kf = self.kf
        for i in range(3):
            self.mk_secret('exp%d' % i)
        code, p1 = kf.request('GET', SECS, query={'limit': 1})
        self.mk_secret('exp-later')
        kf.admin('POST', '/_fake/compact')
        code, st = kf.request('GET', SECS, query={
            'limit': 1, 'continue': p1['metadata']['continue']})
        self.assertEqual(code, 410)
        self.assertEqual(st['reason'], 'Expired')
        code, st = kf.request('GET', SECS, query={'limit': 1,
                                                  'continue': 'garbage!'})
        self.assertEqual(code, 400)

    # -------------------------------------------------------------- watch
    def test_watch_too_old_resource_version(self):
        kf = self.kf
        old = kf.rv()
        self.mk_secret('old1')
        self.mk_secret('old2')
        kf.admin('POST', '/_fake/compact')
        with kf.watch(SECS, resourceVersion=str(old)) as w:
            self.assertEqual(w.status, 200)
            evs = list(w.events())
        self.assertEqual(len(evs), 1, evs)
        self.assertEqual(evs[0]['type'], 'ERROR')
        self.assertEqual(evs[0]['object']['code'], 410)
        self.assertEqual(evs[0]['object']['reason'], 'Expired')
        self.assertIn('too old resource version', evs[0]['object']['message'])
        # the boundary: events after the compacted RV are still there
        a = self.mk_secret('bound-a')['metadata']['resourceVersion']
        b = self.mk_secret('bound-b')['metadata']['resourceVersion']
        self.mk_secret('bound-c')
        crv = kf.admin('POST', '/_fake/compact', {'resourceVersion': b})
        self.assertEqual(crv['compactedResourceVersion'], b)
        with kf.watch(SECS, resourceVersion=b, timeoutSeconds='5') as w:
            evs = w.read_until(lambda e: True)
        self.assertEqual(evs[0]['object']['metadata']['name'], 'bound-c')
        with kf.watch(SECS, resourceVersion=a, timeoutSeconds='5') as w:
            evs = list(w.events())
        self.assertEqual([e['type'] for e in evs], ['ERROR'])
        # the current RV is still fine
        with kf.watch(SECS, resourceVersion=str(kf.rv()),
                      timeoutSeconds='1') as w:
            self.assertEqual(list(w.events()), [])
            self.assertTrue(w.clean)

    def test_watch_initial_events_and_timeout(self):
        kf = self.kf
        self.mk_secret('init-a', labels={'w': 'init'})
        self.mk_secret('init-b', labels={'w': 'init'})
        t0 = time.monotonic()
        with kf.watch(SECS, labelSelector='w=init', timeoutSeconds='1') as w:
            evs = list(w.events())
        self.assertLess(time.monotonic() - t0, 5)
        self.assertTrue(w.clean)
        self.assertEqual([(e['type'], e['object']['metadata']['name'])
                          for e in evs],
                         [('ADDED', 'init-a'), ('ADDED', 'init-b')])
        self.assertEqual(evs[0]['object']['kind'], 'Secret')

    def test_bookmarks(self):
        kf = self.kf
        with kf.watch(FWS, resourceVersion=str(kf.rv()),
                      allowWatchBookmarks='true', timeoutSeconds='10') as w:
            self.mk_secret('bm-other-kind')
            target = kf.rv()
            evs = w.read_until(
                lambda e: e['type'] == 'BOOKMARK' and
                int(e['object']['metadata']['resourceVersion']) >= target)
        bm = evs[-1]
        self.assertEqual(bm['object']['kind'], 'Framework')
        self.assertEqual(bm['object']['apiVersion'],
                         'frameworkcontroller.microsoft.com/v1')
        self.assertEqual(int(bm['object']['metadata']['resourceVersion']),
                         target)
        self.assertFalse([e for e in evs if e['type'] != 'BOOKMARK'])

    def test_watch_resume_gets_exactly_the_missed_events(self):
        kf = self.kf
        start = kf.rv()
        w = kf.watch(SECS, resourceVersion=str(start), labelSelector='r=1')
        self.mk_secret('res-a', labels={'r': '1'})
        self.mk_secret('res-b', labels={'r': '1'})
        evs = w.read_until(lambda e: e['object']['metadata']['name'] ==
                           'res-b')
        w.close()
        last = evs[-1]['object']['metadata']['resourceVersion']
        # missed while disconnected
        expected = []
        o = kf.request('PATCH', SECS + '/res-a',
                       {'metadata': {'annotations': {'n': '1'}}})[1]
        expected.append(('MODIFIED', 'res-a', o['metadata']['resourceVersion']))
        o = self.mk_secret('res-c', labels={'r': '1'})
        expected.append(('ADDED', 'res-c', o['metadata']['resourceVersion']))
        self.mk_secret('res-nolabel')
        o = kf.request('PATCH', SECS + '/res-b',
                       {'metadata': {'labels': {'r': None}}})[1]
        # left the selection: DELETED
        expected.append(('DELETED', 'res-b', o['metadata']['resourceVersion']))
        code, _ = kf.request('DELETE', SECS + '/res-a')
        self.assertEqual(code, 200)
        end = kf.rv()
        expected.append(('DELETED', 'res-a', str(end)))
        with kf.watch(SECS, resourceVersion=last, labelSelector='r=1',
                      timeoutSeconds='5') as w2:
            got = w2.read_until(
                lambda e: e['object']['metadata']['resourceVersion'] ==
                str(end))
        self.assertEqual([(e['type'], e['object']['metadata']['name'],
                           e['object']['metadata']['resourceVersion'])
                          for e in got], expected)

    def test_admin_load_stores_objects_with_status(self):
        kf = self.kf
        ns = 'other'
        path = FW_PATH % ns
        start = kf.rv()
        tpl = json.dumps({
            'apiVersion': 'frameworkcontroller.microsoft.com/v1',
            'kind': 'Framework',
            'metadata': {'name': '__name__', 'resourceVersion': '7',
                         'uid': 'not-kept', 'labels': {'l': '__name__'}},
            'spec': {'executionType': 'Start',
                     'retryPolicy': {'fancyRetryPolicy': False,
                                     'maxRetryCount': 0},
                     'taskRoles': [{'name': 'w', 'taskNumber': 1, 'task': {
                         'pod': {'spec': {'containers': [{
                             'name': 'w', 'image': 'ubuntu'}]}}}}]},
            'status': {'state': 'AttemptRunning'}})
        w = kf.watch(path, resourceVersion=str(start), timeoutSeconds='5')
        out = kf.admin('POST', '/_fake/load', {
            'namespace': ns, 'template': tpl, 'prefix': 'load', 'first': 1,
            'n': 3})
        self.assertEqual(out, {'loaded': 3, 'resourceVersion': str(start + 3)})
        evs = w.read_until(lambda e: e['object']['metadata']['name'] ==
                           'load3')
        w.close()
        self.assertEqual([(e['type'], e['object']['metadata']['name'],
                           e['object']['metadata']['resourceVersion'])
                          for e in evs],
                         [('ADDED', 'load%d' % i, str(start + i))
                          for i in (1, 2, 3)])
        code, obj = kf.request('GET', path + '/load2')
        self.assertEqual(code, 200, obj)
        md = obj['metadata']
        self.assertEqual((md['resourceVersion'], md['labels'], md['namespace'],
                          md['generation']),
                         (str(start + 2), {'l': 'load2'}, ns, 1))
        self.assertNotEqual(md['uid'], 'not-kept')
        self.assertEqual(obj['status'], {'state': 'AttemptRunning'})
        # the same name again: 409 and nothing stored after it
        with self.assertRaises(AssertionError) as cm:
            kf.admin('POST', '/_fake/load', {
                'namespace': ns, 'template': tpl, 'prefix': 'load',
                'first': 3, 'n': 2})
        self.assertIn('409', str(cm.exception))
        self.assertEqual(kf.request('GET', path + '/load4')[0], 404)
        self.assertEqual(kf.rv(), start + 3)
        with self.assertRaises(AssertionError) as cm:
            kf.admin('POST', '/_fake/load', {'namespace': ns,
                                             'template': '{"metadata": {}}'})
        self.assertIn('__name__', str(cm.exception))
        for i in (1, 2, 3):
            self.assertEqual(kf.request('DELETE', path + '/load%d' % i)[0],
                             200)

    # -------------------------------------------------------------- delete
    def test_foreground_deletion_collects_owned_secrets(self):
        kf = self.kf
        fw = kf.create_framework('fgfw')
        self.mk_secret('fg-owned1', owner=fw)
        self.mk_secret('fg-owned2', owner=fw)
        self.mk_secret('fg-free')
        start = kf.rv()
        with kf.watch('/api/v1/namespaces/default/secrets',
                      resourceVersion=str(start)) as ws, \
                kf.watch(FWS, resourceVersion=str(start)) as wf:
            code, obj = kf.request('DELETE', FWS + '/fgfw', {
                'kind': 'DeleteOptions', 'apiVersion': 'v1',
                'propagationPolicy': 'Foreground'})
            self.assertEqual(code, 200, obj)
            self.assertEqual(obj['kind'], 'Framework')
            self.assertIn('deletionTimestamp', obj['metadata'])
            self.assertIn('foregroundDeletion', obj['metadata']['finalizers'])
            fevs = wf.read_until(lambda e: e['type'] == 'DELETED')
            sevs = ws.read_until(
                lambda e: len([1]) and e['object']['metadata']['name'] ==
                'fg-owned2' and e['type'] == 'DELETED' or False)
        self.assertEqual([e['type'] for e in fevs], ['MODIFIED', 'DELETED'])
        del_rv = int(fevs[-1]['object']['metadata']['resourceVersion'])
        for e in sevs:
            if e['type'] == 'DELETED':
                self.assertLess(
                    int(e['object']['metadata']['resourceVersion']), del_rv)
        self.assertEqual(kf.request('GET', SECS + '/fg-owned1')[0], 404)
        self.assertEqual(kf.request('GET', SECS + '/fg-owned2')[0], 404)
        self.assertEqual(kf.request('GET', SECS + '/fg-free')[0], 200)
        self.assertEqual(kf.request('GET', FWS + '/fgfw')[0], 404)

    def test_background_deletion_and_orphan(self):
        kf = self.kf
        fw = kf.create_framework('bgfw')
        self.mk_secret('bg-owned', owner=fw)
        code, obj = kf.request('DELETE', FWS + '/bgfw')
        self.assertEqual(code, 200)
        self.assertEqual(kf.request('GET', FWS + '/bgfw')[0], 404)
        wait_for(lambda: kf.request('GET', SECS + '/bg-owned')[0] == 404,
                 5, what='garbage collection of bg-owned')
        fw = kf.create_framework('orfw')
        self.mk_secret('or-owned', owner=fw)
        code, obj = kf.request('DELETE', FWS + '/orfw',
                               query={'propagationPolicy': 'Orphan'})
        self.assertEqual(code, 200)
        wait_for(lambda: kf.request('GET', FWS + '/orfw')[0] == 404, 5)
        code, s = kf.request('GET', SECS + '/or-owned')
        self.assertEqual(code, 200)
        self.assertNotIn('ownerReferences', s['metadata'])
        # built-in kinds answer a delete with a Status
        code, st = kf.request('DELETE', SECS + '/or-owned')
        self.assertEqual(st['kind'], 'Status')
        self.assertEqual(st['status'], 'Success')

    # -------------------------------------------------------------- faults
    def test_fault_429_with_retry_after(self):
        kf = self.kf
        kf.admin('POST', '/_fake/faults', {'status': 429, 'count': 2,
                                           'verb': 'create',
                                           'resource': 'secrets',
                                           'retryAfter': 3})
        for _ in range(2):
            code, hdrs, body = kf.request('POST', SECS, secret('f429'),
                                          raw=True)
            self.assertEqual(code, 429)
            self.assertEqual(hdrs.get('Retry-After'), '3')
            st = json.loads(body)
            self.assertEqual(st['reason'], 'TooManyRequests')
            self.assertEqual(st['details']['retryAfterSeconds'], 3)
        # GETs were not affected, the third create goes through
        self.assertEqual(kf.request('GET', SECS)[0], 200)
        self.assertEqual(kf.request('POST', SECS, secret('f429'))[0], 201)

    def test_fault_500_resource_exhausted_and_counters(self):
        kf = self.kf
        kf.admin('POST', '/_fake/counters/reset')
        msg = ('rpc error: code = ResourceExhausted desc = trying to send '
               'message larger than max (2097152 vs. 2097152)')
        kf.admin('POST', '/_fake/faults', {'status': 500, 'message': msg,
                                           'path': '/frameworks$',
                                           'verb': 'POST'})
        body = {'apiVersion': 'frameworkcontroller.microsoft.com/v1',
                'kind': 'Framework', 'metadata': {'name': 'fexh'}}
        code, st = kf.request('POST', FWS, body)
        self.assertEqual(code, 500)
        self.assertEqual(st['reason'], 'InternalError')
        self.assertIn('ResourceExhausted', st['message'])
        self.assertEqual(kf.request('POST', FWS, body)[0], 201)
        self.assertEqual(kf.request('POST', FWS, body)[0], 409)
        c = kf.admin('GET', '/_fake/counters')
        self.assertEqual(c['creates']['frameworks'], {'fexh': 1})
        self.assertEqual(c['createAttempts']['frameworks'], {'fexh': 3})
        self.assertEqual(c['requests']['create frameworks'], 3)

    def test_fault_after_phase_applies_the_write(self):
        kf = self.kf
        kf.admin('POST', '/_fake/faults', {'status': 504, 'phase': 'after',
                                           'verb': 'create',
                                           'resource': 'frameworks'})
        body = {'apiVersion': 'frameworkcontroller.microsoft.com/v1',
                'kind': 'Framework', 'metadata': {'name': 'fafter'}}
        code, st = kf.request('POST', FWS, body)
        self.assertEqual(code, 504)
        self.assertEqual(st['reason'], 'Timeout')
        self.assertEqual(kf.request('POST', FWS, body)[0], 409)

    def test_latency(self):
        kf = self.kf
        kf.admin('POST', '/_fake/latency', {'seconds': 0.3, 'count': 1,
                                            'verb': 'get'})
        t0 = time.monotonic()
        kf.request('GET', SECS + '/whatever')
        self.assertGreaterEqual(time.monotonic() - t0, 0.3)
        t0 = time.monotonic()
        kf.request('GET', SECS + '/whatever')
        self.assertLess(time.monotonic() - t0, 0.3)

    def test_cut_watch_mid_event_and_resume(self):
        kf = self.kf
        start = kf.rv()
        w = kf.watch(SECS, resourceVersion=str(start))
        self.mk_secret('cut-a')
        first = w.read_until(lambda e: True)
        self.assertEqual(first[0]['object']['metadata']['name'], 'cut-a')
        wait_for(lambda: kf.admin('POST', '/_fake/watches/cut',
                                  {'mode': 'mid-event'})['cut'] >= 1, 5)
        self.mk_secret('cut-b')
        rest = list(w.events())
        w.close()
        self.assertEqual(rest, [])
        self.assertTrue(w.partial, 'expected half an event line')
        self.assertFalse(w.clean)
        self.assertRaises(ValueError, json.loads, w.partial)
        last = first[0]['object']['metadata']['resourceVersion']
        with kf.watch(SECS, resourceVersion=last, timeoutSeconds='5') as w2:
            evs = w2.read_until(lambda e: True)
        self.assertEqual((evs[0]['type'], evs[0]['object']['metadata']
                          ['name']), ('ADDED', 'cut-b'))

    def test_cut_watch_reset_and_end(self):
        kf = self.kf
        w = kf.watch(SECS, resourceVersion=str(kf.rv()))
        w2 = kf.watch(SECS, resourceVersion=str(kf.rv()))
        wait_for(lambda: len(kf.admin('GET', '/_fake/watches')['watches'])
                 >= 2, 5)
        n = kf.admin('POST', '/_fake/watches/cut', {'mode': 'end'})['cut']
        self.assertGreaterEqual(n, 2)
        self.assertEqual(list(w.events()), [])
        self.assertTrue(w.clean)
        self.assertEqual(list(w2.events()), [])
        w.close()
        w2.close()
        w3 = kf.watch(SECS, resourceVersion=str(kf.rv()))
        wait_for(lambda: kf.admin('POST', '/_fake/watches/cut',
                                  {'mode': 'reset'})['cut'] >= 1, 5)
        self.assertEqual(list(w3.events()), [])
        self.assertFalse(w3.clean)
        w3.close()

    def test_watch_in_stream_error_fault(self):
        kf = self.kf
        kf.admin('POST', '/_fake/faults', {'status': 410, 'verb': 'watch',
                                           'inStream': True})
        with kf.watch(SECS, resourceVersion=str(kf.rv())) as w:
            self.assertEqual(w.status, 200)
            evs = list(w.events())
        self.assertEqual(evs[0]['type'], 'ERROR')
        self.assertEqual(evs[0]['object']['code'], 410)
        kf.admin('POST', '/_fake/faults', {'status': 503, 'verb': 'list'})
        self.assertEqual(kf.request('GET', SECS)[0], 503)
        self.assertEqual(kf.request('GET', SECS)[0], 200)

    def test_fault_drop_closes_the_connection(self):
        kf = self.kf
        kf.admin('POST', '/_fake/faults', {'action': 'drop', 'verb': 'get',
                                           'resource': 'secrets'})
        conn = kf.new_conn()
        conn.request('GET', SECS + '/x',
                     headers={'Authorization': 'Bearer ' + kf.token})
        import http.client
        with self.assertRaises((http.client.HTTPException, ConnectionError)):
            conn.getresponse()
        conn.close()


class ServerPause(unittest.TestCase):
    def test_pause_refuse_and_hang(self):
        with KubeFake(token='p', admin_port=True) as kf:
            self.assertEqual(kf.request('GET', SECS)[0], 200)
            kf.admin('POST', '/_fake/server/pause', {'mode': 'refuse'})

            def refused():
                s = socket.socket()
                try:
                    s.connect(('127.0.0.1', kf.port))
                    return False
                except ConnectionRefusedError:
                    return True
                finally:
                    s.close()
            wait_for(refused, 5, what='connection refused')
            kf.admin('POST', '/_fake/server/resume')
            kf.reset_conn()
            self.assertEqual(kf.request('GET', SECS)[0], 200)
            # hang: requests wait until resumed
            kf.admin('POST', '/_fake/server/pause', {'mode': 'hang'})
            res = {}
            t = threading.Thread(target=lambda: res.update(
                r=kf.request('GET', SECS)))
            t.start()
            t.join(0.3)
            self.assertTrue(t.is_alive())
            kf.admin('POST', '/_fake/server/resume')
            t.join(5)
            self.assertEqual(res['r'][0], 200)
            # pause with an automatic resume
            kf.admin('POST', '/_fake/server/pause', {'mode': 'refuse',
                                                     'seconds': 0.3})
            wait_for(refused, 5)
            wait_for(lambda: not refused(), 5, what='automatic resume')

    def test_held_create_runs_after_the_client_left(self):
        # latency holds a create; the client gives up and goes; the create
        # is executed all the same, and --log-name names it in the log
        import shutil
        import tempfile
        tmp = tempfile.mkdtemp(prefix='kube-fake-log-')
        self.addCleanup(shutil.rmtree, tmp, True)
        log = os.path.join(tmp, 'requests.log')
        with KubeFake(token='h', admin_port=True, extra_args=[
                '--log', log, '--log-name', '--log-agent']) as kf:
            kf.admin('POST', '/_fake/latency', {'seconds': 2, 'count': -1,
                                                'verb': 'create',
                                                'resource': 'secrets'})
            conn = kf.new_conn()
            conn.request('POST', SECS, json.dumps(secret('held')),
                         headers={'Authorization': 'Bearer h',
                                  'Content-Type': 'application/json',
                                  'User-Agent': 'gone/1'})
            conn.close()
            # held (counted before the delay): clearing lets it be
            wait_for(lambda: kf.admin('GET', '/_fake/counters')['requests']
                     .get('create secrets'), 5, what='the create held')
            kf.admin('DELETE', '/_fake/latency')
            self.assertEqual(kf.request('GET', SECS + '/held')[0], 404)
            wait_for(lambda: kf.request('GET', SECS + '/held')[0] == 200, 10,
                     what='the held create')
            self.assertEqual(kf.request('POST', SECS, secret('quick'))[0],
                             201)

            def logged():   # (a line is written once its answer is sent)
                with open(log) as f:
                    lines = f.read().splitlines()
                return [x for x in lines if ' name=quick ' in x] and lines
            lines = wait_for(logged, 5, what='the log lines')
            held = [x for x in lines if x.endswith(' name=held agent=gone/1')]
            self.assertEqual(len(held), 1, lines)
            m = re.search(r' POST \S+/secrets 201 ([\d.]+)ms ', held[0])
            self.assertTrue(m, held[0])
            self.assertGreaterEqual(float(m.group(1)), 1900)
            self.assertRegex([x for x in lines if ' name=quick ' in x][0],
                             r' name=quick agent=\S+$')
            # other verbs name their object in the target
            self.assertFalse([x for x in lines if ' GET ' in x
                              and ' name=' in x])

    def test_history_size(self):
        with KubeFake(extra_args=['--history-size', '5']) as kf:
            start = kf.rv()
            for i in range(4):
                kf.request('POST', SECS, secret('h%d' % i))
            with kf.watch(SECS, resourceVersion=str(start),
                          timeoutSeconds='5') as w:
                evs = w.read_until(lambda e: e['object']['metadata']
                                   ['name'] == 'h3')
            self.assertEqual(len(evs), 4)
            for i in range(4, 8):
                kf.request('POST', SECS, secret('h%d' % i))
            with kf.watch(SECS, resourceVersion=str(start)) as w:
                evs = list(w.events())
            self.assertEqual(evs[0]['object']['code'], 410)

    def test_token_file_rotation(self):
        import tempfile
        d = tempfile.mkdtemp()
        tf = os.path.join(d, 'token')
        with open(tf, 'w') as f:
            f.write('first\n')
        with KubeFake(extra_args=['--token-file', tf]) as kf:
            self.assertEqual(kf.request('GET', SECS, token='first')[0], 200)
            with open(tf + '.new', 'w') as f:
                f.write('second\n')
            os.rename(tf + '.new', tf)
            self.assertEqual(kf.request('GET', SECS, token='first')[0], 401)
            self.assertEqual(kf.request('GET', SECS, token='second')[0], 200)


class Controller(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.kf = KubeFake(token='tok-ctl', extra_args=[
            '--simulate-controller', '--step-seconds', '0.02',
            '--run-seconds', '0.1', '--compress-threshold', '20000']).start()

    @classmethod
    def tearDownClass(cls):
        cls.kf.stop()

    def completed(self, name, timeout=20):
        return self.kf.wait_framework(
            name, lambda f: (f.get('status') or {}).get('state') ==
            'Completed', timeout)

    def test_success_walks_through_the_states(self):
        kf = self.kf
        start = kf.rv()
        with kf.watch(FWS, resourceVersion=str(start),
                      fieldSelector='metadata.name=okfw') as w:
            kf.create_framework('okfw', [('master', 1), ('worker', 2)])
            evs = w.read_until(lambda e: (e['object'].get('status') or {})
                               .get('state') == 'Completed')
        states = [(e['object'].get('status') or {}).get('state')
                  for e in evs]
        self.assertEqual(states, [
            None, 'AttemptCreationPending', 'AttemptCreationRequested',
            'AttemptPreparing', 'AttemptRunning', 'AttemptDeletionPending',
            'AttemptDeletionRequested', 'AttemptDeleting', 'AttemptCompleted',
            'Completed'])
        rvs = [int(e['object']['metadata']['resourceVersion']) for e in evs]
        self.assertEqual(rvs, sorted(rvs))
        st = evs[-1]['object']['status']
        cs = st['attemptStatus']['completionStatus']
        self.assertEqual(cs['code'], 0)
        self.assertEqual(cs['phrase'], 'Succeeded')
        self.assertEqual(cs['type'], {'name': 'Succeeded', 'attributes': []})
        self.assertNotIn('phase', cs)
        self.assertEqual(st['retryPolicyStatus']['totalRetriedCount'], 0)
        trs = st['attemptStatus']['taskRoleStatuses']
        self.assertEqual([t['name'] for t in trs], ['master', 'worker'])
        self.assertEqual(len(trs[1]['taskStatuses']), 2)
        t = trs[1]['taskStatuses'][1]
        self.assertEqual(t['attemptStatus']['podName'], 'okfw-worker-1')
        self.assertTrue(t['attemptStatus']['podUID'])
        self.assertTrue(t['attemptStatus']['podIP'])
        for k in ('startTime', 'runTime', 'completionTime', 'transitionTime'):
            self.assertTrue(st[k], k)
        self.assertEqual(evs[-1]['object']['metadata']['generation'], 10)
        # pod events
        code, el = kf.request('GET', EVENT_PATH % NS, query={
            'fieldSelector': 'involvedObject.name=okfw-worker-1'})
        reasons = sorted(e['reason'] for e in el['items'])
        self.assertEqual(reasons, ['Scheduled', 'Started'])
        e = el['items'][0]
        self.assertEqual(e['involvedObject']['kind'], 'Pod')
        self.assertEqual(e['type'], 'Normal')
        self.assertEqual(e['count'], 1)
        self.assertTrue(e['source']['component'])
        uids = [x['metadata']['uid'] for x in
                kf.request('GET', EVENT_PATH % NS)[1]['items']]
        self.assertEqual(len(uids), len(set(uids)))

    def test_retries_with_exit_codes(self):
        kf = self.kf
        start = kf.rv()
        with kf.watch(FWS, resourceVersion=str(start),
                      fieldSelector='metadata.name=retryfw') as w:
            kf.create_framework('retryfw', retry=3, annotations={
                'kube-fake/exit-codes': '1,137,0'})
            evs = w.read_until(lambda e: (e['object'].get('status') or {})
                               .get('state') == 'Completed')
        attempts = []
        for e in evs:
            st = e['object'].get('status')
            if st and st['state'] == 'AttemptCompleted':
                a = st['attemptStatus']
                if not attempts or attempts[-1][0] != a['id']:
                    attempts.append((a['id'], a['completionStatus']['code'],
                                     st['retryPolicyStatus']
                                     ['totalRetriedCount']))
        self.assertEqual(attempts, [(0, 1, 0), (1, 137, 1), (2, 0, 2)])
        st = evs[-1]['object']['status']
        self.assertEqual(st['attemptStatus']['id'], 2)
        self.assertEqual(st['retryPolicyStatus'],
                         {'totalRetriedCount': 2,
                          'accountableRetriedCount': 2,
                          'retryDelaySec': None})
        self.assertEqual(st['attemptStatus']['completionStatus']['code'], 0)
        failed = [e['object']['status']['attemptStatus']['completionStatus']
                  for e in evs if (e['object'].get('status') or {})
                  .get('state') == 'AttemptCompleted' and
                  e['object']['status']['attemptStatus']['id'] == 0][0]
        self.assertEqual(failed['phrase'], 'ContainerUnrecognizedFailed')
        self.assertEqual(failed['type']['name'], 'Failed')

    def test_task_retries(self):
        kf = self.kf
        start = kf.rv()
        with kf.watch(FWS, resourceVersion=str(start),
                      fieldSelector='metadata.name=taskretryfw') as w:
            kf.create_framework('taskretryfw', [('worker', 2)], annotations={
                'kube-fake/task-retries': '2'})
            evs = w.read_until(lambda e: (e['object'].get('status') or {})
                               .get('state') == 'Completed')
        seen = {}
        for e in evs:
            st = e['object'].get('status') or {}
            for tr in (st.get('attemptStatus') or {}).get(
                    'taskRoleStatuses') or []:
                for t in tr.get('taskStatuses') or []:
                    a = t['attemptStatus']
                    if a.get('podUID'):
                        seen.setdefault(t['index'], {})[a['id']] = (
                            t['instanceUID'], a['podUID'])
        self.assertEqual(sorted(seen), [0, 1])
        for idx, attempts in seen.items():
            self.assertEqual(sorted(attempts), [0, 1, 2], idx)
            # one task instance, a new pod per attempt
            self.assertEqual(len({u for u, _ in attempts.values()}), 1)
            self.assertEqual(len({p for _, p in attempts.values()}), 3)
        st = evs[-1]['object']['status']
        self.assertEqual(st['attemptStatus']['id'], 0)
        self.assertEqual(st['attemptStatus']['completionStatus']['code'], 0)
        t = st['attemptStatus']['taskRoleStatuses'][0]['taskStatuses'][0]
        self.assertEqual(t['retryPolicyStatus']['totalRetriedCount'], 2)

    def test_retries_exhausted(self):
        kf = self.kf
        kf.create_framework('exhfw', retry=1, annotations={
            'kube-fake/exit-codes': '2'})
        st = self.completed('exhfw')['status']
        self.assertEqual(st['attemptStatus']['id'], 1)
        self.assertEqual(st['attemptStatus']['completionStatus']['code'], 2)
        self.assertEqual(st['retryPolicyStatus']['totalRetriedCount'], 1)
        self.assertEqual(st['retryPolicyStatus']['accountableRetriedCount'],
                         1)

    def test_stop(self):
        kf = self.kf
        kf.create_framework('stopfw', annotations={
            'kube-fake/run-seconds': 'inf'})
        kf.wait_framework('stopfw', lambda f: (f.get('status') or {})
                          .get('state') == 'AttemptRunning')
        code, _ = kf.request('PATCH', FWS + '/stopfw',
                             {'spec': {'executionType': 'Stop'}})
        self.assertEqual(code, 200)
        st = self.completed('stopfw')['status']
        cs = st['attemptStatus']['completionStatus']
        self.assertEqual(cs['code'], -210)
        self.assertEqual(cs['phrase'], 'StopFrameworkRequested')
        self.assertEqual(cs['type'], {'name': 'Failed',
                                      'attributes': ['Permanent']})

    def test_compressed_task_role_statuses(self):
        kf = self.kf
        kf.create_framework('bigfw', [('worker', 1000)])
        fw = self.completed('bigfw', timeout=60)
        att = fw['status']['attemptStatus']
        self.assertIsNone(att['taskRoleStatuses'])
        trs = json.loads(gzip.decompress(base64.b64decode(
            att['taskRoleStatusesCompressed'])))
        self.assertEqual(len(trs), 1)
        self.assertEqual(trs[0]['name'], 'worker')
        self.assertEqual([t['index'] for t in trs[0]['taskStatuses']],
                         list(range(1000)))
        self.assertTrue(all(t['state'] == 'Completed'
                            for t in trs[0]['taskStatuses']))
        # a bounded number of pod events for huge jobs
        code, el = kf.request('GET', EVENT_PATH % NS)
        n = len([e for e in el['items']
                 if e['involvedObject']['name'].startswith('bigfw-')])
        self.assertLessEqual(n, 20)
        self.assertGreater(n, 0)

    def test_pause_and_resume(self):
        kf = self.kf
        kf.admin('POST', '/_fake/controller/pause')
        try:
            kf.create_framework('pausefw')
            info = kf.admin('GET', '/_fake/controller')
            self.assertTrue(info['paused'])
            # nothing may happen while paused (a negative check needs time)
            time.sleep(0.4)
            self.assertIsNone(kf.get_framework('pausefw').get('status'))
        finally:
            kf.admin('POST', '/_fake/controller/resume')
        self.completed('pausefw')


if __name__ == '__main__':
    unittest.main()
