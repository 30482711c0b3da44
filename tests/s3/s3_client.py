#!/usr/bin/env python3
"""A small S3 client for rckpt's tests, independent of rckpt's own S3 code.

Standard library only (any python3 from 3.8): SigV4 signing of path-style
requests, over http.client. The tests use it to look at a bucket behind
rckpt's back (what is there, which multipart uploads are pending, an object
damaged on purpose) and to check the fault proxy (fault_proxy.py);
s3_server.sh uses it to wait for SeaweedFS and create the test bucket.
It signs the payload's SHA-256 (x-amz-content-sha256), as AWS requires, and
encodes keys and queries once, as SigV4 says.

As a command (what s3_server.sh runs):
    s3_client.py probe ENDPOINT ACCESS_KEY SECRET_KEY REGION BUCKET
creates BUCKET when it is missing, then puts, reads back and deletes a small
object; exit status 0 when all of that worked, 1 with the reason otherwise.
"""

import datetime
import hashlib
import hmac
import http.client
import re
import sys
import urllib.parse
import xml.etree.ElementTree as ET


def _quote(text, safe):
    return urllib.parse.quote(text, safe=safe)


class Response:
    """One S3 response: status, headers (names lower case) and body."""

    def __init__(self, status, reason, headers, body):
        self.status = status
        self.reason = reason
        self.headers = headers
        self.body = body

    def error_code(self):
        """The <Code> of an S3 error body, or None when the body is not an error."""
        match = re.search(rb"<Error>.*?<Code>([^<]*)</Code>", self.body, re.S)
        return match.group(1).decode() if match else None

    def __repr__(self):
        return f"<Response {self.status} {self.reason} {self.error_code() or ''}>".replace(" >", ">")


class S3Error(Exception):
    """A response other than the one an operation expects."""

    def __init__(self, operation, response):
        code = response.error_code()
        super().__init__(f"{operation}: HTTP {response.status}" + (f" {code}" if code else "") +
                         (f": {response.body[:300]!r}" if response.body and not code else ""))
        self.response = response


class S3Client:
    """Path-style S3 requests signed with SigV4 for one endpoint and identity.

    One connection is kept open and reused; a request on a connection that
    the peer closed is not retried (the fault tests count requests), so
    call reconnect() after a fault that broke it. Not thread-safe: one
    client per thread.
    """

    def __init__(self, endpoint, access_key, secret_key, region="us-east-1", timeout=60):
        parsed = urllib.parse.urlsplit(endpoint)
        if parsed.scheme != "http" or not parsed.hostname or parsed.path not in ("", "/"):
            raise ValueError(f"endpoint {endpoint!r}: expected http://HOST:PORT")
        self.endpoint = endpoint.rstrip("/")
        self.host = parsed.netloc
        self.access_key = access_key
        self.secret_key = secret_key
        self.region = region
        self.timeout = timeout
        self._conn = None

    def close(self):
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    reconnect = close

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # -- signing -------------------------------------------------------------

    def sign(self, method, path, query, headers, body, now=None):
        """Adds host, x-amz-date, x-amz-content-sha256 and Authorization to headers.

        path is the encoded request path, query a list of (name, value)
        pairs, not encoded (value None for a value-less name such as
        ``uploads``)."""
        now = now or datetime.datetime.now(datetime.timezone.utc)
        amz_date = now.strftime("%Y%m%dT%H%M%SZ")
        day = amz_date[:8]
        headers["host"] = self.host
        headers["x-amz-date"] = amz_date
        headers["x-amz-content-sha256"] = hashlib.sha256(body).hexdigest()
        canonical_query = "&".join(f"{k}={v}" for k, v in sorted(
            (_quote(k, "-_.~"), _quote(v or "", "-_.~")) for k, v in query))
        names = sorted(h.lower() for h in headers)
        lowered = {h.lower(): " ".join(str(v).strip().split()) for h, v in headers.items()}
        canonical_headers = "".join(f"{n}:{lowered[n]}\n" for n in names)
        signed_headers = ";".join(names)
        canonical_request = "\n".join([method, path, canonical_query, canonical_headers,
                                       signed_headers, headers["x-amz-content-sha256"]])
        scope = f"{day}/{self.region}/s3/aws4_request"
        string_to_sign = "\n".join(["AWS4-HMAC-SHA256", amz_date, scope,
                                    hashlib.sha256(canonical_request.encode()).hexdigest()])
        key = ("AWS4" + self.secret_key).encode()
        for part in (day, self.region, "s3", "aws4_request"):
            key = hmac.new(key, part.encode(), hashlib.sha256).digest()
        signature = hmac.new(key, string_to_sign.encode(), hashlib.sha256).hexdigest()
        headers["Authorization"] = (f"AWS4-HMAC-SHA256 Credential={self.access_key}/{scope}, "
                                    f"SignedHeaders={signed_headers}, Signature={signature}")
        return headers

    # -- requests ------------------------------------------------------------

    def request(self, method, bucket="", key="", query=(), headers=None, body=b""):
        """Sends one signed request; returns its Response (any status).

        query: a dict or (name, value) pairs, value None for a name alone.
        Connection errors (reset, truncated body, timeout) propagate."""
        if isinstance(query, dict):
            query = list(query.items())
        path = "/" + _quote(bucket, "-_.~") + ("/" + _quote(key, "-_.~/") if key else "")
        if not bucket:
            path = "/"
        headers = self.sign(method, path, list(query), dict(headers or {}), body)
        target = path
        if query:
            target += "?" + "&".join(_quote(k, "-_.~") + ("" if v is None else "=" + _quote(v, "-_.~"))
                                     for k, v in query)
        if self._conn is None:
            parsed = urllib.parse.urlsplit(self.endpoint)
            self._conn = http.client.HTTPConnection(parsed.hostname, parsed.port or 80,
                                                    timeout=self.timeout)
        try:
            self._conn.request(method, target, body=body or None, headers=headers)
            resp = self._conn.getresponse()
            data = resp.read()
        except BaseException:
            self.close()
            raise
        result = Response(resp.status, resp.reason,
                          {k.lower(): v for k, v in resp.getheaders()}, data)
        if resp.will_close:
            self.close()
        return result

    def _expect(self, operation, response, *statuses):
        if response.status not in statuses:
            raise S3Error(operation, response)
        return response

    def create_bucket(self, bucket):
        """Creates bucket; one that this identity already owns is fine."""
        r = self.request("PUT", bucket)
        if r.status == 409 and r.error_code() in ("BucketAlreadyOwnedByYou", "BucketAlreadyExists"):
            return r
        return self._expect("CreateBucket", r, 200)

    def put_object(self, bucket, key, data, headers=None):
        return self._expect(f"PutObject {key}", self.request("PUT", bucket, key, headers=headers,
                                                             body=data), 200)

    def get_object(self, bucket, key, byte_range=None):
        """The object's bytes; byte_range "A-B" or "-N" asks for a range."""
        headers = {"Range": f"bytes={byte_range}"} if byte_range else None
        r = self.request("GET", bucket, key, headers=headers)
        return self._expect(f"GetObject {key}", r, 206 if byte_range else 200).body

    def head_object(self, bucket, key):
        """The object's headers, or None when there is no such key."""
        r = self.request("HEAD", bucket, key)
        return None if r.status == 404 else self._expect(f"HeadObject {key}", r, 200).headers

    def delete_object(self, bucket, key):
        return self._expect(f"DeleteObject {key}", self.request("DELETE", bucket, key), 204, 200)

    def list_objects(self, bucket, prefix=""):
        """Keys under prefix, with their sizes: {key: size}."""
        keys, token = {}, None
        while True:
            query = [("list-type", "2"), ("prefix", prefix)] + ([("continuation-token", token)]
                                                               if token else [])
            root = _xml(self._expect("ListObjectsV2", self.request("GET", bucket, query=query), 200))
            for item in _findall(root, "Contents"):
                keys[_text(item, "Key")] = int(_text(item, "Size"))
            token = _text(root, "NextContinuationToken")
            if _text(root, "IsTruncated") != "true" or not token:
                return keys

    def delete_prefix(self, bucket, prefix):
        """Deletes every object and aborts every multipart upload under prefix."""
        for key in self.list_objects(bucket, prefix):
            self.delete_object(bucket, key)
        for key, upload_id in self.list_multipart_uploads(bucket, prefix):
            self.abort_multipart_upload(bucket, key, upload_id)

    def create_multipart_upload(self, bucket, key, headers=None):
        r = self.request("POST", bucket, key, query=[("uploads", None)], headers=headers)
        return _text(_xml(self._expect(f"CreateMultipartUpload {key}", r, 200)), "UploadId")

    def upload_part(self, bucket, key, upload_id, number, data):
        """Uploads part number; returns its ETag."""
        r = self.request("PUT", bucket, key, query=[("partNumber", str(number)),
                                                    ("uploadId", upload_id)], body=data)
        return self._expect(f"UploadPart {key} part {number}", r, 200).headers["etag"]

    def complete_multipart_upload(self, bucket, key, upload_id, etags):
        """Completes with etags in part order (part numbers 1..n). Returns the
        Response: a 200 may still carry an <Error> body (Response.error_code())."""
        body = ("<CompleteMultipartUpload>" + "".join(
            f"<Part><PartNumber>{n}</PartNumber><ETag>{etag}</ETag></Part>"
            for n, etag in enumerate(etags, 1)) + "</CompleteMultipartUpload>").encode()
        r = self.request("POST", bucket, key, query=[("uploadId", upload_id)], body=body)
        return self._expect(f"CompleteMultipartUpload {key}", r, 200)

    def abort_multipart_upload(self, bucket, key, upload_id):
        r = self.request("DELETE", bucket, key, query=[("uploadId", upload_id)])
        return self._expect(f"AbortMultipartUpload {key}", r, 204, 200)

    def list_multipart_uploads(self, bucket, prefix=""):
        """Pending uploads under prefix: a list of (key, upload id)."""
        r = self.request("GET", bucket, query=[("uploads", None), ("prefix", prefix)])
        root = _xml(self._expect("ListMultipartUploads", r, 200))
        return [(_text(u, "Key"), _text(u, "UploadId")) for u in _findall(root, "Upload")]


def _xml(response):
    return ET.fromstring(response.body)


def _findall(root, name):
    return [e for e in root.iter() if e.tag.rsplit("}", 1)[-1] == name]


def _text(root, name):
    found = _findall(root, name)
    return found[0].text if found else None


def probe(endpoint, access_key, secret_key, region, bucket):
    """What s3_server.sh waits for: the bucket, and an object written, read and deleted."""
    key = ".rckpt-s3-server-probe"
    data = b"rckpt s3_server.sh probe\n"
    with S3Client(endpoint, access_key, secret_key, region, timeout=10) as s3:
        s3.create_bucket(bucket)
        s3.put_object(bucket, key, data)
        back = s3.get_object(bucket, key)
        if back != data:
            raise RuntimeError(f"GetObject {key}: read back {back!r}, wrote {data!r}")
        s3.delete_object(bucket, key)


def main(argv):
    if len(argv) != 7 or argv[1] != "probe":
        print(__doc__.split("As a command (what s3_server.sh runs):\n")[1], file=sys.stderr, end="")
        return 2
    try:
        probe(*argv[2:])
    except (OSError, http.client.HTTPException, S3Error, RuntimeError, ET.ParseError) as e:
        print(f"{type(e).__name__}: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
