"""heapq's and bisect's functions, held where compiled code reaches them at
once: compiled, ``heapq.heappush(...)`` looks the function up on the module
at every call, and a replay pushes and pops millions of times. Each is
``Final``, kept in a static, and calls the very same function.

Pure Python: no Django, no kubernetes client.
"""

from __future__ import annotations

import bisect
import heapq
from typing import Final

heappush: Final = heapq.heappush
heappop: Final = heapq.heappop
insort: Final = bisect.insort
bisect_left: Final = bisect.bisect_left
