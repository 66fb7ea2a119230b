"""The access check in RocketMQ's order, the resources each request needs, and file reloads."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from apogee.acl.config import AccountUpdate
from apogee.acl.permission import Perm
from apogee.acl.resources import needed_resources
from apogee.acl.validator import AccessValidator, plain_acl_path
from apogee.codes import RequestCode as C
from apogee.codes import ResponseCode
from apogee.errors import ConfigError
from apogee.model.client import ConsumerData, HeartbeatData, ProducerData
from apogee.model.subscription import SubscriptionData
from apogee.protocol.bodies import encode_heartbeat
from apogee.protocol.command import RemotingCommand
from apogee.protocol.signing import SessionCredentials, sign

ACL = """
globalWhiteRemoteAddresses: [ "10.9.9.*" ]
accounts:
  - accessKey: producer1
    secretKey: producer-secret
    defaultTopicPerm: DENY
    defaultGroupPerm: SUB
    topicPerms: [ "orders=PUB", "audit=PUB|SUB", "secret=DENY" ]
    groupPerms: [ "blocked=DENY" ]
  - accessKey: consumer1
    secretKey: consumer-secret
    whiteRemoteAddress: 10.1.1.1
    defaultTopicPerm: SUB
    defaultGroupPerm: DENY
    groupPerms: [ "readers=SUB" ]
  - accessKey: operator1
    secretKey: operator-secret
    admin: true
  - accessKey: limitedadmin
    secretKey: limited-secret
    admin: true
    topicPerms: [ "orders=SUB" ]
"""

PRODUCER = SessionCredentials("producer1", "producer-secret")
CONSUMER = SessionCredentials("consumer1", "consumer-secret")
OPERATOR = SessionCredentials("operator1", "operator-secret")
PEER = "127.0.0.1:50000"


@pytest.fixture
def acl_file(tmp_path: Path) -> Path:
    path = tmp_path / "conf" / "plain_acl.yml"
    path.parent.mkdir()
    path.write_text(ACL)
    path.chmod(0o640)
    return path


@pytest.fixture
def validator(acl_file: Path) -> AccessValidator:
    return AccessValidator(acl_file)


def send(
    topic: str, group: str = "pg", *, v2: bool = True, code: int = C.SEND_MESSAGE_V2
) -> RemotingCommand:
    ext = (
        {"a": group, "b": topic, "c": "TBW102", "d": "4"}
        if v2
        else {"producerGroup": group, "topic": topic, "defaultTopic": "TBW102"}
    )
    return RemotingCommand.request(code if v2 else C.SEND_MESSAGE, ext, b"body")


def send_with_access_key(access_key: str) -> RemotingCommand:
    request = send("orders")
    request.ext_fields["AccessKey"] = access_key
    return request


def signed(request: RemotingCommand, credentials: SessionCredentials) -> RemotingCommand:
    sign(request, credentials)
    return request


def test_resources_follow_rocketmq_request_mapping() -> None:
    assert needed_resources(send("orders")) == {"orders": Perm.PUB}
    assert needed_resources(send("orders", v2=False)) == {"orders": Perm.PUB}
    assert needed_resources(send("%RETRY%cg", group="cg")) == {"%RETRY%cg": Perm.SUB}
    assert needed_resources(send("orders", code=C.SEND_BATCH_MESSAGE)) == {"orders": Perm.PUB}
    pull = RemotingCommand.request(C.PULL_MESSAGE, {"consumerGroup": "cg", "topic": "t"})
    assert needed_resources(pull) == {"t": Perm.SUB, "%RETRY%cg": Perm.SUB}
    back = RemotingCommand.request(C.CONSUMER_SEND_MSG_BACK, {"group": "cg", "offset": "1"})
    assert needed_resources(back) == {"%RETRY%cg": Perm.SUB}
    offset = RemotingCommand.request(
        C.UPDATE_CONSUMER_OFFSET, {"consumerGroup": "cg", "topic": "t"}
    )
    assert needed_resources(offset) == {"t": Perm.SUB, "%RETRY%cg": Perm.SUB}
    heartbeat = HeartbeatData(
        "c@1",
        producers=(ProducerData("pg"),),
        consumers=(
            ConsumerData("cg", subscriptions=(SubscriptionData("t1"), SubscriptionData("t2"))),
        ),
    )
    beat = RemotingCommand.request(C.HEART_BEAT, body=encode_heartbeat(heartbeat))
    assert needed_resources(beat) == {"%RETRY%cg": Perm.SUB, "t1": Perm.SUB, "t2": Perm.SUB}
    assert needed_resources(RemotingCommand.request(C.GET_ROUTEINFO_BY_TOPIC, {"topic": "t"})) == {}


def test_signed_requests_within_the_account_perms_pass(validator: AccessValidator) -> None:
    assert validator.check(signed(send("orders"), PRODUCER), PEER) is None
    assert validator.check(signed(send("audit"), PRODUCER), PEER) is None
    pull = RemotingCommand.request(C.PULL_MESSAGE, {"consumerGroup": "readers", "topic": "any"})
    assert validator.check(signed(pull, CONSUMER), PEER) is None


@pytest.mark.parametrize(
    ("make", "remark"),
    [
        (lambda: send("orders"), "is not signed: no AccessKey"),
        (lambda: send_with_access_key(""), "is not signed: no AccessKey"),
        (
            lambda: signed(send("orders"), SessionCredentials("stranger1", "whatever1")),
            "no account",
        ),
        (
            lambda: signed(send("orders"), SessionCredentials("producer1", "wrong-secret")),
            "signature",
        ),
        (
            lambda: signed(send("payments"), PRODUCER),
            "may not PUB topic 'payments' (its permission there: DENY)",
        ),
        (lambda: signed(send("secret"), PRODUCER), "may not PUB topic 'secret'"),
        (
            lambda: signed(send("%RETRY%blocked", "blocked"), PRODUCER),
            "may not SUB group 'blocked'",
        ),
        (
            lambda: signed(
                RemotingCommand.request(C.DELETE_TOPIC_IN_BROKER, {"topic": "orders"}), PRODUCER
            ),
            "request code 215 needs an admin account; AccessKey producer1 is not one",
        ),
        (
            lambda: signed(
                RemotingCommand.request(C.PULL_MESSAGE, {"consumerGroup": "other", "topic": "t"}),
                CONSUMER,
            ),
            "may not SUB group 'other'",
        ),
        (
            lambda: signed(RemotingCommand.request(C.HEART_BEAT, body=b"{not json"), PRODUCER),
            "cannot tell what request code 34 touches",
        ),
    ],
)
def test_refusals_are_no_permission_with_the_rule_in_the_remark(
    validator: AccessValidator, make: object, remark: str
) -> None:
    request = make()  # type: ignore[operator]
    refusal = validator.check(request, PEER)
    assert refusal is not None
    assert refusal.code == ResponseCode.NO_PERMISSION
    assert remark in (refusal.remark or "")


def test_a_tampered_signed_request_is_refused(validator: AccessValidator) -> None:
    request = signed(send("orders"), PRODUCER)
    request.ext_fields["b"] = "audit"  # replayed against another topic
    assert (
        validator.refusal(request, PEER) == "[ACL] check signature failed for AccessKey producer1"
    )


def test_admins_pass_admin_codes_and_a_listed_resource_still_binds_them(
    validator: AccessValidator,
) -> None:
    delete = RemotingCommand.request(C.DELETE_TOPIC_IN_BROKER, {"topic": "orders"})
    assert validator.check(signed(delete, OPERATOR), PEER) is None
    assert validator.check(signed(send("anything"), OPERATOR), PEER) is None  # no perms listed
    limited = SessionCredentials("limitedadmin", "limited-secret")
    assert "may not PUB topic 'orders'" in (
        validator.refusal(signed(send("orders"), limited), PEER) or ""
    )


def test_white_addresses_skip_the_checks(validator: AccessValidator) -> None:
    # global white list: even unsigned admin requests pass (RocketMQ's order)
    delete = RemotingCommand.request(C.DELETE_TOPIC_IN_BROKER, {"topic": "orders"})
    assert validator.check(delete, "10.9.9.7:4000") is None
    assert validator.check(delete, "::ffff:10.9.9.7:4000") is None
    # an account's own white address: known AccessKey, no valid signature needed
    request = send("orders")
    request.ext_fields["AccessKey"] = "consumer1"
    assert validator.check(request, "10.1.1.1:4000") is None
    assert validator.check(request, "10.1.1.2:4000") is not None


def test_trace_topic_sends_pass(validator: AccessValidator) -> None:
    assert validator.check(signed(send("RMQ_SYS_TRACE_TOPIC"), PRODUCER), PEER) is None


def test_the_file_is_reloaded_only_when_it_changed(
    acl_file: Path, validator: AccessValidator
) -> None:
    assert validator.read_if_changed() is None
    acl_file.write_text(ACL.replace("orders=PUB", "orders=DENY"))
    table = validator.read_if_changed()
    assert table is not None
    validator.install(table)
    assert validator.check(signed(send("orders"), PRODUCER), PEER) is not None
    os.utime(acl_file)  # touched, same content
    assert validator.read_if_changed() is None


def test_a_broken_file_keeps_the_accounts_in_force(
    acl_file: Path, validator: AccessValidator, caplog: pytest.LogCaptureFixture
) -> None:
    acl_file.write_text("accounts: [ {accessKey: x} ]")
    assert validator.read_if_changed() is None
    assert "not valid, keeping the accounts loaded" in caplog.text
    assert validator.check(signed(send("orders"), PRODUCER), PEER) is None
    acl_file.unlink()
    assert validator.read_if_changed() is None
    assert validator.check(signed(send("orders"), PRODUCER), PEER) is None


def test_edits_rewrite_the_file_with_its_mode_and_a_new_version(
    acl_file: Path, validator: AccessValidator
) -> None:
    table = validator.update_account(AccountUpdate("newuser1", "newsecret1", topic_perms=["t=PUB"]))
    validator.install(table)
    assert table.version.counter == 1
    assert acl_file.stat().st_mode & 0o777 == 0o640
    new = SessionCredentials("newuser1", "newsecret1")
    assert validator.check(signed(send("t"), new), PEER) is None
    assert validator.read_if_changed() is None  # the file on disk is what is in force

    table2 = validator.delete_account("newuser1")
    assert table2 is not None and "newuser1" not in table2.accounts
    assert validator.delete_account("newuser1") is None
    table3 = validator.update_global_white(["127.0.0.*"])
    validator.install(table3)
    assert table3.version.counter == 3
    assert validator.check(send("x"), PEER) is None  # unsigned, but white-listed now
    with pytest.raises(ConfigError):
        validator.update_global_white(["127.0.0.999"])
    assert "127.0.0.*" in acl_file.read_text()


def test_missing_file_and_relative_paths(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="does not exist"):
        AccessValidator(tmp_path / "none.yml")
    assert plain_acl_path("", home=str(tmp_path)) == tmp_path / "conf" / "plain_acl.yml"
    assert plain_acl_path("/etc/acl.yml", home=None) == Path("/etc/acl.yml")
    with pytest.raises(ConfigError, match="ROCKETMQ_HOME"):
        plain_acl_path("conf/plain_acl.yml", home="")
