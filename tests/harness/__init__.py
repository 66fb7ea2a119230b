"""Test-only harness: the C++ client runner, the kernel switch, the crash writer."""
