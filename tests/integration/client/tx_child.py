"""A transactional producer that dies in its local transaction: run as a child process.

``python tx_child.py NAMESRV GROUP TOPIC BODY [KEYS]`` sends BODY (with KEYS, by
default ``order-1``) as a half message, prints
``half <msg id>`` once the broker stored it and then waits inside the local transaction
until it is killed, so the transaction is never ended by this process. Its checker
answers UNKNOW: this process never learns how the transaction ended.
"""

from __future__ import annotations

import asyncio
import sys

from apogee.client import LocalTransactionState, Message, MessageExt, TransactionProducer


def undecided(_half: MessageExt) -> LocalTransactionState:
    return LocalTransactionState.UNKNOW


async def main(namesrv: str, group: str, topic: str, body: str, keys: str = "order-1") -> None:
    async def stuck(msg: Message, _arg: object) -> LocalTransactionState:
        print("half", msg.uniq_key, flush=True)
        await asyncio.Event().wait()  # the process is killed here
        return LocalTransactionState.COMMIT_MESSAGE

    async with TransactionProducer(group, namesrv=namesrv, checker=undecided) as producer:
        await producer.send_in_transaction(Message(topic, body.encode(), keys=keys), stuck)


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:6]))
