"""The object store: one global resourceVersion (as etcd), copy-on-write
entries holding the serialized JSON, a bounded event history for watches,
paged lists with consistent snapshots, deletion with finalizers and a
garbage collector for ownerReferences."""
import base64
import binascii
import bisect
import collections
import heapq
import itertools
import json
import threading
import time

from . import resources
from .util import ApiError, dumpb, loads, new_uid, now_rfc3339, random_suffix

META_ORDER = ('name', 'generateName', 'namespace', 'selfLink', 'uid',
              'resourceVersion', 'generation', 'creationTimestamp',
              'deletionTimestamp', 'deletionGracePeriodSeconds', 'labels',
              'annotations', 'ownerReferences', 'finalizers', 'managedFields')
SERVER_META = ('uid', 'resourceVersion', 'generation', 'creationTimestamp',
               'deletionTimestamp', 'deletionGracePeriodSeconds', 'selfLink',
               'namespace', 'name')


class Entry:
    """One stored version of one object.  Immutable once published."""
    __slots__ = ('rt', 'ns', 'name', 'key', 'uid', 'rv', 'raw', 'labels',
                 'fields', 'owners', 'deleting', 'finalizers')

    def obj(self):
        """A fresh, mutable dict of the object."""
        return loads(self.raw)

    def item_raw(self):
        """The JSON as a list item: built-in kinds omit kind/apiVersion."""
        if self.rt.builtin:
            p = self.rt.raw_prefix
            if self.raw.startswith(p):
                return b'{' + self.raw[len(p):]
        return self.raw


def not_found(rt, name):
    kindgroup = rt.qualified
    return ApiError(404, 'NotFound', '%s "%s" not found' % (kindgroup, name),
                    rt.details(name))


def conflict(rt, name, msg=None):
    if msg is None:
        msg = ('the object has been modified; please apply your changes to '
               'the latest version and try again')
    return ApiError(409, 'Conflict',
                    'Operation cannot be fulfilled on %s "%s": %s'
                    % (rt.qualified, name, msg), rt.details(name))


def gone_status(message):
    return ApiError(410, 'Expired', message)


def _canonical(rt, obj):
    """kind, apiVersion, metadata first; metadata keys in Go order."""
    md = obj.get('metadata') or {}
    nmd = {}
    for k in META_ORDER:
        if k in md:
            v = md[k]
            if v is None or (k in ('labels', 'annotations', 'ownerReferences',
                                   'finalizers') and not v):
                continue
            nmd[k] = v
    out = {'kind': rt.kind, 'apiVersion': rt.api_version, 'metadata': nmd}
    for k, v in obj.items():
        if k not in ('kind', 'apiVersion', 'metadata'):
            out[k] = v
    return out


class Store:
    def __init__(self, history_size=50000, gc_delay=0.1, start_rv=1000):
        self.cond = threading.Condition(threading.RLock())
        self.rv = start_rv
        self.objects = {r.name: {} for r in resources.RESOURCES}
        self.hist = collections.deque(maxlen=max(1, history_size))
        self.history_size = history_size
        self.by_uid = {}                 # uid -> entry (live objects)
        self.dependents = {}             # owner uid -> set(dependent uid)
        self.snapshots = collections.OrderedDict()
        self.hooks = []                  # fn(ev) called under the lock
        self.gc = GarbageCollector(self, gc_delay)
        self.closed = False

    # ------------------------------------------------------------ basics
    @property
    def compacted_rv(self):
        """Watching from an RV below this is impossible (410)."""
        return self.rv - len(self.hist)

    def current_rv(self):
        return self.rv

    def compact(self, rv=None):
        """Drop history up to and including rv (default: everything)."""
        with self.cond:
            if rv is None or rv > self.rv:
                rv = self.rv
            while self.hist and self.hist[0][0] <= rv:
                self.hist.popleft()
            for k in [k for k in self.snapshots if k[0] < self.compacted_rv]:
                del self.snapshots[k]
            self.cond.notify_all()
            return self.compacted_rv

    def _make_entry(self, rt, obj, rv):
        md = obj['metadata']
        e = Entry()
        e.rt = rt
        e.ns = md.get('namespace', '') if rt.namespaced else ''
        e.name = md['name']
        e.key = e.ns + '/' + e.name if rt.namespaced else e.name
        e.uid = md['uid']
        e.rv = rv
        md['resourceVersion'] = str(rv)
        obj['metadata'] = md = {k: md[k] for k in META_ORDER if k in md}
        e.raw = dumpb(obj)
        e.labels = md.get('labels') or {}
        e.fields = resources.field_values(rt, obj)
        e.owners = tuple(o.get('uid') for o in md.get('ownerReferences') or ()
                         if isinstance(o, dict))
        e.deleting = bool(md.get('deletionTimestamp'))
        e.finalizers = tuple(md.get('finalizers') or ())
        return e

    def _commit(self, typ, entry, prev):
        """Publish a change (lock held).  entry.rv must be self.rv + 1."""
        self.rv = entry.rv
        objs = self.objects[entry.rt.name]
        if typ == 'DELETED':
            objs.pop(entry.key, None)
            self.by_uid.pop(entry.uid, None)
            for o in entry.owners:
                s = self.dependents.get(o)
                if s is not None:
                    s.discard(entry.uid)
                    if not s:
                        del self.dependents[o]
        else:
            objs[entry.key] = entry
            self.by_uid[entry.uid] = entry
            old_owners = prev.owners if prev is not None else ()
            if old_owners != entry.owners:
                for o in old_owners:
                    s = self.dependents.get(o)
                    if s is not None:
                        s.discard(entry.uid)
                        if not s:
                            del self.dependents[o]
                for o in entry.owners:
                    self.dependents.setdefault(o, set()).add(entry.uid)
        ev = (entry.rv, typ, entry, prev)
        self.hist.append(ev)
        for h in self.hooks:
            h(ev)
        self.cond.notify_all()
        return ev

    # ------------------------------------------------------------ reads
    def get(self, rt, ns, name):
        e = self.objects[rt.name].get(ns + '/' + name if rt.namespaced
                                      else name)
        if e is None:
            raise not_found(rt, name)
        return e

    def _current_sorted(self, rt, ns):
        objs = self.objects[rt.name]
        if rt.namespaced and ns:
            pre = ns + '/'
            items = [(k, e) for k, e in objs.items() if k.startswith(pre)]
        else:
            items = list(objs.items())
        items.sort(key=lambda kv: kv[0])
        return items

    def _state_at(self, rt, ns, rv):
        """Sorted [(key, entry)] of rt as it was at rv (lock held)."""
        if rv < self.compacted_rv:
            raise gone_status('The resourceVersion for the provided list is '
                              'too old.')
        cur = dict(self.objects[rt.name])
        n = self.rv - rv
        if n > 0:
            for ev in itertools.islice(reversed(self.hist), n):
                _, typ, e, prev = ev
                if e.rt is not rt:
                    continue
                if typ == 'ADDED':
                    cur.pop(e.key, None)
                else:
                    cur[prev.key] = prev
        if rt.namespaced and ns:
            pre = ns + '/'
            items = [(k, e) for k, e in cur.items() if k.startswith(pre)]
        else:
            items = list(cur.items())
        items.sort(key=lambda kv: kv[0])
        return items

    def list(self, rt, ns, lsel, fsel, limit=0, cont=None, rv_param=None,
             rv_match=None):
        """Returns (list_rv, [entry], continue_token, remaining)."""
        with self.cond:
            if cont:
                try:
                    tok = json.loads(base64.urlsafe_b64decode(
                        cont + '=' * (-len(cont) % 4)))
                    snap_rv = int(tok['rv'])
                    start = tok['start']
                    if not isinstance(start, str):
                        raise ValueError
                except (ValueError, KeyError, TypeError, binascii.Error):
                    raise ApiError(400, 'BadRequest', 'continue key is not '
                                   'valid: incorrect encoded start '
                                   'resourceVersion (version meta.k8s.io/v1)')
                if snap_rv < self.compacted_rv:
                    raise ApiError(410, 'Expired', 'The provided continue '
                                   'parameter is too old to display a '
                                   'consistent list result. You can start a '
                                   'new list without the continue parameter, '
                                   'or use the continue token in this response'
                                   ' to retrieve the remainder of the results. '
                                   'Continuing with the provided token results'
                                   ' in an inconsistent list - objects that '
                                   'were created, modified, or deleted between'
                                   ' the time the first chunk was returned and'
                                   ' now may show up in the list.')
                skey = (snap_rv, rt.name, ns)
                items = self.snapshots.get(skey)
                if items is None:
                    items = self._state_at(rt, ns, snap_rv)
                    self._remember(skey, items)
                else:
                    self.snapshots.move_to_end(skey)
                pos = bisect.bisect_left(items, start, key=lambda kv: kv[0])
                list_rv = snap_rv
            else:
                list_rv = self.rv
                if rv_param not in (None, '', '0'):
                    try:
                        want = int(rv_param)
                    except ValueError:
                        raise ApiError(400, 'BadRequest', 'invalid resource '
                                       'version: %s' % rv_param)
                    if rv_match == 'Exact':
                        list_rv = want
                    elif want > self.rv:
                        raise ApiError(504, 'Timeout', 'Too large resource '
                                       'version: %d, current: %d'
                                       % (want, self.rv),
                                       {'causes': [{
                                           'reason': 'ResourceVersionTooLarge',
                                           'message': 'Too large resource '
                                           'version'}],
                                        'retryAfterSeconds': 1})
                if list_rv != self.rv:
                    items = self._state_at(rt, ns, list_rv)
                else:
                    items = self._current_sorted(rt, ns)
                pos = 0
                if limit:
                    self._remember((list_rv, rt.name, ns), items)
        out = []
        n = len(items)
        i = pos
        while i < n:
            e = items[i][1]
            i += 1
            if lsel and not lsel.matches(e.labels):
                continue
            if fsel and not fsel.matches(e.fields):
                continue
            out.append(e)
            if limit and len(out) >= limit:
                break
        token = None
        remaining = None
        if limit and i < n:
            token = base64.urlsafe_b64encode(json.dumps(
                {'v': 'meta.k8s.io/v1', 'rv': list_rv,
                 'start': items[i][0]}, separators=(',', ':')).encode()) \
                .decode().rstrip('=')
            if not lsel and not fsel:
                remaining = n - i
        return list_rv, out, token, remaining

    def _remember(self, key, items):
        self.snapshots[key] = items
        self.snapshots.move_to_end(key)
        while len(self.snapshots) > 16:
            self.snapshots.popitem(last=False)

    # ------------------------------------------------------------ writes
    def _namespace_check(self, rt, ns):
        if rt.namespaced and ns not in self.objects['namespaces']:
            raise ApiError(404, 'NotFound', 'namespaces "%s" not found' % ns,
                           {'name': ns, 'kind': 'namespaces'})

    def create(self, rt, ns, obj, dry_run=False):
        """obj: the parsed body (a dict, will be modified)."""
        md = obj.get('metadata')
        if md is None:
            md = obj['metadata'] = {}
        if not isinstance(md, dict):
            raise ApiError(400, 'BadRequest', 'metadata must be an object')
        name = md.get('name') or ''
        if not isinstance(name, str):
            raise ApiError(400, 'BadRequest', 'metadata.name must be a string')
        if not name:
            gen = md.get('generateName')
            if gen:
                name = gen + random_suffix()
            else:
                raise resources.invalid(rt, '', [(
                    'metadata.name', 'name or generateName is required',
                    None)])
        if rt.namespaced:
            bns = md.get('namespace')
            if bns and bns != ns:
                raise ApiError(400, 'BadRequest', 'the namespace of the '
                               'provided object does not match the namespace '
                               'sent on the request')
            md['namespace'] = ns
        else:
            md.pop('namespace', None)
        md['name'] = name
        for k in ('uid', 'resourceVersion', 'generation', 'creationTimestamp',
                  'deletionTimestamp', 'deletionGracePeriodSeconds',
                  'selfLink', 'managedFields'):
            md.pop(k, None)
        md['uid'] = new_uid()
        md['creationTimestamp'] = now_rfc3339()
        if rt.has_generation:
            md['generation'] = 1
        resources.default_object(rt, obj)
        resources.validate_object(rt, obj, name, True)
        obj = _canonical(rt, obj)
        with self.cond:
            self._namespace_check(rt, ns)
            key = ns + '/' + name if rt.namespaced else name
            if key in self.objects[rt.name]:
                raise ApiError(409, 'AlreadyExists', '%s "%s" already exists'
                               % (rt.qualified, name), rt.details(name))
            e = self._make_entry(rt, obj, self.rv + 1)
            if dry_run:
                return e
            self._commit('ADDED', e, None)
            return e

    def load(self, rt, ns, template, names):
        """Store one object per name from a JSON template (its "__name__"
        replaced), status included, as a restore from an etcd backup would:
        ADDED events with ascending RVs, no validation of the status.  For
        benchmarks that need many objects faster than creates over HTTP."""
        if not isinstance(template, str) or '__name__' not in template:
            raise ApiError(400, 'BadRequest', 'template must be a JSON text '
                           'containing __name__')
        made = 0
        for name in names:
            try:
                obj = loads(template.replace('__name__', name))
            except ValueError as e:
                raise ApiError(400, 'BadRequest', 'template is not JSON: %s' % e)
            if not isinstance(obj, dict) or not isinstance(obj.get('metadata'), dict):
                raise ApiError(400, 'BadRequest', 'template must be an object '
                               'with metadata')
            status = obj.pop('status', None)
            md = obj['metadata']
            for k in ('uid', 'resourceVersion', 'generation', 'creationTimestamp',
                      'deletionTimestamp', 'deletionGracePeriodSeconds',
                      'selfLink', 'managedFields', 'generateName'):
                md.pop(k, None)
            md['name'] = name
            if rt.namespaced:
                md['namespace'] = ns
            md['uid'] = new_uid()
            md['creationTimestamp'] = now_rfc3339()
            if rt.has_generation:
                md['generation'] = 1
            resources.default_object(rt, obj)
            resources.validate_object(rt, obj, name, True)
            if status is not None:
                obj['status'] = status
            obj = _canonical(rt, obj)
            with self.cond:
                self._namespace_check(rt, ns)
                key = ns + '/' + name if rt.namespaced else name
                if key in self.objects[rt.name]:
                    raise ApiError(409, 'AlreadyExists', '%s "%s" already '
                                   'exists (%d loaded before it)'
                                   % (rt.qualified, name, made),
                                   rt.details(name))
                self._commit('ADDED', self._make_entry(rt, obj, self.rv + 1),
                             None)
            made += 1
        return made

    def update(self, rt, ns, name, fn, dry_run=False):
        """Read-modify-write: fn(current entry, current dict) -> new dict
        (may raise).  Server-managed metadata is kept; no-op updates do not
        write."""
        with self.cond:
            cur = self.get(rt, ns, name)
            old = cur.obj()
            new = fn(cur, cur.obj())
            if not isinstance(new, dict):
                raise ApiError(400, 'BadRequest', 'the object must be a JSON '
                               'object')
            e = self._finish_update(rt, cur, old, new, dry_run)
            return e

    def _finish_update(self, rt, cur, old, new, dry_run):
        """Lock held."""
        nmd = new.get('metadata')
        if not isinstance(nmd, dict):
            nmd = new['metadata'] = {}
        omd = old['metadata']
        if nmd.get('name', omd['name']) != omd['name']:
            raise ApiError(400, 'BadRequest', 'the name of the object (%s) '
                           'does not match the name on the URL (%s)'
                           % (nmd.get('name'), omd['name']))
        if rt.namespaced and nmd.get('namespace', cur.ns) != cur.ns:
            raise ApiError(400, 'BadRequest', 'the namespace of the provided '
                           'object does not match the namespace sent on the '
                           'request')
        if nmd.get('uid') not in (None, '', cur.uid):
            raise ApiError(409, 'Conflict', 'Precondition failed: UID in '
                           'precondition: %s, UID in object meta: %s'
                           % (nmd.get('uid'), cur.uid), rt.details(cur.name))
        k = new.get('kind')
        if k is not None and k != rt.kind:
            raise ApiError(400, 'BadRequest', 'the kind of the object (%s) '
                           'does not match the kind of the URL (%s)'
                           % (k, rt.kind))
        for key in SERVER_META:
            if key in omd:
                nmd[key] = omd[key]
            else:
                nmd.pop(key, None)
        nmd.pop('managedFields', None)
        if omd.get('deletionTimestamp'):
            added = set(nmd.get('finalizers') or ()) - \
                set(omd.get('finalizers') or ())
            if added:
                raise resources.invalid(rt, cur.name, [(
                    'metadata.finalizers', 'no new finalizers can be added if '
                    'the object is being deleted', sorted(added)[0])])
        resources.default_object(rt, new)
        new = _canonical(rt, new)
        old = _canonical(rt, old)
        old['metadata'].pop('resourceVersion', None)
        rv_saved = new['metadata'].pop('resourceVersion', None)
        if rt.has_generation:
            ob = {k: v for k, v in old.items() if k != 'metadata'}
            nb = {k: v for k, v in new.items() if k != 'metadata'}
            if ob != nb:
                new['metadata']['generation'] = \
                    int(old['metadata'].get('generation') or 0) + 1
        if new == old:
            return cur                       # no-op: no write, no event
        del rv_saved
        resources.validate_object(rt, new, cur.name, False)
        # finalizers removed from an object being deleted: delete it now
        if new['metadata'].get('deletionTimestamp') and \
                not new['metadata'].get('finalizers'):
            if dry_run:
                return cur
            return self._delete_locked(cur, new)
        e = self._make_entry(rt, new, self.rv + 1)
        if dry_run:
            return e
        self._commit('MODIFIED', e, cur)
        return e

    def _delete_locked(self, cur, final_obj=None):
        """Remove cur now: DELETED event carrying the deletion's RV."""
        obj = final_obj if final_obj is not None else cur.obj()
        e = self._make_entry(cur.rt, obj, self.rv + 1)
        self._commit('DELETED', e, cur)
        if e.uid in self.dependents:
            self.gc.schedule(self.gc.delay, ('orphaned', e.uid))
        if cur.rt.name == 'namespaces':
            self.gc.schedule(0, ('namespace', e.name))
        return e

    def delete(self, rt, ns, name, policy=None, preconditions=None,
               dry_run=False):
        """Returns (entry, deleted_now)."""
        with self.cond:
            cur = self.get(rt, ns, name)
            pre = preconditions or {}
            if pre.get('uid') and pre['uid'] != cur.uid:
                raise ApiError(409, 'Conflict', 'Precondition failed: UID in '
                               'precondition: %s, UID in object meta: %s'
                               % (pre['uid'], cur.uid), rt.details(name))
            if pre.get('resourceVersion') and \
                    str(pre['resourceVersion']) != str(cur.rv):
                raise ApiError(409, 'Conflict', 'Precondition failed: '
                               'ResourceVersion in precondition: %s, '
                               'ResourceVersion in object meta: %s'
                               % (pre['resourceVersion'], cur.rv),
                               rt.details(name))
            if policy not in (None, '', 'Background', 'Foreground', 'Orphan'):
                raise resources.invalid(rt, name, [(
                    'propagationPolicy', 'supported values: "Foreground", '
                    '"Background", "Orphan", nil', policy)])
            if rt.name == 'namespaces':
                policy = 'Namespace'
            if cur.deleting:
                # deletion already in progress: nothing changes
                return cur, False
            need_final = policy in ('Foreground', 'Orphan', 'Namespace') or \
                cur.finalizers
            if not need_final:
                if dry_run:
                    return cur, True
                e = self._delete_locked(cur)
                return e, True
            obj = cur.obj()
            md = obj['metadata']
            md['deletionTimestamp'] = now_rfc3339()
            md['deletionGracePeriodSeconds'] = 0
            fins = list(md.get('finalizers') or [])
            if policy == 'Foreground' and 'foregroundDeletion' not in fins:
                fins.append('foregroundDeletion')
            if policy == 'Orphan' and 'orphan' not in fins:
                fins.append('orphan')
            md['finalizers'] = fins
            if rt.name == 'namespaces':
                obj['status'] = {'phase': 'Terminating'}
            if dry_run:
                return cur, False
            obj = _canonical(rt, obj)
            e = self._make_entry(rt, obj, self.rv + 1)
            self._commit('MODIFIED', e, cur)
            if policy == 'Foreground':
                self.gc.schedule(self.gc.delay, ('foreground', e.uid))
            elif policy == 'Orphan':
                self.gc.schedule(self.gc.delay, ('orphan', e.uid))
            elif policy == 'Namespace':
                self.gc.schedule(self.gc.delay, ('namespace', e.name))
            return e, False

    def remove_finalizer(self, uid, fin):
        """Lock held.  Remove one finalizer (deleting the object when it was
        the last one and deletion is pending)."""
        cur = self.by_uid.get(uid)
        if cur is None or fin not in cur.finalizers:
            return
        obj = cur.obj()
        md = obj['metadata']
        md['finalizers'] = [f for f in md.get('finalizers') or [] if f != fin]
        if md.get('deletionTimestamp') and not md['finalizers']:
            del md['finalizers']
            self._delete_locked(cur, _canonical(cur.rt, obj))
        else:
            e = self._make_entry(cur.rt, _canonical(cur.rt, obj), self.rv + 1)
            self._commit('MODIFIED', e, cur)

    # ------------------------------------------------------------ watch
    def events_after(self, cursor, max_events=2000):
        """Events with rv > cursor (lock held).  Raises ApiError 410 when
        they are no longer in the history."""
        if cursor < self.compacted_rv:
            raise gone_status('too old resource version: %d (%d)'
                              % (cursor, self.compacted_rv + 1))
        n = self.rv - cursor
        if n <= 0:
            return []
        h = self.hist
        start = len(h) - n
        if n > max_events:
            return list(itertools.islice(h, start, start + max_events))
        if start > len(h) // 2:
            return list(itertools.islice(reversed(h), n))[::-1]
        return list(itertools.islice(h, start, None))


class GarbageCollector:
    """Background work of the fake "kube-controller-manager": foreground and
    orphan deletion, deleting dependents whose owners are gone, namespace
    cleanup.  One thread, one heap."""

    def __init__(self, store, delay):
        self.store = store
        self.delay = delay
        self.heap = []
        self.seq = itertools.count()
        self.cv = threading.Condition(threading.Lock())
        self.stopping = False
        self.thread = threading.Thread(target=self._run, name='gc',
                                       daemon=True)
        self.thread.start()

    def schedule(self, after, task):
        with self.cv:
            heapq.heappush(self.heap, (time.monotonic() + after,
                                       next(self.seq), task))
            self.cv.notify()

    def stop(self):
        with self.cv:
            self.stopping = True
            self.cv.notify()

    def _run(self):
        while True:
            with self.cv:
                while not self.stopping:
                    now = time.monotonic()
                    if self.heap and self.heap[0][0] <= now:
                        break
                    self.cv.wait(self.heap[0][0] - now if self.heap else None)
                if self.stopping:
                    return
                _, _, task = heapq.heappop(self.heap)
            try:
                self._do(task)
            except Exception as ex:          # never let the GC die
                import sys
                print('kube-fake: gc task %r failed: %r' % (task, ex),
                      file=sys.stderr)

    def _do(self, task):
        st = self.store
        kind, arg = task
        with st.cond:
            if kind == 'orphaned':
                # dependents of a deleted owner: delete those with no live
                # owner left (background)
                for duid in list(st.dependents.get(arg, ())):
                    d = st.by_uid.get(duid)
                    if d is None:
                        continue
                    if any(o in st.by_uid for o in d.owners):
                        continue
                    if not d.deleting:
                        if d.finalizers:
                            self._mark_deleting(d)
                        else:
                            st._delete_locked(d)
            elif kind == 'foreground':
                owner = st.by_uid.get(arg)
                if owner is None:
                    return
                pending = False
                for duid in list(st.dependents.get(arg, ())):
                    d = st.by_uid.get(duid)
                    if d is None:
                        continue
                    others = [o for o in d.owners if o != arg
                              and o in st.by_uid]
                    if others:
                        continue
                    if d.finalizers:
                        if not d.deleting:
                            self._mark_deleting(d)
                        pending = True
                    else:
                        st._delete_locked(d)
                if pending:
                    self.schedule(self.delay, task)
                else:
                    st.remove_finalizer(arg, 'foregroundDeletion')
            elif kind == 'orphan':
                owner = st.by_uid.get(arg)
                if owner is None:
                    return
                for duid in list(st.dependents.get(arg, ())):
                    d = st.by_uid.get(duid)
                    if d is None:
                        continue
                    obj = d.obj()
                    refs = [o for o in obj['metadata'].get('ownerReferences')
                            or [] if o.get('uid') != arg]
                    if refs:
                        obj['metadata']['ownerReferences'] = refs
                    else:
                        obj['metadata'].pop('ownerReferences', None)
                    e = st._make_entry(d.rt, _canonical(d.rt, obj), st.rv + 1)
                    st._commit('MODIFIED', e, d)
                st.remove_finalizer(arg, 'orphan')
            elif kind == 'namespace':
                pre = arg + '/'
                for rt in resources.RESOURCES:
                    if not rt.namespaced:
                        continue
                    for k, e in list(st.objects[rt.name].items()):
                        if k.startswith(pre):
                            st._delete_locked(e)
                ns = st.objects['namespaces'].get(arg)
                if ns is not None and ns.deleting:
                    st.remove_finalizer(ns.uid, 'kubernetes')
                    ns = st.objects['namespaces'].get(arg)
                    if ns is not None and ns.deleting and not ns.finalizers:
                        st._delete_locked(ns)

    def _mark_deleting(self, d):
        st = self.store
        obj = d.obj()
        obj['metadata']['deletionTimestamp'] = now_rfc3339()
        obj['metadata']['deletionGracePeriodSeconds'] = 0
        e = st._make_entry(d.rt, _canonical(d.rt, obj), st.rv + 1)
        st._commit('MODIFIED', e, d)
