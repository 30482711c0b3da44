#!/usr/bin/env python3
"""Writes sigv4_vectors.tsv: S3 requests signed by botocore's S3SigV4Auth.

sigv4_test.cc signs the same requests with rckpt's SigV4 and compares the
canonical request and the Authorization header byte for byte. The requests
cover what rckpt sends (ranged GETs with If-Match, multipart uploads, the
listings, session tokens, signed and unsigned payloads) and keys with spaces,
unicode, '=', '+' and other bytes that must be encoded exactly once.

Run with botocore from PyPI (any recent version; this file was made with the
one named in the output's first line):
    python3 -m venv /tmp/boto && /tmp/boto/bin/pip install botocore
    /tmp/boto/bin/python tests/s3/data/make_sigv4_vectors.py > tests/s3/data/sigv4_vectors.tsv

Format: a '#' comment line, then one request per line, tab-separated fields,
each field the hex of its UTF-8 bytes: name, method, bucket, key, query
(name US value RS ...), headers (the same; besides host, x-amz-date,
x-amz-content-sha256 and the token), payload hash, session token, region,
amz date, access key id, secret key, canonical request, Authorization.
"""
import datetime
import sys
from unittest import mock

import botocore
from botocore.auth import S3SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.config import Config
from botocore.credentials import Credentials
from botocore.utils import percent_encode

US, RS = "\x1f", "\x1e"
ACCESS, SECRET = "AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"
TOKEN = "IQoJb3JpZ2luX2VjEXAMPLETOKEN//////////wEaCXVzLWVhc3QtMSJIMEYCIQD+/=="
WHEN = datetime.datetime(2024, 11, 5, 13, 7, 42)

KEYS = [
    "plain.rckpt",
    "dir/a b+c=d/\u00fc.rckpt",
    "with space.rckpt",
    "plus+sign",
    "eq=sign=twice",
    "tilde~under_dash-dot.",
    "unicode/\u65e5\u672c\u8a9e/\u00e9t\u00e9/ckpt",
    "percent%20literal",
    "semi;colon,comma&amp",
    "q?mark#hash",
    "a//double/slash/",
    "dot/./seg/../x",
    "star*paren()quote'bang!",
    "at@dollar$colon:",
]

# (name, method, key or None for a bucket request, query, headers, body,
#  sign the payload)
CASES = []
for i, key in enumerate(KEYS):
    CASES.append((f"get-range-{i}", "GET", key, [],
                  [("Range", "bytes=1048576-9437183"), ("If-Match", '"9b2cf535f27731c974343645a3985328"')],
                  b"", True))
CASES += [
    ("get-suffix", "GET", "run/last.rckpt", [], [("Range", "bytes=-262144")], b"", True),
    ("head", "HEAD", "run/last.rckpt", [], [], b"", True),
    ("create-upload", "POST", "dir/a b+c=d/\u00fc.rckpt", [("uploads", "")], [], b"", True),
    ("create-upload-sse-kms", "POST", "run/last.rckpt", [("uploads", "")],
     [("x-amz-server-side-encryption", "aws:kms"),
      ("x-amz-server-side-encryption-aws-kms-key-id", "arn:aws:kms:us-east-1:111122223333:key/1234abcd")],
     b"", True),
    ("upload-part-unsigned", "PUT", "run/last.rckpt",
     [("uploadId", "VXBsb2FkIElEIGZvciA2aWWpbmcncyBteS1tb3ZpZS5tMnRzIHVwbG9hZA+/="), ("partNumber", "17")],
     [], b"x" * 1000, False),
    ("upload-part-signed", "PUT", "with space.rckpt",
     [("partNumber", "2"), ("uploadId", "abc+def/ghi=")], [], b"part bytes", True),
    ("complete", "POST", "run/last.rckpt", [("uploadId", "2~abc_DEF-1.x")], [],
     b'<CompleteMultipartUpload><Part><PartNumber>1</PartNumber><ETag>&quot;a&quot;</ETag></Part>'
     b'</CompleteMultipartUpload>', True),
    ("abort", "DELETE", "run/last.rckpt", [("uploadId", "xyz")], [], b"", True),
    ("put-sse-s3", "PUT", "small.rckpt", [], [("x-amz-server-side-encryption", "AES256")],
     b"tiny object", True),
    ("delete", "DELETE", "unicode/\u65e5\u672c\u8a9e/\u00e9t\u00e9/ckpt", [], [], b"", True),
    ("list-v2", "GET", None,
     [("list-type", "2"), ("prefix", "dir/a b+c=d/"), ("delimiter", "/"),
      ("continuation-token", "1ueGcxLPRx1Tr/XYExHnhbYLgveDs2J/wm36Hy4vbOwM=")], [], b"", True),
    ("list-uploads", "GET", None,
     [("uploads", ""), ("prefix", "run/"), ("key-marker", "run/a b"), ("upload-id-marker", "u+1")],
     [], b"", True),
    ("header-spaces", "GET", "plain.rckpt", [], [("X-Amz-Meta-Note", "  two   spaces  inside ")],
     b"", True),
]


def hexed(s):
    return (s if isinstance(s, bytes) else s.encode("utf-8")).hex()


def main():
    out = ["# botocore " + botocore.__version__ + ": name method bucket key query headers "
           "payload-hash token region amz-date access-key secret canonical-request authorization"]
    for n, (name, method, key, query, headers, body, sign_payload) in enumerate(CASES):
        for token in ([""] if n % 3 else ["", TOKEN]):
            region = "eu-central-1" if n % 2 else "us-east-1"
            bucket = "rckpt-test"
            path = "/" + bucket + ("" if key is None else "/" + percent_encode(key, safe="/~"))
            url = "http://127.0.0.1:8333" + path
            req = AWSRequest(method=method, url=url, data=body, headers=dict(headers),
                             params=dict(query))
            req.context["client_config"] = Config(s3={"payload_signing_enabled": sign_payload})
            creds = Credentials(ACCESS, SECRET, token or None)
            auth = S3SigV4Auth(creds, "s3", region)
            signed = []  # the canonical request add_auth signs
            original = auth.canonical_request
            auth.canonical_request = lambda r: signed.append(original(r)) or signed[-1]
            with mock.patch("botocore.auth.get_current_datetime", return_value=WHEN):
                auth.add_auth(req)
            canonical = signed[0]
            fields = [
                name + ("-token" if token else ""), method, bucket, key or "",
                RS.join(k + US + v for k, v in query),
                RS.join(k + US + v for k, v in headers),
                req.headers["X-Amz-Content-SHA256"], token, region,
                req.context["timestamp"], ACCESS, SECRET, canonical, req.headers["Authorization"],
            ]
            out.append("\t".join(hexed(f) for f in fields))
    sys.stdout.write("\n".join(out) + "\n")


if __name__ == "__main__":
    main()
