"""Two checks of what a draft says. Its one `pip install` line resolves as written: a local
build's pin carries the PyTorch index the lock names (`torch==2.13.0+cpu` is on no other index),
and no other index line is copied (a mirror the user passed may be private). And every
placeholder the scrubber leaves inside the repro's own code holds the filing for a person."""
from __future__ import annotations

from pathlib import Path

from bot.issue.draft import _lockfile
from bot.store import ReproDir

LOCK = """\
# requirements.lock — compiled by pip-compile
--index-url https://pypi.org/simple
--extra-index-url https://download.pytorch.org/whl/cpu
--extra-index-url https://user:tok@mirror.corp.example/simple

filelock==3.20.0 \\
    --hash=sha256:aaaa
torch==2.13.0+cpu \\
    --hash=sha256:bbbb
transformers==5.23.0 \\
    --hash=sha256:cccc
"""


def _install(tmp_path: Path, lock: str) -> str | None:
    repro = ReproDir(tmp_path)
    repro.requirements_lock.write_text(lock, encoding="utf-8")
    section = _lockfile(repro)
    assert section is not None
    return section.install


def test_a_local_build_names_the_pytorch_index_and_nothing_else(tmp_path: Path) -> None:
    assert _install(tmp_path, LOCK) == ("pip install torch==2.13.0+cpu transformers==5.23.0 "
                                        "--extra-index-url https://download.pytorch.org/whl/cpu")


def test_plain_releases_need_no_index(tmp_path: Path) -> None:
    assert _install(tmp_path, LOCK.replace("+cpu", "")) == "pip install torch==2.13.0 transformers==5.23.0"


def test_every_place_the_scrubber_fills_in_the_code_waits_for_a_person() -> None:
    """A bucket, a tracker's entity or a service account scrubbed inside the repro's own code
    changes the script a maintainer would run, as an address does (bot/scrub_places.py)."""
    from bot.issue.draft import script_placeholders
    body = ("### Reproduction\n\n```python\nimport fsspec\nfs = fsspec.open('s3://<bucket>/x.bin')\n"
            "run = init(entity='<entity>', project='<project>')\nx = '<pad>'\n```\n")
    assert script_placeholders(body) == [(2, "<bucket>"), (3, "<entity>"), (3, "<project>")]
