#!/usr/bin/python3
"""Regenerate the seed corpus of the fuzz targets (test/fuzz/corpus/TARGET/)
from real inputs: frameworks run by kube-fake's simulated controller (with
compression of taskRoleStatuses forced on), the raw bytes of its watch
streams and LIST pages, and the configs and patches of the test fixtures.

    python3 test/fuzz/make-corpus.py          # rewrites seed-* files only

Inputs the fuzzers found (crash-*, regress-*) are kept: they are regression
tests.
"""
import base64
import glob
import hashlib
import http.client
import json
import os
import sys
import time

HERE = os.path.dirname(os.path.realpath(__file__))
sys.path.insert(0, os.path.join(HERE, '..', 'kube-fake'))
from kube_fake_harness import KubeFake, wait_for  # noqa: E402

CORPUS = os.path.join(HERE, 'corpus')
FW = '/apis/frameworkcontroller.microsoft.com/v1/namespaces/default/frameworks'

CONFIGS = [
    'protocolVersion: 2\nname: job1\ntype: job\n',
    'extras:\n  hivedScheduler:\n    jobPriorityClass: prod\n',
    'protocolVersion: 2\nname: notify\ntype: job\nextras:\n'
    '  jobStatusChangeNotification:\n    running: true\n    succeeded: yes\n'
    '    failed: "true"\n    stopped: on\n    retried: false\n'
    '  hivedScheduler: {jobPriorityClass: test, taskRoles: {a: {skuNum: 1}}}\n',
    'prerequisites:\n  - type: dockerimage\n    uri: ubuntu:18.04\n    name: img\n'
    'taskRoles:\n  worker:\n    instances: 2\n    dockerImage: img\n'
    '    resourcePerInstance: {cpu: 1, memory: 1024, gpu: 0}\n'
    '    commands:\n      - echo hi\n'
    'extras: &x\n  hivedScheduler:\n    jobPriorityClass: *x\n',
    '--- !!map\n? extras\n: hivedScheduler: [1, 2]\n...\n',
]

PATCHES = [  # (target, patch) — RFC 7396 Appendix A and framework-shaped cases
    ({'a': 'b'}, {'a': 'c'}), ({'a': 'b'}, {'b': 'c'}), ({'a': 'b'}, {'a': None}),
    ({'a': 'b', 'b': 'c'}, {'a': None}), ({'a': ['b']}, {'a': 'c'}),
    ({'a': 'c'}, {'a': ['b']}), ({'a': {'b': 'c'}}, {'a': {'b': 'd', 'c': None}}),
    ({'a': [{'b': 'c'}]}, {'a': [1]}), (['a', 'b'], ['c', 'd']), ({'a': 'b'}, ['c']),
    ({'a': 'foo'}, None), ({'a': 'foo'}, 'bar'), ({'e': None}, {'a': 1}),
    ([1, 2], {'a': 'b', 'c': None}), ({}, {'a': {'bb': {'ccc': None}}}),
]


# json_text: what the plain scanner must take, and what it must leave to
# PostgreSQL's parser (escapes, bad numbers and literals, junk after)
JSON_TEXTS = [
    '{"a": 1, "b": [true, false, null], "c": {"d": "e"}}', '[]', '{}', ' [ { } , [ ] ] ',
    '-0', '0.5e-3', '1E+2', '123456789012345678901234567890.25', '-', '01', '1.', '.5', '1e',
    '"plain"', '"esc\\aped \\"q\\""', '"\\u00e9\\ud83d\\ude00"', '"tab\tin"', '"\u00e9t\u00e9"',
    'true', 'truex', 'nul', '[1,]', '{"a" 1}', '{"a":1,}', '[1] 2', '{"a": 1, "a": 2}',
    '[1e1000000]', '{"spec": {"x": [1, {"y": "}"}]}, "status": null}',
    # a member added (metadata.annotations.config) or left out (spec) by the
    # same parse: where the path is, is not, or is twice; escaped and empty
    # keys; out of order, duplicate and more than 32 members (jsonb's offsets)
    '{"metadata": {"annotations": {"config": "old", "b": 1}, "name": "x"}, "spec": 1}',
    '{"metadata": {"annotations": {}}}',
    '{"metadata": {"annotations": [1]}}',
    '{"metadata": {"annotations": {"a": 1}}, "metadata": {"annotations": {"b": 2}}}',
    '{"metadata": {"x": {"annotations": {}}}, "annotations": {}}',
    '{"spec": {"a": 1}, "spec": 2, "b": 3}',
    '{"b\\"q": 1, "a": 2, "": 3, "": 4, "\\n": [1.50]}',
    '{"metadata": {"annot\\u0061tions": {}}}',
    '[0, -0, 1.50, 1e2, -1E-2, 0.000001, 12345678901234567890]',
    '{' + ', '.join('"k%d": [%d, "s%d", {"z": %d}]' % (i, i, i, i) for i in range(40, -1, -1)) + '}',
    '[' + ', '.join('{"n": %d, "a": [true]}' % i for i in range(40)) + ']',
]


def put(target, name, data):
    d = os.path.join(CORPUS, target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, 'seed-' + name), 'wb') as f:
        f.write(data if isinstance(data, bytes) else data.encode())


def packed_seed(tag, text):
    """A packed target's input: a mode byte and four damage bytes (from the
    tag, so every mode and some damage occur), then the snapshot."""
    h = bytes.fromhex(tag)
    return bytes([h[0] & 7, h[1], h[2], h[3] | 1, h[4] & 15]) + text.encode()


def raw_get(kf, path, timeout=10):
    """The body bytes of a GET, chunked transfer decoded (as curl gives them)."""
    conn = http.client.HTTPConnection('127.0.0.1', kf.port, timeout=timeout)
    conn.request('GET', path, headers={'Accept': 'application/json'})
    resp = conn.getresponse()
    body = resp.read()
    conn.close()
    return body


def compact(obj):
    return json.dumps(obj, separators=(',', ':'), sort_keys=False)


def main():
    for f in glob.glob(os.path.join(CORPUS, '*', 'seed-*')):
        os.unlink(f)
    kf = KubeFake(extra_args=['--simulate-controller', '--compress-threshold', '200',
                              '--run-seconds', '0.2', '--step-seconds', '0.02',
                              '--bookmark-interval', '1'])
    kf.start()
    try:
        start_rv = kf.rv()
        jobs = [('fuzzjob1', [('worker', 1)], '0', 0),
                ('fuzzjob2', [('ps', 1), ('worker', 3)], '1', 2),
                ('fuzzjob3', [('worker', 8)], '0', 0),
                ('fuzzjob4', [('worker', 1)], '137', 1)]
        for i, (name, roles, codes, retry) in enumerate(jobs):
            kf.create_framework(name, task_roles=roles, retry=retry,
                                labels={'userName': 'alice', 'virtualCluster': 'default'},
                                annotations={'jobName': name, 'totalGpuNumber': '0',
                                             'config': CONFIGS[i % len(CONFIGS)],
                                             'kube-fake/exit-codes': codes})
        for name, _, _, _ in jobs:
            kf.wait_framework(name, lambda fw: fw.get('status', {}).get('state') == 'Completed',
                              timeout=60)
        # the whole history of the frameworks, as one watch stream
        stream = raw_get(kf, FW + '?watch=true&allowWatchBookmarks=true&timeoutSeconds=2'
                         '&resourceVersion=%d' % start_rv, timeout=20)
        events = [json.loads(line) for line in stream.splitlines() if line.strip()]
        lines = stream.splitlines(keepends=True)
        head = b''
        while lines and len(head) + len(lines[0]) < 24000:
            head += lines.pop(0)
        put('watch_stream', 'history', b'\x47' + head)
        put('watch_stream', 'history-bytewise', b'\x00' + head[:3000])
        for i in range(0, len(events), 5):
            put('watch_stream', 'events-%03d' % i,
                bytes([i % 64]) + b''.join(compact(e).encode() + b'\n' for e in events[i:i + 5]))
        put('watch_stream', 'error-410', b'\x03' + compact(
            {'type': 'ERROR', 'object': {'kind': 'Status', 'apiVersion': 'v1', 'status': 'Failure',
                                         'message': 'too old resource version', 'reason': 'Expired',
                                         'code': 410}}).encode() + b'\n')
        # LIST pages, as sent
        cont = None
        page = 0
        while page < 10:
            path = FW + '?limit=2' + ('&continue=' + cont if cont else '')
            body = raw_get(kf, path)
            put('list_stream', 'page-%d' % page, bytes([page * 7 % 64]) + body)
            cont = json.loads(body)['metadata'].get('continue')
            page += 1
            if not cont:
                break
        full = raw_get(kf, FW)
        put('list_stream', 'all', b'\x91' + full)
        put('list_stream', 'all-bytewise', b'\x00' + full[:3000])
        items = json.loads(full)['items']
        # snapshots and events, one per kind of moment in a framework's life
        seen = set()
        for e in events:
            obj = e['object']
            st = obj.get('status') or {}
            key = (obj.get('metadata', {}).get('name'), st.get('state'),
                   (st.get('attemptStatus') or {}).get('id'))
            if e['type'] == 'BOOKMARK' or key in seen:
                continue
            seen.add(key)
            tag = hashlib.md5(compact(obj).encode()).hexdigest()[:10]
            put('snapshot', tag, compact(obj))
            put('packed', tag, packed_seed(tag, compact(obj)))
            put('watch_event', tag, compact(e))
            if len(seen) <= 8:
                put('json_text', tag, json.dumps(obj, indent=1))
            att = st.get('attemptStatus') or {}
            comp = att.get('taskRoleStatusesCompressed')
            if comp:
                put('snapshot', 'gzip-' + tag, b'Z' + base64.b64decode(comp))
        for e in [e for e in events if e['type'] != 'BOOKMARK'][-3:]:
            put('watch_event', 'deleted-' + e['object']['metadata']['name'],
                compact({'type': 'DELETED', 'object': e['object']}))
        for i, t in enumerate(JSON_TEXTS):
            put('json_text', 'edge-%02d' % i, t)
        # merge patches: fixtures, and consecutive states of one framework
        for i, (t, p) in enumerate(PATCHES):
            put('merge_patch', 'rfc-%02d' % i, compact(t) + '\n' + compact(p))
        byname = {}
        for e in events:
            if e['type'] != 'BOOKMARK':
                byname.setdefault(e['object']['metadata']['name'], []).append(e['object'])
        for name, objs in byname.items():
            for i in range(0, len(objs) - 1, 3):
                put('merge_patch', '%s-%02d' % (name, i),
                    compact(objs[i]) + '\n' + compact({'status': objs[i + 1].get('status'),
                                                       'metadata': {'resourceVersion': None}}))
        for i, c in enumerate(CONFIGS):
            put('job_config', 'config-%d' % i, c)
        with open(os.path.join(CORPUS, 'watch_event.setup.json'), 'w') as f:
            f.write(compact(items) + '\n')
    finally:
        kf.stop()
    for d in sorted(glob.glob(os.path.join(CORPUS, '*/'))):
        print('%-14s %3d files' % (os.path.basename(d.rstrip('/')), len(os.listdir(d))))


if __name__ == '__main__':
    main()
