"""ACL 1.0 signatures against values computed from RocketMQ's rule.

The expected signatures were computed outside Python (``openssl dgst -sha1
-hmac <secret> -binary | base64``) over the content RocketMQ's
AclUtils.combineRequestContent builds: the ext-field values in TreeMap key
order, then the body; AclSigner turns the HMAC-SHA1 into Base64.
"""

from __future__ import annotations

import pytest

from apogee.codes import RequestCode
from apogee.errors import ConfigError
from apogee.protocol.command import RemotingCommand
from apogee.protocol.signing import (
    ACCESS_KEY,
    SECURITY_TOKEN,
    SIGNATURE,
    UNIQUE_KEY_QUERY,
    SessionCredentials,
    sign,
    signature,
    signature_matches,
)


def pull_request() -> RemotingCommand:
    # the header of RocketMQ's AclClientRPCHookTest
    ext = {
        "consumerGroup": "group",
        "topic": "topic",
        "queueId": "1",
        "queueOffset": "2",
        "maxMsgNums": "32",
        "sysFlag": "0",
        "commitOffset": "0",
        "suspendTimeoutMillis": "15000",
        "subVersion": "0",
    }
    return RemotingCommand.request(RequestCode.PULL_MESSAGE, ext)


def test_bare_content_matches_aclsigner() -> None:
    request = RemotingCommand.request(RequestCode.HEART_BEAT, body=b"RocketMQ")
    assert signature("12345678", {}, request) == "IUc8rrO/0gDch8CjObLQsW2rsiA="


def test_signing_a_pull_header_adds_access_key_and_the_java_signature() -> None:
    request = pull_request()
    sign(request, SessionCredentials("RocketMQ", "12345678"))
    assert request.ext_fields[ACCESS_KEY] == "RocketMQ"
    assert SECURITY_TOKEN not in request.ext_fields
    # "RocketMQ" "0" "group" "32" "1" "2" "0" "15000" "0" "topic": upper case sorts first
    assert request.ext_fields[SIGNATURE] == "LRXWMEK9Lcy+QAlAwS8qMOkpqyc="


def test_token_channel_unicode_and_body_are_signed() -> None:
    ext = {"a": "PG", "b": "订单", "OnsChannel": "ALIYUN"}
    request = RemotingCommand.request(RequestCode.SEND_MESSAGE_V2, ext, b"hello body")
    sign(request, SessionCredentials("rocketmq2", "secret-二", "token-1"))
    assert request.ext_fields[SECURITY_TOKEN] == "token-1"
    assert request.ext_fields[SIGNATURE] == "Fo1OweAZGVUSsR5nHuTHQoeD6SY="


def test_a_gathered_body_signs_like_the_joined_one() -> None:
    joined = RemotingCommand.request(10, {"k": "v"}, b"abcdef")
    parts = RemotingCommand.request(10, {"k": "v"}, [b"ab", memoryview(b"cd"), bytearray(b"ef")])
    assert signature("secret-x", {"k": "v"}, joined) == signature("secret-x", {"k": "v"}, parts)


def test_verification_ignores_signature_and_unique_key_query_fields() -> None:
    request = pull_request()
    sign(request, SessionCredentials("RocketMQ", "12345678"))
    request.ext_fields[UNIQUE_KEY_QUERY] = "true"  # the broker leaves it out
    assert signature_matches("12345678", request)


@pytest.mark.parametrize(
    ("change", "secret"),
    [
        (lambda r: None, "wrong-secret"),
        (lambda r: r.ext_fields.__setitem__("topic", "other"), "12345678"),
        (lambda r: r.ext_fields.__setitem__("extra", "x"), "12345678"),
        (lambda r: setattr(r, "body", b"tampered"), "12345678"),
        (lambda r: r.ext_fields.pop(SIGNATURE), "12345678"),
    ],
    ids=["wrong-secret", "changed-field", "added-field", "changed-body", "no-signature"],
)
def test_any_change_breaks_the_signature(change: object, secret: str) -> None:
    request = pull_request()
    sign(request, SessionCredentials("RocketMQ", "12345678"))
    change(request)  # type: ignore[operator]
    assert not signature_matches(secret, request)


def test_credentials_need_both_keys() -> None:
    with pytest.raises(ConfigError, match="access key and a secret key"):
        SessionCredentials("RocketMQ", "")
    assert "12345678" not in repr(SessionCredentials("RocketMQ", "12345678"))


def test_keys_sort_by_utf16_code_units_as_java_strings_do() -> None:
    # U+10000 is the surrogate pair D800 DC00 in UTF-16, so Java puts it before U+FFFF,
    # where code-point order would not: the content is "b" + "a".
    ext = {"\uffff": "a", "\U00010000": "b"}
    request = RemotingCommand.request(10, ext)
    assert signature("k-secret1", ext, request) == "eM3E3jAPgtr15Lf37g+imGTyqps="
