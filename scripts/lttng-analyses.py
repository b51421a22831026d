#!/usr/bin/env python3
"""Runs one lttng-analyses 0.6.1 command (PyPI `lttnganalyses`) on this Python.

lttng-analyses predates Python 3.10, which removed the aliases of the abstract base classes
from `collections` (`collections.Mapping`, ...); this puts them back from `collections.abc`
before importing it. Usage: `lttng-analyses.py COMMAND [ARGS...]`, COMMAND one of the
console scripts the package declares (`lttng-cputop`, `lttng-syscallstats`, ...), ARGS
passed on as that command gets them. The tests (system-tests/tests/lttng_analyses.rs) run
it with the interpreter `scripts/test.sh` installs the package for.
"""
import collections
import collections.abc
import importlib
import sys

for _name in ("Mapping", "MutableMapping", "Sequence", "MutableSequence", "Set", "MutableSet", "Iterable", "Callable"):
    if not hasattr(collections, _name):
        setattr(collections, _name, getattr(collections.abc, _name))

# Console script -> (module, function), from the package's entry points.
COMMANDS = {
    "lttng-cputop": ("lttnganalyses.cli.cputop", "run"),
    "lttng-syscallstats": ("lttnganalyses.cli.syscallstats", "run"),
    "lttng-schedlog": ("lttnganalyses.cli.sched", "runlog"),
    "lttng-schedtop": ("lttnganalyses.cli.sched", "runtop"),
    "lttng-irqstats": ("lttnganalyses.cli.irq", "runstats"),
    "lttng-irqlog": ("lttnganalyses.cli.irq", "runlog"),
    "lttng-iolatencytop": ("lttnganalyses.cli.io", "runlatencytop"),
}

if len(sys.argv) < 2 or sys.argv[1] not in COMMANDS:
    sys.exit("usage: lttng-analyses.py {%s} [ARGS...]" % ",".join(sorted(COMMANDS)))
module, function = COMMANDS[sys.argv[1]]
sys.argv = sys.argv[1:]
sys.exit(getattr(importlib.import_module(module), function)())
