"""Checkpoints in object storage: ``s3://BUCKET/KEY`` wherever a checkpoint path goes.

``rckpt.save``, ``load``, ``load_into``, ``save_async``, ``convert``,
``inspect`` and ``verify`` take an ``s3://`` URL as they take a path. Without
``s3=``, the library finds the endpoint, region and credentials as the AWS
CLI does (AWS_* variables, ~/.aws/config and ~/.aws/credentials, the
container endpoint, EC2 instance metadata: docs/OBJECT_STORAGE.md), once per
process. ``s3=S3Options(...)`` gives them per call instead::

    from rckpt.s3 import S3Options
    s3 = S3Options(endpoint="http://10.0.0.5:9000", access_key_id="...",
                   secret_access_key="...")
    rckpt.save("s3://ckpts/run1/last.rckpt", state, s3=s3)

Credentials the C++ library does not resolve itself (a profile's
``credential_process``, ``role_arn`` or SSO settings, and web identity,
AWS_WEB_IDENTITY_TOKEN_FILE) are resolved here with botocore when it is
installed, and handed to the library, which asks again five minutes before
they expire (botocore renews them then). Without botocore, such a
configuration is an UnsupportedError saying so.

Secret keys and session tokens never appear in a repr, a message or a log.
"""

from __future__ import annotations

import dataclasses
import os
import re
import threading
from collections import OrderedDict
from typing import Any, Callable, Optional, Sequence

from . import _core
from .errors import Error, InvalidArgumentError, IoError, UnsupportedError

# "scheme://user:password@" in an endpoint URL: never shown.
_USERINFO = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*://)[^/?#]*@")
# What pathlib makes of "s3://bucket/key": "s3:/bucket/key" (rckpt._local_only's
# refusals use it too).
COLLAPSED_S3 = re.compile(r"[Ss]3:/(?!/)")

_ADDRESSING = ("auto", "path", "virtual")
_ENCRYPTION = (None, "AES256", "aws:kms")
_CREDENTIALS_FROM = ("auto", "rckpt", "botocore")
_SECRET_FIELDS = ("secret_access_key", "session_token")


@dataclasses.dataclass(frozen=True)
class S3Options:
    """How calls given ``s3=`` reach object storage: the library's S3Options
    (include/rckpt/s3.h), field by field. ``None`` and the defaults mean what
    the environment and the AWS files say (docs/OBJECT_STORAGE.md).

    - ``endpoint``: ``"https://host[:port]"`` or ``"http://host:port"`` (plain
      HTTP only when it says http); None: AWS_ENDPOINT_URL_S3,
      AWS_ENDPOINT_URL, the profile's endpoint_url, else AWS's for the region.
    - ``region``: None: AWS_REGION, AWS_DEFAULT_REGION, the profile's, else
      us-east-1. A region hint in an answer is followed once.
    - ``access_key_id``, ``secret_access_key``, ``session_token``: explicit
      credentials (both of the first two, or neither). The secret and the
      token never appear in ``repr()``.
    - ``profile``: the AWS profile (None: AWS_PROFILE, else "default").
    - ``credentials_from``: without explicit keys, "auto" (the library's
      chain, and botocore for what it does not resolve), "rckpt" (the
      library's chain only) or "botocore" (botocore's chain, handed over).
    - ``addressing``: "auto", "path" or "virtual".
    - ``encryption``: None (the bucket's default), "AES256" (SSE-S3) or
      "aws:kms" (SSE-KMS, with ``kms_key_id`` or the account's AWS managed
      key).
    - ``max_requests`` (16): requests in flight at once.
    - ``part_bytes`` (0: from the checkpoint's size; all parts but the last
      one size), ``upload_parts_in_flight`` (8) and ``upload_buffer_bytes``
      (512 MiB: fewer parts in flight when they are large, at least one): a
      save's multipart upload and its host memory.
    - ``max_attempts`` (10), ``retry_base_delay_ms`` (100),
      ``retry_max_delay_ms`` (5000), ``connect_timeout_ms`` (10000),
      ``stall_timeout_s`` (20): retries and their bounds.
    - ``ca_file``: a PEM bundle for HTTPS (None: AWS_CA_BUNDLE, else the
      system's).
    - ``read_environment`` (True): False reads neither the environment nor
      the AWS files (explicit credentials are then required).

    Instances are immutable and hashable: calls given equal options share one
    connection pool.
    """

    endpoint: Optional[str] = None
    region: Optional[str] = None
    access_key_id: Optional[str] = None
    secret_access_key: Optional[str] = dataclasses.field(default=None, repr=False)
    session_token: Optional[str] = dataclasses.field(default=None, repr=False)
    profile: Optional[str] = None
    credentials_from: str = "auto"
    addressing: str = "auto"
    encryption: Optional[str] = None
    kms_key_id: Optional[str] = None
    max_requests: int = 16
    part_bytes: int = 0
    upload_parts_in_flight: int = 8
    upload_buffer_bytes: int = 512 << 20
    max_attempts: int = 10
    retry_base_delay_ms: int = 100
    retry_max_delay_ms: int = 5000
    connect_timeout_ms: int = 10000
    stall_timeout_s: int = 20
    ca_file: Optional[str] = None
    read_environment: bool = True

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            shown = "a value" if f.name in _SECRET_FIELDS else repr(value)
            if f.type == "bool" or isinstance(f.default, bool):
                if not isinstance(value, bool):
                    raise TypeError(f"S3Options.{f.name} must be a bool, not {type(value).__name__}")
            elif isinstance(f.default, int):
                if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                    raise TypeError(f"S3Options.{f.name} must be an int >= 0, not {shown}")
            elif value is not None and not isinstance(value, str):
                raise TypeError(f"S3Options.{f.name} must be a str or None, not "
                                f"{type(value).__name__}")
        if self.addressing not in _ADDRESSING:
            raise ValueError(f"S3Options.addressing must be one of {_ADDRESSING}, not "
                             f"{self.addressing!r}")
        if self.encryption not in _ENCRYPTION:
            raise ValueError(f"S3Options.encryption must be None, 'AES256' (SSE-S3) or "
                             f"'aws:kms' (SSE-KMS), not {self.encryption!r}")
        if self.credentials_from not in _CREDENTIALS_FROM:
            raise ValueError(f"S3Options.credentials_from must be one of {_CREDENTIALS_FROM}, "
                             f"not {self.credentials_from!r}")
        if bool(self.access_key_id) != bool(self.secret_access_key):
            given, missing = (("access_key_id", "secret_access_key") if self.access_key_id
                              else ("secret_access_key", "access_key_id"))
            raise ValueError(f"S3Options: {given} is given but {missing} is not: give both, "
                             "or neither (credentials from the environment)")
        if self.session_token and not self.access_key_id:
            raise ValueError("S3Options: session_token goes with access_key_id and "
                             "secret_access_key")

    def __repr__(self) -> str:
        shown = []
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if value == f.default:
                continue
            if f.name in _SECRET_FIELDS:
                shown.append(f"{f.name}=<hidden>")
            elif f.name == "endpoint":
                shown.append(f"endpoint={_redacted(value)!r}")
            else:
                shown.append(f"{f.name}={value!r}")
        return f"S3Options({', '.join(shown)})"

    def _library_fields(self) -> dict[str, Any]:
        """The fields as rckpt._core.s3_file_system takes them (None as "")."""
        out: dict[str, Any] = {}
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            out[f.name] = "" if value is None else value
        return out

    def _description(self) -> str:
        return (f"endpoint={_redacted(self.endpoint) or '(from the environment)'} "
                f"region={self.region or '(from the environment)'}")


def _redacted(url: Optional[str]) -> Optional[str]:
    """``url`` as a repr or a message may show it: "user:password@" becomes "***@"."""
    return None if url is None else _USERINFO.sub(r"\1***@", url)


def is_url(path: Any) -> bool:
    """Whether ``path`` (a str or bytes) is an s3:// URL: the scheme in lower case, as the
    AWS CLI takes it. InvalidArgumentError for the scheme in another case ("S3://"), which
    is neither a URL nor a local path anyone means. The answer is the library's own
    (IsObjectStoreUrl), so Python and C++ route every path alike."""
    if isinstance(path, str):
        path = os.fsencode(path)
    if not isinstance(path, bytes):
        return False
    return _core.is_object_store_url(path)


def _check_not_collapsed(path: Any, who: str) -> None:
    """An os.PathLike whose text is "s3:/..." was an s3:// URL that pathlib collapsed."""
    if isinstance(path, os.PathLike) and not isinstance(path, str):
        text = os.fsdecode(os.fspath(path))
        if COLLAPSED_S3.match(text):
            raise InvalidArgumentError(
                f"{who}: path {text!r} is an s3:// URL whose '//' pathlib collapsed: give URLs "
                "as str")


_lock = threading.Lock()
_made: "OrderedDict[tuple[int, S3Options], Any]" = OrderedDict()
_KEEP = 16  # file systems of distinct options kept (each holds its connections)
_default: dict[int, Any] = {}  # pid -> the file system of calls without s3= (None: the library's)


def file_system(paths: Sequence[Any], s3: Optional[S3Options], who: str) -> Any:
    """The ``fs`` argument of rckpt._core's calls for ``paths`` and ``s3=``:
    None (the library's default file system, configured from the
    environment) or a file system made with the options."""
    for path in paths:
        _check_not_collapsed(path, who)
    if s3 is None:
        if not any(is_url(p) for p in paths):
            return None
        return _default_file_system(who)
    if not isinstance(s3, S3Options):
        raise TypeError(f"{who}: s3 must be an rckpt.s3.S3Options or None, not "
                        f"{type(s3).__name__}")
    key = (os.getpid(), s3)
    with _lock:
        made = _made.get(key)
        if made is not None:
            _made.move_to_end(key)
            return made
    made = _make(s3, s3.profile, who)
    with _lock:
        made = _made.setdefault(key, made)
        while len(_made) > _KEEP:
            _made.popitem(last=False)
    return made


def _default_file_system(who: str) -> Any:
    """What calls without s3= use for s3:// URLs, decided at the first one in
    this process (the library's own default reads the environment once too):
    the library's, unless its credential chain meets a source it does not
    resolve, which botocore then resolves."""
    pid = os.getpid()
    with _lock:
        if pid in _default:
            return _default[pid]
    made = _make(S3Options(), None, who, default=True)
    with _lock:
        return _default.setdefault(pid, made)


def _make(s3: S3Options, profile: Optional[str], who: str, default: bool = False) -> Any:
    fields = s3._library_fields()
    source: Optional[Callable[[], tuple[str, str, str, int]]] = None
    name = ""
    if not s3.access_key_id:
        if s3.credentials_from == "botocore":
            source, name = _botocore_source(profile, who)
        elif s3.credentials_from == "auto" and _core.s3_supported():
            try:
                _core.s3_credential_source(fields)
            except UnsupportedError as unresolved:
                source, name = _botocore_source(profile, who, unresolved)
            except Error:
                pass  # a configuration error: the first request says what is wrong
    if default and source is None:
        return None
    return _core.s3_file_system(fields, source, name, s3._description())


def _botocore_source(profile: Optional[str], who: str, unresolved: Optional[Error] = None
                     ) -> tuple[Callable[[], tuple[str, str, str, int]], str]:
    """A callable giving botocore's current credentials (renewed by botocore
    when they near expiry) as the library takes them, and how messages name it."""
    try:
        import botocore.exceptions
        import botocore.session
    except ImportError:
        if unresolved is None:
            raise UnsupportedError(f"{who}: S3Options(credentials_from='botocore'): botocore is "
                                   "not installed (pip install botocore)") from None
        raise UnsupportedError(f"{who}: {unresolved}; botocore is not installed in this Python "
                               "(pip install botocore)") from None
    try:
        session = botocore.session.Session(profile=profile or None)
        credentials = session.get_credentials()
    except botocore.exceptions.BotoCoreError as e:
        raise IoError(f"{who}: botocore could not resolve credentials: {e}") from None
    if credentials is None:
        raise IoError(f"{who}: botocore found no credentials (profile "
                      f"{profile or os.environ.get('AWS_PROFILE') or 'default'})")
    name = f"botocore ({getattr(credentials, 'method', None) or 'credentials'})"

    def current() -> tuple[str, str, str, int]:
        frozen = credentials.get_frozen_credentials()
        # Read after get_frozen_credentials, which renews refreshable ones.
        expiry = getattr(credentials, "_expiry_time", None)
        expires = int(expiry.timestamp()) if expiry is not None else 0
        return frozen.access_key, frozen.secret_key, frozen.token or "", expires

    return current, name


def credential_source(s3: Optional[S3Options] = None) -> str:
    """Where calls with ``s3=`` (None: without it) get their credentials, found
    without sending a request: "S3Options::credentials", "environment",
    "profile 'NAME'", "container endpoint", "instance metadata", or
    "botocore (METHOD)" for what botocore resolves and hands over.
    UnsupportedError for a source nobody here resolves (botocore missing);
    InvalidArgumentError for a wrong configuration."""
    options = s3 or S3Options()
    if options.access_key_id:
        return "S3Options::credentials"
    if options.credentials_from == "botocore":
        return _botocore_source(options.profile, "rckpt.s3.credential_source")[1]
    try:
        return str(_core.s3_credential_source(options._library_fields()))
    except UnsupportedError as unresolved:
        if options.credentials_from == "rckpt" or not _core.s3_supported():
            raise
        return _botocore_source(options.profile, "rckpt.s3.credential_source", unresolved)[1]


__all__ = ["S3Options", "credential_source"]
