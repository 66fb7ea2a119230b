"""Command-line entry point `apogee`."""
