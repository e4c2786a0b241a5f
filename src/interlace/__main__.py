"""``python -m interlace``: the same command as ``interlace``."""

from __future__ import annotations

import sys

from interlace.cli import main

if __name__ == "__main__":
    sys.exit(main())
