"""The reduction passes, coarse to fine. Each is a small named function ``fn(gate)`` that proposes
candidates through the gate (see ``reducer.search``); one module per family of passes."""
from __future__ import annotations

from reducer.passes import (arguments, classes, cleanup, constants, direct, inline, literals, parameters, recorded,
                            single, slicing, statements, unwrap)
from reducer.passes.base import Pass
from reducer.passes.first_cut import first_cut

# Once, before the phases: a child process's work brought into the parent (every later run is
# then in-process), then the trace-guided first cut (the original minus what never ran).
PRELUDE: list[Pass] = [Pass("bring_home", direct.bring_home), Pass("first_cut", first_cut)]

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
    Pass("flatten", inline.flatten),
    Pass("fold_constants", constants.fold_constants),
    Pass("slice", slicing.slice_failure),
    Pass("delete_statements", statements.delete_statements),
    Pass("unwrap", unwrap.unwrap),
    Pass("statement_to_expression", unwrap.statement_to_expression),
    Pass("inline_functions", inline.inline_functions),
    Pass("collapse_classes", classes.collapse_classes),
    Pass("propagate_constants", constants.propagate_constants),
    # After the value passes: they put the values the trace saw at the lines it saw them, and a
    # loop written as its one step no longer has the loop variable those values were recorded
    # for. Before remove_arguments and cleanup, which the parameters and helpers it frees feed.
    # Shrinking a container to its failing entry (FINE) sends the search back here.
    Pass("single_element", single.single_element),
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
DEFAULT_PASSES: list[Pass] = STRUCTURE + FINE

BY_NAME: dict[str, Pass] = {p.name: p for p in PRELUDE + DEFAULT_PASSES}
