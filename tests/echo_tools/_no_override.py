"""Run a helper script with file permissions enforced, even as root (used by the read-only storage test).

Usage: _no_override.py SCRIPT [ARGS...]. As root, drops CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH and
CAP_FOWNER from the bounding set, then execs SCRIPT: at exec, root's capabilities are cut to the bounding
set, so the kernel applies mode bits to it like to any user. As any other user it just execs SCRIPT.
"""

from __future__ import annotations

import ctypes
import os
import sys
from pathlib import Path

PR_CAPBSET_DROP = 24
CAPS = {"CAP_DAC_OVERRIDE": 1, "CAP_DAC_READ_SEARCH": 2, "CAP_FOWNER": 3}


def main() -> None:
    script, *args = sys.argv[1:]
    if os.geteuid() == 0:
        libc = ctypes.CDLL(None, use_errno=True)
        for name, cap in CAPS.items():
            if libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0:
                err = ctypes.get_errno()
                raise SystemExit(f"cannot drop {name}: {os.strerror(err)}")
    target = str(Path(__file__).resolve().parent / script)
    os.execv(sys.executable, [sys.executable, target, *args])


if __name__ == "__main__":
    main()
