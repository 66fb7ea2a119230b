"""Every Python example of docs/python-client.md and of the README runs, as written,
against real processes.

The examples name the name server 127.0.0.1:9876 (``apogee standalone``); here that address
is replaced by the test cluster's before each example runs in a namespace of its own. The
broker evaluates SQL92 subscriptions (``enablePropertyFilter=true``), as the page says.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from apogee.testing.cluster import BrokerProcess, NamesrvProcess

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[3]
DOC = ROOT / "docs" / "python-client.md"
README = ROOT / "README.md"
EXAMPLES = [
    example
    for page in (DOC, README)
    for example in re.findall(r"```python\n(.*?)```", page.read_text(), flags=re.DOTALL)
    if page is DOC or "apogee.client" in example  # the README's Spark snippet is Spark's
]


@pytest.fixture(scope="module")
def namesrv(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    root = tmp_path_factory.mktemp("docs")
    with NamesrvProcess(root / "ns") as ns:
        broker = BrokerProcess(
            root / "store", ns.address, properties={"enablePropertyFilter": "true"}
        )
        broker.start()
        try:
            yield ns.address
        finally:
            assert broker.stop() == 0, broker.log_text()


def test_the_page_has_examples() -> None:
    assert len(EXAMPLES) >= 6


@pytest.mark.parametrize("source", EXAMPLES, ids=[f"example-{i}" for i in range(len(EXAMPLES))])
def test_an_example_runs(source: str, namesrv: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert "127.0.0.1:9876" in source
    code = compile(source.replace("127.0.0.1:9876", namesrv), str(DOC), "exec")
    exec(code, {"__name__": "__main__"})  # the point: run the documented code
    assert capsys.readouterr().out  # every example prints what it got
