"""Resource types served by kube-fake: discovery documents, defaulting,
validation and Table conversion."""
import base64
import binascii
import re
import time

from .util import ApiError, parse_rfc3339

FW_GROUP = 'frameworkcontroller.microsoft.com'


class ResourceType:
    def __init__(self, name, singular, kind, group, version, namespaced,
                 short_names=(), builtin=True, has_generation=False,
                 verbs=('create', 'delete', 'deletecollection', 'get', 'list',
                        'patch', 'update', 'watch'),
                 categories=()):
        self.name = name
        self.singular = singular
        self.kind = kind
        self.list_kind = kind + 'List'
        self.group = group
        self.version = version
        self.api_version = (group + '/' + version) if group else version
        self.namespaced = namespaced
        self.short_names = list(short_names)
        self.builtin = builtin
        self.has_generation = has_generation
        self.verbs = list(verbs)
        self.categories = list(categories)
        # every stored object's JSON starts with this prefix, so that list
        # items of built-in kinds can be served without kind/apiVersion
        # (as a real server does)
        self.raw_prefix = ('{"kind":"%s","apiVersion":"%s",'
                           % (kind, self.api_version)).encode()
        # "frameworks.frameworkcontroller.microsoft.com" / "secrets"
        self.qualified = name + ('.' + group if group else '')

    def discovery(self):
        d = {'name': self.name, 'singularName': self.singular,
             'namespaced': self.namespaced, 'kind': self.kind,
             'verbs': self.verbs}
        if self.short_names:
            d['shortNames'] = self.short_names
        if self.categories:
            d['categories'] = self.categories
        d['storageVersionHash'] = base64.b64encode(
            (self.qualified + self.version).encode()[:8]).decode()
        return d

    def details(self, name):
        d = {'name': name, 'kind': self.name}
        if self.group:
            d['group'] = self.group
        return d


RESOURCES = [
    ResourceType('frameworks', 'framework', 'Framework', FW_GROUP, 'v1', True,
                 short_names=['fw'], builtin=False, has_generation=True,
                 categories=['all']),
    ResourceType('secrets', 'secret', 'Secret', '', 'v1', True),
    ResourceType('events', 'event', 'Event', '', 'v1', True,
                 short_names=['ev']),
    ResourceType('namespaces', 'namespace', 'Namespace', '', 'v1', False,
                 short_names=['ns'],
                 verbs=('create', 'delete', 'get', 'list', 'patch', 'update',
                        'watch')),
    ResourceType('priorityclasses', 'priorityclass', 'PriorityClass',
                 'scheduling.k8s.io', 'v1', False, short_names=['pc']),
]

BY_PATH = {}        # (group, version, plural) -> ResourceType
for _r in RESOURCES:
    BY_PATH[(_r.group, _r.version, _r.name)] = _r
BY_NAME = {r.name: r for r in RESOURCES}

GROUP_VERSIONS = {}  # group -> [version]
for _r in RESOURCES:
    if _r.group:
        GROUP_VERSIONS.setdefault(_r.group, [])
        if _r.version not in GROUP_VERSIONS[_r.group]:
            GROUP_VERSIONS[_r.group].append(_r.version)


def api_versions_doc(server_address):
    return {'kind': 'APIVersions', 'versions': ['v1'],
            'serverAddressByClientCIDRs': [
                {'clientCIDR': '0.0.0.0/0', 'serverAddress': server_address}]}


def api_group_list_doc():
    groups = []
    for g, vs in GROUP_VERSIONS.items():
        gv = [{'groupVersion': g + '/' + v, 'version': v} for v in vs]
        groups.append({'name': g, 'versions': gv, 'preferredVersion': gv[0]})
    return {'kind': 'APIGroupList', 'apiVersion': 'v1', 'groups': groups}


def api_group_doc(group):
    vs = GROUP_VERSIONS.get(group)
    if vs is None:
        return None
    gv = [{'groupVersion': group + '/' + v, 'version': v} for v in vs]
    return {'kind': 'APIGroup', 'apiVersion': 'v1', 'name': group,
            'versions': gv, 'preferredVersion': gv[0]}


def resource_list_doc(group, version):
    rs = [r.discovery() for r in RESOURCES
          if r.group == group and r.version == version]
    if not rs:
        return None
    return {'kind': 'APIResourceList', 'apiVersion': 'v1',
            'groupVersion': (group + '/' + version) if group else version,
            'resources': rs}


VERSION_DOC = {
    'major': '1', 'minor': '28', 'gitVersion': 'v1.28.15-kube-fake',
    'gitCommit': '0000000000000000000000000000000000000000',
    'gitTreeState': 'clean', 'buildDate': '2024-10-22T20:28:14Z',
    'goVersion': 'go1.22.8', 'compiler': 'gc', 'platform': 'linux/amd64',
}

# ---------------------------------------------------------------- validation

FRAMEWORK_NAME_RE = re.compile(r'^[a-z0-9]{1,63}$')
DNS1123_LABEL_RE = re.compile(r'^[a-z0-9]([-a-z0-9]*[a-z0-9])?$')
DNS1123_SUBDOMAIN_RE = re.compile(
    r'^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$')
LABEL_NAME_RE = re.compile(r'^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$')
LABEL_VALUE_RE = re.compile(r'^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$')


def invalid(rt, name, causes):
    """422 Invalid with field causes [(field, message, value)]."""
    parts = []
    cl = []
    for field, msg, value in causes:
        if value is None:
            text = '%s: %s' % (field, msg)
        else:
            text = '%s: Invalid value: %s: %s' % (field, _go_quote(value), msg)
        parts.append(text)
        cl.append({'reason': 'FieldValueInvalid' if value is not None
                   else 'FieldValueRequired',
                   'message': text.split(': ', 1)[1] if value is None
                   else 'Invalid value: %s: %s' % (_go_quote(value), msg),
                   'field': field})
    if len(parts) == 1:
        agg = parts[0]
    else:
        agg = '[' + ', '.join(parts) + ']'
    kindgroup = rt.kind + ('.' + rt.group if rt.group else '')
    msg = '%s "%s" is invalid: %s' % (kindgroup, name, agg)
    d = rt.details(name)
    d['kind'] = rt.kind
    d['causes'] = cl
    return ApiError(422, 'Invalid', msg, d)


def _go_quote(v):
    if isinstance(v, str):
        return '"' + v.replace('\\', '\\\\').replace('"', '\\"') + '"'
    return str(v)


def validate_name(rt, name, causes):
    if rt.name == 'frameworks':
        if not FRAMEWORK_NAME_RE.match(name):
            causes.append(('metadata.name',
                           "metadata.name in body should match "
                           "'^[a-z0-9]{1,63}$'", name))
        return
    if rt.name == 'namespaces':
        if len(name) > 63 or not DNS1123_LABEL_RE.match(name):
            causes.append(('metadata.name',
                           "a lowercase RFC 1123 label must consist of lower "
                           "case alphanumeric characters or '-', and must "
                           "start and end with an alphanumeric character "
                           "(e.g. 'my-name',  or '123-abc', regex used for "
                           "validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')",
                           name))
        return
    if len(name) > 253 or not DNS1123_SUBDOMAIN_RE.match(name):
        causes.append(('metadata.name',
                       "a lowercase RFC 1123 subdomain must consist of lower "
                       "case alphanumeric characters, '-' or '.', and must "
                       "start and end with an alphanumeric character (e.g. "
                       "'example.com', regex used for validation is "
                       "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]"
                       "([-a-z0-9]*[a-z0-9])?)*')", name))


def validate_object(rt, obj, name, creating):
    """Raise ApiError(422) when obj is not valid for rt.  obj is the object
    about to be stored (metadata already filled in)."""
    causes = []
    md = obj['metadata']
    if creating:
        validate_name(rt, name, causes)
    labels = md.get('labels')
    if labels is not None:
        if not isinstance(labels, dict):
            raise ApiError(400, 'BadRequest',
                           'metadata.labels: must be an object')
        for k, v in labels.items():
            kname = k.split('/', 1)[-1]
            if not LABEL_NAME_RE.match(kname) or len(kname) > 63:
                causes.append(('metadata.labels', "name part must consist of "
                               "alphanumeric characters, '-', '_' or '.'", k))
            if not isinstance(v, str) or len(v) > 63 or \
                    not LABEL_VALUE_RE.match(v):
                causes.append(('metadata.labels',
                               "a valid label must be an empty string or "
                               "consist of alphanumeric characters, '-', '_' "
                               "or '.'", v if isinstance(v, str) else str(v)))
    ann = md.get('annotations')
    if ann is not None:
        if not isinstance(ann, dict):
            raise ApiError(400, 'BadRequest',
                           'metadata.annotations: must be an object')
        for k, v in ann.items():
            if not isinstance(v, str):
                raise ApiError(400, 'BadRequest',
                               'json: cannot unmarshal %s into Go struct '
                               'field ObjectMeta.metadata.annotations of type '
                               'string' % type(v).__name__)
        total = sum(len(k) + len(v) for k, v in ann.items())
        if total > 256 * 1024:
            causes.append(('metadata.annotations', 'must have at most 262144 '
                           'bytes', None))
    for o in md.get('ownerReferences') or []:
        if not isinstance(o, dict) or not o.get('uid') or \
                not o.get('name') or not o.get('kind') or \
                not o.get('apiVersion'):
            causes.append(('metadata.ownerReferences', 'ownerReference must '
                           'have apiVersion, kind, name and uid', None))
    if rt.name == 'frameworks':
        spec = obj.get('spec')
        if spec is not None and not isinstance(spec, dict):
            causes.append(('spec', 'spec in body must be of type object',
                           str(type(spec).__name__)))
        elif isinstance(spec, dict):
            et = spec.get('executionType')
            if et is not None and et not in ('Start', 'Stop'):
                causes.append(('spec.executionType', 'supported values: '
                               '"Start", "Stop"', et))
            trs = spec.get('taskRoles')
            if trs is not None and not isinstance(trs, list):
                causes.append(('spec.taskRoles', 'spec.taskRoles in body must '
                               'be of type array', str(type(trs).__name__)))
            elif trs:
                for i, tr in enumerate(trs):
                    if not isinstance(tr, dict):
                        causes.append(('spec.taskRoles[%d]' % i,
                                       'must be of type object', None))
                        continue
                    tn = tr.get('taskNumber')
                    if tn is not None and (not isinstance(tn, int) or
                                           isinstance(tn, bool) or tn < 0):
                        causes.append(('spec.taskRoles[%d].taskNumber' % i,
                                       'must be a non-negative integer',
                                       str(tn)))
    elif rt.name == 'priorityclasses':
        v = obj.get('value')
        if v is None:
            causes.append(('value', 'Required value', None))
        elif not isinstance(v, int) or isinstance(v, bool):
            raise ApiError(400, 'BadRequest', 'json: cannot unmarshal %s into '
                           'Go struct field PriorityClass.value of type int32'
                           % type(v).__name__)
        elif v > 1000000000 and creating and \
                not name.startswith('system-'):
            causes.append(('value', 'must be less than or equal to 1000000000'
                           ' (user defined priority class)', str(v)))
        if creating and name.startswith('system-') and \
                name not in ('system-cluster-critical', 'system-node-critical'):
            causes.append(('metadata.name', 'priority class names with '
                           "'system-' prefix are reserved", name))
        pp = obj.get('preemptionPolicy')
        if pp not in (None, 'PreemptLowerPriority', 'Never'):
            causes.append(('preemptionPolicy', 'supported values: "Never", '
                           '"PreemptLowerPriority"', pp))
    elif rt.name == 'secrets':
        data = obj.get('data')
        if data is not None:
            if not isinstance(data, dict):
                raise ApiError(400, 'BadRequest', 'Secret.data: must be an '
                               'object')
            for k, v in data.items():
                if not re.match(r'^[-._a-zA-Z0-9]+$', k):
                    causes.append(('data[%s]' % k, "a valid config key must "
                                   "consist of alphanumeric characters, '-', "
                                   "'_' or '.'", k))
            size = sum(len(v) * 3 // 4 for v in data.values()
                       if isinstance(v, str))
            if size > 1048576:
                causes.append(('data', 'Too long: must have at most 1048576 '
                               'bytes', None))
    if causes:
        raise invalid(rt, name, causes)


def default_object(rt, obj):
    """Apply server-side defaulting for built-in kinds (in place)."""
    if rt.name == 'secrets':
        sd = obj.pop('stringData', None)
        data = obj.get('data')
        if data is None and sd:
            data = obj['data'] = {}
        if data is not None:
            if not isinstance(data, dict):
                raise ApiError(400, 'BadRequest', 'Secret.data: must be an '
                               'object')
            for k, v in data.items():
                if not isinstance(v, str):
                    raise ApiError(400, 'BadRequest', 'json: cannot unmarshal'
                                   ' %s into Go struct field Secret.data of '
                                   'type []uint8' % type(v).__name__)
                try:
                    base64.b64decode(v, validate=True)
                except (binascii.Error, ValueError):
                    raise ApiError(400, 'BadRequest', 'illegal base64 data at '
                                   'input byte 0')
        if sd:
            if not isinstance(sd, dict):
                raise ApiError(400, 'BadRequest', 'Secret.stringData: must be '
                               'an object')
            for k, v in sd.items():
                data[k] = base64.b64encode(str(v).encode()).decode()
        obj.setdefault('type', 'Opaque')
    elif rt.name == 'priorityclasses':
        obj.setdefault('preemptionPolicy', 'PreemptLowerPriority')
    elif rt.name == 'namespaces':
        obj.setdefault('spec', {'finalizers': ['kubernetes']})
        obj['status'] = {'phase': 'Terminating'
                         if obj['metadata'].get('deletionTimestamp')
                         else 'Active'}
        obj['metadata'].setdefault('labels', {})[
            'kubernetes.io/metadata.name'] = obj['metadata']['name']
    elif rt.name == 'events':
        obj.setdefault('reportingComponent', '')
        obj.setdefault('reportingInstance', '')


# ---------------------------------------------------------------- fields

def field_values(rt, obj):
    """Field-selector values of obj (a dict with metadata)."""
    md = obj['metadata']
    f = {'metadata.name': md.get('name', '')}
    if rt.namespaced:
        f['metadata.namespace'] = md.get('namespace', '')
    if rt.name == 'secrets':
        f['type'] = obj.get('type', '')
    elif rt.name == 'events':
        io = obj.get('involvedObject') or {}
        for k in ('kind', 'namespace', 'name', 'uid', 'apiVersion',
                  'resourceVersion', 'fieldPath'):
            f['involvedObject.' + k] = str(io.get(k) or '')
        f['reason'] = obj.get('reason') or ''
        f['reportingComponent'] = obj.get('reportingComponent') or ''
        f['source'] = (obj.get('source') or {}).get('component') or ''
        f['type'] = obj.get('type') or ''
    elif rt.name == 'namespaces':
        f['status.phase'] = (obj.get('status') or {}).get('phase', '')
    return f


# ---------------------------------------------------------------- tables

def _age(ts, now):
    if not ts:
        return '<unknown>'
    try:
        d = int(now - parse_rfc3339(ts))
    except ValueError:
        return '<invalid>'
    if d < 0:
        d = 0
    if d < 120:
        return '%ds' % d
    if d < 600:
        return '%dm%ds' % (d // 60, d % 60) if d % 60 else '%dm' % (d // 60)
    if d < 3 * 3600:
        return '%dm' % (d // 60)
    if d < 8 * 3600:
        h, m = d // 3600, (d % 3600) // 60
        return '%dh%dm' % (h, m) if m else '%dh' % h
    if d < 48 * 3600:
        return '%dh' % (d // 3600)
    return '%dd' % (d // 86400)


_NAME_COL = {'name': 'Name', 'type': 'string', 'format': 'name',
             'description': 'Name must be unique within a namespace.',
             'priority': 0}
_AGE_COL = {'name': 'Age', 'type': 'date', 'format': '',
            'description': 'CreationTimestamp is a timestamp representing the '
            'server time when this object was created.', 'priority': 0}


def table_columns(rt):
    if rt.name == 'secrets':
        return [_NAME_COL,
                {'name': 'Type', 'type': 'string', 'format': '',
                 'description': 'Used to facilitate programmatic handling of '
                 'secret data.', 'priority': 0},
                {'name': 'Data', 'type': 'string', 'format': '',
                 'description': 'Data contains the secret data.',
                 'priority': 0}, _AGE_COL]
    if rt.name == 'priorityclasses':
        return [_NAME_COL,
                {'name': 'Value', 'type': 'integer', 'format': '',
                 'description': 'The value of this priority class.',
                 'priority': 0},
                {'name': 'Global-Default', 'type': 'boolean', 'format': '',
                 'description': 'globalDefault specifies whether this '
                 'PriorityClass should be considered as the default '
                 'priority.', 'priority': 0},
                _AGE_COL,
                {'name': 'PreemptionPolicy', 'type': 'string', 'format': '',
                 'description': 'preemptionPolicy is the Policy for '
                 'preempting pods with lower priority.', 'priority': 1}]
    if rt.name == 'namespaces':
        return [_NAME_COL,
                {'name': 'Status', 'type': 'string', 'format': '',
                 'description': 'The status of the namespace',
                 'priority': 0}, _AGE_COL]
    if rt.name == 'events':
        return [{'name': 'Last Seen', 'type': 'string', 'format': '',
                 'description': 'Time when last event occurred',
                 'priority': 0},
                {'name': 'Type', 'type': 'string', 'format': '',
                 'description': 'Type of this event', 'priority': 0},
                {'name': 'Reason', 'type': 'string', 'format': '',
                 'description': 'Short, machine understandable string',
                 'priority': 0},
                {'name': 'Object', 'type': 'string', 'format': '',
                 'description': 'The object that this event is about',
                 'priority': 0},
                {'name': 'Message', 'type': 'string', 'format': '',
                 'description': 'A human-readable description',
                 'priority': 0}]
    return [_NAME_COL, _AGE_COL]


def table_cells(rt, obj, now=None):
    if now is None:
        now = time.time()
    md = obj.get('metadata') or {}
    name = md.get('name', '')
    age = _age(md.get('creationTimestamp'), now)
    if rt.name == 'secrets':
        return [name, obj.get('type', ''), len(obj.get('data') or {}), age]
    if rt.name == 'priorityclasses':
        return [name, obj.get('value', 0), bool(obj.get('globalDefault')),
                age, obj.get('preemptionPolicy', '')]
    if rt.name == 'namespaces':
        return [name, (obj.get('status') or {}).get('phase', ''), age]
    if rt.name == 'events':
        io = obj.get('involvedObject') or {}
        last = obj.get('lastTimestamp') or obj.get('eventTime') or \
            md.get('creationTimestamp')
        return [_age(last, now), obj.get('type', ''), obj.get('reason', ''),
                '%s/%s' % ((io.get('kind') or '').lower(), io.get('name', '')),
                obj.get('message', '')]
    return [name, age]


# ---------------------------------------------------------------- openapi

def _pb_field(num, payload):
    """A length-delimited protobuf field."""
    n = len(payload)
    out = bytearray([(num << 3) | 2])
    while True:
        b = n & 0x7f
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            break
    return bytes(out) + payload


def openapi_v2_protobuf():
    """A minimal OpenAPI v2 document (gnostic openapi_v2.Document) without
    definitions: kubectl's client-side validation then has no schema for
    our kinds and accepts them, as for a CRD without a schema."""
    info = _pb_field(1, b'Kubernetes') + _pb_field(2, VERSION_DOC[
        'gitVersion'].encode())
    return _pb_field(1, b'2.0') + _pb_field(2, info) + _pb_field(8, b'')


def openapi_v2_json():
    return {'swagger': '2.0', 'info': {'title': 'Kubernetes',
                                       'version': VERSION_DOC['gitVersion']},
            'paths': {}, 'definitions': {}}
