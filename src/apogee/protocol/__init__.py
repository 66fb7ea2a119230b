"""Sans-I/O RocketMQ remoting codec: commands, frames, headers, bodies.

Imports: ``apogee.codes``, ``apogee.errors``, ``apogee.model``, ``apogee._util``
only; never asyncio, sockets or the store. Bytes go in and commands come out;
commands go in and buffers come out. Opaque allocation, timeouts and I/O
belong to ``apogee.remoting``.

Modules: ``command`` (RemotingCommand), ``framing`` (encode, FrameDecoder),
``header_json`` / ``header_binary`` (the two header serializations),
``headers`` (typed custom headers), ``bodies`` (JSON bodies <-> model values),
``tolerant_json`` (fastjson's bare map keys).
"""
