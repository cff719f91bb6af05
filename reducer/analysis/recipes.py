"""Value recipes: how the boundary launcher writes a value it cannot spell as a literal (a model,
a config, a tensor, a PEFT wrapper) as code that builds an equivalent one.

The engine defines the interface; what it knows of a library's classes belongs to the target that
owns them (bot/targets/recipes/<target>.py), which the caller hands to the launcher as file paths.
A recipe file runs in the USER's interpreter, inside the traced run (standard library only at its
top: it looks the library's classes up in ``sys.modules`` and never imports a library the script
did not). It defines:

``rebuild(value, source) -> dict | None``
    ``{"expr": text, "imports": [statements], "setup": [statements]}`` that builds a value
    equivalent to ``value`` for the failure, or None when this file has no recipe for it.
    ``source(other)`` is the launcher's own describer, for the values inside (a model's config, a
    PEFT model's base): the same dict, or None. ``setup`` statements run before the call, in order
    (a tiny checkpoint saved so that ``from_pretrained`` can load it); names they bind and paths
    they write start with ``reprobot_``. A recipe never spells a path of the run's own folder:
    the launcher drops one that does.

``install(when_imported)`` (optional)
    Called once per process before the script runs: ``when_imported(module, patch)`` patches a
    module right after its first import (reducer/run/exception_hook/reprobot_after_import.py). A
    target uses it with two of the helpers every recipe file is given (the others:
    ``merge(into, got)`` joins a part's imports and setup to a recipe's, ``import_of(cls)`` is the
    import line of a library class, through its package's top level where it is exported,
    ``call_of(cls, kwargs, source)`` is ``Cls(k=<v rebuilt>, ...)`` or None,
    ``fresh_name(path)`` is the relative ``reprobot_<name>`` a path of the machine becomes):
    ``remember_saves(cls, method="save_pretrained")`` -- a folder an object of ``cls`` was saved
    into is then rebuilt as that save (the object's recipe, then ``.save_pretrained('reprobot_<name>')``),
    before any recipe is asked about the path -- and ``note_loads(cls, method="from_pretrained",
    positional=())`` -- an object a load returns carries that load's keyword arguments (positional
    ones after the first two named by ``positional``) as ``_reprobot_load``, for a recipe to
    repeat the load when it is part of the failure (quantization, a device_map).

``process_state() -> dict | None`` (optional)
    The library state of the whole process that a failing call needs and no argument carries (a
    torch.distributed process group a ``DistributedDataParallel(...)`` joins): ``{"imports",
    "setup"}`` statements that bring it about again in a candidate, plus, for a process that is
    one rank of a multi-process job, ``"rank": {"expr", "imports"}`` -- how a candidate reads its own
    rank (a value that differed between ranks is written per rank, indexed by it) -- and, for a
    rank no launcher started (the script's own ``mp.spawn``), ``"start": {"param", "imports",
    "call"}`` -- the candidate then runs its setup and call in a function of that one parameter
    (the rank), which ``call`` (its ``{target}`` the function's name) starts in every rank. Asked
    when a failure or a watched call is recorded; None when the process has no such state.

The first file whose ``rebuild`` answers wins, in the order the caller gives them; the
``process_state`` answers of all files are joined.
"""
from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

ENV_VAR = "REPROBOT_RECIPES"


def recipe_env(paths: Iterable[Path | str]) -> dict[str, str]:
    """The environment entry that hands recipe files to a launcher (none when there are none)."""
    joined = os.pathsep.join(str(p) for p in paths)
    return {ENV_VAR: joined} if joined else {}


# Loads the recipe files in a launcher (reducer/analysis/boundary.py); ``_private`` and ``_source`` are the
# launcher's. Recipes that raise are skipped: a recipe is an optimisation, never a failure.
LOADER = r'''
_RECIPES = []
_MAX_RECIPE = 20000
RECIPE_ERRORS = []


def _load_recipes():
    try:
        from reprobot_after_import import when_imported
    except Exception:
        when_imported = None
    for path in filter(None, os.environ.get("REPROBOT_RECIPES", "").split(os.pathsep)):
        try:
            with open(path, encoding="utf-8") as f:
                code = compile(f.read(), path, "exec")
            space = {"__name__": "_reprobot_recipe", "__file__": path, "__builtins__": __builtins__,
                     "remember_saves": _remember_saves, "note_loads": _note_loads,
                     "merge": _merge, "import_of": _import_of, "fresh_name": _fresh_name,
                     "call_of": _call_of}
            exec(code, space)
        except Exception:
            continue
        if callable(space.get("install")) and when_imported is not None:
            try:
                space["install"](when_imported)
            except Exception:
                pass
        if callable(space.get("rebuild")):
            _RECIPES.append(space["rebuild"])
        if callable(space.get("process_state")):
            _STATES.append(space["process_state"])


_STATES = []


def _process_state():
    """The process-wide state recipes, joined (None when none answers)."""
    out = {"imports": [], "setup": []}
    for fn in _STATES:
        try:
            got = fn()
        except Exception as e:
            RECIPE_ERRORS.append("process_state: %s: %s" % (type(e).__name__, str(e)[:200]))
            continue
        if not isinstance(got, dict):
            continue
        _merge(out, {"imports": list(got.get("imports") or []), "setup": list(got.get("setup") or [])})
        for key in ("rank", "start"):
            if isinstance(got.get(key), dict) and key not in out:
                out[key] = got[key]
    return out if out["setup"] or "rank" in out else None


_SAVED = {}          # absolute path -> the object saved there (at most 16)


def _merge(into, got):
    for key in ("imports", "setup"):
        for line in got[key]:
            if line not in into[key]:
                into[key].append(line)


def _call_of(cls, kwargs, source):
    """``Cls(k=v, ...)`` with every value rebuilt by ``source``; None when one cannot be (or the
    class is the script's own)."""
    imp = _import_of(cls)
    if imp is None:
        return None
    out = {"imports": [imp], "setup": [], "expr": ""}
    parts = []
    for key, value in kwargs.items():
        if not isinstance(key, str) or not key.isidentifier():
            return None
        got = source(value)
        if got is None:
            return None
        _merge(out, got)
        parts.append("%s=%s" % (key, got["expr"]))
    out["expr"] = "%s(%s)" % (cls.__name__, ", ".join(parts))
    return out


def _import_of(cls):
    if cls.__module__ in ("__main__", "__mp_main__"):
        return None
    top = sys.modules.get(cls.__module__.split(".")[0])
    home = top.__name__ if top is not None and getattr(top, cls.__name__, None) is cls else cls.__module__
    return "from %s import %s" % (home, cls.__name__)


def _wrapped(real, fn):
    """``fn`` standing in for ``real``: its name, its code's name too (the boundary launcher knows
    the function a line entered by its code, ``from_pretrained``, not the wrapper's own name)."""
    try:
        fn.__code__ = fn.__code__.replace(co_name=real.__name__)
    except Exception:
        pass
    fn._reprobot = True
    fn.__wrapped__ = real
    fn.__name__ = getattr(real, "__name__", "wrapped")
    fn.__qualname__ = getattr(real, "__qualname__", fn.__name__)
    fn.__doc__ = getattr(real, "__doc__", None)
    return fn


def _remember_saves(cls, method="save_pretrained"):
    real = getattr(cls, method, None)
    if real is None or getattr(real, "_reprobot", False):
        return

    def save(self, directory, *args, **kwargs):
        out = real(self, directory, *args, **kwargs)
        try:
            if len(_SAVED) < 16:
                _SAVED[os.path.abspath(os.fspath(directory))] = (self, method)
        except Exception:
            pass
        return out
    setattr(cls, method, _wrapped(real, save))


def _note_loads(cls, method="from_pretrained", positional=(), skip=1):
    real = cls.__dict__.get(method)
    if not isinstance(real, classmethod) or getattr(real.__func__, "_reprobot", False):
        return
    fn = real.__func__

    def load(owner, *args, **kwargs):
        loaded = fn(owner, *args, **kwargs)
        try:
            noted = dict(zip(positional, args[skip:]))
            noted.update(kwargs)
            loaded._reprobot_load = noted
        except Exception:
            pass
        return loaded
    setattr(cls, method, classmethod(_wrapped(fn, load)))


def _saved(value, depth):
    """A folder the script saved an object into: that object's recipe, saved there anew."""
    try:
        path = os.path.abspath(os.fspath(value))
    except Exception:
        return None
    obj, method = _SAVED.get(path, (None, None))
    got = _rebuilt(obj, depth + 1) if obj is not None else None
    if got is None:
        return None
    name = _fresh_name(path) or "reprobot_saved"
    return {"expr": repr(name), "imports": got["imports"],
            "setup": got["setup"] + ["%s.%s(%r)" % (got["expr"], method, name)]}


def _literal_of(value):
    try:
        text = _source(value)
    except Exception:
        return None
    return text if text is not None and len(text) <= _MAX_REPR else None


def _containers(value, depth):
    """A list, tuple or dict whose entries all have recipes (``{"input_ids": <tensor>}``)."""
    cls = type(value)
    if cls not in (list, tuple, dict) or len(value) > 64:
        return None
    pairs = list(value.items()) if cls is dict else [(None, v) for v in value]
    parts, imports, setup = [], [], []
    for key, item in pairs:
        if key is not None and _literal_of(key) is None:
            return None
        got = _rebuilt(item, depth + 1)
        if got is None:
            return None
        imports += [i for i in got["imports"] if i not in imports]
        setup += [s for s in got["setup"] if s not in setup]
        parts.append((key, got["expr"]))
    if cls is dict:
        expr = "{" + ", ".join(_literal_of(k) + ": " + e for k, e in parts) + "}"
    else:
        body = ", ".join(e for _, e in parts)
        expr = "[" + body + "]" if cls is list else "(" + body + ("," if len(parts) == 1 else "") + ")"
    return {"expr": expr, "imports": imports, "setup": setup}


def _dataclass(value, depth):
    """An object of a library's dataclass (a data collator, an arguments class no target knows):
    its class called with the init fields that are not at their defaults, each rebuilt."""
    dc = sys.modules.get("dataclasses")
    cls = type(value)
    if dc is None or not dc.is_dataclass(cls) or _import_of(cls) is None:
        return None
    home = getattr(sys.modules.get(cls.__module__), "__file__", None) or ""
    if any(home.startswith(p) for p in _private):
        return None         # a module of the user's own folder: not there for a maintainer
    kwargs = {}
    for f in dc.fields(cls):
        if not f.init or f.name.startswith("_") or not hasattr(value, f.name):
            continue
        mine = getattr(value, f.name)
        if f.default is not dc.MISSING:
            default = f.default
        elif f.default_factory is not dc.MISSING:
            try:
                default = f.default_factory()
            except Exception:
                default = dc.MISSING
        else:
            default = dc.MISSING
        try:
            if default is not dc.MISSING and (mine is default or type(mine) is type(default) and bool(mine == default)):
                continue
        except Exception:
            pass
        kwargs[f.name] = mine
    return _call_of(cls, kwargs, lambda v: _rebuilt(v, depth + 1))


def _rebuilt(value, depth=0, literal=True):
    """{"expr", "imports", "setup"} that rebuilds ``value``: a literal, or a target's recipe.
    A path the script wrote asks the recipes first (what wrote it), then is a literal."""
    if isinstance(value, (str, os.PathLike)):
        got = _saved(value, depth) if depth <= 6 else None
        if got is not None or not literal:
            return got
    text = _literal_of(value) if literal else None
    if text is not None:
        return {"expr": text, "imports": [], "setup": []}
    if depth > 6:
        return None
    got = _containers(value, depth) if literal else None
    if got is not None:
        return got
    for fn in _RECIPES:
        try:
            got = fn(value, lambda inner: _rebuilt(inner, depth + 1))
        except Exception as exc:
            # kept for the record (reducer/analysis/boundary.py writes them): a recipe's bug shows in reduction.json
            if len(RECIPE_ERRORS) < 8:
                RECIPE_ERRORS.append("%s: %s: %s" % (os.path.basename(fn.__code__.co_filename), type(exc).__name__,
                                                      str(exc)[:200]))
            got = None
        out = _checked(got)
        if out is not None:
            return out
    if literal:
        try:
            out = _checked(_dataclass(value, depth))
        except Exception:
            out = None
        if out is not None:
            return out
    return _fresh_folder(value) if literal else None


def _checked(got):
    """A recipe's answer in the contract's shape; None when it is not one, too long, or spells
    a path of the run's own folders."""
    if not got or not isinstance(got.get("expr"), str):
        return None
    out = {"expr": got["expr"], "imports": [str(i) for i in got.get("imports") or []],
           "setup": [str(s) for s in got.get("setup") or []]}
    whole = "\n".join(out["imports"] + out["setup"] + [out["expr"]])
    if len(whole) > _MAX_RECIPE or any(p in whole for p in _private):
        return None
    return out


def _fresh_folder(value):
    """A path inside the run's own folders that no recipe writes (an offload or output folder a
    library creates): a fresh relative name, which a maintainer's run creates the same way."""
    try:
        text = os.fspath(value) if isinstance(value, (str, os.PathLike)) else None
    except Exception:
        return None
    if not isinstance(text, str) or not os.path.isabs(text) or not any(text.startswith(p) for p in _private):
        return None
    name = _fresh_name(text)
    return None if name is None else {"expr": repr(name), "imports": [], "setup": []}


def _temp_folder():
    import tempfile     # (the launcher imports only what every run needs)
    return tempfile.gettempdir().rstrip(os.sep)


def _fresh_name(path):
    """``reprobot_<its base name>``, a relative folder a maintainer's run creates the same way;
    tempfile's random names (``tmpk3j9x_ab``) as ``reprobot_tmp``. None for an odd name."""
    base = os.path.basename(str(path).rstrip(os.sep)) or "dir"
    if not all(c.isalnum() or c in "._-" for c in base):
        return None
    if re.fullmatch(r"tmp[a-z0-9_]{8}", base):
        base = "tmp"
    elif os.path.dirname(str(path).rstrip(os.sep)) == _temp_folder():
        # mkdtemp(prefix="intent-export-") in the temp folder: the prefix is the user's name for
        # it, the eight random characters after it are noise in a repro
        m = re.fullmatch(r"(.*?[A-Za-z0-9])[-_.]+[a-z0-9_]{8}", base)
        if m:
            base = m.group(1)
    return "reprobot_" + base
'''
