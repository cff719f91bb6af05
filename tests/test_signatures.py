"""Did any release accept this keyword (issue #30): the catalogue of the stack's call signatures
across releases, built from wheels with the real builder, and its lookup."""
from __future__ import annotations

import gzip
import json
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from bot.targets import registry
from bot.upstream import signatures
from bot.upstream.signatures import Catalogue, catalogue, keyword_in_releases, load, parse_signature_error

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
import build_signatures as build  # noqa: E402
import release_wheels  # noqa: E402

BASE_V1 = '''
from dataclasses import dataclass, field
from typing import ClassVar

@dataclass
class BaseConfig:
    name: str = "x"
    seed: int = 0
    registry_size: ClassVar[int] = 0
    internal: int = field(default=0, init=False)
'''
CONFIG_V1 = '''
from dataclasses import dataclass
from fakepkg.base import BaseConfig
from elsewhere import Foreign

@dataclass
class AdapterConfig(BaseConfig):
    r: int = 8
    old_dropout: float = 0.0

class Runner(Foreign):
    def run(self, steps):
        pass

class Trainer:
    def __init__(self, model, args=None, tokenizer=None):
        self.model = model

    def train(self, resume=None):
        pass

    def _private(self, secret):
        pass

    @staticmethod
    def build(spec, strict=False):
        pass

def make_model(model, config, *, adapter_name="default"):
    return model

def _hidden(x):
    return x
'''
# 2.0 adds a dataclass field and a keyword, drops one of each, and starts taking **kwargs.
CONFIG_V2 = (CONFIG_V1.replace("    old_dropout: float = 0.0\n", "    use_dora: bool = False\n")
             .replace("def __init__(self, model, args=None, tokenizer=None):",
                      "def __init__(self, model, args=None, processing_class=None, **kwargs):")
             + "\nasync def merge(model, *, safe=True):\n    return model\n")
EXT = '''
from dataclasses import dataclass
from fakepkg.base import BaseConfig

@dataclass
class ExtConfig(BaseConfig):
    beta: float = 0.1
'''
VERSIONS = {"fakepkg": ["1.0", "2.0"], "fakeext": ["0.1"]}


def _wheel(folder: Path, pkg: str, version: str, files: dict[str, str]) -> None:
    with zipfile.ZipFile(folder / f"{pkg}-{version}-py3-none-any.whl", "w") as zf:
        for name, text in files.items():
            zf.writestr(f"{pkg}/{name}", text)
        zf.writestr(f"{pkg}-{version}.dist-info/METADATA", f"Name: {pkg}\nVersion: {version}\n")


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> tuple[Path, dict]:
    folder = tmp_path_factory.mktemp("wheels")
    # Listed newest first, as a careless edit might: the builder orders releases itself.
    _wheel(folder, "fakepkg", "2.0", {"__init__.py": "", "base.py": BASE_V1, "config.py": CONFIG_V2})
    _wheel(folder, "fakepkg", "1.0", {"__init__.py": "", "base.py": BASE_V1, "config.py": CONFIG_V1,
                                      "broken.py": "def (:\n"})
    _wheel(folder, "fakeext", "0.1", {"__init__.py": "", "config.py": EXT})
    out = folder / "sigs.json.gz"
    data = build.build(folder, out, {"fakepkg": ["2.0", "1.0"], "fakeext": ["0.1"]})
    return out, data


@pytest.fixture(scope="module")
def cat(built) -> Catalogue:
    return load(built[0])


def test_the_stored_form_is_masks_over_ordered_releases(built) -> None:
    out, data = built
    assert data["versions"] == VERSIONS
    assert json.loads(gzip.decompress(out.read_bytes())) == data
    rows = data["callables"]["fakepkg"]
    assert rows["Trainer"][0] == 0b11 and rows["merge"][0] == 0b10
    assert rows["Trainer"][2]["tokenizer"] == 0b01 and rows["Trainer"][2]["processing_class"] == 0b10
    assert rows["Trainer"][1] == 0b10                       # **kwargs from 2.0 on
    # Private callables and methods are left out; __init__ is the class itself.
    assert "_hidden" not in rows and "Trainer._private" not in rows and "Trainer.__init__" not in rows
    assert rows["Runner"][3] == ["Foreign"]


def test_same_wheels_give_the_same_bytes(built, tmp_path) -> None:
    out, _ = built
    again = tmp_path / "again.json.gz"
    build.build(out.parent, again, {"fakepkg": ["1.0", "2.0"], "fakeext": ["0.1"]})
    assert again.read_bytes() == out.read_bytes()


def test_a_keyword_another_release_accepts_is_a_version_mismatch(cat) -> None:
    old = cat.keyword_in_releases("Trainer.__init__", "tokenizer")
    assert (old.verdict, old.package, old.first, old.last, old.newest, old.in_newest) == \
        ("in_some_release", "fakepkg", "1.0", "1.0", "2.0", False)
    assert old.version_mismatch
    new = cat.keyword_in_releases("Trainer()", "processing_class")
    assert (new.verdict, new.first, new.last, new.in_newest) == ("in_some_release", "2.0", "2.0", True)


def test_dataclass_fields_own_and_inherited(cat) -> None:
    added = cat.keyword_in_releases("AdapterConfig.__init__", "use_dora")
    assert (added.verdict, added.first, added.in_newest) == ("in_some_release", "2.0", True)
    dropped = cat.keyword_in_releases("AdapterConfig.__init__", "old_dropout")
    assert (dropped.verdict, dropped.last, dropped.in_newest) == ("in_some_release", "1.0", False)
    inherited = cat.keyword_in_releases("AdapterConfig.__init__", "seed")
    assert (inherited.verdict, inherited.first, inherited.last, inherited.via) == ("in_some_release", "1.0", "2.0", "")
    # A ClassVar and an init=False field are no parameters.
    for kw in ("registry_size", "internal"):
        assert cat.keyword_in_releases("AdapterConfig.__init__", kw).verdict == "in_no_release"


def test_a_base_of_another_package_is_followed(cat) -> None:
    # fakeext's config subclasses fakepkg's: unresolved when fakeext was read, followed at lookup.
    a = cat.keyword_in_releases("ExtConfig.__init__", "seed")
    assert (a.verdict, a.package, a.via, a.callable) == ("in_some_release", "fakepkg", "fakepkg:BaseConfig",
                                                         "ExtConfig")
    assert cat.keyword_in_releases("ExtConfig.__init__", "beta").via == ""
    cross = Catalogue({"versions": {"a": ["1"], "b": ["1", "2"]},
                       "callables": {"a": {"Sub": [1, 0, {"own": 1}, ["Base"]]},
                                     "b": {"Base": [3, 0, {"old": 1, "new": 2}]}}})
    hit = cross.keyword_in_releases("Sub.__init__", "old")
    assert (hit.verdict, hit.package, hit.via, hit.last, hit.in_newest) == ("in_some_release", "b", "b:Base", "1",
                                                                              False)
    miss = cross.keyword_in_releases("Sub", "typo")
    assert (miss.verdict, miss.package, miss.unresolved_bases) == ("in_no_release", "a", ())


def test_a_keyword_no_release_accepts_is_usage(cat) -> None:
    typo = cat.keyword_in_releases("AdapterConfig.__init__", "rank")
    assert (typo.verdict, typo.package, typo.takes_kwargs, typo.unresolved_bases) == \
        ("in_no_release", "fakepkg", False, ())
    assert not typo.version_mismatch
    assert cat.keyword_in_releases("Trainer.__init__", "tokenizr").takes_kwargs is True
    assert cat.keyword_in_releases("make_model", "adapter").verdict == "in_no_release"
    assert cat.keyword_in_releases("make_model", "adapter_name").verdict == "in_some_release"
    # A base outside every catalogued package: its parameters are not vouched for.
    runner = cat.keyword_in_releases("Runner.__init__", "steps")
    assert (runner.verdict, runner.unresolved_bases) == ("in_no_release", ("Foreign",))
    assert cat.keyword_in_releases("Runner.run", "steps").verdict == "in_some_release"


def test_methods_static_methods_and_async_functions(cat) -> None:
    assert cat.keyword_in_releases("Trainer.train", "resume").verdict == "in_some_release"
    assert cat.keyword_in_releases("Trainer.build", "spec").verdict == "in_some_release"   # no self to drop
    merged = cat.keyword_in_releases("fakepkg.merge", "safe")
    assert (merged.verdict, merged.callable, merged.callable_first) == ("in_some_release", "merge", "2.0")


@pytest.mark.parametrize("name", ["__init__", "Nope.__init__", "_hidden", "Trainer._private", ""])
def test_unknown_callables(cat, name: str) -> None:
    assert cat.keyword_in_releases(name, "x").verdict == "unknown_callable"


@pytest.mark.parametrize("message, expected", [
    ("TypeError: Accelerator.__init__() got an unexpected keyword argument 'dispatch_batches'",
     ("Accelerator.__init__", ("dispatch_batches",), "unexpected")),
    ("get_peft_model() got an unexpected keyword argument 'adapter'", ("get_peft_model", ("adapter",), "unexpected")),
    ("__init__() got an unexpected keyword argument 'x'", ("__init__", ("x",), "unexpected")),
    ("SFTTrainer.__init__() got an unexpected keyword argument 'tokenizer'. Did you mean 'tokenize'?",
     ("SFTTrainer.__init__", ("tokenizer",), "unexpected")),
    ("TrainingArguments.__init__() missing 1 required positional argument: 'output_dir'",
     ("TrainingArguments.__init__", ("output_dir",), "missing")),
    ("f() missing 2 required keyword-only arguments: 'a' and 'b'", ("f", ("a", "b"), "missing")),
    ("('Keyword argument not understood:', 'foo')", (None, ("foo",), "not_understood")),
    ("Keyword argument not understood: foo", (None, ("foo",), "not_understood")),
])
def test_parse_signature_error(message: str, expected: tuple) -> None:
    got = parse_signature_error(message)
    assert got is not None and (got.callable, got.keywords, got.shape) == expected


@pytest.mark.parametrize("message", ["", None, "ValueError: unexpected value 'x'", "missing a config file"])
def test_other_messages_are_not_signature_errors(message) -> None:
    assert parse_signature_error(message) is None


def test_builder_refuses_a_missing_wheel(tmp_path) -> None:
    proc = subprocess.run([sys.executable, str(ROOT / "scripts" / "build_signatures.py"), "--wheels", str(tmp_path),
                           "--out", str(tmp_path / "x.json.gz")], capture_output=True, text=True, cwd=tmp_path)
    assert proc.returncode != 0
    assert proc.stderr.strip().startswith("build_signatures: no wheel for ") and "\n" not in proc.stderr.strip()
    assert not (tmp_path / "x.json.gz").exists()


# The committed catalogue, built from the released wheels.

def test_committed_catalogue_covers_the_stack() -> None:
    path = ROOT / "bot" / "data" / "signatures.json.gz"
    assert path.stat().st_size < 2_000_000
    data = json.loads(gzip.decompress(path.read_bytes()))
    stack = {p for t in registry.targets() if not t.foundation for p in t.packages}
    assert set(data["versions"]) == set(release_wheels.VERSIONS) == stack
    assert all(len(data["callables"][pkg]) > 100 for pkg in stack)


def test_committed_catalogue_knows_the_famous_renames() -> None:
    ev = keyword_in_releases("TrainingArguments.__init__", "evaluation_strategy")
    assert (ev.verdict, ev.package, ev.in_newest) == ("in_some_release", "transformers", False)
    assert ev.first == release_wheels.VERSIONS["transformers"][0]
    assert keyword_in_releases("TrainingArguments.__init__", "eval_strategy").in_newest
    disp = keyword_in_releases("Accelerator.__init__", "dispatch_batches")
    assert (disp.verdict, disp.package, disp.in_newest) == ("in_some_release", "accelerate", False)
    r = keyword_in_releases("LoraConfig.__init__", "r")
    assert (r.verdict, r.package, r.in_newest) == ("in_some_release", "peft", True)
    assert keyword_in_releases("LoraConfig.__init__", "rank").verdict == "in_no_release"
    tok = keyword_in_releases("DPOTrainer.__init__", "tokenizer")
    assert (tok.verdict, tok.package, tok.in_newest) == ("in_some_release", "trl", False)
    # trl's configs inherit TrainingArguments from transformers: followed across packages.
    via = keyword_in_releases("DPOConfig.__init__", "evaluation_strategy")
    assert (via.verdict, via.via) == ("in_some_release", "transformers:TrainingArguments")
    assert keyword_in_releases("get_peft_model", "peft_config").in_newest
    assert keyword_in_releases("__init__", "r").verdict == "unknown_callable"


def test_a_missing_data_file_gives_an_empty_catalogue(monkeypatch) -> None:
    # A broken install still answers (every callable unknown) instead of failing the report.
    class NoFiles:
        def joinpath(self, _name: str):
            raise FileNotFoundError("gone")

    catalogue.cache_clear()
    monkeypatch.setattr(signatures.resources, "files", lambda _pkg: NoFiles())
    try:
        assert keyword_in_releases("Accelerator.__init__", "cpu").verdict == "unknown_callable"
    finally:
        catalogue.cache_clear()


def test_the_release_list_names_only_registered_targets() -> None:
    release_wheels.check_against_registry(release_wheels.VERSIONS)
    with pytest.raises(SystemExit, match="notapkg is not a package of a registered target"):
        release_wheels.check_against_registry({**release_wheels.VERSIONS, "notapkg": ["1.0"]})
