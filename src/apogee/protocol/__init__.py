"""Sans-I/O RocketMQ remoting codec: commands, frames, headers, bodies."""
