"""Static concurrency rules on libcst, run as ``interlace lint``."""
