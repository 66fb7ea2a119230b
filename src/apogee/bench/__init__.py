"""Benchmarks behind `apogee bench`."""
