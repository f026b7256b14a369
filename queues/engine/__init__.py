"""The admission engine: pure Python, no Django, no kubernetes client.

Its replay path may also be compiled with mypyc (``make install`` does it);
``queues.engine.compiled`` decides, as the package is first imported, whether
the compiled modules are current and may be used. ``ENGINE`` says which runs.
"""

from queues.engine import compiled

ENGINE = compiled.choose()
compiled.install(ENGINE)
