"""Small helpers shared by the kube-fake modules."""
import datetime
import json
import random
import time
import uuid

_dumps = json.JSONEncoder(ensure_ascii=False, separators=(',', ':'),
                          check_circular=False).encode


def dumps(obj):
    """Compact JSON text (like Go's encoding/json)."""
    return _dumps(obj)


def dumpb(obj):
    return _dumps(obj).encode('utf-8')


loads = json.loads


def now_rfc3339(t=None):
    if t is None:
        t = time.time()
    return datetime.datetime.fromtimestamp(int(t), datetime.timezone.utc) \
        .strftime('%Y-%m-%dT%H:%M:%SZ')


def now_micro(t=None):
    if t is None:
        t = time.time()
    return datetime.datetime.fromtimestamp(t, datetime.timezone.utc) \
        .strftime('%Y-%m-%dT%H:%M:%S.%fZ')


def parse_rfc3339(s):
    s = s.replace('Z', '+00:00')
    return datetime.datetime.fromisoformat(s).timestamp()


def new_uid():
    return str(uuid.uuid4())


_GEN_CHARS = 'bcdfghjklmnpqrstvwxz2456789'


def random_suffix(n=5):
    return ''.join(random.choice(_GEN_CHARS) for _ in range(n))


class ApiError(Exception):
    """An error that becomes a metav1.Status response."""

    def __init__(self, code, reason, message, details=None, headers=None):
        super().__init__(message)
        self.code = code
        self.reason = reason
        self.message = message
        self.details = details
        self.headers = headers or {}

    def status(self):
        return status_body(self.code, self.reason, self.message, self.details)


def status_body(code, reason, message, details=None):
    body = {'kind': 'Status', 'apiVersion': 'v1', 'metadata': {},
            'status': 'Failure', 'message': message}
    if reason:
        body['reason'] = reason
    if details is not None:
        body['details'] = details
    body['code'] = code
    return body


REASON_BY_CODE = {
    400: 'BadRequest', 401: 'Unauthorized', 403: 'Forbidden',
    404: 'NotFound', 405: 'MethodNotAllowed', 406: 'NotAcceptable',
    409: 'Conflict', 410: 'Expired', 413: 'RequestEntityTooLarge',
    415: 'UnsupportedMediaType', 422: 'Invalid', 429: 'TooManyRequests',
    500: 'InternalError', 503: 'ServiceUnavailable', 504: 'Timeout',
}

DEFAULT_MESSAGE = {
    400: 'the server rejected our request for an unknown reason',
    401: 'Unauthorized',
    403: 'forbidden',
    404: 'the server could not find the requested resource',
    409: 'the server reported a conflict',
    410: 'The resourceVersion for the provided list is too old.',
    413: 'Request entity too large: limit is 3145728',
    415: 'the body of the request was in an unknown format',
    422: 'the server rejected our request due to an error in our request',
    429: 'Too many requests, please try again later.',
    500: 'Internal error occurred: injected fault',
    503: 'the server is currently unable to handle the request',
    504: 'the server was unable to return a response in the time allotted, '
         'but may still be processing the request',
}
