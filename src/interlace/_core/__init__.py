"""The schedule engine, in pure stdlib: decisions, strategies, shrinking, tokens and reports.

A run *is* its list of scheduling decisions. Backends (the controlled asyncio loop, controlled
threads) execute user code and consult a :class:`~interlace._core.strategy.Chooser` at their
schedule points; everything else (exploring, shrinking, replaying, reporting) works on the
decisions a run took. Nothing here imports asyncio or threads.
"""
