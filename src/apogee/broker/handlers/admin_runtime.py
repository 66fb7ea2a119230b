"""Broker-wide views: GET_BROKER_RUNTIME_INFO, GET_BROKER_CONFIG,
GET_ALL_CONSUMER_OFFSET, GET_ALL_DELAY_OFFSET.

Owns: their answers. Imports: ``apogee.broker``, ``apogee.protocol``,
``apogee.remoting``, ``apogee.model``.

* Runtime info: a KVTable body (``{"table": {...}}``) built by
  ``runtime_stats.runtime_table`` when asked.
* Broker config: the settings as properties text (``key=value`` lines) and
  a ``version`` header holding the config's DataVersion JSON.
* The two offset dumps answer with the very content of
  ``config/consumerOffset.json`` and ``config/delayOffset.json`` (a slave
  copies them from its master); reading them does not count as persisting.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from apogee.broker.offsets import ConsumerOffsetManager
from apogee.broker.schedule_service import DelayOffsetTable
from apogee.model.route import DataVersion
from apogee.protocol.bodies import encode_data_version, encode_kv_table
from apogee.protocol.command import RemotingCommand
from apogee.remoting.dispatch import RequestContext


class RuntimeHandlers:
    def __init__(
        self,
        runtime: Callable[[], dict[str, str]],
        config: Mapping[str, str],
        config_version: DataVersion,
        offsets: ConsumerOffsetManager,
        delay_offsets: DelayOffsetTable,
    ) -> None:
        self._runtime = runtime
        self._config_text = "".join(f"{k}={v}\n" for k, v in config.items()).encode()
        self._config_version = encode_data_version(config_version).decode()
        self._offsets = offsets
        self._delay_offsets = delay_offsets

    def runtime_info(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        return request.make_response(body=encode_kv_table(self._runtime()))

    def broker_config(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        return request.make_response(
            ext_fields={"version": self._config_version}, body=self._config_text
        )

    def all_consumer_offsets(
        self, ctx: RequestContext, request: RemotingCommand
    ) -> RemotingCommand:
        return request.make_response(body=self._offsets.encode(mark_clean=False))

    def all_delay_offsets(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        return request.make_response(body=self._delay_offsets.encode(mark_clean=False))
