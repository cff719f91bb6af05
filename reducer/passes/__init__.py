"""The reduction passes, coarse to fine. Each is a small named function ``fn(gate)`` that proposes
candidates through the gate (see ``reducer.search.driver``); one module per family of passes.

Every pass's docstring ends with what it removes (``Removes:``) and what it must never change
(``Never changes:``). What no pass changes, whichever it is: it only proposes, and never runs a
candidate itself (reducer/passes/base.py); a candidate is a whole program, and the gate alone
decides whether it becomes the best (behind it, reducer/search/judge.py). What several families build
their candidates from is reducer/passes/rewrites.py."""
from __future__ import annotations

from reducer.passes import (arguments, attributes, bindings, boundary, classes, cleanup, constants, defaults, direct,
                            heavy, inline, literals, parameters, recorded, round_trips, scaffolding, single, slicing,
                            statements, temp_folders, unwrap, variables)
from reducer.passes.base import Pass
from reducer.passes.first_cut import first_cut

# Once, before the phases: a child process's work brought into the parent (every later run is
# then in-process, and traced there), the boundary call (the imports plus the one call that
# entered the library where the failure was raised, with its recorded arguments: often the whole
# repro), then the trace-guided first cut (the best minus what never ran). The search traces the
# best again before each prelude pass when the one before changed it.
PRELUDE: list[Pass] = [Pass("bring_home", direct.bring_home), Pass("boundary_call", boundary.boundary_call),
                       Pass("first_cut", first_cut)]

# Two phases, coarse to fine. STRUCTURE passes remove statements (the measure a maintainer reads
# and the one that frees whole helpers); they are repeated to a fixpoint before any FINE pass
# spends runs on a literal or a container entry, and every FINE change sends the search back to
# STRUCTURE (a smaller value can make a branch or a helper removable).
STRUCTURE: list[Pass] = [
    Pass("cleanup_bulk", cleanup.bulk),
    Pass("recorded_values", constants.recorded_values),
    Pass("recorded_bindings", recorded.recorded_bindings),
    # a config class's literal defaults where its attributes are read (what the trace cannot see:
    # a value handed to a builtin, or read in another process)
    Pass("class_defaults", defaults.class_defaults),
    # the same for a parsed command line: an option whose value the trace could not write (it
    # differs between runs: a temporary folder, a free port) keeps the parser and its helper alive
    Pass("option_defaults", defaults.option_defaults),
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
    # before unwrap, whose `with` → body cannot keep what a temporary folder's name stood for
    Pass("temp_folders", temp_folders.temp_folders),
    # after option_defaults and temp_folders, which make a save's and a load's paths read alike
    # (the parent's `args.ckpt_dir`, the child's): the load read as the value saved there
    Pass("round_trips", round_trips.round_trips),
    Pass("unwrap", unwrap.unwrap),
    Pass("statement_to_expression", unwrap.statement_to_expression),
    Pass("methods_to_functions", scaffolding.methods_to_functions),
    Pass("inline_functions", inline.inline_functions),
    Pass("collapse_classes", classes.collapse_classes),
    Pass("propagate_constants", constants.propagate_constants),
    # Bindings a person would not keep (reducer/passes/bindings.py): few targets each, and what
    # they free (an import, a helper, a dict) the passes above then remove.
    Pass("path_literals", bindings.path_literals),
    Pass("fold_kwargs", bindings.fold_kwargs),
    # a list filled one append at a time (what single_element leaves of a collecting loop)
    Pass("fold_appends", bindings.fold_appends),
    # a setting put on an object for the one call after it (the model's own generation config
    # the recipe writes for generate): that call's keyword, after which the object needs no name
    Pass("attribute_keywords", bindings.attribute_keywords),
    Pass("value_functions", bindings.value_functions),
    # After the value passes: they put the values the trace saw at the lines it saw them, and a
    # loop written as its one step no longer has the loop variable those values were recorded
    # for. Before remove_arguments and cleanup, which the parameters and helpers it frees feed.
    # Shrinking a container to its failing entry (FINE) sends the search back here.
    Pass("single_element", single.single_element),
    Pass("comprehension_to_element", scaffolding.comprehension_to_element),
    Pass("drop_unused_parameters", parameters.drop_unused_parameters),
    Pass("remove_arguments", arguments.remove_arguments),
    # a value carried one line further by a name read once (into the next statement: nothing runs
    # in between, so the order of the calls stays; a statement less, here among the structural
    # passes), and an import `import pkg` reaches
    Pass("inline_variables", variables.inline_variables),
    Pass("inline_returns", variables.inline_returns),
    Pass("fold_imports", variables.fold_imports),
    # after fold_imports: where no `import pkg` was there to fold into, one replaces several
    Pass("root_imports", variables.root_imports),
    Pass("cleanup", cleanup.cleanup),
]
FINE: list[Pass] = [
    Pass("arguments_to_defaults", arguments.arguments_to_defaults),
    Pass("shrink_containers", literals.shrink_containers),
    Pass("shrink_literals", literals.shrink_literals),
    # a wrapper's attribute stepped over (`m.base_layer.weight` → `m.weight`): the wrapping call
    # then goes in STRUCTURE, where every FINE change sends the search back
    Pass("drop_middle_attributes", attributes.drop_middle_attributes),
    # What inline_variables leaves: a name read once further down its block. Moving the value
    # there moves its evaluation past other statements, the boldest guess of the inlinings, so it
    # comes last, once the structure is at a fixpoint; never a site inline_variables takes (the
    # next statement). A token or three a binding: every one at once first, so a long script pays
    # one run.
    Pass("inline_single_use", bindings.inline_single_use),
]
DEFAULT_PHASES: list[list[Pass]] = [STRUCTURE, FINE]

# After a fixpoint of both phases that came early (well before --max-time, or before the default
# budget): bolder rewrites in one candidate (reducer/passes/heavy.py), then the phases again; the
# search ends at a level that gains nothing.
HEAVY: list[Pass] = [Pass("heavy_level", heavy.heavy_level)]
DEFAULT_PASSES: list[Pass] = STRUCTURE + FINE

BY_NAME: dict[str, Pass] = {p.name: p for p in PRELUDE + DEFAULT_PASSES + HEAVY}
