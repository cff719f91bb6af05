"""huggingface/datasets: its bug-report form (.github/ISSUE_TEMPLATE/bug-report.yml) and the
block ``datasets-cli env`` prints.

A seventh target written by following CONTRIBUTING.md ("Add a target"); as bot/targets/datasets.py
with datasets.md.j2 in templates/ it is a target like the others. It lives here, registered only by
tests/test_targets.py, until its form is kept in shared/upstream-forms/ like the six others'.
"""
from __future__ import annotations

from bot.targets.base import EXPECTED, Target, textarea
from bot.targets.sysinfo import fields, install_notes, platform_of, python_of, version_of


# datasets/commands/env.py (what `datasets-cli env` prints): these names, in this order.
def render(env: dict) -> str:
    items = [
        ("`datasets` version", version_of(env, "datasets")),
        ("Platform", platform_of(env)),
        ("Python version", python_of(env)),
        ("`huggingface_hub` version", version_of(env, "huggingface_hub")),
        ("PyArrow version", version_of(env, "pyarrow")),
        ("Pandas version", version_of(env, "pandas")),
        ("`fsspec` version", version_of(env, "fsspec")),
    ]
    return fields(items + install_notes(env, ("datasets",)))


TARGET = Target(
    key="datasets", repo="huggingface/datasets", packages=("datasets",), order=60,
    fields=(textarea("description", "Describe the bug", required=True),
            textarea("reproduction", "Steps to reproduce the bug", required=True),
            EXPECTED,
            textarea("environment-info", "Environment info", required=True)),
    render_system_info=render, system_info_command="datasets-cli env",
    api_names=(r"\b(?:load_dataset|load_from_disk|load_dataset_builder|get_dataset_config_names|"
               r"concatenate_datasets|interleave_datasets|(?:Iterable)?Dataset(?:Dict)?|DatasetBuilder|"
               r"GeneratorBasedBuilder|ArrowBasedBuilder|DownloadManager|ClassLabel|Sequence|Features)\b|"
               r"from 'datasets|\bdatasets\.\w"),
    api_rank=4,
    callee_names=("Dataset", "DatasetDict", "IterableDataset", "Features"),
    area_prefixes=(("datasets/arrow_dataset", "dataset processing"), ("datasets/load", "loading")),
    checkout_parent="src",
    env_packages=("huggingface_hub", "pyarrow", "pandas", "fsspec"),
    maintainers=None,
)
