"""Inlining functions called once, collapsing data-only classes: exact output sources."""
from __future__ import annotations

from tests.reducer_support import raises, reduce_with


def test_inline_function_binds_arguments_and_defaults() -> None:
    src = ("def build(n, scale=2):\n    total = n * scale\n    return total\n"
           "x = build(5)\nraise KeyError(x)\n")
    out = reduce_with(src, raises(KeyError, "10"), "inline_functions")
    assert out == "n = 5\nscale = 2\ntotal = n * scale\nx = total\nraise KeyError(x)\n"


def test_inline_method_binds_self() -> None:
    src = ("class T:\n    def __init__(self):\n        self.v = 3\n"
           "    def setup(self):\n        raise KeyError(self.v)\n"
           "t = T()\nt.setup()\n")
    out = reduce_with(src, raises(KeyError, "3"), "inline_functions")
    assert out == ("class T:\n    def __init__(self):\n        self.v = 3\n"
                   "t = T()\nself = t\nraise KeyError(self.v)\n")


def test_function_called_twice_or_returning_early_is_left_alone() -> None:
    twice = "def f():\n    return 1\nf()\nraise KeyError(f())\n"
    assert reduce_with(twice, raises(KeyError), "inline_functions") == twice
    early = "def f(x):\n    if x:\n        return 1\n    raise KeyError(x)\nf(0)\n"
    assert reduce_with(early, raises(KeyError), "inline_functions") == early


def test_a_function_setting_globals_called_from_the_module_is_inlined_without_its_global_line() -> None:
    # a pool initializer brought home: `load()` at the module's top level, where its `global`
    # line says nothing; called from inside another function it would, so it stays there
    src = ("_model = None\n\n\ndef load(path):\n    global _model\n    _model = {'path': path}\n\n\n"
           "load('ckpt')\nraise KeyError(_model['path'])\n")
    out = reduce_with(src, raises(KeyError, "ckpt"), "inline_functions")
    assert out == "_model = None\n\n\npath = 'ckpt'\n_model = {'path': path}\nraise KeyError(_model['path'])\n"
    nested = src.replace("load('ckpt')\nraise", "def main():\n    load('ckpt')\n\n\nmain()\nmain()\nraise")
    assert "global _model" in reduce_with(nested, raises(KeyError, "ckpt"), "inline_functions")


def test_collapse_data_only_class() -> None:
    src = 'class Cfg:\n    """Settings."""\n    lr = 0.5\n    name: str = "gemma"\nraise KeyError(Cfg.name, Cfg.lr)\n'
    out = reduce_with(src, raises(KeyError, "gemma"), "collapse_classes")
    assert out == 'raise KeyError("gemma", 0.5)\n'


def test_collapse_class_used_through_an_instance() -> None:
    src = "class Cfg:\n    lr = 0.5\ncfg = Cfg()\nraise KeyError(cfg.lr)\n"
    assert reduce_with(src, raises(KeyError, "0.5"), "collapse_classes") == "raise KeyError(0.5)\n"
    with_method = "class Cfg:\n    lr = 0.5\n    def f(self):\n        pass\nraise KeyError(Cfg.lr)\n"
    assert reduce_with(with_method, raises(KeyError), "collapse_classes") == with_method


def test_inlined_main_drops_its_return_code() -> None:
    src = "def main(argv=None):\n    raise KeyError(argv)\n    return 0\nmain()\n"
    out = reduce_with(src, raises(KeyError), "inline_functions")
    assert out == "argv = None\nraise KeyError(argv)\n"
