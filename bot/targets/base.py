"""What a target is: the ``Target`` every module in bot/targets/ declares, the form-field
shapes its bug-report form is built from, and the fields most forms share.

This is the bottom of bot/: it imports nothing of reprobot's but the engine's (reducer.errors, and
reducer.stack, the interface through which the engine reads what targets know), so every layer
above (env, issue, upstream, rerun, commands) can read a target without a cycle.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from reducer.stack import Spelling

# Who can help: people edit this data file without touching code; it is keyed by ``repo``.
MAINTAINERS_FILE = "data/maintainers.json"   # a resource of the bot package


# --- a bug-report form's shape (what bot/issue/forms.py validates drafts against) ---------------

@dataclass(frozen=True)
class Field:
    id: str
    type: str                      # "textarea" | "checkboxes"
    label: str
    required: bool = False
    options: tuple[str, ...] = ()  # checkbox option labels
    render: str | None = None      # code-fence language GitHub wraps the value in
    # Checkbox options the form marks required one by one: a person ticks them, so a draft
    # that leaves one unticked is waiting for confirmation, not broken.
    required_options: tuple[str, ...] = ()
    # GitHub pre-fills a field from the URL only by its id; a form that gives a field no id
    # (pytorch's) gets a reprobot-side id here and prefill=False.
    prefill: bool = True


@dataclass(frozen=True)
class Form:
    key: str                       # the target's key
    repo: str                      # the target's "owner/name"
    template: str                  # "bug-report.yml"
    fields: tuple[Field, ...]
    system_info_command: str | None = None

    def field(self, field_id: str) -> Field:
        for f in self.fields:
            if f.id == field_id:
                return f
        raise KeyError(field_id)

    @property
    def labels(self) -> list[str]:
        return [f.label for f in self.fields]


def textarea(field_id: str, label: str, *, required: bool = False, render: str | None = None,
             prefill: bool = True) -> Field:
    return Field(field_id, "textarea", label, required, render=render, prefill=prefill)


def checkboxes(field_id: str, label: str, options: tuple[str, ...], *, required: bool = False,
               required_options: tuple[str, ...] = ()) -> Field:
    return Field(field_id, "checkboxes", label, required, options, required_options=required_options)


# --- the fields most forms share (each target module picks and orders its own) -----------------

def system_info_field(render: str | None = None) -> Field:
    return textarea("system-info", "System Info", required=True, render=render)


REPRODUCTION = textarea("reproduction", "Reproduction", required=True)
EXPECTED = textarea("expected-behavior", "Expected behavior", required=True)
WHO_CAN_HELP = textarea("who-can-help", "Who can help?")
OWN_SCRIPTS = ("The official example scripts", "My own modified scripts")


# --- a section of the environment probe ---------------------------------------------------------

@dataclass(frozen=True)
class ProbeSection:
    """A section the environment probe (bot/env/probe.py) runs for a target: what its System Info
    needs that package metadata does not say (a native library, a config file)."""
    name: str                      # the probe's section and env.json's key ("bitsandbytes")
    # ``section_<name>`` and the helpers it calls, module-level functions of the target's module.
    # The probe runs their SOURCE in the user's interpreter (Python 3.9+, the standard library at
    # hand, its library imported only inside the function, the probe's ``_installed(dist)`` and
    # ``_err(exc)`` in scope); reprobot never calls them.
    functions: tuple[Callable[..., object], ...]
    # The package the section imports: its import error (or "ok") becomes that package's
    # ``import`` in env.json, as an import section's would.
    imports: str | None = None
    # Variables set (where unset) before the probe runs any section: a library's import banner off.
    environment: tuple[tuple[str, str], ...] = ()

    def source(self) -> str:
        """What the probe runs for this section: the variables, then the functions' source."""
        import inspect
        lines = ["import os"] + [f"os.environ.setdefault({k!r}, {v!r})" for k, v in self.environment]
        return "\n".join(lines) + "\n\n\n" + "\n\n".join(inspect.getsource(f) for f in self.functions)


# --- the target ---------------------------------------------------------------------------------

@dataclass(frozen=True)
class Target:
    key: str                                   # "peft": draft-peft.md, templates/peft.md.j2, --repo peft
    repo: str                                  # "owner/name" on GitHub
    packages: tuple[str, ...]                  # top-level import names whose frames are this repo's code
    fields: tuple[Field, ...]                  # the bug-report form, in the form's order
    render_system_info: Callable[[dict], str]  # env.json -> the System Info text the form asks for
    system_info_command: str | None = None     # what the form tells reporters to run for System Info
    form_file: str = "bug-report.yml"          # ?template= of the pre-filled URL
    template: str = ""                         # jinja2 template; default "<key>.md.j2"
    template_dir: Path | None = None           # where that template is, when not in templates/
    order: int = 50                            # where commands list it (lower first, then by key)
    # Routing: public API names (a regex) that say a call or a message is this repo's, tried in
    # ``api_rank`` order (lower first; the most generic names, transformers', go last).
    api_names: str | None = None
    api_rank: int = 5
    callee_names: tuple[str, ...] = ()         # names a rejected call's message gives this repo's callees
    area_prefixes: tuple[tuple[str, str], ...] = ()  # package path prefix -> maintainers' area
    checkout_parent: str | None = None         # editable checkout: ".../<parent>/<package>/x.py"
    env_packages: tuple[str, ...] = ()         # other distributions its System Info names (the probe records them)
    # The probe imports it in a section of its own, so a broken install shows as an import error.
    probe_import: bool = False
    distributions: tuple[str, ...] = ()        # pip names, where they differ from ``packages``
    # `reprobot versions` swaps its releases by default and `--git NAME@REF` installs it from
    # ``repo``; off for torch, whose builds are per accelerator and gigabytes each.
    versions_swaps: bool = True
    # Where its "who can help" handles come from: a data file of the bot package with an entry
    # keyed by ``repo`` (people edit it without touching code); None when its form names no one.
    maintainers: str | None = MAINTAINERS_FILE
    # torch: every other target calls into it, so its frames are on almost every path. Its frames
    # count as evidence and earn a cross-link, but it is the target only for a failure with no
    # other target's frames on the path (otherwise the caller's bug would be filed against torch).
    foundation: bool = False
    # trl: it wires transformers, peft and accelerate together itself, so a failure its own
    # code hands to torch is its own rather than "the integration" (transformers').
    wires_integrations: bool = False
    draft_notes: tuple[str, ...] = ()          # said in every draft for this repo (its filing policy)
    # Its value recipes (reducer/analysis/recipes.py): a file of bot/targets/recipes/ that rebuilds its
    # classes' objects (a model from its config, a tensor from its shape) in the user's interpreter.
    recipes: str | None = None
    # Its section of the environment probe, when its System Info needs one (bitsandbytes' native
    # library, accelerate's config file).
    probe_section: ProbeSection | None = None
    # Routing by model family: a regex on a frame's package-relative path whose group "family"
    # names one of its model families ("transformers/models/gemma4/"), a regex of its model classes'
    # names in a message or repro.py whose group "stem" names one ("Gemma4ForCausalLM"), and the
    # stems that match it without being a family ("AutoModel", "PeftModel").
    family_path: str | None = None
    family_class: str | None = None
    not_families: frozenset[str] = frozenset()
    # A failure across three of the stack's packages on one of its models is filed here, where the
    # integration is wired (transformers'), unless a package that wires them itself is innermost.
    integration_home: bool = False
    # Standalone rewrites (reducer/reduction/standalone.py, through reducer/stack.py): given how the script
    # spells the class it loaded through, the callable that builds a config from a model type
    # (``AutoConfig.for_model``), or None; given an adapter config's class, the callable that puts it
    # on a model (``get_peft_model``), or None.
    config_by_type: Callable[[str], Spelling | None] | None = None
    adapter_wrapper: Callable[[str], Spelling | None] | None = None

    @property
    def template_name(self) -> str:
        return self.template or f"{self.key}.md.j2"

    @property
    def form(self) -> Form:
        return Form(self.key, self.repo, self.form_file, self.fields, self.system_info_command)

    @property
    def dists(self) -> tuple[str, ...]:
        """Its distributions as pip and requirements.lock name them."""
        return self.distributions or self.packages
