"""Label and field selectors (equality- and set-based)."""
import re

from .util import ApiError

_TOKEN = re.compile(r'\s*(!=|==|=|!|\(|\)|,|[^\s!=(),]+)')


class Selector:
    """A conjunction of requirements; matches(dict) -> bool."""

    def __init__(self, reqs):
        self.reqs = reqs          # [(key, op, values)]

    def __bool__(self):
        return bool(self.reqs)

    def matches(self, labels):
        for key, op, vals in self.reqs:
            has = key in labels
            v = labels.get(key)
            if op == 'in':
                if not has or v not in vals:
                    return False
            elif op == 'notin':
                if has and v in vals:
                    return False
            elif op == 'exists':
                if not has:
                    return False
            elif op == '!':
                if has:
                    return False
        return True

    def single_value(self, key):
        """The value key must equal, when the selector says so."""
        for k, op, vals in self.reqs:
            if k == key and op == 'in' and len(vals) == 1:
                return next(iter(vals))
        return None


EMPTY = Selector([])


def _split_top(s):
    """Split on commas not inside parentheses."""
    parts, depth, cur = [], 0, []
    for ch in s:
        if ch == '(':
            depth += 1
        elif ch == ')':
            depth -= 1
        if ch == ',' and depth == 0:
            parts.append(''.join(cur))
            cur = []
        else:
            cur.append(ch)
    parts.append(''.join(cur))
    return [p.strip() for p in parts if p.strip()]


def parse_label_selector(s):
    if not s:
        return EMPTY
    reqs = []
    for part in _split_top(s):
        m = re.match(r'^(\S+?)\s+(in|notin)\s*\((.*)\)$', part)
        if m:
            vals = frozenset(v.strip() for v in m.group(3).split(',')
                             if v.strip())
            reqs.append((m.group(1), m.group(2), vals))
            continue
        m = re.match(r'^([^!=\s]+)\s*(==|!=|=)\s*([^!=\s]*)$', part)
        if m:
            op = 'notin' if m.group(2) == '!=' else 'in'
            reqs.append((m.group(1), op, frozenset([m.group(3)])))
            continue
        m = re.match(r'^!\s*([^!=\s]+)$', part)
        if m:
            reqs.append((m.group(1), '!', None))
            continue
        m = re.match(r'^([^!=\s()]+)$', part)
        if m:
            reqs.append((m.group(1), 'exists', None))
            continue
        raise ApiError(400, 'BadRequest',
                       'unable to parse requirement: found %r, expected: '
                       'in, notin, =, ==, !=, gt, lt' % part)
    return Selector(reqs)


def parse_field_selector(s, allowed):
    """Field selectors: only =, ==, != on the allowed fields."""
    if not s:
        return EMPTY
    reqs = []
    for part in s.split(','):
        part = part.strip()
        if not part:
            continue
        m = re.match(r'^([^!=]+?)\s*(==|!=|=)\s*(.*)$', part)
        if not m:
            raise ApiError(400, 'BadRequest',
                           'invalid selector: \'%s\'; can\'t understand '
                           '\'%s\'' % (s, part))
        key = m.group(1).strip()
        if key not in allowed:
            raise ApiError(400, 'BadRequest',
                           '"%s" is not a known field selector: only '
                           '"metadata.name", "metadata.namespace"' % key)
        op = 'notin' if m.group(2) == '!=' else 'in'
        reqs.append((key, op, frozenset([m.group(3).strip()])))
    return Selector(reqs)
