"""The real kubectl against kube-fake: discovery, CRUD of frameworks,
secrets and priorityclasses, watch, paging, errors, bearer tokens over
https with a self-signed CA.

kubectl only sends bearer tokens over TLS, so the main suite runs on https.
Run: python3 -m unittest discover -s test/kube-fake -p 'test_*.py' -v
"""
import base64
import json
import os
import queue
import shutil
import subprocess
import sys
import tempfile
import threading
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from kube_fake_harness import FW_PATH, KubeFake, make_tls  # noqa: E402

KUBECTL = shutil.which('kubectl') or '/usr/bin/kubectl'
FWS = FW_PATH % 'default'

FRAMEWORK_YAML = """\
apiVersion: frameworkcontroller.microsoft.com/v1
kind: Framework
metadata:
  name: %(name)s
  labels:
    type: kube-fake-test
spec:
  executionType: Start
  retryPolicy:
    fancyRetryPolicy: false
    maxRetryCount: 0
  taskRoles:
  - name: worker
    taskNumber: 1
    task:
      pod:
        spec:
          restartPolicy: Never
          containers:
          - name: ubuntu
            image: ubuntu:trusty
            command: ["sh", "-c", "sleep 1"]
"""


def write_kubeconfig(path, server, token=None, ca=None, namespace='default'):
    cluster = {'server': server}
    if ca:
        cluster['certificate-authority'] = ca
    user = {'token': token} if token else {}
    cfg = {'apiVersion': 'v1', 'kind': 'Config',
           'clusters': [{'name': 'fake', 'cluster': cluster}],
           'users': [{'name': 'tester', 'user': user}],
           'contexts': [{'name': 'fake', 'context': {
               'cluster': 'fake', 'user': 'tester',
               'namespace': namespace}}],
           'current-context': 'fake'}
    with open(path, 'w') as f:
        json.dump(cfg, f)        # JSON is YAML


def kubectl_available():
    try:
        subprocess.run([KUBECTL, 'version', '--client'], check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                       timeout=30)
        return True
    except (OSError, subprocess.SubprocessError):
        return False


@unittest.skipUnless(kubectl_available(), 'kubectl is not installed')
class KubectlHttps(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix='kube-fake-kubectl-')
        cls.tls = make_tls(cls.dir)
        cls.kf = KubeFake(token='kubectl-token', tls=cls.tls,
                          admin_port=True, workdir=cls.dir).start()
        cls.kubeconfig = os.path.join(cls.dir, 'kubeconfig')
        write_kubeconfig(cls.kubeconfig, cls.kf.url, 'kubectl-token',
                         cls.tls[2])

    @classmethod
    def tearDownClass(cls):
        cls.kf.stop()
        shutil.rmtree(cls.dir, ignore_errors=True)

    def env(self):
        e = dict(os.environ)
        e['KUBECONFIG'] = self.kubeconfig
        e['HOME'] = self.dir          # discovery cache stays in the temp dir
        return e

    def kubectl(self, *args, input=None, check=True):
        p = subprocess.run([KUBECTL] + list(args), input=input,
                           capture_output=True, text=True, env=self.env(),
                           timeout=60)
        if check and p.returncode != 0:
            self.fail('kubectl %s failed (%d):\n%s%s'
                      % (' '.join(args), p.returncode, p.stdout, p.stderr))
        return p

    def test_version_and_api_resources(self):
        p = self.kubectl('version', '-o', 'json')
        v = json.loads(p.stdout)
        self.assertIn('serverVersion', v)
        self.assertTrue(v['serverVersion']['gitVersion'].startswith('v1.'))
        p = self.kubectl('api-resources')
        lines = [l.split() for l in p.stdout.splitlines()]
        fw = [l for l in lines if l and l[0] == 'frameworks']
        self.assertTrue(fw, p.stdout)
        self.assertIn('fw', fw[0])
        self.assertIn('frameworkcontroller.microsoft.com/v1', fw[0])
        self.assertTrue([l for l in lines if l and l[0] == 'priorityclasses'])

    def test_framework_create_get_patch_delete(self):
        name = 'kcfw1'
        p = self.kubectl('create', '-f', '-',
                         input=FRAMEWORK_YAML % {'name': name})
        self.assertIn('framework.frameworkcontroller.microsoft.com/%s created'
                      % name, p.stdout)
        p = self.kubectl('get', 'frameworks')
        self.assertRegex(p.stdout, r'(?m)^NAME\s+AGE$')
        self.assertRegex(p.stdout, r'(?m)^%s\s+\d+s$' % name)
        obj = json.loads(self.kubectl('get', 'framework', name, '-o',
                                      'json').stdout)
        self.assertEqual(obj['kind'], 'Framework')
        self.assertEqual(obj['metadata']['generation'], 1)
        self.assertEqual(obj['spec']['taskRoles'][0]['taskNumber'], 1)
        self.kubectl('patch', 'framework', name, '--type=merge', '-p',
                     '{"spec":{"executionType":"Stop"}}')
        p = self.kubectl('get', 'fw', name, '-o',
                         'jsonpath={.spec.executionType} '
                         '{.metadata.generation}')
        self.assertEqual(p.stdout, 'Stop 2')
        # the server refuses strategic merge patches for custom resources
        p = self.kubectl('patch', 'framework', name, '-p',
                         '{"spec":{"executionType":"Start"}}', check=False)
        self.assertNotEqual(p.returncode, 0)
        self.assertIn('strategic-merge-patch+json is not supported', p.stderr)
        p = self.kubectl('delete', 'framework', name)
        self.assertIn('"%s" deleted' % name, p.stdout)
        p = self.kubectl('get', 'framework', name, check=False)
        self.assertEqual(p.returncode, 1)
        self.assertIn('Error from server (NotFound): frameworks.'
                      'frameworkcontroller.microsoft.com "%s" not found'
                      % name, p.stderr)
        # invalid name, refused by the server like the real CRD schema
        p = self.kubectl('create', '-f', '-', check=False,
                         input=FRAMEWORK_YAML % {'name': 'bad-name'})
        self.assertNotEqual(p.returncode, 0)
        self.assertIn('Invalid', p.stderr)
        self.assertIn('metadata.name', p.stderr)

    def test_get_missing_framework(self):
        p = self.kubectl('get', 'framework', 'missing', check=False)
        self.assertEqual(p.returncode, 1)
        self.assertIn('Error from server (NotFound): frameworks.'
                      'frameworkcontroller.microsoft.com "missing" not found',
                      p.stderr)

    def test_watch(self):
        kf = self.kf
        kf.create_framework('kcwatch1')
        proc = subprocess.Popen(
            [KUBECTL, 'get', 'frameworks', '-w', '--output-watch-events'],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            env=self.env())
        lines = queue.Queue()

        def pump():
            for line in proc.stdout:
                lines.put(line.split())
            lines.put(None)
        threading.Thread(target=pump, daemon=True).start()

        def expect(event, name):
            seen = []
            while True:
                try:
                    l = lines.get(timeout=20)
                except queue.Empty:
                    self.fail('kubectl -w did not show %s %s; saw %r'
                              % (event, name, seen))
                if l is None:
                    self.fail('kubectl -w ended: %r %s'
                              % (seen, proc.stderr.read()))
                seen.append(l)
                if l[:2] == [event, name]:
                    return
        try:
            expect('ADDED', 'kcwatch1')
            kf.create_framework('kcwatch2')
            expect('ADDED', 'kcwatch2')
            code, _ = kf.request('PATCH', FWS + '/kcwatch1',
                                 {'metadata': {'labels': {'x': 'y'}}})
            self.assertEqual(code, 200)
            expect('MODIFIED', 'kcwatch1')
            self.assertEqual(kf.request('DELETE', FWS + '/kcwatch2')[0], 200)
            expect('DELETED', 'kcwatch2')
        finally:
            proc.terminate()
            proc.wait(10)
            proc.stdout.close()
            proc.stderr.close()

    def test_chunked_list(self):
        self.kubectl('create', 'namespace', 'chunks')
        for i in range(5):
            self.kf.create_framework('chunk%d' % i, ns='chunks')
        self.kf.admin('POST', '/_fake/counters/reset')
        p = self.kubectl('get', 'frameworks', '-n', 'chunks',
                         '--chunk-size=2', '-o', 'name')
        self.assertEqual(p.stdout.split(), [
            'framework.frameworkcontroller.microsoft.com/chunk%d' % i
            for i in range(5)])
        c = self.kf.admin('GET', '/_fake/counters')
        self.assertEqual(c['requests'].get('list frameworks'), 3)

    def test_secret_and_priorityclass(self):
        self.kubectl('create', 'secret', 'generic', 'kcsecret',
                     '--from-literal=password=hunter2')
        p = self.kubectl('get', 'secret', 'kcsecret', '-o',
                         'jsonpath={.data.password}')
        self.assertEqual(base64.b64decode(p.stdout), b'hunter2')
        p = self.kubectl('get', 'secrets')
        self.assertRegex(p.stdout, r'(?m)^kcsecret\s+Opaque\s+1\s+')
        self.kubectl('delete', 'secret', 'kcsecret')
        p = self.kubectl('get', 'secret', 'kcsecret', check=False)
        self.assertIn('secrets "kcsecret" not found', p.stderr)
        self.kubectl('create', 'priorityclass', 'kcprio', '--value=1000',
                     '--description=test')
        p = self.kubectl('get', 'priorityclass', 'kcprio', '-o', 'json')
        pc = json.loads(p.stdout)
        self.assertEqual(pc['value'], 1000)
        self.assertNotIn('namespace', pc['metadata'])
        p = self.kubectl('get', 'pc')
        self.assertRegex(p.stdout, r'(?m)^kcprio\s+1000\s+false\s+')
        self.kubectl('delete', 'priorityclass', 'kcprio')
        p = self.kubectl('get', 'priorityclass', 'kcprio', check=False)
        self.assertIn('priorityclasses.scheduling.k8s.io "kcprio" not found',
                      p.stderr)

    def test_wrong_token_is_rejected(self):
        p = self.kubectl('get', 'frameworks', '--token=wrong-token',
                         check=False)
        self.assertNotEqual(p.returncode, 0)
        self.assertIn('Unauthorized', p.stderr + p.stdout)
        cfg = os.path.join(self.dir, 'noca')
        write_kubeconfig(cfg, self.kf.url, 'kubectl-token', None)
        e = self.env()
        e['KUBECONFIG'] = cfg
        p = subprocess.run([KUBECTL, 'get', 'frameworks'], capture_output=True,
                           text=True, env=e, timeout=60)
        self.assertNotEqual(p.returncode, 0)
        self.assertIn('certificate', p.stderr)


@unittest.skipUnless(kubectl_available(), 'kubectl is not installed')
class KubectlPlainHttp(unittest.TestCase):
    def test_plain_http_without_token(self):
        d = tempfile.mkdtemp(prefix='kube-fake-kubectl-http-')
        try:
            with KubeFake(workdir=d) as kf:
                cfg = os.path.join(d, 'kubeconfig')
                write_kubeconfig(cfg, kf.url)
                env = dict(os.environ, KUBECONFIG=cfg, HOME=d)
                kf.create_framework('httpfw')
                p = subprocess.run([KUBECTL, 'get', 'fw', '-o', 'name'],
                                   capture_output=True, text=True, env=env,
                                   timeout=60)
                self.assertEqual(p.returncode, 0, p.stderr)
                self.assertEqual(p.stdout.strip(),
                                 'framework.frameworkcontroller.microsoft.com'
                                 '/httpfw')
                p = subprocess.run([KUBECTL, 'get', 'namespaces'],
                                   capture_output=True, text=True, env=env,
                                   timeout=60)
                self.assertRegex(p.stdout, r'(?m)^default\s+Active\s+')
        finally:
            shutil.rmtree(d, ignore_errors=True)


if __name__ == '__main__':
    unittest.main()
