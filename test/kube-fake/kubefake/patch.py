"""RFC 7396 (JSON merge patch) and RFC 6902 (JSON patch)."""
import copy


def merge_patch(target, patch):
    """Return target merge-patched with patch (RFC 7396).  target is not
    modified; unchanged sub-documents are shared with it."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    if not isinstance(target, dict):
        target = {}
    result = dict(target)
    for k, v in patch.items():
        if v is None:
            result.pop(k, None)
        elif isinstance(v, dict):
            result[k] = merge_patch(target.get(k), v)
        else:
            result[k] = copy.deepcopy(v) if isinstance(v, list) else v
    return result


class PatchError(Exception):
    """The patch cannot be applied (RFC 6902 error)."""


class PatchTestFailed(PatchError):
    pass


def _unescape(tok):
    return tok.replace('~1', '/').replace('~0', '~')


def _split(pointer):
    if pointer == '':
        return []
    if not isinstance(pointer, str) or not pointer.startswith('/'):
        raise PatchError('invalid JSON pointer %r' % (pointer,))
    return [_unescape(t) for t in pointer[1:].split('/')]


def _index(container, tok, allow_end):
    if tok == '-' and allow_end:
        return len(container)
    if not tok.isdigit() or (len(tok) > 1 and tok[0] == '0'):
        raise PatchError('invalid array index %r' % tok)
    i = int(tok)
    limit = len(container) + (1 if allow_end else 0)
    if i >= limit:
        raise PatchError('array index %d out of bounds' % i)
    return i


def _parent(doc, toks):
    cur = doc
    for tok in toks[:-1]:
        if isinstance(cur, dict):
            if tok not in cur:
                raise PatchError('path component %r not found' % tok)
            cur = cur[tok]
        elif isinstance(cur, list):
            cur = cur[_index(cur, tok, False)]
        else:
            raise PatchError('path component %r is not a container' % tok)
    return cur


def _get(doc, pointer):
    toks = _split(pointer)
    cur = doc
    for tok in toks:
        if isinstance(cur, dict):
            if tok not in cur:
                raise PatchError("doc is missing path: %s" % pointer)
            cur = cur[tok]
        elif isinstance(cur, list):
            cur = cur[_index(cur, tok, False)]
        else:
            raise PatchError("doc is missing path: %s" % pointer)
    return cur


def _add(doc, pointer, value):
    toks = _split(pointer)
    if not toks:
        return value
    par = _parent(doc, toks)
    tok = toks[-1]
    if isinstance(par, dict):
        par[tok] = value
    elif isinstance(par, list):
        par.insert(_index(par, tok, True), value)
    else:
        raise PatchError('cannot add to a non-container at %s' % pointer)
    return doc


def _remove(doc, pointer):
    toks = _split(pointer)
    if not toks:
        raise PatchError('cannot remove the whole document')
    par = _parent(doc, toks)
    tok = toks[-1]
    if isinstance(par, dict):
        if tok not in par:
            raise PatchError('unable to remove nonexistent key: %s: missing '
                             'value' % tok)
        return par.pop(tok)
    if isinstance(par, list):
        return par.pop(_index(par, tok, False))
    raise PatchError('cannot remove from a non-container at %s' % pointer)


def json_patch(doc, ops):
    """Apply an RFC 6902 patch to a deep copy of doc and return it."""
    if not isinstance(ops, list):
        raise PatchError('a JSON patch must be an array of operations')
    doc = copy.deepcopy(doc)
    for op in ops:
        if not isinstance(op, dict) or 'op' not in op:
            raise PatchError('invalid operation %r' % (op,))
        kind = op['op']
        path = op.get('path')
        if path is None:
            raise PatchError('operation %s is missing path' % kind)
        if kind in ('add', 'replace', 'test') and 'value' not in op:
            raise PatchError('operation %s is missing value' % kind)
        if kind == 'add':
            doc = _add(doc, path, copy.deepcopy(op['value']))
        elif kind == 'remove':
            _remove(doc, path)
        elif kind == 'replace':
            toks = _split(path)
            if not toks:
                doc = copy.deepcopy(op['value'])
                continue
            _get(doc, path)          # must exist
            par = _parent(doc, toks)
            if isinstance(par, dict):
                par[toks[-1]] = copy.deepcopy(op['value'])
            else:
                par[_index(par, toks[-1], False)] = copy.deepcopy(op['value'])
        elif kind == 'move':
            frm = op.get('from')
            if frm is None:
                raise PatchError('move is missing from')
            if path.startswith(frm + '/'):
                raise PatchError('cannot move a value into one of its '
                                 'children')
            v = _remove(doc, frm)
            doc = _add(doc, path, v)
        elif kind == 'copy':
            frm = op.get('from')
            if frm is None:
                raise PatchError('copy is missing from')
            doc = _add(doc, path, copy.deepcopy(_get(doc, frm)))
        elif kind == 'test':
            try:
                cur = _get(doc, path)
            except PatchError:
                raise PatchTestFailed('testing value %s failed: path not '
                                      'found' % path)
            if not _json_equal(cur, op['value']):
                raise PatchTestFailed('testing value %s failed: test failed'
                                      % path)
        else:
            raise PatchError('Unexpected kind: %s' % kind)
    return doc


def _json_equal(a, b):
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    return a == b
