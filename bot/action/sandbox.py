"""Isolation for the code the Action runs on the public's behalf (issue #18).

The reproduce job runs a script anyone could have posted. An allow-listed environment keeps
the runner's variables out of the script's own ``os.environ``, but not out of
``/proc/<parent>/environ``, the runner user's ``~/.git-credentials`` or the network. So the
reduction runs inside Linux namespaces made with util-linux's ``unshare`` (no root needed
where unprivileged user namespaces are allowed):

* a PID namespace with its own ``/proc``: no process outside the run is visible, and when the
  run's first process ends the kernel kills every process left in it (``setsid`` daemons too);
* a network namespace with no interface up: no connection leaves, none reaches the runner;
* a mount namespace in which each credential store of the runner's home (``HIDDEN``) is
  covered: a file by ``/dev/null``, a folder by an empty tmpfs;
* then every capability dropped (``setpriv``), so the script cannot undo those mounts.

``probe()`` checks that all of this works here; the Action refuses untrusted code when it does
not (unless a maintainer opts out with ``--isolation none`` on a runner that is a sandbox).
ubuntu-24.04 runners restrict unprivileged user namespaces through AppArmor: the workflow
loads a profile for ``/usr/bin/unshare`` with ``userns`` before this step (docs/ACTION.md).
"""
from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

# Where a runner user keeps credentials, relative to its home.
HIDDEN = (".git-credentials", ".netrc", ".ssh", ".aws", ".azure", ".config/gh", ".config/gcloud", ".docker",
          ".kube", ".gnupg", ".pypirc", ".npmrc", ".yarnrc", ".m2", ".cargo/credentials", ".cargo/credentials.toml",
          ".config/pip", ".huggingface", ".cache/huggingface", ".config/git/credentials")
MODES = ("namespaces", "none")

# Covers each path given before "--" (a folder by an empty tmpfs, a file by /dev/null), then
# runs the command after it with no capabilities left.
_JAIL = r'''
while [ "$#" -gt 0 ] && [ "$1" != "--" ]; do
  if [ -d "$1" ]; then mount -t tmpfs -o size=64k,mode=700 reprobot-hidden "$1" || exit 121
  elif [ -e "$1" ]; then mount --bind /dev/null "$1" || exit 121
  fi
  shift
done
shift
exec setpriv --bounding-set -all --inh-caps -all --no-new-privs -- "$@"
'''


@dataclass(frozen=True)
class Isolation:
    """How the Action's runs are isolated: ``mode`` "namespaces" (``wrap`` adds the prefix) or
    "none" (``wrap`` returns the command as is)."""

    mode: str
    hidden: tuple[str, ...] = ()
    reason: str = ""          # why namespaces are not available, when they are not

    def wrap(self, cmd: list[str], *, network: bool = False) -> list[str]:
        if self.mode != "namespaces":
            return list(cmd)
        ns = ["unshare", "--user", "--map-root-user", "--pid", "--fork", "--kill-child", "--mount", "--mount-proc"]
        if not network:
            ns.append("--net")
        return [*ns, "--", "sh", "-c", _JAIL, "reprobot-jail", *self.hidden, "--", *cmd]


def hidden_paths(homes: list[str | None]) -> tuple[str, ...]:
    """The credential stores that exist under the given homes (the runner's, this process's)."""
    out: list[str] = []
    for home in dict.fromkeys(h for h in homes if h):
        for rel in HIDDEN:
            p = Path(home) / rel
            if p.exists() or p.is_symlink():
                out.append(str(p))
    return tuple(out)


def probe(homes: list[str | None] | None = None) -> Isolation:
    """Namespaces if a trial run under them works here, else "none" with the reason."""
    missing = [tool for tool in ("unshare", "setpriv", "mount") if shutil.which(tool) is None]
    if missing:
        return Isolation("none", reason=f"{', '.join(missing)} not found (util-linux)")
    homes = homes if homes is not None else [os.environ.get("HOME"), str(Path.home())]
    iso = Isolation("namespaces", hidden_paths(homes))
    try:
        proc = subprocess.run(iso.wrap(["true"]), stdin=subprocess.DEVNULL, capture_output=True, text=True,
                              timeout=30)
    except (OSError, subprocess.TimeoutExpired) as e:
        return Isolation("none", reason=f"unshare could not run ({e})")
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or [f"exit {proc.returncode}"])[-1]
        return Isolation("none", reason=f"user namespaces are not available here ({last[:200]})")
    return iso
