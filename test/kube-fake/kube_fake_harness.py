"""Helpers for tests that run kube-fake: start/stop the server, plain JSON
requests, a raw watch-stream reader and the /_fake admin API.

Usage:
    with KubeFake(token='t', extra_args=['--simulate-controller']) as kf:
        code, obj = kf.request('GET', '/api/v1/namespaces/default/secrets')
        kf.admin('POST', '/_fake/faults', {'status': 503, 'count': 1})
"""
import http.client
import json
import os
import socket
import ssl
import subprocess
import tempfile
import time
import urllib.parse

HERE = os.path.dirname(os.path.abspath(__file__))
KUBE_FAKE = os.path.join(HERE, 'kube-fake')
FW_PATH = '/apis/frameworkcontroller.microsoft.com/v1/namespaces/%s/frameworks'
SECRET_PATH = '/api/v1/namespaces/%s/secrets'
EVENT_PATH = '/api/v1/namespaces/%s/events'
PC_PATH = '/apis/scheduling.k8s.io/v1/priorityclasses'


def wait_for(pred, timeout=10.0, interval=0.01, what='condition'):
    """Poll pred() until it returns something true; return that value."""
    deadline = time.monotonic() + timeout
    while True:
        v = pred()
        if v:
            return v
        if time.monotonic() > deadline:
            raise AssertionError('timed out waiting for %s' % what)
        time.sleep(interval)


class KubeFake:
    def __init__(self, token=None, extra_args=(), tls=None, admin_port=False,
                 workdir=None):
        self.token = token
        self.extra_args = list(extra_args)
        self.tls = tls                      # (cert, key, ca) or None
        self.want_admin_port = admin_port
        self._own_dir = workdir is None
        self.dir = workdir or tempfile.mkdtemp(prefix='kube-fake-test-')
        self.proc = None
        self.port = None
        self.admin_port = None
        self._conn = None

    # ------------------------------------------------------------ process
    def start(self):
        port_file = os.path.join(self.dir, 'port')
        admin_file = os.path.join(self.dir, 'admin-port')
        for f in (port_file, admin_file):
            if os.path.exists(f):
                os.unlink(f)
        args = [KUBE_FAKE, '--port', '0', '--port-file', port_file]
        if self.token:
            args += ['--token', self.token]
        if self.tls:
            args += ['--tls-cert', self.tls[0], '--tls-key', self.tls[1]]
        if self.want_admin_port:
            args += ['--admin-port', '0', '--admin-port-file', admin_file]
        args += self.extra_args
        self.stderr = open(os.path.join(self.dir, 'stderr.log'), 'ab')
        self.proc = subprocess.Popen(args, stdout=subprocess.DEVNULL,
                                     stderr=self.stderr)

        def ready():
            if self.proc.poll() is not None:
                raise RuntimeError('kube-fake exited with %s'
                                   % self.proc.returncode)
            try:
                with open(port_file) as f:
                    return int(f.read().strip())
            except (OSError, ValueError):
                return None
        self.port = wait_for(ready, 20, what='kube-fake port file')
        if self.want_admin_port:
            with open(admin_file) as f:
                self.admin_port = int(f.read().strip())
        return self

    def stop(self):
        if self._conn is not None:
            self._conn.close()
            self._conn = None
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.proc is not None:
            self.stderr.close()
        rc = self.proc.returncode if self.proc else None
        self.proc = None
        return rc

    def __enter__(self):
        return self.start()

    def __exit__(self, *a):
        self.stop()

    # ------------------------------------------------------------ http
    @property
    def scheme(self):
        return 'https' if self.tls else 'http'

    @property
    def url(self):
        return '%s://127.0.0.1:%d' % (self.scheme, self.port)

    def _ssl_ctx(self):
        ctx = ssl.create_default_context(cafile=self.tls[2])
        return ctx

    def new_conn(self, timeout=30, port=None):
        port = port or self.port
        if self.tls and port == self.port:
            return http.client.HTTPSConnection('127.0.0.1', port,
                                               timeout=timeout,
                                               context=self._ssl_ctx())
        return http.client.HTTPConnection('127.0.0.1', port, timeout=timeout)

    def reset_conn(self):
        """Forget the kept-alive connection (e.g. after a server pause)."""
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def request(self, method, path, body=None, headers=None, token=None,
                query=None, raw=False, content_type=None):
        """One request on a kept-alive connection.  Returns (status, json
        body or bytes) — with raw=True (status, headers, bytes)."""
        if query:
            path = path + ('&' if '?' in path else '?') + \
                urllib.parse.urlencode(query)
        h = {'Accept': 'application/json'}
        tok = token if token is not None else self.token
        if tok:
            h['Authorization'] = 'Bearer ' + tok
        data = None
        if body is not None:
            data = body if isinstance(body, bytes) else \
                json.dumps(body).encode()
            h['Content-Type'] = content_type or (
                'application/merge-patch+json' if method == 'PATCH'
                else 'application/json')
        if headers:
            h.update(headers)
        for attempt in range(2):
            reused = self._conn is not None
            if self._conn is None:
                self._conn = self.new_conn()
            try:
                self._conn.request(method, path, body=data, headers=h)
                resp = self._conn.getresponse()
                payload = resp.read()
                break
            except (http.client.HTTPException, ConnectionError, OSError):
                self._conn.close()
                self._conn = None
                # only a GET on a kept-alive connection that the server had
                # closed is retried; anything else is the test's business
                if attempt or not reused or method != 'GET':
                    raise
        if resp.getheader('Connection', '').lower() == 'close':
            self._conn.close()
            self._conn = None
        if raw:
            return resp.status, dict(resp.getheaders()), payload
        try:
            return resp.status, json.loads(payload) if payload else None
        except ValueError:
            return resp.status, payload

    def admin(self, method, path, params=None):
        """Call the /_fake admin API (no token needed)."""
        conn = self.new_conn(port=self.admin_port if self.admin_port
                             else self.port)
        try:
            data = json.dumps(params).encode() if params is not None else None
            conn.request(method, path, body=data,
                         headers={'Content-Type': 'application/json'})
            resp = conn.getresponse()
            out = json.loads(resp.read() or b'null')
            if resp.status != 200:
                raise AssertionError('admin %s %s: %s %s'
                                     % (method, path, resp.status, out))
            return out
        finally:
            conn.close()

    def rv(self):
        return int(self.admin('GET', '/_fake/rv')['resourceVersion'])

    # ------------------------------------------------------------ objects
    def create_framework(self, name, task_roles=(('worker', 1),),
                         annotations=None, retry=0, ns='default', labels=None):
        body = {'apiVersion': 'frameworkcontroller.microsoft.com/v1',
                'kind': 'Framework',
                'metadata': {'name': name},
                'spec': {'executionType': 'Start',
                         'retryPolicy': {'fancyRetryPolicy': False,
                                         'maxRetryCount': retry},
                         'taskRoles': [{'name': n, 'taskNumber': c,
                                        'task': {'pod': {'spec': {
                                            'containers': [{
                                                'name': n,
                                                'image': 'ubuntu'}]}}}}
                                       for n, c in task_roles]}}
        if annotations:
            body['metadata']['annotations'] = annotations
        if labels:
            body['metadata']['labels'] = labels
        code, obj = self.request('POST', FW_PATH % ns, body)
        if code != 201:
            raise AssertionError('create %s: %s %s' % (name, code, obj))
        return obj

    def get_framework(self, name, ns='default'):
        code, obj = self.request('GET', (FW_PATH % ns) + '/' + name)
        return obj if code == 200 else None

    def wait_framework(self, name, pred, timeout=15, ns='default'):
        def check():
            fw = self.get_framework(name, ns)
            return fw if fw is not None and pred(fw) else None
        return wait_for(check, timeout, 0.02, 'framework %s' % name)

    # ------------------------------------------------------------ watch
    def watch(self, path, timeout=30, **params):
        params.setdefault('watch', 'true')
        return WatchStream(self, path, params, timeout)


class WatchStream:
    """A raw HTTP/1.1 chunked watch reader: events() yields parsed event
    dicts; .partial holds bytes of an incomplete line when the stream broke;
    .clean tells whether the terminating chunk was received."""

    def __init__(self, kf, path, params, timeout):
        self.kf = kf
        q = urllib.parse.urlencode(params)
        sock = socket.create_connection(('127.0.0.1', kf.port),
                                        timeout=timeout)
        if kf.tls:
            sock = kf._ssl_ctx().wrap_socket(sock,
                                             server_hostname='127.0.0.1')
        self.sock = sock
        req = ['GET %s?%s HTTP/1.1' % (path, q), 'Host: 127.0.0.1',
               'Accept: application/json']
        if kf.token:
            req.append('Authorization: Bearer ' + kf.token)
        sock.sendall(('\r\n'.join(req) + '\r\n\r\n').encode())
        self.f = sock.makefile('rb')
        status = self.f.readline()
        self.status = int(status.split()[1])
        self.headers = {}
        while True:
            line = self.f.readline()
            if line in (b'\r\n', b'', b'\n'):
                break
            k, _, v = line.decode().partition(':')
            self.headers[k.strip().lower()] = v.strip()
        self.buf = b''
        self.partial = b''
        self.clean = False
        self.eof = False

    def _chunk(self):
        if self.headers.get('transfer-encoding') != 'chunked':
            n = int(self.headers.get('content-length', '0'))
            data = self.f.read(n) if n else b''
            self.eof = True
            return data or None
        line = self.f.readline()
        if not line:
            self.eof = True
            return None
        n = int(line.strip() or b'0', 16)
        if n == 0:
            self.f.readline()
            self.clean = True
            self.eof = True
            return None
        data = self.f.read(n)
        if len(data) < n:
            self.eof = True
            self.partial = self.buf + data
            self.buf = b''
            return None
        self.f.read(2)
        return data

    def next(self):
        """The next event, or None at the end of the stream."""
        while b'\n' not in self.buf:
            if self.eof:
                if self.buf:
                    self.partial = self.buf
                    self.buf = b''
                return None
            try:
                data = self._chunk()
            except (OSError, ValueError):
                self.eof = True
                data = None
            if data is None:
                if self.buf and not self.partial:
                    self.partial = self.buf
                    self.buf = b''
                return None
            self.buf += data
        line, self.buf = self.buf.split(b'\n', 1)
        return json.loads(line)

    def events(self):
        while True:
            ev = self.next()
            if ev is None:
                return
            yield ev

    def read_until(self, pred, limit=100000):
        """Events up to and including the first one matching pred."""
        out = []
        for ev in self.events():
            out.append(ev)
            if pred(ev):
                return out
            if len(out) >= limit:
                break
        raise AssertionError('stream ended before the expected event; got %r'
                             % [(e['type'], e['object'].get('metadata', {})
                                 .get('name')) for e in out][-20:])

    def close(self):
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.sock.close()

    def __enter__(self):
        return self

    def __exit__(self, *a):
        self.close()


def make_tls(dirpath):
    """A self-signed CA and a server certificate for 127.0.0.1/localhost,
    made with the openssl CLI.  Returns (cert, key, ca)."""
    def run(*args):
        subprocess.run(['openssl'] + list(args), cwd=dirpath, check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    run('req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', 'ca.key',
        '-out', 'ca.crt', '-days', '2', '-subj', '/CN=kube-fake-test-ca')
    run('req', '-newkey', 'rsa:2048', '-nodes', '-keyout', 'server.key',
        '-out', 'server.csr', '-subj', '/CN=127.0.0.1')
    with open(os.path.join(dirpath, 'ext.cnf'), 'w') as f:
        f.write('subjectAltName=IP:127.0.0.1,DNS:localhost\n'
                'basicConstraints=CA:FALSE\n'
                'keyUsage=digitalSignature,keyEncipherment\n'
                'extendedKeyUsage=serverAuth\n')
    run('x509', '-req', '-in', 'server.csr', '-CA', 'ca.crt', '-CAkey',
        'ca.key', '-CAcreateserial', '-out', 'server.crt', '-days', '2',
        '-extfile', 'ext.cnf')
    return (os.path.join(dirpath, 'server.crt'),
            os.path.join(dirpath, 'server.key'),
            os.path.join(dirpath, 'ca.crt'))
