from __future__ import annotations

from pathlib import Path

import orjson

from apogee.namesrv.kvconfig import KVConfig


def test_put_get_delete_persist(tmp_path: Path) -> None:
    path = tmp_path / "namesrv" / "kvConfig.json"
    kv = KVConfig(path)
    kv.put("ORDER_TOPIC_CONFIG", "T1", "broker-a:4")
    kv.put("ORDER_TOPIC_CONFIG", "T2", "broker-a:2")
    kv.put("other", "k", "v")
    kv.delete("other", "k")
    kv.delete("missing", "k")
    on_disk = orjson.loads(path.read_bytes())
    assert on_disk == {
        "configTable": {"ORDER_TOPIC_CONFIG": {"T1": "broker-a:4", "T2": "broker-a:2"}}
    }
    again = KVConfig(path)
    assert again.get("ORDER_TOPIC_CONFIG", "T1") == "broker-a:4"
    assert again.get("other", "k") is None
    assert again.namespace("ORDER_TOPIC_CONFIG") == {"T1": "broker-a:4", "T2": "broker-a:2"}
    assert again.namespace("other") is None


def test_memory_only_table_writes_nothing(tmp_path: Path) -> None:
    kv = KVConfig(None)
    kv.put("ns", "k", "v")
    assert kv.get("ns", "k") == "v"
    assert list(tmp_path.iterdir()) == []
