"""Broker: request handlers, managers and services around the store."""
