"""Backends that run user code under the engine: the controlled asyncio loop, the pytest plugin.

The public entry points are re-exported from :mod:`interlace`: ``explore`` and ``replay``.
"""
