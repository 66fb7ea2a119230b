"""ACL 1.0 request signatures: what a client adds to a request and a server checks.

Owns: SessionCredentials, the signature ext-field names, and the one rule
for the signed content, used both to sign and to verify.

The rule (RocketMQ's AclClientRPCHook, AclUtils.combineRequestContent and
AclSigner; PlainAccessValidator.parse for the verifying side)::

    content   = concat(value for (key, value) in sorted(extFields)
                       if key not in {"Signature", "_UNIQUE_KEY_QUERY"})
                + body
    Signature = base64(HMAC-SHA1(key = utf8(secretKey), msg = utf8(content)))

Keys are sorted as Java's ``TreeMap<String, ...>`` sorts them (UTF-16 code
units), which is byte order for the ASCII names every header uses. The
signer puts ``AccessKey`` (and ``SecurityToken`` when it has one) into the
ext fields before signing, so they are signed too. The C++ client adds
``OnsChannel`` and signs its header's declared fields; a verifier that signs
every received field except the two above accepts both.
"""

from __future__ import annotations

import base64
import hmac
from dataclasses import dataclass, field

from apogee.errors import ConfigError
from apogee.protocol.command import RemotingCommand

ACCESS_KEY = "AccessKey"
SECRET_KEY = "SecretKey"  # a key of credentials files; never sent
SIGNATURE = "Signature"
SECURITY_TOKEN = "SecurityToken"
ONS_CHANNEL = "OnsChannel"  # added by the C++ client; signed like any other field
#: Left out of the signed content by the verifier (MixAll.UNIQUE_MSG_QUERY_FLAG).
UNIQUE_KEY_QUERY = "_UNIQUE_KEY_QUERY"

_UNSIGNED = frozenset({SIGNATURE, UNIQUE_KEY_QUERY})


@dataclass(frozen=True, slots=True)
class SessionCredentials:
    """An account's keys, as a client signs with them."""

    access_key: str
    secret_key: str = field(repr=False)
    security_token: str | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if not self.access_key or not self.secret_key:
            raise ConfigError("credentials need both an access key and a secret key")


def _java_order(key: str) -> bytes:
    # UTF-16 code units compared as unsigned numbers = String.compareTo.
    return key.encode("utf-16-be", "surrogatepass")


def signature(secret_key: str, ext_fields: dict[str, str], request: RemotingCommand) -> str:
    """Base64 HMAC-SHA1 of ``ext_fields`` (minus the unsigned ones) and the body."""
    if all(map(str.isascii, ext_fields)):
        items = sorted(ext_fields.items())  # code-point order is Java's for ASCII keys
    else:
        items = sorted(ext_fields.items(), key=lambda kv: _java_order(kv[0]))
    content = "".join([v for k, v in items if k not in _UNSIGNED]).encode("utf-8")
    # One call into OpenSSL: far cheaper than the incremental hmac object per request.
    message = b"".join([content, *request.body_buffers()])
    digest = hmac.digest(secret_key.encode("utf-8"), message, "sha1")
    return base64.b64encode(digest).decode("ascii")


def sign(request: RemotingCommand, credentials: SessionCredentials) -> None:
    """Add ``AccessKey`` (and ``SecurityToken``), then ``Signature``, to ``request``."""
    ext = request.ext_fields
    ext[ACCESS_KEY] = credentials.access_key
    if credentials.security_token is not None:
        ext[SECURITY_TOKEN] = credentials.security_token
    ext[SIGNATURE] = signature(credentials.secret_key, ext, request)


def signature_matches(secret_key: str, request: RemotingCommand) -> bool:
    """Whether ``request`` carries the signature ``secret_key`` gives its content."""
    sent = request.ext_fields.get(SIGNATURE)
    if sent is None:
        return False
    expected = signature(secret_key, request.ext_fields, request)
    return hmac.compare_digest(expected.encode("ascii"), sent.encode("utf-8", "replace"))
