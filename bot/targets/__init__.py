"""The targets: every repository reprobot files at, one module each, behind one registry.

``base.py`` says what a target is (``Target``, its form's fields); each other module here
(``transformers.py``, ``peft.py``, ...) is one target: its repository, packages, bug-report
form, System-Info renderer, routing names, maintainers' source, and whether `versions` swaps
it; ``registry.py`` finds them and derives every list the rest of reprobot reads (the stack
the probe records, what `versions` swaps, the owners routing names). Nothing else in bot/ or
reducer/ spells out a target's repository or the stack's packages (tests/test_targets_registry.py
checks). This package imports nothing of bot's outside itself: it is the bottom layer.

Adding a target: CONTRIBUTING.md, "Add a target".
"""
from bot.targets.base import Field, Form, Target, checkboxes, textarea
from bot.targets.registry import (ELSEWHERE, OTHER_CHECKOUTS, REPO_KEYS, TARGETS, api_names, api_patterns,
                                  area_prefixes, callee_packages, checkout_parents, env_packages, get_target,
                                  git_repos, known_owner, ordered_dists, ordered_packages, owner_packages,
                                  package_targets, probe_imports, register, repo_keys, repo_of_package,
                                  stack_packages, system_info_clis, target_for_repo, targets, unregister,
                                  versions_packages, versions_shown)

__all__ = ["ELSEWHERE", "OTHER_CHECKOUTS", "REPO_KEYS", "TARGETS", "Field", "Form", "Target", "api_names",
           "api_patterns", "area_prefixes", "callee_packages", "checkboxes", "checkout_parents", "env_packages",
           "get_target", "git_repos", "known_owner", "ordered_dists", "ordered_packages", "owner_packages",
           "package_targets", "probe_imports", "register", "repo_keys", "repo_of_package", "stack_packages",
           "system_info_clis", "target_for_repo", "targets", "textarea", "unregister", "versions_packages",
           "versions_shown"]
