"""Administration: mqadmin-style operations and offline store inspection."""
