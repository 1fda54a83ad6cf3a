"""The end of a command: the process exits when its work is done, not seconds later.

After a command has written its output, CPython's own shutdown clears every imported module and runs
full garbage collections over every object still alive. For a command that loaded the model stack
that is the whole heap: ``p2l leaderboard`` on a trained model ends with 4,617 modules (torch,
transformers, scikit-learn, scipy, sympy, plotly) and 540,000 tracked objects, and the shutdown spent
2.1 s of CPU, about 70% of it in the collector (``gc_collect_main``; perf), after the last line was
written. Nothing waited on a thread: the main thread was busy walking its heap. On a busy machine a
process at a low priority gets a small share of a core, and those 2 s became 370 s of wall time
(6 CPU-bound processes on 2 cores, the command under ``nice -n 10``; issue 38 saw 175 s).

:func:`skip_exit_collections` has :func:`gc.freeze` run by an ``atexit`` handler: it moves every object into
the collector's permanent generation, which the shutdown collections do not examine; the same command
then spends 0.3 s of CPU at shutdown. Everything else about the exit stays: the other ``atexit``
handlers and :func:`weakref.finalize` callbacks run, modules are cleared and objects freed by
reference count, files are flushed. What no longer happens is collecting reference cycles that are
still alive at exit, so a resource that must be released at exit is closed explicitly or by a
finalizer, never left to the collector (the embedding cache's SQLite connection registers one). The
freeze waits for the exit (an ``atexit`` handler, not a call when the command returns) so that a
program calling the CLI in-process, as the tests do, keeps collecting its garbage until it ends.
"""

from __future__ import annotations

import atexit
import gc


def skip_exit_collections() -> None:
    """Freeze the collector's view of the heap when the interpreter exits (registered once, however
    often this is called): the shutdown then skips examining the objects the run leaves."""
    atexit.unregister(gc.freeze)
    atexit.register(gc.freeze)
