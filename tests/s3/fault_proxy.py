#!/usr/bin/env python3
"""A fault-injecting HTTP proxy in front of a real S3 server, for rckpt's tests.

    fault_proxy.py --upstream http://127.0.0.1:PORT [--ready-file F] [--verbose]

Listens on a free loopback port for S3 traffic and on another for control,
then writes F (and stdout) as JSON: {"port": .., "control_port": .., "pid": ..}.
Standard library only, any python3 from 3.8.

Every client connection gets its own connection to the upstream, and every
request and response is relayed byte for byte: the Host header is untouched,
so SigV4 signatures stay valid when the client signs for the proxy's
host:port. The proxy parses HTTP/1.1 framing (Content-Length, chunked,
Expect: 100-continue) only to know where each request and response ends;
pipelined requests are not supported (S3 clients do not pipeline). An
answer the upstream gives before it has read a request's body is relayed,
and the connection then ends as the upstream ends it. An upstream that
cannot be reached (a server killed, restarting) resets the client's
connection, as close to "connection refused" as a proxy can be.

Control API (JSON over HTTP on the control port):
  POST /rules    a rule or a list of rules, appended after those already set.
                 Each request takes the first rule that matches it and has
                 uses left:
                   {"match": {"method": "PUT", "query": "partNumber",
                              "path": "REGEX", "header": "Range",
                              "operation": "UploadPart"},
                    "times": N,        (default 1; -1: always)
                    "action": ACTION}
                 match: every field given must hold (none: every request).
                   method    the request's method;
                   query     a query parameter present (name, or name=value),
                             e.g. uploads, uploadId, partNumber, partNumber=2;
                   path      a regular expression searched in the decoded
                             path, /BUCKET/KEY;
                   header    a request header present (any case);
                   operation the S3 operation, as GET /stats names it.
                 ACTION, one of:
                   {"status": 503, "code": "SlowDown"}  the proxy answers with
                       this status and an S3 <Error> body (code: by default
                       SlowDown for 503, InternalError for 500, ...); the
                       request never reaches the server. "message" optional;
                       "region": R adds <Region>R</Region> and the header
                       x-amz-bucket-region: R (a bucket in another region).
                   {"status": 200, "error_body": "InternalError"}  the same
                       with status 200: CompleteMultipartUpload's
                       200-with-<Error> (the upload stays incomplete).
                   {"reset_after_bytes": K, "direction": "request"|"response"}
                       the connection is reset (RST) after K bytes of the
                       body: of the request's when it has one, else of the
                       response's (direction overrides). Response, K = 0: reset
                       instead of relaying the response (the server acted on
                       the request). Request: the server saw K bytes of it.
                   {"truncate_at": K}  the response's head and K bytes of its
                       body are relayed, then the connection is closed cleanly.
                   {"stall_seconds": S, "after_bytes": K}  nothing is relayed
                       for S seconds, before the request is forwarded or, with
                       after_bytes, after K bytes of the response body. A
                       client that gave up before a request is forwarded has
                       its request dropped, never forwarded late.
                   {"delay_ms": D}  the request is forwarded D ms late.
                   {"throttle_bytes_per_s": R, "direction": "request"|"response"}
                       the body (the request's when it has one, else the
                       response's; direction overrides) is relayed at R bytes
                       a second for as long as the rule is set: DELETE /rules
                       lets the rest go at full speed (a slow upload or
                       download that a test ends when it has looked).
                   {"etag": "opaque"}  the answer's ETag header is replaced by
                       an opaque one (base64, the MD5 of nothing), as GCS's
                       XML API, SSE-KMS and SSE-C objects and MinIO with
                       encryption give; the same ETag always becomes the same
                       opaque one. Bodies are relayed as they are (an <ETag>
                       in XML too), and nothing is translated back (SigV4
                       signs a request's If-Match and CompleteMultipartUpload's
                       body of part ETags): meant for HeadObject and PutObject
                       answers.
                   {"flip_byte": K}  byte K of the request's body (the last one
                       when the body is shorter; Content-Length bodies only) is
                       inverted on its way to the server, as a link that
                       damages a byte would: the client's checksum header, if
                       any, no longer matches (S3 answers 400 BadDigest;
                       SeaweedFS checks x-amz-checksum-crc32c and Content-MD5).
                 A reset, truncation or stall at or past the end of a body
                 leaves the response whole (the rule is used up all the same;
                 GET /stats counts only faults injected).
  GET /rules     the rules, with the uses left of each and how often it fired.
  DELETE /rules  clears them.
  POST /delay    {"ms": D}: every request is forwarded D ms late (0: none).
  GET /stats     {"requests": {"GetObject": n, ...}, "faults": {"status": n,
                 "reset": n, ...}, "bytes_to_upstream": n,
                 "bytes_from_upstream": n, "connections": n, "delay_ms": D,
                 "signing_regions": {"us-east-1": n, ...}} (the region of each
                 SigV4 Authorization header's credential scope)
  DELETE /stats  sets the counts back to zero.
  GET /parts     the sizes of what was uploaded, per object, as the proxy relayed
                 the requests: {"/BUCKET/KEY": "N1 N2 ...", ...}, the Content-Length
                 of each part (by part number, the last try of each) of the
                 object's latest multipart upload, or of its latest PutObject
                 (one size). Stores such as R2 and Garage refuse an upload
                 whose parts but the last differ in size.
  DELETE /parts  forgets them.
A bad rule is answered 400 with the reason, and none of the list is added.
"""

import argparse
import base64
import hashlib
import http.server
import json
import os
import re
import select
import signal
import socket
import socketserver
import struct
import sys
import threading
import urllib.parse

BLOCK = 1 << 20
MAX_HEAD = 64 << 10
DEFAULT_CODES = {400: "BadRequest", 403: "AccessDenied", 404: "NoSuchKey", 409: "Conflict",
                 412: "PreconditionFailed", 500: "InternalError", 501: "NotImplemented",
                 503: "SlowDown"}
DEFAULT_MESSAGES = {"SlowDown": "Please reduce your request rate.",
                    "InternalError": "We encountered an internal error. Please try again."}
REASONS = {200: "OK", 400: "Bad Request", 403: "Forbidden", 404: "Not Found", 409: "Conflict",
           412: "Precondition Failed", 500: "Internal Server Error", 501: "Not Implemented",
           503: "Service Unavailable"}


# The region of a SigV4 credential scope: Credential=KEY/DATE/REGION/s3/aws4_request.
SIGNING_REGION = re.compile(r"Credential=[^/,]+/\d{8}/([^/,]+)/")


class ProtocolError(Exception):
    """A message the proxy cannot frame; the connection is closed."""


class RuleError(ValueError):
    """A rule the control API refuses."""


# -- rules ------------------------------------------------------------------------------------------

def _check_keys(where, obj, allowed):
    if not isinstance(obj, dict):
        raise RuleError(f"{where}: expected a JSON object, got {json.dumps(obj)}")
    for key in obj:
        if key not in allowed:
            raise RuleError(f"{where}: unknown key {key!r} (expected one of {', '.join(allowed)})")


def _number(where, value, minimum, integer=False):
    kinds = (int,) if integer else (int, float)
    if isinstance(value, bool) or not isinstance(value, kinds) or value < minimum:
        raise RuleError(f"{where}: expected {'an integer' if integer else 'a number'} >= {minimum}, "
                        f"got {json.dumps(value)}")
    return value


class Rule:
    MATCH_KEYS = ("method", "query", "path", "header", "operation")
    ACTIONS = {  # kind: (its keys, the optional keys that go with it)
        "status": (("status", "error_body"), ("code", "message", "region")),
        "reset": (("reset_after_bytes",), ("direction",)),
        "truncate": (("truncate_at",), ()),
        "stall": (("stall_seconds",), ("after_bytes",)),
        "delay": (("delay_ms",), ()),
        "throttle": (("throttle_bytes_per_s",), ("direction",)),
        "etag": (("etag",), ()),
        "flip": (("flip_byte",), ()),
    }

    def __init__(self, spec, index):
        where = f"rule {index}"
        _check_keys(where, spec, ("match", "times", "action"))
        if "action" not in spec:
            raise RuleError(f"{where}: no 'action'")
        self.match = spec.get("match", {})
        _check_keys(f"{where}: match", self.match, self.MATCH_KEYS)
        for key, value in self.match.items():
            if not isinstance(value, str) or not value:
                raise RuleError(f"{where}: match.{key}: expected a non-empty string, got "
                                f"{json.dumps(value)}")
        try:
            self.path = re.compile(self.match["path"]) if "path" in self.match else None
        except re.error as e:
            raise RuleError(f"{where}: match.path: {self.match['path']!r} is not a regular "
                            f"expression ({e})") from None
        self.times = spec.get("times", 1)
        if isinstance(self.times, bool) or not isinstance(self.times, int) or \
                (self.times < 1 and self.times != -1):
            raise RuleError(f"{where}: times: expected an integer >= 1, or -1 for always, got "
                            f"{json.dumps(self.times)}")
        self.action = spec["action"]
        allowed = [k for keys, extra in self.ACTIONS.values() for k in keys + extra]
        _check_keys(f"{where}: action", self.action, allowed)
        kinds = [kind for kind, (keys, _) in self.ACTIONS.items()
                 if any(k in self.action for k in keys)]
        if len(kinds) != 1:
            raise RuleError(f"{where}: action: expected exactly one of status (with code or "
                            f"error_body), reset_after_bytes, truncate_at, stall_seconds, delay_ms, "
                            f"throttle_bytes_per_s, etag, flip_byte; got "
                            f"{json.dumps(self.action)}")
        self.kind = kinds[0]
        for key in self.action:
            if key not in sum(self.ACTIONS[self.kind], ()):
                raise RuleError(f"{where}: action: {key!r} does not go with {self.kind}")
        self._check_action(f"{where}: action")
        self.fired = 0

    def _check_action(self, where):
        a = self.action
        if self.kind == "status":
            self.status = _number(f"{where}.status", a.get("status", 200), 200, integer=True)
            if self.status > 599:
                raise RuleError(f"{where}.status: expected an HTTP status (200-599), got {self.status}")
            if "code" in a and "error_body" in a:
                raise RuleError(f"{where}: give code or error_body, not both")
            self.code = a.get("code", a.get("error_body", DEFAULT_CODES.get(self.status)))
            if not isinstance(self.code, str) or not re.fullmatch(r"[A-Za-z0-9.]+", self.code or ""):
                raise RuleError(f"{where}: code: expected an S3 error code such as SlowDown, got "
                                f"{json.dumps(self.code)}")
            self.message = a.get("message", DEFAULT_MESSAGES.get(self.code, "Injected fault."))
            if not isinstance(self.message, str):
                raise RuleError(f"{where}.message: expected a string")
            self.region = a.get("region")
            if self.region is not None and (not isinstance(self.region, str) or
                                            not re.fullmatch(r"[a-z0-9-]+", self.region)):
                raise RuleError(f"{where}.region: expected a region name such as eu-west-1, got "
                                f"{json.dumps(self.region)}")
        elif self.kind == "reset":
            self.bytes = _number(f"{where}.reset_after_bytes", a["reset_after_bytes"], 0, True)
            self._check_direction(where)
        elif self.kind == "throttle":
            self.rate = _number(f"{where}.throttle_bytes_per_s", a["throttle_bytes_per_s"], 1)
            self._check_direction(where)
        elif self.kind == "etag":
            if a["etag"] != "opaque":
                raise RuleError(f"{where}.etag: expected 'opaque', got {json.dumps(a['etag'])}")
        elif self.kind == "truncate":
            self.bytes = _number(f"{where}.truncate_at", a["truncate_at"], 0, True)
        elif self.kind == "flip":
            self.bytes = _number(f"{where}.flip_byte", a["flip_byte"], 0, True)
        elif self.kind == "stall":
            self.seconds = _number(f"{where}.stall_seconds", a["stall_seconds"], 0)
            self.bytes = a.get("after_bytes")
            if self.bytes is not None:
                _number(f"{where}.after_bytes", self.bytes, 0, True)
        else:
            self.ms = _number(f"{where}.delay_ms", a["delay_ms"], 0)

    def _check_direction(self, where):
        self.direction = self.action.get("direction")
        if self.direction not in (None, "request", "response"):
            raise RuleError(f"{where}.direction: expected 'request' or 'response', got "
                            f"{json.dumps(self.direction)}")

    def on_request_body(self, request):
        """Whether the rule's fault meets the request's body (else the response's)."""
        return self.direction == "request" or (self.direction is None and request.has_body())

    def matches(self, request):
        m = self.match
        if "method" in m and m["method"].upper() != request.method:
            return False
        if "operation" in m and m["operation"] != request.operation:
            return False
        if "header" in m and m["header"].lower() not in request.headers:
            return False
        if self.path is not None and not self.path.search(request.path):
            return False
        if "query" in m:
            name, eq, value = m["query"].partition("=")
            if not any(n == name and (not eq or v == value) for n, v in request.query):
                return False
        return True

    def describe(self):
        return {"match": self.match, "times": self.times, "action": self.action,
                "fired": self.fired}


class State:
    """Rules, the global delay and the counts, shared by every connection."""

    def __init__(self):
        self.lock = threading.Lock()
        self.rules = []
        self.delay_ms = 0
        self.parts = {}  # path: [upload id or None, {part number: bytes}] (GET /parts)
        self.reset_stats()

    def reset_stats(self):
        self.requests = {}
        self.faults = {}
        self.bytes_to_upstream = 0
        self.bytes_from_upstream = 0
        self.connections = 0
        self.signing_regions = {}

    def record_part(self, request):
        """Notes the size of an UploadPart's or PutObject's body (GET /parts)."""
        kind, length = request.body_framing()
        if request.operation not in ("UploadPart", "PutObject") or kind != "length":
            return
        query = dict(request.query)
        upload = query.get("uploadId")
        number = int(query.get("partNumber", "1")) if upload else 1
        with self.lock:
            entry = self.parts.get(request.path)
            if entry is None or entry[0] != upload:
                entry = self.parts[request.path] = [upload, {}]
            entry[1][number] = length

    def part_sizes(self):
        with self.lock:
            return {path: " ".join(str(sizes[n]) for n in sorted(sizes))
                    for path, (_, sizes) in self.parts.items()}

    def add_rules(self, specs):
        if isinstance(specs, dict):
            specs = [specs]
        if not isinstance(specs, list):
            raise RuleError("expected a rule (a JSON object) or a list of rules")
        rules = [Rule(spec, i) for i, spec in enumerate(specs)]
        with self.lock:
            self.rules.extend(rules)
            return len(self.rules)

    def take(self, request):
        """Counts the request; returns the rule it uses up, or None."""
        with self.lock:
            self.requests[request.operation] = self.requests.get(request.operation, 0) + 1
            scope = SIGNING_REGION.search(request.headers.get("authorization", ""))
            if scope:
                region = scope.group(1)
                self.signing_regions[region] = self.signing_regions.get(region, 0) + 1
            for rule in self.rules:
                if rule.times != 0 and rule.matches(request):
                    if rule.times > 0:
                        rule.times -= 1
                    rule.fired += 1
                    return rule
        return None

    def is_set(self, rule):
        with self.lock:
            return any(r is rule for r in self.rules)

    def count(self, **counts):
        with self.lock:
            for name, n in counts.items():
                if name.startswith("fault_"):
                    self.faults[name[6:]] = self.faults.get(name[6:], 0) + n
                else:
                    setattr(self, name, getattr(self, name) + n)

    def stats(self):
        with self.lock:
            return {"requests": dict(self.requests), "faults": dict(self.faults),
                    "bytes_to_upstream": self.bytes_to_upstream,
                    "bytes_from_upstream": self.bytes_from_upstream,
                    "connections": self.connections, "delay_ms": self.delay_ms,
                    "signing_regions": dict(self.signing_regions)}


# -- HTTP framing -----------------------------------------------------------------------------------

class Reader:
    """Buffered reads from a socket, for heads and bodies."""

    def __init__(self, sock):
        self.sock = sock
        self.buf = bytearray()
        self.block = memoryview(bytearray(BLOCK))

    def read_until(self, delimiter, limit):
        """Bytes up to and including delimiter; None at a clean EOF before any byte."""
        start = 0
        while True:
            at = self.buf.find(delimiter, start)
            if at >= 0:
                end = at + len(delimiter)
                data = bytes(self.buf[:end])
                del self.buf[:end]
                return data
            if len(self.buf) > limit:
                raise ProtocolError(f"no {delimiter!r} in the first {limit} bytes")
            start = max(0, len(self.buf) - len(delimiter) + 1)
            n = self.sock.recv_into(self.block)
            if n == 0:
                if self.buf:
                    raise ProtocolError("connection closed in the middle of a message head")
                return None
            self.buf += self.block[:n]

    def read_some(self, maximum):
        """Up to maximum bytes (b'' at EOF); valid until the next call."""
        if self.buf:
            data = bytes(self.buf[:maximum])
            del self.buf[:len(data)]
            return data
        n = self.sock.recv_into(self.block[:min(maximum, BLOCK)])
        return self.block[:n]


class Message:
    """A request or response head."""

    def __init__(self, raw):
        self.raw = raw
        lines = raw[:-4].decode("latin-1").split("\r\n")
        self.start = lines[0].split(" ", 2)
        if len(self.start) < 2:
            raise ProtocolError(f"bad start line {lines[0]!r}")
        self.headers = {}
        for line in lines[1:]:
            name, sep, value = line.partition(":")
            if not sep:
                raise ProtocolError(f"bad header line {line!r}")
            self.headers[name.strip().lower()] = value.strip()

    def framing(self):
        if "chunked" in self.headers.get("transfer-encoding", "").lower():
            return ("chunked", None)
        if "content-length" in self.headers:
            try:
                return ("length", int(self.headers["content-length"]))
            except ValueError:
                raise ProtocolError(f"bad Content-Length {self.headers['content-length']!r}")
        return None

    def closes(self):
        return "close" in self.headers.get("connection", "").lower()


class Request(Message):
    def __init__(self, raw):
        super().__init__(raw)
        self.method = self.start[0].upper()
        target = urllib.parse.urlsplit(self.start[1])
        self.path = urllib.parse.unquote(target.path)
        self.query = urllib.parse.parse_qsl(target.query, keep_blank_values=True)
        self.operation = operation(self.method, self.path, dict(self.query), self.headers)

    def body_framing(self):
        return self.framing() or ("length", 0)

    def has_body(self):
        kind, n = self.body_framing()
        return kind == "chunked" or n > 0


class Response(Message):
    def __init__(self, raw):
        super().__init__(raw)
        try:
            self.status = int(self.start[1])
        except ValueError:
            raise ProtocolError(f"bad status line {self.start!r}")

    def body_framing(self, method):
        if method == "HEAD" or self.status < 200 or self.status in (204, 304):
            return ("length", 0)
        return self.framing() or ("close", None)


def operation(method, path, query, headers):
    """The S3 operation of a path-style request, as AWS names it."""
    bucket, _, key = path.lstrip("/").partition("/")
    copy = "x-amz-copy-source" in headers
    if not bucket:
        return "ListBuckets" if method == "GET" else f"{method} /"
    if key:
        if method == "PUT":
            if "partNumber" in query and "uploadId" in query:
                return "UploadPartCopy" if copy else "UploadPart"
            return "CopyObject" if copy else "PutObject"
        if method == "POST":
            return ("CreateMultipartUpload" if "uploads" in query else
                    "CompleteMultipartUpload" if "uploadId" in query else "PostObject")
        if method == "DELETE":
            return "AbortMultipartUpload" if "uploadId" in query else "DeleteObject"
        if method == "GET":
            return "ListParts" if "uploadId" in query else "GetObject"
        if method == "HEAD":
            return "HeadObject"
    else:
        if method == "GET":
            if "uploads" in query:
                return "ListMultipartUploads"
            if "location" in query:
                return "GetBucketLocation"
            return "ListObjectsV2" if query.get("list-type") == "2" else "ListObjects"
        if method == "POST" and "delete" in query:
            return "DeleteObjects"
        named = {"HEAD": "HeadBucket", "PUT": "CreateBucket", "DELETE": "DeleteBucket"}
        if method in named:
            return named[method]
    return f"{method} (other)"


def body_pieces(reader, framing):
    """The body's bytes as they come on the wire, framing included."""
    kind, length = framing
    if kind == "length":
        while length:
            piece = reader.read_some(min(length, BLOCK))
            if not piece:
                raise ProtocolError(f"connection closed with {length} bytes of the body to come")
            length -= len(piece)
            yield piece
    elif kind == "chunked":
        while True:
            line = reader.read_until(b"\r\n", 4096)
            if line is None:
                raise ProtocolError("connection closed in a chunked body")
            yield line
            try:
                size = int(line.split(b";")[0].strip(), 16)
            except ValueError:
                raise ProtocolError(f"bad chunk size line {line!r}")
            if size == 0:
                while True:  # trailers, up to the empty line
                    line = reader.read_until(b"\r\n", MAX_HEAD)
                    if line is None:
                        raise ProtocolError("connection closed in a chunked body's trailers")
                    yield line
                    if line == b"\r\n":
                        return
            yield from body_pieces(reader, ("length", size + 2))
    else:  # until the connection closes
        while True:
            piece = reader.read_some(BLOCK)
            if not piece:
                return
            yield piece


def relay(pieces, dst, cut=None):
    """Sends pieces to dst; with cut, stops after cut bytes when there are more.
    Returns (bytes sent, None), or (cut, the rest of the piece cut) when it stopped."""
    sent = 0
    for piece in pieces:
        if cut is not None and sent + len(piece) > cut:
            dst.sendall(piece[:cut - sent])
            return cut, piece[cut - sent:]
        dst.sendall(piece)
        sent += len(piece)
    return sent, None


def reset(sock):
    """Closes sock with a TCP RST rather than a FIN."""
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    except OSError:
        pass
    sock.close()


def error_response(rule, request, number, keep_alive):
    body = b""
    if request.method != "HEAD":
        region = f"<Region>{rule.region}</Region>" if rule.region else ""
        body = ('<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>' + rule.code +
                "</Code><Message>" + _xml_escape(rule.message) + "</Message>" + region +
                "<Resource>" +
                _xml_escape(request.path) + f"</Resource><RequestId>rckpt-fault-proxy-{number}"
                "</RequestId></Error>").encode()
    head = (f"HTTP/1.1 {rule.status} {REASONS.get(rule.status, 'Error')}\r\n"
            f"Content-Type: application/xml\r\nContent-Length: {len(body)}\r\n"
            f"x-amz-request-id: rckpt-fault-proxy-{number}\r\n" +
            (f"x-amz-bucket-region: {rule.region}\r\n" if rule.region else "") +
            f"Connection: {'keep-alive' if keep_alive else 'close'}\r\n\r\n")
    return head.encode() + body


ETAG_LINE = re.compile(rb"^(etag:[ \t]*)([^\r\n]*)", re.IGNORECASE | re.MULTILINE)


def opaque_etag(head):
    """A response head whose ETag is replaced by an opaque one, as GCS's look
    ("CJ+Zz5nV4fICEAE="): base64 of 11 bytes of the SHA-256 of the real one."""
    def replace(m):
        digest = hashlib.sha256(m.group(2)).digest()[:11]
        return m.group(1) + b'"' + base64.b64encode(digest) + b'"'
    return ETAG_LINE.sub(replace, head, count=1)


def _xml_escape(text):
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


# -- the proxy --------------------------------------------------------------------------------------

class Connection:
    """One client connection and its upstream connection, request by request."""

    def __init__(self, server, client):
        self.server = server
        self.state = server.state
        self.client = client

    def log(self, text):
        print(f"fault_proxy: {text}", file=sys.stderr, flush=True)

    def serve(self):
        try:
            self.upstream = socket.create_connection(self.server.upstream, timeout=10)
            self.upstream.settimeout(None)
        except OSError as e:
            self.log(f"upstream {self.server.upstream[0]}:{self.server.upstream[1]} cannot be "
                     f"reached ({e}): resetting the client's connection")
            reset(self.client)
            return
        for s in (self.client, self.upstream):
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.state.count(connections=1)
        self.from_client = Reader(self.client)
        self.from_upstream = Reader(self.upstream)
        try:
            while self.exchange():
                pass
        except (OSError, ProtocolError) as e:
            if self.server.verbose:
                self.log(f"connection ends: {type(e).__name__}: {e}")
        finally:
            self.client.close()
            self.upstream.close()

    def upstream_closed_while_idle(self):
        """Waits for the client's next request; True when the upstream closed first."""
        if self.from_client.buf:
            return False
        readable, _, _ = select.select([self.client, self.upstream], [], [])
        return self.upstream in readable and self.client not in readable

    def exchange(self):
        """Relays one request and its response; False when the connection is done."""
        if self.upstream_closed_while_idle():
            return False
        raw = self.from_client.read_until(b"\r\n\r\n", MAX_HEAD)
        if raw is None:
            return False
        request = Request(raw)
        rule = self.state.take(request)
        self.state.record_part(request)
        if self.server.verbose or rule:
            self.log(f"{request.operation} {request.path}" + (f" -> {rule.kind} {rule.action}"
                                                              if rule else ""))
        delay = self.state.delay_ms + (rule.ms if rule and rule.kind == "delay" else 0)
        if delay:
            self.server.stopping.wait(delay / 1000)
            if rule and rule.kind == "delay":
                self.state.count(fault_delay=1)
        if rule and rule.kind == "status":
            return self.answer(request, rule)
        if rule and rule.kind == "stall" and rule.bytes is None:
            self.state.count(fault_stall=1)
            self.server.stopping.wait(rule.seconds)
            if self.client_gone():
                self.log(f"{request.operation} {request.path}: the client left during the stall; "
                         "request dropped")
                return False
        self.upstream.sendall(raw)
        self.state.count(bytes_to_upstream=len(raw))
        response = None
        if "100-continue" in request.headers.get("expect", "").lower():
            response = self.read_response()
            if response.status == 100:
                self.client.sendall(response.raw)
                response = None
            else:  # a final answer before the body: relay it, then close
                self.relay_response(request, response, rule)
                return False
        early = False
        if request.has_body():
            cut = rule.bytes if rule and rule.kind == "reset" and \
                rule.direction != "response" else None
            throttle = rule if rule and rule.kind == "throttle" and \
                rule.on_request_body(request) else None
            flip = rule.bytes if rule and rule.kind == "flip" else None
            outcome = self.relay_request_body(request, cut, throttle, flip)
            if outcome == "cut":
                self.state.count(fault_reset=1)
                reset(self.client)
                reset(self.upstream)
                return False
            early = outcome == "early"
        response = response or self.read_response()
        while response.status < 200:  # interim responses
            self.client.sendall(response.raw)
            response = self.read_response()
        keep = self.relay_response(request, response, rule) and not request.closes()
        if early:
            # A server that answered before it read the whole body (a refused
            # upload): the connection ends, as the server ends it, once the
            # client has sent the rest, so that the answer is not lost to a
            # reset of the bytes it is still sending.
            self.linger()
            return False
        return keep

    def linger(self):
        """Ends the client's connection gracefully: FIN, then what it still sends is
        read and dropped (for at most 10 s)."""
        try:
            self.client.shutdown(socket.SHUT_WR)
            self.client.settimeout(10)
            while self.client.recv(BLOCK):
                pass
        except OSError:
            pass

    def relay_request_body(self, request, cut, throttle=None, flip=None):
        """Relays the request's body (at throttle's rate, when given; byte flip
        inverted): None when whole, "cut" when it stopped after cut bytes, "early" when
        the upstream answered (or stopped reading) before its end."""
        sent = 0
        framing = request.body_framing()
        pieces = body_pieces(self.from_client, framing)
        if flip is not None and framing[0] == "length" and framing[1] > 0:
            pieces = self.flipped(pieces, min(flip, framing[1] - 1))
        if throttle is not None:
            pieces = self.throttled(pieces, throttle)
        try:
            for piece in pieces:
                if select.select([self.upstream], [], [], 0)[0]:
                    return "early"
                if cut is not None and sent + len(piece) > cut:
                    self.upstream.sendall(piece[:cut - sent])
                    sent = cut
                    return "cut"
                try:
                    self.upstream.sendall(piece)
                except OSError:
                    return "early"
                sent += len(piece)
            return None
        finally:
            self.state.count(bytes_to_upstream=sent)

    def relay_body(self, reader, framing, dst, cut, counter, throttle=None):
        """Relays a body (at throttle's rate, when given); True when it stopped at cut."""
        pieces = body_pieces(reader, framing)
        if throttle is not None:
            pieces = self.throttled(pieces, throttle)
        sent, rest = relay(pieces, dst, cut)
        self.state.count(**{counter: sent})
        return rest is not None

    def flipped(self, pieces, at):
        """pieces with the byte at offset `at` inverted."""
        seen = 0
        for piece in pieces:
            if seen <= at < seen + len(piece):
                piece = bytearray(piece)
                piece[at - seen] ^= 0xFF
                piece = bytes(piece)
                self.state.count(fault_flip=1)
            seen += len(piece)
            yield piece

    def throttled(self, pieces, rule):
        """pieces cut into slices of a tenth of a second's worth at rule's rate, one every
        tenth of a second, while the rule is set; then the rest as it comes."""
        self.state.count(fault_throttle=1)
        step = max(1, int(rule.rate / 10))
        throttling = True
        for piece in pieces:
            at = 0
            while throttling and at < len(piece):
                yield piece[at:at + step]
                at += step
                self.server.stopping.wait(step / rule.rate)
                throttling = self.state.is_set(rule)
            if at < len(piece):
                yield piece[at:]

    def read_response(self):
        raw = self.from_upstream.read_until(b"\r\n\r\n", MAX_HEAD)
        if raw is None:
            raise ProtocolError("the upstream closed the connection before answering")
        return Response(raw)

    def relay_response(self, request, response, rule):
        """Relays the response with rule's fault; False when the connection must close."""
        framing = response.body_framing(request.method)
        kind = rule.kind if rule else None
        if kind == "etag":
            response = Response(opaque_etag(response.raw))
            self.state.count(fault_etag=1)
        if kind == "reset" and (rule.direction == "response" or
                                (rule.direction is None and not request.has_body())):
            if rule.bytes == 0:
                self.state.count(fault_reset=1)
                reset(self.client)
                return False
            self.client.sendall(response.raw)
            if self.relay_body(self.from_upstream, framing, self.client, rule.bytes,
                               "bytes_from_upstream"):
                self.state.count(fault_reset=1)
                reset(self.client)
                return False
        elif kind == "truncate":
            self.client.sendall(response.raw)
            if self.relay_body(self.from_upstream, framing, self.client, rule.bytes,
                               "bytes_from_upstream"):
                self.state.count(fault_truncate=1)
                self.client.shutdown(socket.SHUT_WR)
                return False
        elif kind == "stall" and rule.bytes is not None:
            self.client.sendall(response.raw)
            pieces = body_pieces(self.from_upstream, framing)
            sent, rest = relay(pieces, self.client, rule.bytes)
            if rest is not None:
                self.state.count(fault_stall=1)
                self.server.stopping.wait(rule.seconds)
                self.client.sendall(rest)  # the rest of the piece cut, then of the body
                more, _ = relay(pieces, self.client)
                sent += len(rest) + more
            self.state.count(bytes_from_upstream=sent)
        else:
            throttle = rule if kind == "throttle" and not rule.on_request_body(request) else None
            self.client.sendall(response.raw)
            self.relay_body(self.from_upstream, framing, self.client, None, "bytes_from_upstream",
                            throttle)
        return framing[0] != "close" and not response.closes()

    def answer(self, request, rule):
        """Answers rule's status and <Error> without involving the upstream."""
        number = self.state.stats()["connections"]
        self.state.count(fault_status=1)
        if "100-continue" in request.headers.get("expect", "").lower():
            # The client waits to send its body: answer now and close, as servers do.
            self.client.sendall(error_response(rule, request, number, keep_alive=False))
            return False
        for _ in body_pieces(self.from_client, request.body_framing()):
            pass
        self.client.sendall(error_response(rule, request, number, not request.closes()))
        return not request.closes()

    def client_gone(self):
        readable, _, _ = select.select([self.client], [], [], 0)
        if not readable:
            return False
        try:
            return self.client.recv(1, socket.MSG_PEEK) == b""
        except OSError:
            return True


class ProxyServer(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 256

    def __init__(self, address, upstream, state, verbose):
        self.upstream = upstream
        self.state = state
        self.verbose = verbose
        self.stopping = threading.Event()
        # Connections are served by finish_request: no handler class.
        super().__init__(address, socketserver.BaseRequestHandler)

    def finish_request(self, request, client_address):
        Connection(self, request).serve()

    def shutdown_request(self, request):
        pass  # Connection.serve closes it, with a RST when a fault says so


def control_handler(state):
    class Control(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, fmt, *args):
            pass

        def reply(self, status, obj):
            body = (json.dumps(obj, indent=1) + "\n").encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def body(self):
            length = int(self.headers.get("Content-Length") or 0)
            text = self.rfile.read(length)
            try:
                return json.loads(text)
            except ValueError as e:
                raise RuleError(f"the body is not JSON ({e}): {text[:200]!r}") from None

        def route(self, method):
            try:
                if (method, self.path) == ("POST", "/rules"):
                    self.reply(200, {"rules": state.add_rules(self.body())})
                elif (method, self.path) == ("GET", "/rules"):
                    with state.lock:
                        self.reply(200, {"rules": [r.describe() for r in state.rules]})
                elif (method, self.path) == ("DELETE", "/rules"):
                    with state.lock:
                        state.rules.clear()
                    self.reply(200, {"rules": 0})
                elif (method, self.path) == ("POST", "/delay"):
                    spec = self.body()
                    _check_keys("delay", spec, ("ms",))
                    ms = _number("delay.ms", spec.get("ms"), 0)
                    with state.lock:
                        state.delay_ms = ms
                    self.reply(200, {"delay_ms": ms})
                elif (method, self.path) == ("GET", "/stats"):
                    self.reply(200, state.stats())
                elif (method, self.path) == ("DELETE", "/stats"):
                    with state.lock:
                        state.reset_stats()
                    self.reply(200, state.stats())
                elif (method, self.path) == ("GET", "/parts"):
                    self.reply(200, state.part_sizes())
                elif (method, self.path) == ("DELETE", "/parts"):
                    with state.lock:
                        state.parts = {}
                    self.reply(200, {})
                else:
                    self.reply(404, {"error": f"no {method} {self.path}; expected POST/GET/DELETE "
                                              "/rules, POST /delay, GET/DELETE /stats, GET/DELETE /parts"})
            except RuleError as e:
                self.reply(400, {"error": str(e)})

        def do_GET(self):
            self.route("GET")

        def do_POST(self):
            self.route("POST")

        def do_DELETE(self):
            self.route("DELETE")

    return Control


def parse_upstream(text):
    url = urllib.parse.urlsplit(text)
    if url.scheme != "http" or not url.hostname or not url.port or url.path not in ("", "/"):
        raise SystemExit(f"fault_proxy: --upstream {text!r}: expected http://HOST:PORT "
                         "(plain HTTP; the proxy relays bytes, it does not speak TLS)")
    return url.hostname, url.port


def main():
    parser = argparse.ArgumentParser(
        description="A fault-injecting HTTP proxy in front of a real S3 server (rckpt's tests).",
        epilog="The control API is described at the top of this file.")
    parser.add_argument("--upstream", required=True, help="the S3 server, http://HOST:PORT")
    parser.add_argument("--ready-file", help="written as JSON {port, control_port, pid} once "
                                             "listening (also printed on stdout)")
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (127.0.0.1)")
    parser.add_argument("--port", type=int, default=0, help="S3 port (0: a free one)")
    parser.add_argument("--control-port", type=int, default=0, help="control port (0: a free one)")
    parser.add_argument("--verbose", action="store_true", help="log every request on stderr")
    args = parser.parse_args()
    upstream = parse_upstream(args.upstream)

    state = State()
    proxy = ProxyServer((args.host, args.port), upstream, state, args.verbose)
    control = http.server.ThreadingHTTPServer((args.host, args.control_port), control_handler(state))
    control.daemon_threads = True
    threads = [threading.Thread(target=s.serve_forever, daemon=True) for s in (proxy, control)]
    for t in threads:
        t.start()

    info = {"port": proxy.server_address[1], "control_port": control.server_address[1],
            "pid": os.getpid()}
    if args.ready_file:
        tmp = f"{args.ready_file}.tmp.{os.getpid()}"
        with open(tmp, "w") as f:
            json.dump(info, f)
        os.replace(tmp, args.ready_file)
    print(json.dumps(info), flush=True)

    done = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: done.set())
    while not done.wait(3600):
        pass
    proxy.stopping.set()
    proxy.shutdown()
    control.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
