"""Synchronous file-backed message store: CommitLog, ConsumeQueue, IndexFile."""
