"""Remoting round-trip throughput: N connections, each keeping K requests in flight.

The server runs in a child process (so client and server each get a core) with
a trivial inline echo handler; the parent drives the clients for a fixed time
and prints requests per second. Not a test: nothing here asserts a speed.

    .venv/bin/python benchmarks/remoting_echo.py --connections 4 --inflight 32 --seconds 5
"""

from __future__ import annotations

import argparse
import asyncio
import subprocess
import sys
import time

from apogee.protocol.command import RemotingCommand
from apogee.remoting import (
    ClientConfig,
    HandlerTable,
    RemotingClient,
    RemotingServer,
    RequestContext,
    ServerConfig,
    run,
)

ECHO_CODE = 310  # SEND_MESSAGE_V2, so headers look like a producer's


def _echo(ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
    return request.make_response(ext_fields={"msgId": "0A", "queueId": "0", "queueOffset": "1"})


async def _echo_async(ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
    return _echo(ctx, request)


async def serve(async_handler: bool) -> None:
    table = HandlerTable()
    table.register(ECHO_CODE, _echo_async if async_handler else _echo)
    server = RemotingServer(table, ServerConfig(host="127.0.0.1", port=0))
    await server.start()
    print(server.port, flush=True)
    # Stop when the parent closes our stdin.
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)
    await server.stop(grace_s=1)


def _request(body: bytes) -> RemotingCommand:
    ext = {
        "a": "bench-producer",
        "b": "BenchTopic",
        "c": "TBW102",
        "d": "4",
        "e": "0",
        "f": "0",
        "g": str(int(time.time() * 1000)),
        "h": "0",
        "i": "UNIQ_KEY\x01AC110001000018B4AAC2\x02WAIT\x01true\x02",
        "j": "0",
        "k": "false",
        "m": "false",
    }
    return RemotingCommand.request(ECHO_CODE, ext, body)


async def drive(port: int, connections: int, inflight: int, seconds: float, body: bytes) -> None:
    clients = [RemotingClient(ClientConfig()) for _ in range(connections)]
    addr = f"127.0.0.1:{port}"
    count = 0
    loop = asyncio.get_running_loop()
    deadline = loop.time() + seconds

    async def worker(client: RemotingClient) -> None:
        nonlocal count
        while loop.time() < deadline:
            await client.invoke(addr, _request(body), timeout_s=10)
            count += 1

    for client in clients:
        await client.connection(addr)
    start = loop.time()
    await asyncio.gather(*(worker(c) for c in clients for _ in range(inflight)))
    elapsed = loop.time() - start
    for client in clients:
        await client.close()
    print(
        f"connections={connections} inflight={inflight} body={len(body)}B "
        f"requests={count} seconds={elapsed:.2f} rate={count / elapsed:,.0f} req/s"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--connections", type=int, default=4)
    parser.add_argument("--inflight", type=int, default=32)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--body-bytes", type=int, default=128)
    parser.add_argument(
        "--async-handler", action="store_true", help="a coroutine handler (one task each)"
    )
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        run(serve(args.async_handler))
        return
    child = subprocess.Popen(
        [sys.executable, __file__, "--serve", *(["--async-handler"] if args.async_handler else [])],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout is not None
        port = int(child.stdout.readline())
        run(drive(port, args.connections, args.inflight, args.seconds, b"x" * args.body_bytes))
    finally:
        assert child.stdin is not None
        child.stdin.close()
        child.wait(timeout=10)


if __name__ == "__main__":
    main()
