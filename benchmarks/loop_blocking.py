"""How long the blocking work agent code runs on an event loop holds the loop up.

Run: ``python benchmarks/loop_blocking.py``. The figures behind ``max_stall``'s default: each
row is one piece of synchronous work that agent runtimes commonly do inside ``async def``
code (so on the loop's thread), timed on this machine, median of 5. While it runs, no task
runs and no timer fires; every timer due by its end fires in the next iteration, which is
what a loop stall of that length explores.

* ``json.loads`` / ``json.dumps`` of a chat-completion reply with tool calls, at 100 KB and
  1 MB (a long answer, a retrieved document, a tool's JSON result);
* a regex tokenizer over 400 KB of text (the shape of a pure-Python BPE pre-tokenizer);
* a full garbage collection (``gc.collect()``) of a heap holding 1 million small objects (an
  agent's memory, caches and message history);
* ``copy.deepcopy`` of a conversation of 2,000 messages (state snapshots before a step).
"""

from __future__ import annotations

import copy
import gc
import json
import re
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any


def _reply(size: int) -> dict[str, Any]:
    chunk = "The quick brown fox jumps over the lazy dog. " * 8
    content = (chunk * (size // len(chunk) + 1))[:size]
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "choices": [
            {
                "index": 0,
                "message": {
                    "role": "assistant",
                    "content": content,
                    "tool_calls": [
                        {
                            "id": f"call_{n}",
                            "type": "function",
                            "function": {
                                "name": "search",
                                "arguments": json.dumps({"q": chunk[:40], "n": n}),
                            },
                        }
                        for n in range(20)
                    ],
                },
                "finish_reason": "tool_calls",
            }
        ],
        "usage": {"prompt_tokens": 1000, "completion_tokens": size // 4},
    }


def _timed(work: Callable[[], object]) -> float:
    times = []
    for _ in range(5):
        started = time.perf_counter()
        work()
        times.append(time.perf_counter() - started)
    return statistics.median(times) * 1000


def main() -> int:
    rows: list[tuple[str, float]] = []
    for size, label in ((100_000, "100 KB"), (1_000_000, "1 MB")):
        reply = _reply(size)
        text = json.dumps(reply)
        rows.append((f"json.loads of a {label} reply", _timed(lambda t=text: json.loads(t))))
        rows.append((f"json.dumps of a {label} reply", _timed(lambda r=reply: json.dumps(r))))
    words = re.compile(r"'s|'t|'re|'ve|'m|'ll|'d| ?\w+| ?\d+| ?[^\s\w\d]+|\s+")
    text = "The quick brown fox jumps over the lazy dog, doesn't it? 42 times. " * 6000
    rows.append(("regex tokenizer over 400 KB", _timed(lambda: words.findall(text))))
    heap = [{"id": n, "text": "message"} for n in range(1_000_000)]
    rows.append(("gc.collect() with 1M objects alive", _timed(gc.collect)))
    del heap
    conversation = [
        {"role": "user" if n % 2 else "assistant", "content": f"message {n} " * 20, "meta": {}}
        for n in range(2000)
    ]
    rows.append(("deepcopy of 2,000 messages", _timed(lambda: copy.deepcopy(conversation))))
    print(f"Python {sys.version.split()[0]}; median of 5, milliseconds the loop is held up")
    for name, ms in rows:
        print(f"{name:<40} {ms:>8.1f} ms")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
