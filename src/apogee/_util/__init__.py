"""Business-free helpers shared by every layer (stdlib only)."""
