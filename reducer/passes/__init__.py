"""The reduction passes, coarse to fine. Each is a small named function ``fn(gate)`` that proposes
candidates through the gate (see ``reducer.search``); one module per family of passes.

Every pass's docstring ends with what it removes (``Removes:``) and what it must never change
(``Never changes:``). What no pass changes, whichever it is: it only proposes, and never runs a
candidate itself (reducer/passes/base.py); a candidate is a whole program, and the gate alone
decides whether it becomes the best (reducer/gate.py)."""
from __future__ import annotations

from reducer.passes import (arguments, boundary, classes, cleanup, constants, direct, heavy, inline, literals,
                            parameters, recorded, scaffolding, single, slicing, statements, unwrap)
from reducer.passes.base import Pass
from reducer.passes.first_cut import first_cut

# Once, before the phases: the boundary call (the imports plus the one call that entered the
# library where the failure was raised, with its recorded arguments: often the whole repro),
# a child process's work brought into the parent (every later run is then in-process), then the
# trace-guided first cut (the original minus what never ran).
PRELUDE: list[Pass] = [Pass("boundary_call", boundary.boundary_call), Pass("bring_home", direct.bring_home),
                       Pass("first_cut", first_cut)]

# Two phases, coarse to fine. STRUCTURE passes remove statements (the measure a maintainer reads
# and the one that frees whole helpers); they are repeated to a fixpoint before any FINE pass
# spends runs on a literal or a container entry, and every FINE change sends the search back to
# STRUCTURE (a smaller value can make a branch or a helper removable).
STRUCTURE: list[Pass] = [
    Pass("cleanup_bulk", cleanup.bulk),
    Pass("recorded_values", constants.recorded_values),
    Pass("recorded_bindings", recorded.recorded_bindings),
    Pass("resolve_dispatch", constants.resolve_dispatch),
    Pass("call_directly", direct.call_directly),
    # issue #31's scaffolding: builtin map/filter/sorted/reduce over one element called directly,
    # then annotations (freeing the classes and imports only they named)
    Pass("direct_higher_order", scaffolding.direct_higher_order),
    Pass("drop_annotations", scaffolding.drop_annotations),
    Pass("flatten", inline.flatten),
    Pass("fold_constants", constants.fold_constants),
    Pass("slice", slicing.slice_failure),
    Pass("delete_statements", statements.delete_statements),
    Pass("unwrap", unwrap.unwrap),
    Pass("statement_to_expression", unwrap.statement_to_expression),
    Pass("methods_to_functions", scaffolding.methods_to_functions),
    Pass("inline_functions", inline.inline_functions),
    Pass("collapse_classes", classes.collapse_classes),
    Pass("propagate_constants", constants.propagate_constants),
    # After the value passes: they put the values the trace saw at the lines it saw them, and a
    # loop written as its one step no longer has the loop variable those values were recorded
    # for. Before remove_arguments and cleanup, which the parameters and helpers it frees feed.
    # Shrinking a container to its failing entry (FINE) sends the search back here.
    Pass("single_element", single.single_element),
    Pass("comprehension_to_element", scaffolding.comprehension_to_element),
    Pass("drop_unused_parameters", parameters.drop_unused_parameters),
    Pass("remove_arguments", arguments.remove_arguments),
    Pass("cleanup", cleanup.cleanup),
]
FINE: list[Pass] = [
    Pass("arguments_to_defaults", arguments.arguments_to_defaults),
    Pass("shrink_containers", literals.shrink_containers),
    Pass("shrink_literals", literals.shrink_literals),
]
DEFAULT_PHASES: list[list[Pass]] = [STRUCTURE, FINE]

# After a fixpoint of both phases that came early (well before --max-time, or before the default
# budget): bolder rewrites in one candidate (reducer/passes/heavy.py), then the phases again; the
# search ends at a level that gains nothing.
HEAVY: list[Pass] = [Pass("heavy_level", heavy.heavy_level)]
DEFAULT_PASSES: list[Pass] = STRUCTURE + FINE

BY_NAME: dict[str, Pass] = {p.name: p for p in PRELUDE + DEFAULT_PASSES + HEAVY}
