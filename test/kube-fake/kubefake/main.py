"""Command line entry point of kube-fake."""
import argparse
import os
import signal
import sys
import tempfile
import threading

from . import resources
from .controller import Controller
from .server import Options, Server
from .store import Store


def parse_args(argv):
    p = argparse.ArgumentParser(
        prog='kube-fake',
        description='A fake Kubernetes API server for paidb tests: '
        'frameworks, secrets, events, priorityclasses, namespaces.')
    p.add_argument('--port', type=int, default=0,
                   help='port to listen on (0: any free port)')
    p.add_argument('--port-file', help='write the port here once listening')
    p.add_argument('--host', default='127.0.0.1')
    p.add_argument('--admin-port', type=int, default=None,
                   help='also serve /_fake/ on this port (0: any); it stays '
                   'up while the API port is paused')
    p.add_argument('--admin-port-file')
    p.add_argument('--token', help='bearer token required on every request')
    p.add_argument('--token-file', help='bearer token file (re-read when it '
                   'changes)')
    p.add_argument('--tls-cert')
    p.add_argument('--tls-key')
    p.add_argument('--simulate-controller', action='store_true',
                   help='run the simulated frameworkcontroller')
    p.add_argument('--controller-paused', action='store_true',
                   help='start the simulated controller paused')
    p.add_argument('--namespace', action='append',
                   help='namespace(s) that exist at start (repeatable or '
                   'comma separated; default "default")')
    p.add_argument('--history-size', type=int, default=50000,
                   help='watch events kept (older resourceVersions: 410)')
    p.add_argument('--bookmark-interval', type=float, default=5.0)
    p.add_argument('--compress-threshold', type=int, default=20000,
                   help='bytes of taskRoleStatuses JSON above which they are '
                   'compressed')
    p.add_argument('--gc-delay', type=float, default=0.1,
                   help='seconds before the garbage collector acts')
    p.add_argument('--run-seconds', type=float, default=0.3,
                   help='default time in AttemptRunning')
    p.add_argument('--step-seconds', type=float, default=0.05,
                   help='default time of the other controller steps')
    p.add_argument('--pod-event-tasks', type=int, default=10,
                   help='tasks per attempt that get pod Events')
    p.add_argument('--watch-timeout', type=float, default=None,
                   help='server-side timeout of watches without '
                   'timeoutSeconds (default 1800-3600 s, jittered)')
    p.add_argument('--max-body-bytes', type=int, default=3 * 1024 * 1024)
    p.add_argument('--max-object-bytes', type=int, default=1572864)
    p.add_argument('--no-system-priority-classes', action='store_true',
                   help='do not pre-create system-cluster-critical and '
                   'system-node-critical')
    p.add_argument('--log', help='append one line per request to this file')
    p.add_argument('--log-agent', action='store_true',
                   help='end each --log line with agent=<User-Agent>, to '
                   'tell clients apart (e.g. the members of a cluster)')
    p.add_argument('--log-name', action='store_true',
                   help='on each --log line of a create, add name=<the '
                   'object\'s name> (from the body) before agent=')
    a = p.parse_args(argv)
    if bool(a.tls_cert) != bool(a.tls_key):
        p.error('--tls-cert and --tls-key go together')
    return a


def write_atomic(path, text):
    d = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(dir=d, prefix='.kube-fake-port.')
    with os.fdopen(fd, 'w') as f:
        f.write(text)
    os.rename(tmp, path)


def seed(store, namespaces, system_pcs):
    ns_rt = resources.BY_NAME['namespaces']
    for ns in namespaces:
        if ns not in store.objects['namespaces']:
            store.create(ns_rt, '', {'metadata': {'name': ns}})
    if system_pcs:
        pc_rt = resources.BY_NAME['priorityclasses']
        for name, value in (('system-cluster-critical', 2000000000),
                            ('system-node-critical', 2000001000)):
            store.create(pc_rt, '', {
                'metadata': {'name': name}, 'value': value,
                'globalDefault': False,
                'description': 'Used for system critical pods that must not '
                'be moved from their current node.'
                if name.endswith('node-critical') else
                'Used for system critical pods that must run in the cluster, '
                'but can be moved to another node if necessary.'})


def main(argv=None):
    a = parse_args(sys.argv[1:] if argv is None else argv)
    opts = Options()
    for k, v in vars(a).items():
        setattr(opts, k, v)
    nss = ['default', 'kube-system', 'kube-public']
    for n in a.namespace or []:
        for x in n.split(','):
            x = x.strip()
            if x and x not in nss:
                nss.append(x)
    store = Store(history_size=a.history_size, gc_delay=a.gc_delay)
    seed(store, nss, not a.no_system_priority_classes)
    controller = None
    if a.simulate_controller:
        controller = Controller(store, run_seconds=a.run_seconds,
                                step_seconds=a.step_seconds,
                                compress_threshold=a.compress_threshold,
                                pod_event_tasks=a.pod_event_tasks,
                                enabled=not a.controller_paused)
    server = Server(opts, store, controller)
    server.start()
    if controller is not None:
        controller.start()
    done = threading.Event()

    def on_signal(signum, frame):
        done.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGUSR1, lambda s, f: threading.Thread(
        target=server.pause, args=('refuse',), daemon=True).start())
    signal.signal(signal.SIGUSR2, lambda s, f: threading.Thread(
        target=server.resume, daemon=True).start())
    if a.admin_port_file and server.admin_port is not None:
        write_atomic(a.admin_port_file, '%d\n' % server.admin_port)
    if a.port_file:
        write_atomic(a.port_file, '%d\n' % server.port)
    sys.stderr.write('kube-fake: listening on %s://%s:%d%s\n' % (
        'https' if a.tls_cert else 'http', a.host, server.port,
        ' (admin port %d)' % server.admin_port
        if server.admin_port is not None else ''))
    sys.stderr.flush()
    while not done.wait(1.0):
        pass
    server.shutdown()
    if controller is not None:
        controller.stop()
    store.gc.stop()
    sys.stderr.write('kube-fake: stopped\n')
    sys.stderr.flush()
    return 0
