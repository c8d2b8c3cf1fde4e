"""A benchmark for the placement service.

It starts a server on a fresh database, seeds it over HTTP and runs timed
scenarios with keep-alive clients (``python -m placement.bench --help``).
"""
