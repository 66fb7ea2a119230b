"""Test harness: cluster fixtures in-process and as subprocesses. Nothing else imports it."""
