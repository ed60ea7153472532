"""Kafka wire format: primitives, headers, message schemas, record batches.

This package knows nothing about groups, sockets or files.
"""
