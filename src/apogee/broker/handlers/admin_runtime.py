"""Broker-wide views and settings: GET_BROKER_RUNTIME_INFO, GET_BROKER_CONFIG,
UPDATE_BROKER_CONFIG, GET_ALL_CONSUMER_OFFSET, GET_ALL_DELAY_OFFSET.

Owns: their answers.

* Runtime info: a KVTable body (``{"table": {...}}``) built by
  ``runtime_stats.runtime_table`` when asked.
* Broker config: the settings as properties text (``key=value`` lines) and
  a ``version`` header holding the config's DataVersion JSON.
* Broker config updates: only keys that are safe to change while running
  (today ``brokerPermission``); any other key is refused by name and nothing
  changes. A new permission bumps the topic data version and re-registers
  at once, so the name servers' routes follow before the answer.
* The two offset dumps answer with the very content of
  ``config/consumerOffset.json`` and ``config/delayOffset.json`` (a slave
  copies them from its master); reading them does not count as persisting.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping

from apogee._util.props import parse_properties
from apogee.broker.offsets import ConsumerOffsetManager
from apogee.broker.permission import BrokerPermission
from apogee.broker.schedule_service import DelayOffsetTable
from apogee.broker.topics import TopicConfigManager
from apogee.codes import ResponseCode
from apogee.errors import ConfigError
from apogee.model.route import DataVersion
from apogee.protocol.bodies import encode_data_version, encode_kv_table
from apogee.protocol.command import RemotingCommand
from apogee.remoting.dispatch import RequestContext


class ConfigUpdater:
    """Applies UPDATE_BROKER_CONFIG to the settings that may change at run time."""

    MUTABLE_KEYS = frozenset({"brokerPermission"})

    def __init__(
        self,
        permission: BrokerPermission,
        topics: TopicConfigManager,
        register: Callable[[], Awaitable[object]],
    ) -> None:
        self.permission = permission
        self._topics = topics
        self._register = register

    def current(self) -> dict[str, str]:
        return {"brokerPermission": str(self.permission.value)}

    async def apply(self, props: Mapping[str, str]) -> None:
        """Validate every key first, then apply; raises ConfigError naming a bad key."""
        unknown = sorted(set(props) - self.MUTABLE_KEYS)
        if unknown:
            raise ConfigError(f"config key {unknown[0]!r} cannot be changed while running")
        if "brokerPermission" in props:
            raw = props["brokerPermission"]
            try:
                value = int(raw)
            except ValueError:
                raise ConfigError(f"brokerPermission: {raw!r} is not an integer") from None
            self.permission.set(value)
            self._topics.touch()
            await self._register()


class RuntimeHandlers:
    def __init__(
        self,
        runtime: Callable[[], dict[str, str]],
        config: Mapping[str, str],
        config_version: DataVersion,
        offsets: ConsumerOffsetManager,
        delay_offsets: DelayOffsetTable,
        *,
        updater: ConfigUpdater,
    ) -> None:
        self._runtime = runtime
        self._config = dict(config)
        self._config_version = config_version
        self._offsets = offsets
        self._delay_offsets = delay_offsets
        self._updater = updater

    def runtime_info(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        return request.make_response(body=encode_kv_table(self._runtime()))

    def broker_config(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        settings = {**self._config, **self._updater.current()}
        text = "".join(f"{k}={v}\n" for k, v in settings.items()).encode()
        version = encode_data_version(self._config_version).decode()
        return request.make_response(ext_fields={"version": version}, body=text)

    async def update_broker_config(
        self, ctx: RequestContext, request: RemotingCommand
    ) -> RemotingCommand:
        props = parse_properties(request.body_bytes().decode("utf-8", "replace"))
        if not props:
            return request.make_response(ResponseCode.SYSTEM_ERROR, "no config key given")
        try:
            await self._updater.apply(props)
        except ConfigError as exc:
            return request.make_response(ResponseCode.SYSTEM_ERROR, str(exc))
        self._config_version = self._config_version.next(self._config_version.timestamp + 1)
        return request.make_response()

    def all_consumer_offsets(
        self, ctx: RequestContext, request: RemotingCommand
    ) -> RemotingCommand:
        return request.make_response(body=self._offsets.encode(mark_clean=False))

    def all_delay_offsets(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        return request.make_response(body=self._delay_offsets.encode(mark_clean=False))
