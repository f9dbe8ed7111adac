#!/usr/bin/python3
"""Client-side helpers of test/bench/stress.sh (stdlib only).

  create-rate  --url U --template F --n N --procs P --prefix X
        create N frameworks (the ~3 KB template, __name__ replaced) with P
        client processes on kept-alive connections; prints "RATE SECONDS"
  arrivals     --url U --prefix X --n N --out F --ready R
        watch frameworks from the current resourceVersion and write
        "name epoch" for every ADDED framework whose name starts with X,
        until N were seen; R is created once the watch is open
  count        --url U
        the number of frameworks in the API server (LIST limit=1 and
        remainingItemCount); prints it.  Costly on a big store: not for polling
  added        --url U --prefix X --n N --out F --ready R
        watch frameworks from the current resourceVersion and count ADDED
        frameworks named X...; append "count epoch" to F every 1000 and at N,
        then exit
  patch-status --url U --prefix X --first A --n N --procs P
        merge-patch a running status (4 tasks) onto frameworks XA..X(A+N-1)
        with P processes; prints "RATE SECONDS"
  watch-rate   --url U --from-rv R --n N
        watch frameworks from resourceVersion R and count events until N
        MODIFIED ones arrived; prints "RATE SECONDS"
"""
import argparse
import http.client
import json
import multiprocessing
import os
import socket
import sys
import time
import urllib.parse

FWS = '/apis/frameworkcontroller.microsoft.com/v1/namespaces/default/frameworks'


def hostport(url):
    u = urllib.parse.urlparse(url)
    return u.hostname, u.port


def conn(url):
    h, p = hostport(url)
    return http.client.HTTPConnection(h, p, timeout=120)


def admin(url, method, path):
    c = conn(url)
    c.request(method, path)
    r = c.getresponse()
    out = json.loads(r.read() or b'null')
    c.close()
    return out


def _create_worker(args):
    url, template, names = args
    c = conn(url)
    hdr = {'Content-Type': 'application/json', 'Accept': 'application/json'}
    bad = 0
    for n in names:
        c.request('POST', FWS, body=template.replace('__name__', n).encode(), headers=hdr)
        r = c.getresponse()
        r.read()
        if r.status != 201:
            bad += 1
    c.close()
    return bad


def split(names, procs):
    return [names[i::procs] for i in range(procs)]


def create_rate(a):
    template = open(a.template).read().strip()
    names = ['%s%d' % (a.prefix, i) for i in range(1, a.n + 1)]
    with multiprocessing.Pool(a.procs) as pool:
        t0 = time.time()
        bad = sum(pool.map(_create_worker, [(a.url, template, part) for part in split(names, a.procs)]))
        dt = time.time() - t0
    if bad:
        print('create-rate: %d creates failed' % bad, file=sys.stderr)
    print('%.0f %.2f' % (a.n / dt, dt))


class RawWatch:
    """A minimal chunked watch reader that yields raw event lines."""

    def __init__(self, url, rv):
        h, p = hostport(url)
        self.sock = socket.create_connection((h, p), timeout=600)
        q = urllib.parse.urlencode({'watch': 'true', 'resourceVersion': rv,
                                    'allowWatchBookmarks': 'false', 'timeoutSeconds': 3600})
        self.sock.sendall(('GET %s?%s HTTP/1.1\r\nHost: %s\r\nAccept: application/json\r\n\r\n'
                           % (FWS, q, h)).encode())
        self.f = self.sock.makefile('rb', buffering=1 << 20)
        status = self.f.readline()
        if b' 200 ' not in status:
            raise SystemExit('watch failed: %r' % status)
        while self.f.readline() not in (b'\r\n', b'\n', b''):
            pass
        self.buf = b''

    def lines(self):
        while True:
            size = self.f.readline()
            if not size:
                return
            n = int(size.strip() or b'0', 16)
            if n == 0:
                return
            data = self.f.read(n + 2)[:n]
            self.buf += data
            while b'\n' in self.buf:
                line, self.buf = self.buf.split(b'\n', 1)
                yield line


def arrivals(a):
    rv = admin(a.url, 'GET', '/_fake/rv')['resourceVersion']
    w = RawWatch(a.url, rv)
    open(a.ready, 'w').close()
    seen = 0
    with open(a.out, 'w', buffering=1) as out:
        for line in w.lines():
            t = time.time()
            if not line.startswith(b'{"type":"ADDED"') and b'"ADDED"' not in line[:40]:
                continue
            ev = json.loads(line)
            name = ev['object']['metadata']['name']
            if name.startswith(a.prefix):
                out.write('%s %.6f\n' % (name, t))
                seen += 1
                if seen >= a.n:
                    return


def added(a):
    rv = admin(a.url, 'GET', '/_fake/rv')['resourceVersion']
    w = RawWatch(a.url, rv)
    open(a.ready, 'w').close()
    pat = b'"name":"' + a.prefix.encode()
    seen = 0
    with open(a.out, 'w', buffering=1) as out:
        for line in w.lines():
            if b'"ADDED"' not in line[:40] or pat not in line:
                continue
            seen += 1
            if seen % 1000 == 0 or seen >= a.n:
                out.write('%d %.6f\n' % (seen, time.time()))
            if seen >= a.n:
                return


def count(a):
    c = conn(a.url)
    c.request('GET', FWS + '?limit=1', headers={'Accept': 'application/json'})
    r = c.getresponse()
    d = json.loads(r.read())
    print(len(d.get('items') or []) + int(d['metadata'].get('remainingItemCount') or 0))


def running_status(name):
    tasks = [{'index': i, 'state': 'AttemptRunning', 'startTime': '2020-08-01T10:00:00Z',
              'runTime': '2020-08-01T10:01:00Z', 'transitionTime': '2020-08-01T10:01:00Z',
              'retryPolicyStatus': {'totalRetriedCount': 0, 'accountableRetriedCount': 0},
              'attemptStatus': {'id': 0, 'podName': '%s-worker-%d' % (name, i),
                                'podNodeName': 'node-%d' % i, 'podIP': '10.0.0.%d' % i,
                                'completionStatus': None}} for i in range(4)]
    return {'status': {
        'state': 'AttemptRunning', 'startTime': '2020-08-01T10:00:00Z',
        'runTime': '2020-08-01T10:01:00Z', 'transitionTime': '2020-08-01T10:01:00Z',
        'retryPolicyStatus': {'totalRetriedCount': 0, 'accountableRetriedCount': 0,
                              'retryDelaySec': None},
        'attemptStatus': {'id': 0, 'startTime': '2020-08-01T10:00:00Z',
                          'runTime': '2020-08-01T10:01:00Z',
                          'instanceUID': '0_' + name, 'configMapName': name + '-attempt',
                          'completionStatus': None,
                          'taskRoleStatuses': [{'name': 'worker', 'taskStatuses': tasks}]}}}


def _patch_worker(args):
    url, names = args
    c = conn(url)
    hdr = {'Content-Type': 'application/merge-patch+json', 'Accept': 'application/json'}
    bad = 0
    for n in names:
        c.request('PATCH', FWS + '/' + n, body=json.dumps(running_status(n)).encode(), headers=hdr)
        r = c.getresponse()
        r.read()
        if r.status != 200:
            bad += 1
    c.close()
    return bad


def patch_status(a):
    names = ['%s%d' % (a.prefix, i) for i in range(a.first, a.first + a.n)]
    with multiprocessing.Pool(a.procs) as pool:
        t0 = time.time()
        bad = sum(pool.map(_patch_worker, [(a.url, part) for part in split(names, a.procs)]))
        dt = time.time() - t0
    if bad:
        print('patch-status: %d patches failed' % bad, file=sys.stderr)
    print('%.0f %.2f' % (a.n / dt, dt))


def watch_rate(a):
    t0 = time.time()
    w = RawWatch(a.url, a.from_rv)
    n = 0
    for line in w.lines():
        if b'"MODIFIED"' in line[:40]:
            n += 1
            if n >= a.n:
                break
    dt = time.time() - t0
    print('%.0f %.2f' % (n / dt, dt))


def main():
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest='cmd', required=True)
    s = sub.add_parser('create-rate')
    s.add_argument('--url', required=True)
    s.add_argument('--template', required=True)
    s.add_argument('--n', type=int, default=10000)
    s.add_argument('--procs', type=int, default=8)
    s.add_argument('--prefix', default='cap')
    # 'arrivals' and 'added' watch the same way and take the same arguments
    for name in ('arrivals', 'added'):
        s = sub.add_parser(name)
        s.add_argument('--url', required=True)
        s.add_argument('--prefix', required=True)
        s.add_argument('--n', type=int, required=True)
        s.add_argument('--out', required=True)
        s.add_argument('--ready', required=True)
    s = sub.add_parser('count')
    s.add_argument('--url', required=True)
    s = sub.add_parser('patch-status')
    s.add_argument('--url', required=True)
    s.add_argument('--prefix', required=True)
    s.add_argument('--first', type=int, default=1)
    s.add_argument('--n', type=int, required=True)
    s.add_argument('--procs', type=int, default=4)
    s = sub.add_parser('watch-rate')
    s.add_argument('--url', required=True)
    s.add_argument('--from-rv', required=True)
    s.add_argument('--n', type=int, required=True)
    a = p.parse_args()
    {'create-rate': create_rate, 'arrivals': arrivals, 'added': added, 'count': count,
     'patch-status': patch_status, 'watch-rate': watch_rate}[a.cmd](a)


if __name__ == '__main__':
    main()
