"""`echo-tools ARGS...` in this process (run through `_no_override.py`, so file modes bind even as root)."""

from __future__ import annotations

import sys

from echo_tools.cli import main

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
