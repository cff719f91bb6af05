"""accelerate's value recipes (reducer/analysis/recipes.py is the contract). Runs in the USER's interpreter.

What ``Accelerator.prepare`` returned -> ``Accelerator().prepare(<what it was given, rebuilt>)``: an
``AcceleratedScheduler`` around a torch scheduler, an ``AcceleratedOptimizer`` around a torch
optimizer. The accelerator is built with no arguments: run by the same launch line (``accelerate
launch --cpu``...), it reads the launcher's settings as the script's did; where the script's own
arguments (mixed precision, gradient accumulation) are what fails, the oracle refuses it and the
slice is kept.
"""
import sys

# merge is given by reducer/analysis/recipes.py's loader
# flake8: noqa: F821

_WRAPPERS = (("accelerate.scheduler", "AcceleratedScheduler", "scheduler"),
             ("accelerate.optimizer", "AcceleratedOptimizer", "optimizer"))


def rebuild(value, source):
    for module, name, inner in _WRAPPERS:
        cls = getattr(sys.modules.get(module), name, None)
        if isinstance(cls, type) and isinstance(value, cls):
            got = source(getattr(value, inner, None))
            if got is None:
                return None
            out = {"imports": ["from accelerate import Accelerator"], "setup": [], "expr": ""}
            merge(out, got)
            out["expr"] = "Accelerator().prepare(%s)" % got["expr"]
            return out
    return None
