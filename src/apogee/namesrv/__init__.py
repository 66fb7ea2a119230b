"""NameServer: route tables, KV config and their request handlers."""
