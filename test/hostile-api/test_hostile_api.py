"""hostile-api against raw HTTP: passing through, the safety net (bad path
segments and unnamed deletes are recorded and never forwarded), the trap
port, and a few misbehaviours byte for byte.  The TAP suites 050/051 rely
on these.

    python3 -m unittest discover -s test/hostile-api -p 'test_*.py'
"""
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import unittest
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, '..', 'kube-fake'))
from kube_fake_harness import KubeFake, wait_for, FW_PATH  # noqa: E402

FW = FW_PATH % 'default'
TOKEN = 'hostile-selftest-token'


def raw(port, method, target, body=b'', headers=(), timeout=10):
    """One request on a fresh connection; the whole answer as bytes."""
    s = socket.create_connection(('127.0.0.1', port), timeout=timeout)
    head = '%s %s HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n' % (method, target, TOKEN)
    for k, v in headers:
        head += '%s: %s\r\n' % (k, v)
    head += 'Content-Length: %d\r\n\r\n' % len(body)
    s.sendall(head.encode() + body)
    out = b''
    try:
        while True:
            d = s.recv(65536)
            if not d:
                break
            out += d
    except socket.timeout:
        pass
    s.close()
    return out


class HostileApiTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.fake = KubeFake(token=TOKEN).start()
        cls.dir = tempfile.mkdtemp(prefix='hostile-api-test-')
        files = {k: os.path.join(cls.dir, k) for k in ('port', 'admin', 'trap')}
        cls.err = open(os.path.join(cls.dir, 'stderr'), 'wb')
        cls.proc = subprocess.Popen(
            [os.path.join(HERE, 'hostile-api'), '--upstream', cls.fake.url,
             '--port-file', files['port'], '--admin-port-file', files['admin'],
             '--trap-port-file', files['trap']], stdout=subprocess.DEVNULL, stderr=cls.err)
        wait_for(lambda: os.path.exists(files['port']), 20, what='hostile-api port file')
        ports = []
        for k in ('port', 'admin', 'trap'):
            with open(files[k]) as f:
                ports.append(int(f.read()))
        cls.port, cls.admin_port, cls.trap_port = ports

    @classmethod
    def tearDownClass(cls):
        cls.proc.terminate()
        cls.proc.wait(10)
        cls.err.close()
        cls.fake.stop()

    def admin(self, method, path):
        req = urllib.request.Request('http://127.0.0.1:%d%s' % (self.admin_port, path), method=method)
        with urllib.request.urlopen(req, timeout=30) as r:
            return json.loads(r.read())

    def mode(self, name):
        self.admin('POST', '/mode?name=' + name)

    def setUp(self):
        self.mode('sane')
        self.since = self.admin('GET', '/mode')['requests']

    def recorded(self):
        return self.admin('GET', '/requests?since=%d' % self.since)['requests']

    def test_sane_passes_through(self):
        out = raw(self.port, 'GET', FW)
        self.assertIn(b' 200 ', out.split(b'\r\n')[0])
        self.assertIn(b'Connection: close', out)
        self.assertIn(b'"FrameworkList"', out)
        r = self.recorded()
        self.assertEqual([(x['method'], x['class'], x['resource'], x['mode']) for x in r],
                         [('GET', 'list', 'frameworks', 'sane')])

    def test_bad_segments_and_unnamed_deletes_are_refused(self):
        name = 'keepme'
        body = json.dumps({'apiVersion': 'v1', 'kind': 'Secret', 'metadata': {'name': name}}).encode()
        self.assertIn(b' 201 ', raw(self.port, 'POST', '/api/v1/namespaces/default/secrets', body,
                                    [('Content-Type', 'application/json')]))
        for target in ('/api/v1/namespaces/default/secrets/', '/api/v1/namespaces/default/secrets/..',
                       '/api/v1/namespaces/default/secrets/%2E', '/api/v1/namespaces/default',
                       '/apis/scheduling.k8s.io/v1/', FW):
            self.assertIn(b' 403 ', raw(self.port, 'DELETE', target).split(b'\r\n')[0], target)
        self.assertIn(b' 200 ', raw(self.port, 'GET', '/api/v1/namespaces/default/secrets/' + name))
        r = self.recorded()[1:-1]
        self.assertTrue(all(x['dangerous'] for x in r), r)
        self.assertEqual([bool(x['bad_segments']) for x in r], [True, True, True, False, True, False])

    def test_redirect_goes_to_the_trap(self):
        self.mode('redirect')
        out = raw(self.port, 'GET', FW + '/x')
        self.assertIn(b' 307 ', out)
        loc = [l for l in out.split(b'\r\n') if l.startswith(b'Location: ')][0][10:].decode()
        self.assertEqual(loc, 'http://127.0.0.1:%d%s/x' % (self.trap_port, FW))
        raw(self.trap_port, 'GET', '/anything')
        trap = self.admin('GET', '/trap')['trap']
        self.assertTrue(any(['Authorization', 'Bearer ' + TOKEN] in t['headers'] for t in trap))

    def test_list_modes_answer_watches_with_410(self):
        self.mode('list_wrong_types')
        out = raw(self.port, 'GET', FW + '?watch=true&resourceVersion=5')
        self.assertIn(b'"code": 410', out)
        out = raw(self.port, 'GET', FW)
        self.assertEqual(json.loads(out.split(b'\r\n\r\n', 1)[1])['items'], {})

    def test_watch_events_keep_the_asked_position(self):
        self.mode('watch_hostile_names')
        out = raw(self.port, 'GET', FW + '?watch=true&resourceVersion=1001', timeout=2)
        self.assertIn(b'"name": ".."', out)
        self.assertIn(b'"resourceVersion": "1001"', out)
        self.assertNotIn(b'"resourceVersion": "100', out.replace(b'"resourceVersion": "1001"', b''))

    def test_bad_chunk(self):
        self.mode('bad_chunk')
        out = raw(self.port, 'GET', FW)
        self.assertIn(b'Transfer-Encoding: chunked\r\n', out)
        self.assertIn(b'\r\n\r\nzz\r\n', out)

    def test_non_json_2xx_only_for_writes(self):
        self.mode('non_json_2xx')
        self.assertIn(b'\r\n\r\nOK\n', raw(self.port, 'POST', FW, b'{}'))
        self.assertIn(b'"FrameworkList"', raw(self.port, 'GET', FW))

    def test_unknown_mode_is_refused(self):
        with self.assertRaises(urllib.error.HTTPError):
            self.mode('nonsense')


if __name__ == '__main__':
    unittest.main()
