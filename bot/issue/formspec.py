"""A bug-report form's shape, field by field: what the target registry declares for each
repository and what bot/issue/forms.py validates drafts against.

Kept apart from forms.py so the registry (bot/upstream/targets.py) can describe a form
without importing the code that reads one, which itself reads the registry.
"""
from __future__ import annotations

from dataclasses import dataclass


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
    key: str                       # "transformers"
    repo: str                      # "huggingface/transformers"
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
