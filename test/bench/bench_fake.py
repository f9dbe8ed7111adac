#!/usr/bin/python3
"""Capacity benchmark of test/kube-fake (stdlib only).

Starts kube-fake (controller off) and measures, with several concurrent
client processes on kept-alive connections:
  GET of one framework, creates of new frameworks, merge patches, and watch
  events delivered to one watcher while writers create frameworks.
Prints the median of several runs, e.g. "kube-fake: create 1234/s (median
of 5)".  Takes well under a minute.

    python3 test/bench/bench_fake.py [--runs 5] [--seconds 1.0] [--clients 4]
"""
import argparse
import http.client
import json
import multiprocessing
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
KUBE_FAKE = os.path.join(HERE, '..', 'kube-fake', 'kube-fake')
FWS = '/apis/frameworkcontroller.microsoft.com/v1/namespaces/default/frameworks'
HDR = {'Content-Type': 'application/json', 'Accept': 'application/json'}


def framework(name):
    return json.dumps({
        'apiVersion': 'frameworkcontroller.microsoft.com/v1',
        'kind': 'Framework',
        'metadata': {'name': name, 'labels': {'userName': 'bench',
                                              'virtualCluster': 'default'},
                     'annotations': {'requestGeneration': '1',
                                     'config': 'x' * 400}},
        'spec': {'executionType': 'Start',
                 'retryPolicy': {'fancyRetryPolicy': False,
                                 'maxRetryCount': 0},
                 'taskRoles': [{'name': 'worker', 'taskNumber': 1,
                                'task': {'pod': {'spec': {'containers': [{
                                    'name': 'c', 'image': 'ubuntu'}]}}}}]}
    }).encode()


def worker(kind, port, seconds, wid, run, out):
    conn = http.client.HTTPConnection('127.0.0.1', port, timeout=30)
    n = 0
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if kind == 'get':
            conn.request('GET', FWS + '/benchget', headers=HDR)
            want = 200
        elif kind in ('create', 'writer'):
            conn.request('POST', FWS, body=framework(
                'b%s%dw%dn%d' % (kind[0], run, wid, n)), headers=HDR)
            want = 201
        else:
            conn.request('PATCH', FWS + '/benchpatch%d' % wid,
                         body=json.dumps({'metadata': {'annotations': {
                             'n': str(n)}}}).encode(),
                         headers={'Content-Type':
                                  'application/merge-patch+json'})
            want = 200
        r = conn.getresponse()
        r.read()
        if r.status != want:
            raise SystemExit('%s: unexpected %d' % (kind, r.status))
        n += 1
    conn.close()
    out.put(n)


def watcher(port, rv, seconds, ready, out):
    s = socket.create_connection(('127.0.0.1', port))
    s.sendall(('GET %s?watch=true&resourceVersion=%s HTTP/1.1\r\n'
               'Host: x\r\n\r\n' % (FWS, rv)).encode())
    f = s.makefile('rb')
    while f.readline() not in (b'\r\n', b''):
        pass
    ready.set()
    n = 0
    first = last = None
    s.settimeout(1.0)
    try:
        while True:
            size = f.readline()
            if not size:
                break
            k = int(size.strip(), 16)
            if k == 0:
                break
            f.read(k + 2)
            now = time.monotonic()
            if first is None:
                first = now
            last = now
            n += 1
    except (socket.timeout, OSError):
        pass
    s.close()
    out.put((n, (last - first) if first and last and last > first else 0))


def replay(port, start, end):
    """Events/s delivered to a watcher that starts at an old RV."""
    s = socket.create_connection(('127.0.0.1', port))
    t0 = time.monotonic()
    s.sendall(('GET %s?watch=true&resourceVersion=%d HTTP/1.1\r\n'
               'Host: x\r\n\r\n' % (FWS, start)).encode())
    f = s.makefile('rb')
    while f.readline() not in (b'\r\n', b''):
        pass
    n = 0
    marker = b'"resourceVersion":"%d"' % end
    while True:
        k = int(f.readline().strip(), 16)
        data = f.read(k + 2)
        n += 1
        if marker in data:
            break
    dt = time.monotonic() - t0
    s.close()
    return n / dt


def run_parallel(kind, port, seconds, clients, run):
    ctx = multiprocessing.get_context('fork')
    out = ctx.Queue()
    ps = [ctx.Process(target=worker, args=(kind, port, seconds, i, run, out))
          for i in range(clients)]
    t0 = time.monotonic()
    for p in ps:
        p.start()
    total = sum(out.get(timeout=seconds + 60) for _ in ps)
    for p in ps:
        p.join()
    return total / max(seconds, time.monotonic() - t0 - 0.05)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--runs', type=int, default=5)
    ap.add_argument('--seconds', type=float, default=1.0)
    ap.add_argument('--clients', type=int, default=4)
    a = ap.parse_args()
    d = tempfile.mkdtemp(prefix='bench-fake-')
    pf = os.path.join(d, 'port')
    proc = subprocess.Popen([KUBE_FAKE, '--port', '0', '--port-file', pf,
                             '--history-size', '200000'],
                            stderr=subprocess.DEVNULL)
    try:
        t0 = time.monotonic()
        while not os.path.exists(pf):
            if time.monotonic() - t0 > 20 or proc.poll() is not None:
                raise SystemExit('kube-fake did not start')
            time.sleep(0.02)
        port = int(open(pf).read())
        conn = http.client.HTTPConnection('127.0.0.1', port)
        for name in ['benchget'] + ['benchpatch%d' % i
                                    for i in range(a.clients)]:
            conn.request('POST', FWS, body=framework(name), headers=HDR)
            conn.getresponse().read()
        results = {}
        for kind, label in (('get', 'get'), ('create', 'create'),
                            ('patch', 'merge-patch')):
            rates = [run_parallel(kind, port, a.seconds, a.clients, r)
                     for r in range(a.runs)]
            results[label] = statistics.median(rates)
            print('kube-fake: %s %d/s (median of %d; %d clients)'
                  % (label, results[label], a.runs, a.clients), flush=True)
        # watch throughput: one watcher, writers creating frameworks
        rates = []
        ctx = multiprocessing.get_context('fork')
        for r in range(a.runs):
            conn.request('GET', '/_fake/rv')
            rv = json.loads(conn.getresponse().read())['resourceVersion']
            out = ctx.Queue()
            ready = ctx.Event()
            wp = ctx.Process(target=watcher,
                             args=(port, rv, a.seconds, ready, out))
            wp.start()
            ready.wait(10)
            sent = run_parallel('writer', port, a.seconds, a.clients, 100 + r)
            n, span = out.get(timeout=120)
            wp.join()
            rates.append(n / span if span else 0)
            del sent
        print('kube-fake: watch-events %d/s (median of %d; %d writers)'
              % (statistics.median(rates), a.runs, a.clients), flush=True)
        # replay: a watcher catching up from an old resourceVersion
        conn.request('GET', '/_fake/rv')
        end = int(json.loads(conn.getresponse().read())['resourceVersion'])
        start = max(end - 20000, int(rv))
        rates = []
        for r in range(a.runs):
            n = replay(port, start, end)
            rates.append(n)
        print('kube-fake: watch-replay %d/s (median of %d; %d events)'
              % (statistics.median(rates), a.runs, end - start), flush=True)
    finally:
        proc.terminate()
        proc.wait(10)


if __name__ == '__main__':
    main()
