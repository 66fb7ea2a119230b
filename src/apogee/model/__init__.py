"""Pure value types and the stored-message binary codec (no I/O)."""
