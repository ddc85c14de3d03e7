"""A tool module whose import takes a while (as CrewAI's does): the first call must not block the loop."""

from __future__ import annotations

import threading
import time

IMPORTED = threading.Event()
time.sleep(0.3)
IMPORTED.set()


def ready() -> str:
    return "imported"
