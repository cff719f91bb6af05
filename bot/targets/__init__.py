"""The targets: every repository reprobot files at, one module each, behind one registry.

``base.py`` says what a target is (``Target``, its form's fields); each other module here
(``transformers.py``, ``peft.py``, ...) is one target: its repository, packages, bug-report
form, System-Info renderer and probe section, routing names, model families and integrations,
standalone spellings, maintainers' source, and whether `versions` swaps it; ``registry.py`` finds
them, derives every list the rest of reprobot reads (the stack the probe records, what `versions`
swaps, the owners routing names) and registers them with the engine (reducer/stack.py). Nothing
else in bot/ or reducer/ spells out a target's repository or the stack's packages
(tests/test_targets_registry.py and tests/test_stack_lists.py check). This package imports nothing
of bot's outside itself: it is the bottom layer.

Adding a target: CONTRIBUTING.md, "Add a target".
"""
from bot.targets.base import Field, Form, ProbeSection, Target, checkboxes, textarea
from bot.targets.registry import (ELSEWHERE, OTHER_CHECKOUTS, REPO_KEYS, TARGETS, api_names, api_patterns,
                                  area_prefixes, callee_packages, checkout_packages, checkout_parents,
                                  env_packages, family_owners, get_target, git_repos, integration_home,
                                  known_owner, ordered_dists, ordered_packages, owner_packages, package_targets,
                                  probe_imports, probe_sections, register, repo_keys, repo_of_package,
                                  stack_packages, system_info_clis, target_for_repo, targets, unregister,
                                  versions_packages, versions_shown)

__all__ = ["ELSEWHERE", "OTHER_CHECKOUTS", "REPO_KEYS", "TARGETS", "Field", "Form", "ProbeSection", "Target",
           "api_names", "api_patterns", "area_prefixes", "callee_packages", "checkboxes", "checkout_packages",
           "checkout_parents", "env_packages", "family_owners", "get_target", "git_repos", "integration_home",
           "known_owner", "ordered_dists", "ordered_packages", "owner_packages", "package_targets", "probe_imports",
           "probe_sections", "register", "repo_keys", "repo_of_package", "stack_packages", "system_info_clis",
           "target_for_repo", "targets", "textarea", "unregister", "versions_packages", "versions_shown"]
