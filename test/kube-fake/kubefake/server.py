"""HTTP/1.1 front end of kube-fake: connection handling, authentication,
routing of the Kubernetes API, watches, fault injection and the /_fake admin
API."""
import json
import os
import random
import re
import socket
import ssl
import sys
import threading
import time
import urllib.parse

from . import resources
from .patch import PatchError, PatchTestFailed, json_patch, merge_patch
from .selectors import parse_field_selector, parse_label_selector
from .store import not_found
from .util import (ApiError, DEFAULT_MESSAGE, REASON_BY_CODE, dumpb,
                   now_micro, status_body)

CRLF = b'\r\n'
STATUS_TEXT = {
    100: 'Continue', 200: 'OK', 201: 'Created', 202: 'Accepted',
    204: 'No Content', 400: 'Bad Request', 401: 'Unauthorized',
    403: 'Forbidden', 404: 'Not Found', 405: 'Method Not Allowed',
    406: 'Not Acceptable', 409: 'Conflict', 410: 'Gone',
    411: 'Length Required', 413: 'Request Entity Too Large',
    415: 'Unsupported Media Type', 422: 'Unprocessable Entity',
    429: 'Too Many Requests', 500: 'Internal Server Error',
    501: 'Not Implemented', 502: 'Bad Gateway', 503: 'Service Unavailable',
    504: 'Gateway Timeout',
}
MAX_HEADER_LINE = 65536


class Options:
    port = 0
    port_file = None
    host = '127.0.0.1'
    token = None
    token_file = None
    tls_cert = None
    tls_key = None
    simulate_controller = False
    namespace = 'default'
    history_size = 50000
    bookmark_interval = 5.0
    compress_threshold = 20000
    log = None
    admin_port = None
    admin_port_file = None
    gc_delay = 0.1
    run_seconds = 0.3
    step_seconds = 0.05
    pod_event_tasks = 10
    max_body_bytes = 3 * 1024 * 1024
    max_object_bytes = 1572864
    watch_timeout = None


class Request:
    __slots__ = ('method', 'target', 'path', 'query', 'headers', 'body',
                 'conn', 'after', 'verb', 'resource', 'name', 'rt', 'ns',
                 'status', 'parsed')

    def q(self, key, default=None):
        v = self.query.get(key)
        return v[0] if v else default


class _Closed(Exception):
    """The connection must be closed without a response."""


class Conn:
    def __init__(self, server, sock, addr, admin=False):
        self.server = server
        self.sock = sock
        self.addr = addr
        self.admin = admin
        self.closed = False

    def send(self, data):
        self.sock.sendall(data)

    def close(self):
        if self.closed:
            return
        self.closed = True
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        try:
            self.sock.close()
        except OSError:
            pass


class WatchState:
    __slots__ = ('conn', 'rt', 'ns', 'cut', 'started', 'cursor', 'path')

    def __init__(self, conn, rt, ns, path):
        self.conn = conn
        self.rt = rt
        self.ns = ns
        self.cut = None
        self.started = time.time()
        self.cursor = 0
        self.path = path


# ----------------------------------------------------------------- faults

class Faults:
    """Injected failures and latency, matched against each API request."""

    def __init__(self):
        self.lock = threading.Lock()
        self.rules = []
        self.latency = []
        self.next_id = 1

    @staticmethod
    def _match(rule, req):
        v = rule.get('verb')
        if v:
            vs = [x.strip() for x in v.split(',')]
            if req.verb not in vs and req.method not in \
                    [x.upper() for x in vs]:
                return False
        if rule.get('resource') and rule['resource'] != req.resource:
            return False
        if rule.get('name') and rule['name'] != req.name:
            return False
        rx = rule.get('_rx')
        if rx is not None and not rx.search(req.path):
            return False
        return True

    def add(self, rule, latency=False):
        with self.lock:
            rule = dict(rule)
            rule['id'] = self.next_id
            self.next_id += 1
            if rule.get('path'):
                rule['_rx'] = re.compile(rule['path'])
            (self.latency if latency else self.rules).append(rule)
            return rule['id']

    def take(self, req, phase):
        with self.lock:
            for rule in self.rules:
                if rule.get('phase', 'before') != phase:
                    continue
                if not self._match(rule, req):
                    continue
                if rule['count'] > 0:
                    rule['count'] -= 1
                    if rule['count'] == 0:
                        self.rules.remove(rule)
                rule['hits'] = rule.get('hits', 0) + 1
                return dict(rule)
        return None

    def delay(self, req):
        total = 0.0
        with self.lock:
            for rule in list(self.latency):
                if not self._match(rule, req):
                    continue
                total += rule['seconds']
                if rule['count'] > 0:
                    rule['count'] -= 1
                    if rule['count'] == 0:
                        self.latency.remove(rule)
        return total

    def describe(self):
        with self.lock:
            clean = lambda r: {k: v for k, v in r.items()
                               if not k.startswith('_')}
            return {'faults': [clean(r) for r in self.rules],
                    'latency': [clean(r) for r in self.latency]}

    def clear(self, latency=False, faults=True):
        with self.lock:
            if faults:
                self.rules = []
            if latency:
                self.latency = []


def fault_body(rule):
    """The answer of an action=body fault: its status (as given) and a raw
    body, e.g. a proxy's HTML page with status 200."""
    body = rule.get('body')
    if body is None:
        body = '<html><body>502 Bad Gateway</body></html>'
    return (int(rule.get('status') or 200), body.encode('utf-8'),
            rule.get('contentType') or 'text/html; charset=utf-8', None)


def fault_error(rule):
    code = int(rule.get('status') or 500)
    reason = rule.get('reason') or REASON_BY_CODE.get(code, '')
    msg = rule.get('message') or DEFAULT_MESSAGE.get(code, 'injected fault')
    details = None
    headers = {}
    ra = rule.get('retryAfter')
    if code == 429 and ra is None:
        ra = 1
    if ra is not None:
        headers['Retry-After'] = str(int(float(ra)))
        details = {'retryAfterSeconds': int(float(ra))}
    if code == 410 and not rule.get('reason'):
        reason = 'Expired'
    return ApiError(code, reason, msg, details, headers)


# ----------------------------------------------------------------- counters

class Counters:
    def __init__(self):
        self.lock = threading.Lock()
        self.reset()

    def reset(self):
        self.requests = {}
        self.responses = {}
        self.creates = {}
        self.create_attempts = {}
        self.total = 0

    def count(self, req):
        key = '%s %s' % (req.verb, req.resource or req.path)
        with self.lock:
            self.total += 1
            self.requests[key] = self.requests.get(key, 0) + 1

    def response(self, req, code):
        with self.lock:
            k = str(code)
            self.responses[k] = self.responses.get(k, 0) + 1
            if req.verb == 'create' and req.resource:
                d = self.create_attempts.setdefault(req.resource, {})
                d[req.name or ''] = d.get(req.name or '', 0) + 1
                if code == 201:
                    d = self.creates.setdefault(req.resource, {})
                    d[req.name or ''] = d.get(req.name or '', 0) + 1

    def snapshot(self):
        with self.lock:
            return {'total': self.total, 'requests': dict(self.requests),
                    'responses': dict(self.responses),
                    'creates': {k: dict(v) for k, v in self.creates.items()},
                    'createAttempts': {k: dict(v) for k, v in
                                       self.create_attempts.items()}}


# ----------------------------------------------------------------- auth

class Auth:
    def __init__(self, token, token_file):
        self.token = token
        self.token_file = token_file
        self._stat = None
        self._file_token = None
        self.lock = threading.Lock()

    @property
    def enabled(self):
        return bool(self.token or self.token_file)

    def _current_file_token(self):
        try:
            st = os.stat(self.token_file)
            sig = (st.st_mtime_ns, st.st_size, st.st_ino)
        except OSError:
            return None
        with self.lock:
            if sig != self._stat:
                try:
                    with open(self.token_file) as f:
                        self._file_token = f.read().strip()
                except OSError:
                    self._file_token = None
                self._stat = sig
            return self._file_token

    def check(self, headers):
        if not self.enabled:
            return True
        h = headers.get('authorization', '')
        if not h[:7].lower() == 'bearer ':
            return False
        tok = h[7:].strip()
        if not tok:
            return False
        if self.token and tok == self.token:
            return True
        if self.token_file:
            ft = self._current_file_token()
            if ft and tok == ft:
                return True
        return False


# ----------------------------------------------------------------- server

class Server:
    def __init__(self, opts, store, controller=None):
        self.opts = opts
        self.store = store
        self.controller = controller
        self.auth = Auth(opts.token, opts.token_file)
        self.faults = Faults()
        self.counters = Counters()
        self.ssl_ctx = None
        if opts.tls_cert:
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            ctx.load_cert_chain(opts.tls_cert, opts.tls_key)
            ctx.set_alpn_protocols(['http/1.1'])
            self.ssl_ctx = ctx
        self.listener = None
        self.admin_listener = None
        self.port = None
        self.admin_port = None
        self.conns = set()
        self.conns_lock = threading.Lock()
        self.watches = set()
        self.unpaused = threading.Event()
        self.unpaused.set()
        self.pause_mode = None
        self.pause_lock = threading.Lock()
        self.stopping = False
        self.log_file = open(opts.log, 'a', buffering=1) if opts.log else None
        self.log_lock = threading.Lock()
        self.started_at = time.time()

    # ---------------------------------------------------------- lifecycle
    def _bind(self, port):
        s = socket.socket(socket.AF_INET6 if ':' in self.opts.host
                          else socket.AF_INET, socket.SOCK_STREAM)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind((self.opts.host, port))
        s.listen(1024)
        return s

    def start(self):
        self.listener = self._bind(self.opts.port)
        self.port = self.listener.getsockname()[1]
        threading.Thread(target=self._accept_loop, args=(self.listener, False),
                         name='accept', daemon=True).start()
        if self.opts.admin_port is not None:
            self.admin_listener = self._bind(self.opts.admin_port)
            self.admin_port = self.admin_listener.getsockname()[1]
            threading.Thread(target=self._accept_loop,
                             args=(self.admin_listener, True),
                             name='accept-admin', daemon=True).start()

    def shutdown(self):
        self.stopping = True
        self.unpaused.set()
        for lst in (self.listener, self.admin_listener):
            if lst is not None:
                try:
                    lst.close()
                except OSError:
                    pass
        with self.store.cond:
            self.store.cond.notify_all()
        with self.conns_lock:
            conns = list(self.conns)
        for c in conns:
            c.close()

    def _accept_loop(self, listener, admin):
        while not self.stopping:
            try:
                sock, addr = listener.accept()
            except OSError:
                if listener.fileno() == -1 or self.stopping:
                    return
                time.sleep(0.01)
                continue
            if self.pause_mode == 'refuse' and not admin:
                sock.close()
                continue
            try:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            except OSError:
                pass
            conn = Conn(self, sock, addr, admin)
            t = threading.Thread(target=self._serve_conn, args=(conn,),
                                 daemon=True)
            t.start()

    def pause(self, mode, seconds=None):
        with self.pause_lock:
            if mode not in ('refuse', 'hang'):
                raise ApiError(400, 'BadRequest', 'mode must be refuse or '
                               'hang')
            self.pause_mode = mode
            if mode == 'hang':
                self.unpaused.clear()
            else:
                try:
                    self.listener.close()
                except OSError:
                    pass
                with self.conns_lock:
                    conns = [c for c in self.conns if not c.admin]
                for c in conns:
                    c.close()
                with self.store.cond:
                    self.store.cond.notify_all()
        if seconds:
            t = threading.Timer(float(seconds), self.resume)
            t.daemon = True
            t.start()

    def resume(self):
        with self.pause_lock:
            if self.pause_mode == 'refuse':
                for i in range(200):
                    try:
                        self.listener = self._bind(self.port)
                        break
                    except OSError:
                        time.sleep(0.05)
                else:
                    raise ApiError(500, 'InternalError', 'could not listen '
                                   'on port %d again' % self.port)
                threading.Thread(target=self._accept_loop,
                                 args=(self.listener, False), name='accept',
                                 daemon=True).start()
            self.pause_mode = None
            self.unpaused.set()

    # ---------------------------------------------------------- connection
    def _serve_conn(self, conn):
        with self.conns_lock:
            self.conns.add(conn)
        try:
            if self.ssl_ctx is not None and not conn.admin:
                conn.sock.settimeout(10)
                conn.sock = self.ssl_ctx.wrap_socket(conn.sock,
                                                     server_side=True)
                conn.sock.settimeout(None)
            rfile = conn.sock.makefile('rb', buffering=65536)
            while not conn.closed:
                keep = self._serve_one(conn, rfile)
                if not keep:
                    break
        except (OSError, ssl.SSLError, ValueError, _Closed):
            pass
        except Exception:
            import traceback
            traceback.print_exc()
        finally:
            conn.close()
            with self.conns_lock:
                self.conns.discard(conn)

    def _read_request(self, conn, rfile):
        line = rfile.readline(MAX_HEADER_LINE + 1)
        while line in (b'\r\n', b'\n'):
            line = rfile.readline(MAX_HEADER_LINE + 1)
        if not line:
            return None
        parts = line.decode('latin-1').split()
        if len(parts) != 3:
            self._raw_response(conn, 400, b'bad request line\n',
                               'text/plain', False)
            raise _Closed()
        method, target, version = parts
        headers = {}
        while True:
            h = rfile.readline(MAX_HEADER_LINE + 1)
            if not h:
                raise _Closed()
            if h in (b'\r\n', b'\n'):
                break
            k, _, v = h.decode('latin-1').partition(':')
            k = k.strip().lower()
            v = v.strip()
            if k in headers:
                headers[k] += ', ' + v
            else:
                headers[k] = v
        req = Request()
        req.method = method.upper()
        req.target = target
        req.headers = headers
        req.conn = conn
        req.after = None
        req.verb = None
        req.resource = None
        req.name = None
        req.rt = None
        req.ns = None
        req.status = None
        req.parsed = None
        path, _, query = target.partition('?')
        req.path = urllib.parse.unquote(path) if '%' in path else path
        req.query = urllib.parse.parse_qs(query, keep_blank_values=True) \
            if query else {}
        # body
        if headers.get('expect', '').lower() == '100-continue':
            conn.send(b'HTTP/1.1 100 Continue\r\n\r\n')
        te = headers.get('transfer-encoding', '').lower()
        limit = self.opts.max_body_bytes
        if 'chunked' in te:
            chunks = []
            size = 0
            while True:
                sl = rfile.readline(MAX_HEADER_LINE)
                if not sl:
                    raise _Closed()
                n = int(sl.split(b';')[0].strip() or b'0', 16)
                if n == 0:
                    while True:
                        t = rfile.readline(MAX_HEADER_LINE)
                        if t in (b'\r\n', b'\n', b''):
                            break
                    break
                data = rfile.read(n)
                rfile.readline(MAX_HEADER_LINE)
                size += n
                if size <= limit:
                    chunks.append(data)
            req.body = b''.join(chunks)
            if size > limit:
                req.body = None
        else:
            cl = headers.get('content-length')
            if cl:
                n = int(cl)
                if n > limit:
                    # read and drop it so the connection stays usable
                    left = n
                    while left > 0:
                        d = rfile.read(min(left, 1 << 20))
                        if not d:
                            raise _Closed()
                        left -= len(d)
                    req.body = None
                else:
                    req.body = rfile.read(n)
                    if len(req.body) != n:
                        raise _Closed()
            else:
                req.body = b''
        return req, version

    _date_cache = (0, '')

    def _date(self):
        now = int(time.time())
        c = self._date_cache
        if c[0] != now:
            c = (now, time.strftime('%a, %d %b %Y %H:%M:%S GMT',
                                    time.gmtime(now)))
            self._date_cache = c
        return c[1]

    def _raw_response(self, conn, code, body, ctype, keep, headers=None):
        head = ['HTTP/1.1 %d %s' % (code, STATUS_TEXT.get(code, 'Unknown')),
                'Content-Type: ' + ctype,
                'Content-Length: %d' % len(body),
                'Date: ' + self._date(),
                'Cache-Control: no-cache, private',
                'Audit-Id: %08x' % random.getrandbits(32)]
        if not keep:
            head.append('Connection: close')
        if headers:
            for k, v in headers.items():
                head.append('%s: %s' % (k, v))
        conn.send(('\r\n'.join(head) + '\r\n\r\n').encode('latin-1') + body)

    def _serve_one(self, conn, rfile):
        r = self._read_request(conn, rfile)
        if r is None:
            return False
        req, version = r
        keep = version == 'HTTP/1.1' and \
            'close' not in req.headers.get('connection', '').lower()
        t0 = time.monotonic()
        code = 0
        try:
            try:
                result = self._dispatch(req)
            except (_Closed, OSError, ssl.SSLError):
                raise
            except Exception:
                # a bug in kube-fake: answer like an apiserver panic would
                import traceback
                traceback.print_exc()
                if req.status is not None:   # a watch had started streaming
                    raise _Closed()
                result = self._status_response(ApiError(
                    500, 'InternalError', 'Internal error occurred: '
                    'kube-fake failed to handle the request (see its log)'))
            if result is None:               # a watch wrote its own response
                return keep and not conn.closed and req.status == 'clean'
            code, body, ctype, headers = result
            if req.method == 'HEAD':
                body = b''
            self._raw_response(conn, code, body, ctype, keep, headers)
        finally:
            if self.log_file is not None:
                with self.log_lock:
                    agent = ''
                    if self.opts.log_name and req.verb == 'create':
                        # a create's target names no object: its body does
                        agent = ' name=' + (req.name or '-')
                    if self.opts.log_agent:
                        agent += ' agent=' + req.headers.get('user-agent', '-')
                    self.log_file.write('%s %s %s %s %.1fms%s\n' % (
                        now_micro(), req.method, req.target,
                        code or req.status, (time.monotonic() - t0) * 1000,
                        agent))
            if req.after is not None:
                req.after()
        return keep

    # ---------------------------------------------------------- dispatch
    def _status_response(self, err, req=None):
        body = dumpb(err.status())
        headers = dict(err.headers) if err.headers else None
        if req is not None and req.verb:
            self.counters.response(req, err.code)
        return err.code, body, 'application/json', headers

    def _dispatch(self, req):
        path = req.path
        if path.startswith('/_fake/') or path == '/_fake':
            return self._admin(req)
        if req.conn.admin:
            return self._status_response(ApiError(
                404, 'NotFound', 'the admin port only serves /_fake/'))
        if not self.unpaused.is_set():
            while not self.unpaused.wait(0.5):
                if req.conn.closed or self.stopping:
                    raise _Closed()
        if path in ('/healthz', '/livez', '/readyz') or \
                path.startswith(('/healthz/', '/livez/', '/readyz/')):
            return 200, b'ok', 'text/plain; charset=utf-8', None
        if not self.auth.check(req.headers):
            return 401, dumpb(status_body(401, 'Unauthorized',
                                          'Unauthorized')), \
                'application/json', None
        try:
            self._route(req)
        except ApiError as e:
            return self._status_response(e)
        if req.verb:
            self.counters.count(req)
            d = self.faults.delay(req)
            if d > 0:
                time.sleep(d)
            rule = self.faults.take(req, 'before')
            if rule is not None:
                if rule.get('action') == 'drop':
                    raise _Closed()
                if rule.get('action') == 'body':
                    return fault_body(rule)
                if rule.get('inStream') and req.verb == 'watch':
                    return self._watch_error(req, fault_error(rule))
                return self._status_response(fault_error(rule), req)
        try:
            result = self._handle(req)
        except ApiError as e:
            return self._status_response(e, req)
        if result is None:
            return None
        if req.verb:
            self.counters.response(req, result[0])
            rule = self.faults.take(req, 'after')
            if rule is not None:
                if rule.get('action') == 'drop':
                    raise _Closed()
                if rule.get('action') == 'body':
                    return fault_body(rule)
                return self._status_response(fault_error(rule))
        return result

    def _route(self, req):
        """Fill req.rt/ns/name/verb/resource, or leave verb None for
        discovery and other non-resource paths."""
        parts = [p for p in req.path.split('/') if p]
        if not parts:
            return
        if parts[0] == 'api':
            if len(parts) < 3 or parts[1] != 'v1':
                return
            group, version, rest = '', 'v1', parts[2:]
        elif parts[0] == 'apis':
            if len(parts) < 4:
                return
            group, version, rest = parts[1], parts[2], parts[3:]
        else:
            return
        ns = None
        if rest[0] == 'namespaces' and len(rest) >= 3:
            ns = rest[1]
            rest = rest[2:]
        plural = rest[0]
        rt = resources.BY_PATH.get((group, version, plural))
        if rt is None:
            raise ApiError(404, 'NotFound', 'the server could not find the '
                           'requested resource', {})
        name = rest[1] if len(rest) > 1 else None
        if len(rest) > 2:
            raise ApiError(404, 'NotFound', 'the server could not find the '
                           'requested resource', {})
        if ns is not None and not rt.namespaced:
            raise ApiError(404, 'NotFound', 'the server could not find the '
                           'requested resource', {})
        if rt.namespaced and ns is None and name is not None:
            raise ApiError(404, 'NotFound', 'the server could not find the '
                           'requested resource', {})
        req.rt = rt
        req.ns = ns or ''
        req.name = name
        req.resource = rt.name
        m = req.method
        watch = req.q('watch', '').lower() in ('true', '1')
        if m in ('GET', 'HEAD'):
            req.verb = 'get' if name else ('watch' if watch else 'list')
        elif m == 'POST':
            if name:
                raise ApiError(405, 'MethodNotAllowed', 'the server does not '
                               'allow this method on the requested resource')
            req.verb = 'create'
        elif m == 'PUT':
            req.verb = 'update'
        elif m == 'PATCH':
            req.verb = 'patch'
        elif m == 'DELETE':
            req.verb = 'delete' if name else 'deletecollection'
        else:
            raise ApiError(405, 'MethodNotAllowed', 'the server does not '
                           'allow this method on the requested resource')
        if req.verb in ('update', 'patch') and not name:
            raise ApiError(405, 'MethodNotAllowed', 'the server does not '
                           'allow this method on the requested resource')
        if req.verb == 'create' and req.body:
            # the name, for the per-name create counters (the parsed body is
            # kept for the handler)
            try:
                req.parsed = json.loads(req.body)
                md = req.parsed.get('metadata') or {}
                req.name = md.get('name') or None
            except (ValueError, AttributeError, UnicodeDecodeError):
                pass

    # ---------------------------------------------------------- handlers
    def _json_body(self, req):
        if req.body is None:
            raise ApiError(413, 'RequestEntityTooLarge', 'Request entity too '
                           'large: limit is %d' % self.opts.max_body_bytes)
        ct = req.headers.get('content-type', 'application/json') \
            .split(';')[0].strip().lower()
        if req.verb in ('create', 'update') and \
                ct not in ('application/json', '', '*/*'):
            raise ApiError(415, 'UnsupportedMediaType', 'the body of the '
                           'request was in an unknown format - accepted media '
                           'types include: application/json, application/yaml'
                           ', application/vnd.kubernetes.protobuf')
        if req.parsed is not None:
            return req.parsed
        try:
            return json.loads(req.body)
        except (ValueError, UnicodeDecodeError) as e:
            raise ApiError(400, 'BadRequest', 'the object provided is '
                           'unrecognized (must be of type %s): couldn\'t get '
                           'version/kind; json parse error: %s'
                           % (req.rt.kind if req.rt else 'object', e))

    def _check_size(self, rt, e):
        if len(e.raw) > self.opts.max_object_bytes:
            raise ApiError(413, 'RequestEntityTooLarge',
                           'etcdserver: request is too large')

    def _handle(self, req):
        if req.verb is None:
            return self._nonresource(req)
        rt = req.rt
        st = self.store
        dry = bool(req.q('dryRun'))
        v = req.verb
        if v == 'get':
            e = st.get(rt, req.ns, req.name)
            return self._object_response(req, 200, e)
        if v == 'list':
            return self._list(req)
        if v == 'watch':
            return self._watch(req)
        if v == 'create':
            obj = self._json_body(req)
            if not isinstance(obj, dict):
                raise ApiError(400, 'BadRequest', 'the object provided is '
                               'unrecognized (must be of type %s)' % rt.kind)
            self._check_kind(rt, obj)
            self._precheck_size(req)
            e = st.create(rt, req.ns, obj, dry_run=dry)
            self._check_size(rt, e)
            return self._object_response(req, 201, e)
        if v == 'update':
            body = self._json_body(req)
            if not isinstance(body, dict):
                raise ApiError(400, 'BadRequest', 'the object provided is '
                               'unrecognized (must be of type %s)' % rt.kind)
            self._check_kind(rt, body)
            self._precheck_size(req)
            bmd = body.get('metadata') or {}
            if bmd.get('name') not in (None, req.name):
                raise ApiError(400, 'BadRequest', 'the name of the object (%s)'
                               ' does not match the name on the URL (%s)'
                               % (bmd.get('name'), req.name))

            def fn(cur, _old):
                want = bmd.get('resourceVersion')
                if want not in (None, '') and str(want) != str(cur.rv):
                    raise_conflict(rt, req.name)
                return body
            e = st.update(rt, req.ns, req.name, fn, dry_run=dry)
            self._check_size(rt, e)
            return self._object_response(req, 200, e)
        if v == 'patch':
            return self._patch(req, dry)
        if v == 'delete':
            opts = {}
            if req.body:
                try:
                    opts = json.loads(req.body)
                except ValueError as ex:
                    raise ApiError(400, 'BadRequest', 'json: %s' % ex)
                if not isinstance(opts, dict):
                    opts = {}
            policy = req.q('propagationPolicy') or \
                opts.get('propagationPolicy')
            if policy is None:
                od = opts.get('orphanDependents', req.q('orphanDependents'))
                if od in (True, 'true'):
                    policy = 'Orphan'
            pre = opts.get('preconditions') or {}
            e, deleted = st.delete(rt, req.ns, req.name, policy, pre,
                                   dry_run=dry or bool(opts.get('dryRun')))
            if not rt.builtin or not deleted:
                return self._object_response(req, 200, e)
            d = rt.details(req.name)
            d['uid'] = e.uid
            return 200, dumpb({'kind': 'Status', 'apiVersion': 'v1',
                               'metadata': {}, 'status': 'Success',
                               'details': d}), 'application/json', None
        if v == 'deletecollection':
            lsel = parse_label_selector(req.q('labelSelector'))
            fsel = parse_field_selector(req.q('fieldSelector'),
                                        self._fields(rt))
            _, items, _, _ = st.list(rt, req.ns, lsel, fsel)
            for e in items:
                try:
                    st.delete(rt, e.ns, e.name, req.q('propagationPolicy'))
                except ApiError:
                    pass
            return self._list_response(req, st.current_rv(), [], None, None)
        raise ApiError(405, 'MethodNotAllowed', 'method not allowed')

    def _precheck_size(self, req):
        if req.body is not None and len(req.body) > \
                self.opts.max_object_bytes * 2:
            raise ApiError(413, 'RequestEntityTooLarge',
                           'etcdserver: request is too large')

    @staticmethod
    def _check_kind(rt, obj):
        k = obj.get('kind')
        av = obj.get('apiVersion')
        if k is not None and k != rt.kind:
            raise ApiError(400, 'BadRequest', 'the object provided is '
                           'unrecognized (must be of type %s): kind %s does '
                           'not match' % (rt.kind, k))
        if av is not None and av != rt.api_version:
            raise ApiError(400, 'BadRequest', 'the API version in the data '
                           '(%s) does not match the expected API version (%s)'
                           % (av, rt.api_version))

    def _fields(self, rt):
        if rt.name == 'events':
            return ('metadata.name', 'metadata.namespace',
                    'involvedObject.kind', 'involvedObject.namespace',
                    'involvedObject.name', 'involvedObject.uid',
                    'involvedObject.apiVersion',
                    'involvedObject.resourceVersion',
                    'involvedObject.fieldPath', 'reason',
                    'reportingComponent', 'source', 'type')
        if rt.name == 'secrets':
            return ('metadata.name', 'metadata.namespace', 'type')
        if rt.name == 'namespaces':
            return ('metadata.name', 'status.phase')
        return ('metadata.name', 'metadata.namespace')

    def _patch(self, req, dry):
        rt = req.rt
        ct = req.headers.get('content-type', '').split(';')[0].strip().lower()
        if ct == 'application/strategic-merge-patch+json' and not rt.builtin:
            raise ApiError(415, 'UnsupportedMediaType', 'the body of the '
                           'request was in an unknown format - accepted media '
                           'types include: application/json-patch+json, '
                           'application/merge-patch+json')
        if ct not in ('application/merge-patch+json',
                      'application/json-patch+json',
                      'application/strategic-merge-patch+json'):
            types = 'application/json-patch+json, ' \
                'application/merge-patch+json'
            if rt.builtin:
                types += ', application/strategic-merge-patch+json'
            raise ApiError(415, 'UnsupportedMediaType', 'the body of the '
                           'request was in an unknown format - accepted media '
                           'types include: ' + types)
        if req.body is None:
            raise ApiError(413, 'RequestEntityTooLarge', 'Request entity too '
                           'large: limit is %d' % self.opts.max_body_bytes)
        try:
            patch = json.loads(req.body)
        except (ValueError, UnicodeDecodeError) as e:
            raise ApiError(400, 'BadRequest', 'error decoding patch: %s' % e)
        if ct == 'application/json-patch+json':
            if not isinstance(patch, list):
                raise ApiError(400, 'BadRequest', 'json: cannot unmarshal '
                               'object into Go value of type jsonpatch.Patch')

            def fn(cur, obj):
                try:
                    return json_patch(obj, patch)
                except PatchTestFailed as e:
                    raise ApiError(422, 'Invalid', str(e))
                except PatchError as e:
                    raise ApiError(422, 'Invalid', 'the server rejected our '
                                   'request due to an error in our request: '
                                   '%s' % e)
        else:
            if not isinstance(patch, dict):
                raise ApiError(400, 'BadRequest', 'json: cannot unmarshal %s '
                               'into Go value of type map[string]interface {}'
                               % type(patch).__name__)
            md = patch.get('metadata')
            want = md.get('resourceVersion') if isinstance(md, dict) else None

            def fn(cur, obj):
                if want not in (None, '') and str(want) != str(cur.rv):
                    raise_conflict(rt, req.name)
                return merge_patch(obj, patch)
        e = self.store.update(rt, req.ns, req.name, fn, dry_run=dry)
        self._check_size(rt, e)
        return self._object_response(req, 200, e)

    # ---------------------------------------------------------- output
    def _wants_table(self, req):
        acc = req.headers.get('accept', '')
        return 'as=Table' in acc

    def _table(self, req, rt, entries, list_md):
        include = req.q('includeObject', 'Metadata')
        rows = []
        now = time.time()
        for e in entries:
            obj = e.obj()
            row = {'cells': resources.table_cells(rt, obj, now)}
            if include == 'Object':
                row['object'] = obj
            elif include != 'None':
                row['object'] = {'kind': 'PartialObjectMetadata',
                                 'apiVersion': 'meta.k8s.io/v1',
                                 'metadata': obj['metadata']}
            rows.append(row)
        t = {'kind': 'Table', 'apiVersion': 'meta.k8s.io/v1',
             'metadata': list_md,
             'columnDefinitions': resources.table_columns(rt), 'rows': rows}
        return t

    def _object_response(self, req, code, e):
        if self._wants_table(req):
            t = self._table(req, e.rt, [e],
                            {'resourceVersion': str(e.rv)})
            return code, dumpb(t), 'application/json', None
        return code, e.raw, 'application/json', None

    def _list(self, req):
        rt = req.rt
        lsel = parse_label_selector(req.q('labelSelector'))
        fsel = parse_field_selector(req.q('fieldSelector'), self._fields(rt))
        try:
            limit = int(req.q('limit') or 0)
        except ValueError:
            raise ApiError(400, 'BadRequest', 'invalid limit')
        if limit < 0:
            limit = 0
        rv, items, token, remaining = self.store.list(
            rt, req.ns, lsel, fsel, limit, req.q('continue'),
            req.q('resourceVersion'), req.q('resourceVersionMatch'))
        return self._list_response(req, rv, items, token, remaining)

    def _list_response(self, req, rv, items, token, remaining):
        rt = req.rt
        md = {'resourceVersion': str(rv)}
        if token:
            md['continue'] = token
        if remaining is not None:
            md['remainingItemCount'] = remaining
        if self._wants_table(req):
            return 200, dumpb(self._table(req, rt, items, md)), \
                'application/json', None
        head = ('{"kind":"%s","apiVersion":"%s","metadata":' %
                (rt.list_kind, rt.api_version)).encode() + dumpb(md) + \
            b',"items":['
        body = head + b','.join(e.item_raw() for e in items) + b']}'
        return 200, body, 'application/json', None

    def _nonresource(self, req):
        path = req.path.rstrip('/') or '/'
        if req.method not in ('GET', 'HEAD'):
            raise ApiError(405, 'MethodNotAllowed', 'the server does not '
                           'allow this method on the requested resource')
        doc = None
        if path in ('/openapi/v2', '/swagger-2.0.0.pb-v1'):
            acc = req.headers.get('accept', '')
            if 'protobuf' in acc or path.endswith('pb-v1'):
                return 200, resources.openapi_v2_protobuf(), \
                    'application/com.github.proto-openapi.spec.v2.v1.0+' \
                    'protobuf', None
            doc = resources.openapi_v2_json()
        elif path == '/version':
            doc = resources.VERSION_DOC
        elif path == '/api':
            doc = resources.api_versions_doc(
                '%s:%d' % (self.opts.host, self.port))
        elif path == '/apis':
            doc = resources.api_group_list_doc()
        elif path == '/api/v1':
            doc = resources.resource_list_doc('', 'v1')
        elif path.startswith('/apis/'):
            parts = path.split('/')[2:]
            if len(parts) == 1:
                doc = resources.api_group_doc(parts[0])
            elif len(parts) == 2:
                doc = resources.resource_list_doc(parts[0], parts[1])
        elif path == '/':
            paths = ['/api', '/api/v1', '/apis', '/healthz', '/livez',
                     '/readyz', '/version']
            for g, vs in resources.GROUP_VERSIONS.items():
                paths.append('/apis/' + g)
                for v in vs:
                    paths.append('/apis/%s/%s' % (g, v))
            doc = {'paths': sorted(paths)}
        if doc is None:
            raise ApiError(404, 'NotFound', 'the server could not find the '
                           'requested resource', {})
        return 200, dumpb(doc), 'application/json', None

    # ---------------------------------------------------------- watch
    def _watch_error(self, req, err):
        conn = req.conn
        req.status = 'streaming'
        self._start_stream(conn)
        line = dumpb({'type': 'ERROR', 'object': err.status()}) + b'\n'
        conn.send(b'%x\r\n%s\r\n0\r\n\r\n' % (len(line), line))
        req.status = 'clean'
        return None

    def _start_stream(self, conn, req=None):
        conn.send(b'HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n'
                  b'Cache-Control: no-cache, private\r\n'
                  b'Transfer-Encoding: chunked\r\nDate: ' +
                  time.strftime('%a, %d %b %Y %H:%M:%S GMT',
                                time.gmtime()).encode() + b'\r\n\r\n')

    def _watch(self, req):
        rt = req.rt
        st = self.store
        conn = req.conn
        lsel = parse_label_selector(req.q('labelSelector'))
        fsel = parse_field_selector(req.q('fieldSelector'), self._fields(rt))
        bookmarks = req.q('allowWatchBookmarks', '').lower() in ('true', '1')
        initial_events = req.q('sendInitialEvents', '').lower() in \
            ('true', '1')
        rv_param = req.q('resourceVersion')
        try:
            timeout = float(req.q('timeoutSeconds') or 0)
        except ValueError:
            raise ApiError(400, 'BadRequest', 'invalid timeoutSeconds')
        if timeout <= 0:
            timeout = self.opts.watch_timeout or \
                1800 * (1 + random.random())
        table = self._wants_table(req)
        ns = req.ns
        deadline = time.monotonic() + timeout
        w = WatchState(conn, rt, ns, req.target)
        initial = []
        err = None
        with st.cond:
            if rv_param in (None, '', '0') or initial_events:
                cursor = st.rv
                objs = st.objects[rt.name]
                if ns and rt.namespaced:
                    pre = ns + '/'
                    initial = [e for k, e in objs.items()
                               if k.startswith(pre)]
                else:
                    initial = list(objs.values())
            else:
                try:
                    cursor = int(rv_param)
                except ValueError:
                    raise ApiError(400, 'BadRequest', 'invalid resource '
                                   'version: %s' % rv_param)
                if cursor < st.compacted_rv:
                    err = ApiError(410, 'Expired',
                                   'too old resource version: %d (%d)'
                                   % (cursor, st.compacted_rv + 1))
            w.cursor = cursor
            self.watches.add(w)
        try:
            self.counters.response(req, 200)
            if err is not None:
                return self._watch_error(req, err)
            req.status = 'streaming'
            self._start_stream(conn)
            if initial:
                initial.sort(key=lambda e: e.key)
                out = []
                for e in initial:
                    if lsel and not lsel.matches(e.labels):
                        continue
                    if fsel and not fsel.matches(e.fields):
                        continue
                    out.append(self._event_line('ADDED', e, table, req))
                    if len(out) >= 500:
                        self._send_lines(conn, out)
                        out = []
                self._send_lines(conn, out)
            interval = self.opts.bookmark_interval
            next_bm = time.monotonic() + interval
            if initial_events and bookmarks:
                self._send_lines(conn, [self._bookmark_line(
                    rt, cursor, initial_end=True)])
            while True:
                with st.cond:
                    while True:
                        if self.stopping or conn.closed:
                            raise _Closed()
                        if w.cut is not None:
                            break
                        if not self.unpaused.is_set():
                            st.cond.wait(0.2)
                            continue
                        now = time.monotonic()
                        if now >= deadline:
                            break
                        if bookmarks and now >= next_bm:
                            break
                        if st.rv > cursor:
                            break
                        wake = deadline
                        if bookmarks:
                            wake = min(wake, next_bm)
                        st.cond.wait(wake - now)
                    try:
                        evs = st.events_after(cursor)
                    except ApiError as e:
                        evs = None
                        gone = e
                if w.cut in ('reset',):
                    raise _Closed()
                if w.cut == 'end':
                    conn.send(b'0\r\n\r\n')
                    req.status = 'clean'
                    return None
                if evs is None:
                    line = dumpb({'type': 'ERROR',
                                  'object': gone.status()}) + b'\n'
                    conn.send(b'%x\r\n%s\r\n0\r\n\r\n' % (len(line), line))
                    req.status = 'clean'
                    return None
                out = []
                for ev in evs:
                    line = self._filter_event(ev, rt, ns, lsel, fsel, table,
                                              req)
                    if line is not None:
                        if w.cut == 'mid-event':
                            self._send_lines(conn, out)
                            half = line[:max(1, len(line) // 2)]
                            conn.send(b'%x\r\n%s' % (len(line), half))
                            raise _Closed()
                        out.append(line)
                if evs:
                    cursor = evs[-1][0]
                    w.cursor = cursor
                self._send_lines(conn, out)
                now = time.monotonic()
                if bookmarks and now >= next_bm:
                    self._send_lines(conn, [self._bookmark_line(rt, cursor)])
                    next_bm = now + interval
                if now >= deadline and st.rv <= cursor:
                    conn.send(b'0\r\n\r\n')
                    req.status = 'clean'
                    return None
        finally:
            with st.cond:
                self.watches.discard(w)

    @staticmethod
    def _send_lines(conn, lines):
        if not lines:
            return
        conn.send(b''.join(b'%x\r\n%s\r\n' % (len(l), l) for l in lines))

    def _bookmark_line(self, rt, rv, initial_end=False):
        md = {'resourceVersion': str(rv)}
        if initial_end:
            md['annotations'] = {'k8s.io/initial-events-end': 'true'}
        return dumpb({'type': 'BOOKMARK', 'object': {
            'kind': rt.kind, 'apiVersion': rt.api_version,
            'metadata': md}}) + b'\n'

    def _event_line(self, typ, e, table, req, raw=None):
        if table:
            t = self._table(req, e.rt, [e], {'resourceVersion': str(e.rv)})
            return dumpb({'type': typ, 'object': t}) + b'\n'
        return b'{"type":"' + typ.encode() + b'","object":' + \
            (raw or e.raw) + b'}\n'

    def _filter_event(self, ev, rt, ns, lsel, fsel, table, req):
        _, typ, e, prev = ev
        if e.rt is not rt:
            return None
        if ns and e.ns != ns:
            return None
        if not lsel and not fsel:
            return self._event_line(typ, e, table, req)

        def ok(x):
            if x is None:
                return False
            if lsel and not lsel.matches(x.labels):
                return False
            if fsel and not fsel.matches(x.fields):
                return False
            return True
        cur_ok = ok(e)
        if typ == 'ADDED':
            return self._event_line(typ, e, table, req) if cur_ok else None
        if typ == 'DELETED':
            return self._event_line(typ, e, table, req) if cur_ok else None
        prev_ok = ok(prev)
        if cur_ok and prev_ok:
            return self._event_line('MODIFIED', e, table, req)
        if cur_ok:
            return self._event_line('ADDED', e, table, req)
        if prev_ok:
            # left the selection: DELETED with the previous object at the
            # new resourceVersion (as the watch cache does)
            obj = prev.obj()
            obj['metadata']['resourceVersion'] = str(e.rv)
            return self._event_line('DELETED', prev, table, req,
                                    raw=dumpb(obj))
        return None

    def cut_watches(self, mode, resource=None):
        if mode not in ('reset', 'end', 'mid-event'):
            raise ApiError(400, 'BadRequest', 'mode must be reset, end or '
                           'mid-event')
        with self.store.cond:
            ws = [w for w in self.watches
                  if resource is None or w.rt.name == resource]
            for w in ws:
                w.cut = mode
            self.store.cond.notify_all()
        if mode == 'reset':
            for w in ws:
                w.conn.close()
        return len(ws)

    # ---------------------------------------------------------- admin
    def _admin(self, req):
        params = {}
        for k, v in req.query.items():
            params[k] = v[-1]
        if req.body:
            try:
                b = json.loads(req.body)
                if isinstance(b, dict):
                    params.update(b)
            except ValueError:
                return self._status_response(ApiError(
                    400, 'BadRequest', 'admin body must be a JSON object'))
        try:
            doc = self._admin_do(req, req.path.rstrip('/'), req.method,
                                 params)
        except ApiError as e:
            return self._status_response(e)
        except (ValueError, TypeError, re.error) as e:
            return self._status_response(ApiError(400, 'BadRequest',
                                                  'bad parameter: %s' % e))
        return 200, dumpb(doc), 'application/json', None

    def _admin_do(self, req, path, method, p):
        st = self.store
        post = method in ('POST', 'PUT')

        def boolp(name, default=False):
            v = p.get(name, default)
            if isinstance(v, str):
                return v.lower() in ('1', 'true', 'yes', 'on')
            return bool(v)

        if path in ('/_fake/rv', '/_fake/resourceversion'):
            with st.cond:
                return {'resourceVersion': str(st.rv),
                        'compactedResourceVersion': str(st.compacted_rv)}
        if path == '/_fake/state' or path == '/_fake':
            with st.cond:
                rv, crv = st.rv, st.compacted_rv
                counts = {k: len(v) for k, v in st.objects.items()}
                nw = len(self.watches)
            return {'resourceVersion': str(rv),
                    'compactedResourceVersion': str(crv),
                    'objects': counts, 'watches': nw,
                    'paused': self.pause_mode,
                    'port': self.port, 'adminPort': self.admin_port,
                    'controller': self.controller.info()
                    if self.controller else None,
                    'faults': self.faults.describe(),
                    'counters': self.counters.snapshot()}
        if path == '/_fake/healthz':
            return {'ok': True}
        if path == '/_fake/faults':
            if method == 'DELETE':
                self.faults.clear()
                return {'cleared': True}
            if post:
                rule = {'status': int(p.get('status', 200 if p.get('action') == 'body' else 500)),
                        'count': int(p.get('count', 1)),
                        'verb': p.get('verb') or None,
                        'path': p.get('path') or None,
                        'resource': p.get('resource') or None,
                        'name': p.get('name') or None,
                        'message': p.get('message') or None,
                        'reason': p.get('reason') or None,
                        'retryAfter': p.get('retryAfter'),
                        'phase': p.get('phase', 'before'),
                        'action': p.get('action', 'error'),
                        'inStream': boolp('inStream'),
                        'body': p.get('body'),
                        'contentType': p.get('contentType')}
                if rule['phase'] not in ('before', 'after'):
                    raise ApiError(400, 'BadRequest', 'phase must be before '
                                   'or after')
                if rule['action'] not in ('error', 'drop', 'body'):
                    raise ApiError(400, 'BadRequest', 'action must be error, '
                                   'drop or body')
                if rule['retryAfter'] in ('', None):
                    rule['retryAfter'] = None
                return {'id': self.faults.add(rule)}
            return self.faults.describe()
        if path == '/_fake/latency':
            if method == 'DELETE':
                self.faults.clear(latency=True, faults=False)
                return {'cleared': True}
            if post:
                secs = float(p.get('seconds', 0))
                if secs <= 0:
                    self.faults.clear(latency=True, faults=False)
                    return {'cleared': True}
                rule = {'seconds': secs, 'count': int(p.get('count', -1)),
                        'verb': p.get('verb') or None,
                        'path': p.get('path') or None,
                        'resource': p.get('resource') or None,
                        'name': p.get('name') or None}
                return {'id': self.faults.add(rule, latency=True)}
            return self.faults.describe()
        if path == '/_fake/watches/cut' and post:
            return {'cut': self.cut_watches(p.get('mode', 'reset'),
                                            p.get('resource') or None)}
        if path == '/_fake/watches':
            with st.cond:
                return {'watches': [{'resource': w.rt.name,
                                     'namespace': w.ns, 'path': w.path,
                                     'resourceVersion': str(w.cursor),
                                     'since': w.started}
                                    for w in self.watches]}
        if path == '/_fake/compact' and post:
            rv = p.get('resourceVersion')
            crv = st.compact(int(rv) if rv not in (None, '') else None)
            return {'compactedResourceVersion': str(crv),
                    'resourceVersion': str(st.current_rv())}
        if path == '/_fake/load' and post:
            rt = resources.BY_NAME.get(p.get('resource') or 'frameworks')
            if rt is None:
                raise ApiError(400, 'BadRequest', 'unknown resource')
            first, n = int(p.get('first', 1)), int(p.get('n', 1))
            if n < 0 or n > 10000000:
                raise ApiError(400, 'BadRequest', 'n must be 0 to 10000000')
            prefix = str(p.get('prefix', ''))
            made = st.load(rt, p.get('namespace') or 'default',
                           p.get('template'),
                           (prefix + str(i) for i in range(first, first + n)))
            return {'loaded': made, 'resourceVersion': str(st.current_rv())}
        if path == '/_fake/server/pause' and post:
            mode = p.get('mode', 'refuse')
            secs = p.get('seconds')
            secs = float(secs) if secs not in (None, '') else None
            if mode not in ('refuse', 'hang'):
                raise ApiError(400, 'BadRequest', 'mode must be refuse or '
                               'hang')
            if mode == 'refuse':
                # after this response has been written
                req.after = lambda: self.pause(mode, secs)
            else:
                self.pause(mode, secs)
            return {'paused': mode, 'seconds': secs}
        if path == '/_fake/server/resume' and post:
            self.resume()
            return {'paused': None}
        if path.startswith('/_fake/controller'):
            if self.controller is None:
                raise ApiError(404, 'NotFound', 'the controller is not '
                               'running (start with --simulate-controller)')
            if path == '/_fake/controller/pause' and post:
                self.controller.pause()
            elif path == '/_fake/controller/resume' and post:
                self.controller.resume()
            elif path != '/_fake/controller':
                raise ApiError(404, 'NotFound', 'unknown admin endpoint')
            return self.controller.info()
        if path == '/_fake/counters':
            if method == 'DELETE':
                self.counters.reset()
                return {'reset': True}
            return self.counters.snapshot()
        if path == '/_fake/counters/reset' and post:
            self.counters.reset()
            return {'reset': True}
        raise ApiError(404, 'NotFound', 'unknown admin endpoint %s %s'
                       % (method, path))


def raise_conflict(rt, name):
    from .store import conflict
    raise conflict(rt, name)


__all__ = ['Server', 'Options', 'not_found']
