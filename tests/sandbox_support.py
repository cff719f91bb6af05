"""When the Action's sandbox tests may skip, and the check that they did run the posted code in it.

A test of what the posted code can do inside the sandbox proves nothing when the job refused to
run it ("not-isolated") or ran it without namespaces: nothing ran, so no attack landed. So these
tests skip only where the kernel itself refuses unprivileged user namespaces — asked with the
command the sandbox depends on, ``unshare -Urmpn --fork true`` — and say what it answered.
Anywhere else they run, and a sandbox that reprobot fails to build fails them
(``assert_ran_isolated``) instead of skipping them.
"""
from __future__ import annotations

import shutil
import subprocess

import pytest


def userns_refused() -> str | None:
    """Why this machine cannot make the sandbox's namespaces, or None when it can."""
    missing = [tool for tool in ("unshare", "setpriv") if shutil.which(tool) is None]
    if missing:
        return f"{', '.join(missing)} not installed (util-linux)"
    try:
        proc = subprocess.run(["unshare", "-Urmpn", "--fork", "true"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"`unshare -Urmpn --fork true` could not run: {e}"
    if proc.returncode != 0:
        said = (proc.stderr.strip().splitlines() or [f"exit {proc.returncode}"])[-1]
        return f"the kernel refuses unprivileged user namespaces: `unshare -Urmpn --fork true`: {said}"
    return None


REFUSED = userns_refused()
needs_userns = pytest.mark.skipif(REFUSED is not None, reason=str(REFUSED))


def assert_ran_isolated(result) -> None:
    """The posted code ran, in namespaces: a refusal here is reprobot's failure, not a skip."""
    assert result.status != "not-isolated", \
        f"the sandbox refused on a machine that has user namespaces: {result.detail}"
    assert result.isolation == "namespaces", (result.status, result.isolation, result.detail)
