"""Sans-I/O RocketMQ remoting codec: commands, frames, headers, bodies.

Bytes go in and commands come out; commands go in and buffers come out.
Opaque allocation, timeouts and I/O belong to ``apogee.remoting``; asyncio,
sockets and the store are never imported here.

Modules: ``command`` (RemotingCommand), ``framing`` (encode, FrameDecoder),
``header_json`` / ``header_binary`` (the two header serializations;
``header_scan`` and ``header_write``, the JSON one's compiled direct route),
``headers`` (typed custom headers), ``bodies`` (JSON bodies <-> model values),
``tolerant_json`` (fastjson's bare map keys).
"""
