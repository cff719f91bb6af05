"""reprobot: patch a module right after its first import, without importing it early (stdlib only,
Python >= 3.9). Runs in the USER's interpreter: sitecustomize.py, reprobot_rendezvous.py and
zygote_children.py share this one finder (the recorder's folder is on every run's PYTHONPATH).

Importing a module ahead to patch it would change the run (``threading`` and ``traceback`` come
late in most scripts, ``multiprocessing.util`` registers an atexit handler, torch.distributed is
heavy), so the patch waits for the script's own import.
"""
import os
import sys

_PENDING = {}   # module name -> the patches to run once it has executed


def when_imported(name, patch):
    """``patch(module)`` now if ``name`` is imported (its errors are the caller's), else right after
    its first import (its errors swallowed: the script's import must not fail because of reprobot)."""
    module = sys.modules.get(name)
    if module is not None:
        patch(module)
        return
    patches = _PENDING.setdefault(name, [])
    if patch not in patches:
        patches.append(patch)
    if not any(isinstance(f, _AfterImport) for f in sys.meta_path):
        sys.meta_path.insert(0, _AfterImport())


class _AfterImport:
    def find_spec(self, name, path=None, target=None):
        if name not in _PENDING:
            return None
        patches = _PENDING.pop(name)
        # Step aside while the real finders look, so that nothing below comes back here.
        sys.meta_path.remove(self)
        try:
            import importlib.util
            spec = importlib.util.find_spec(name)
            if spec is not None and hasattr(getattr(spec, "loader", None), "exec_module"):
                spec.loader = _Patching(spec.loader, patches)
            return spec
        finally:
            if _PENDING:
                sys.meta_path.insert(0, self)


class _Patching:
    def __init__(self, loader, patches):
        self._loader, self._patches = loader, patches

    def __getattr__(self, attr):
        return getattr(self._loader, attr)

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def exec_module(self, module):
        self._loader.exec_module(module)
        for patch in self._patches:
            try:
                patch(module)
            except BaseException:
                pass


def append_json_line(path, row):
    """One JSON line appended with O_APPEND (forked workers and ranks write the same file at once,
    and a hard crash loses nothing already written): the recorders' one way to write."""
    import json
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        os.write(fd, (json.dumps(row) + "\n").encode("utf-8", "replace"))
    finally:
        os.close(fd)
