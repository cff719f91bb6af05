"""Who raises an error message (issue #13): the catalogue of the stack's own raise statements that
routes a paste cut above the raising frame, or an error line alone."""
from __future__ import annotations

import gzip
import json
import sys
import zipfile
from pathlib import Path

import pytest

from bot.upstream.failure import failure_from_text
from bot.upstream.raise_sites import Catalogue, catalogue, raisers
from bot.upstream.route import route

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
import build_raise_sites as build  # noqa: E402
import release_wheels  # noqa: E402

SOURCE = '''
def dispatch(model, offload_dir=None):
    if offload_dir is None:
        raise ValueError(
            "We need an `offload_dir` to dispatch this model according to this `device_map`, the following "
            f"submodules need to be offloaded: {', '.join(model)}."
        )

def check(x, n):
    msg = f"Expected {n} adapters"
    msg += ", got " + str(x)
    raise RuntimeError(msg)

def old_style(name):
    raise KeyError("Unknown quantization type %s for this layer" % name)

def formatted(name):
    raise TypeError("{} is not a supported optimizer name".format(name))

def pythons_own(self, name):
    raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

def too_short(x):
    raise ValueError(f"bad {x}")

if not available:
    raise ImportError("This module needs the optional `scipy` package\\nInstall it with pip.")
'''


def _templates(source: str) -> dict[str, tuple[str, list]]:
    return {func: (exc, tpl) for exc, tpl, func in build.sites_of(source)}


def test_templates_of_raise_statements_keep_literal_text_and_mark_formatted_values() -> None:
    t = _templates(SOURCE)
    assert t["dispatch"] == ("ValueError", ["We need an `offload_dir` to dispatch this model according to this "
                                            "`device_map`, the following submodules need to be offloaded: ", None, "."])
    # A message built in a name before the raise, with += after it.
    assert t["check"] == ("RuntimeError", ["Expected ", None, " adapters, got ", None])
    assert t["old_style"][1] == ["Unknown quantization type ", None, " for this layer"]
    assert t["formatted"][1] == [None, " is not a supported optimizer name"]
    # The first line only, as a traceback's error line shows it.
    assert t["<module>"] == ("ImportError", ["This module needs the optional `scipy` package"])
    # Python's own wording names nobody; too little literal text names nobody.
    assert "pythons_own" not in t and "too_short" not in t


def test_a_message_matches_a_template_in_order_with_values_anywhere_between() -> None:
    entries = [{"package": "accelerate", "exc": "ValueError", "template": _templates(SOURCE)["dispatch"][1],
                "sites": ["a.py:f"], "n_sites": 1, "first": "0.15.0", "last": "1.15.0"},
               {"package": "peft", "exc": "RuntimeError", "template": ["Expected ", None, " adapters, got ", None],
                "sites": ["p.py:g"], "n_sites": 1, "first": "0.3.0", "last": "0.4.0"}]
    cat = Catalogue(entries)
    hit = cat.raised_by("ValueError", "We need an `offload_dir` to dispatch this model according to this "
                                      "`device_map`, the following submodules need to be offloaded: lm_head, model.")
    assert [h.package for h in hit] == ["accelerate"] and hit[0].same_exc
    # Out of order, or another text, does not match.
    assert cat.raised_by("RuntimeError", "got 3, Expected 2 adapters") == []
    assert cat.raised_by("RuntimeError", "Expected 2 adapters, got 3")[0].package == "peft"
    # A short template with another exception class is a coincidence, not a raiser.
    assert cat.raised_by("TypeError", "Expected 2 adapters, got 3") == []


def test_the_bundled_catalogue_knows_real_messages_of_each_package() -> None:
    cases = {
        ("NotImplementedError", "igemmlt not available (probably built with NO_CUBLASLT)"): "bitsandbytes",
        ("ValueError", "We need an `offload_dir` to dispatch this model according to this `device_map`, the "
                       "following submodules need to be offloaded: base_model.model.lm_head."): "accelerate",
        ("ValueError", "Please specify `target_modules` in `peft_config`"): "peft",
        ("ValueError", "model must be a PreTrainedModelWrapper, got <class 'transformers.models.codegen.modeling_codegen."
                       "CodeGenForCausalLM'> - supported architectures are: (<class 'trl.models.modeling_value_head."
                       "AutoModelForCausalLMWithValueHead'>,)"): "trl",
        ("ValueError", "`.to` is not supported for `4-bit` or `8-bit` bitsandbytes models. Please use the model "
                       "as it is, since the model has already been set to the correct devices and casted to the "
                       "correct `dtype`."): "transformers",
    }
    for (exc, message), pkg in cases.items():
        assert list(raisers(exc, message)) == [pkg], message
    # Python's own message, which every package's __getattr__ imitates, names nobody.
    assert raisers("AttributeError", "'NoneType' object has no attribute 'cquantize_blockwise_fp16_nf4'") == {}
    data = json.loads(gzip.decompress((ROOT / "bot/data/raise_sites.json.gz").read_bytes()))
    assert set(data["versions"]) == {"transformers", "peft", "accelerate", "bitsandbytes", "trl"}
    assert len(catalogue().entries) == len(data["entries"]) > 5000


def test_an_error_line_alone_is_routed_to_the_package_that_raises_it() -> None:
    r = route(failure_from_text("NotImplementedError: igemmlt not available (probably built with NO_CUBLASLT)\n"))
    assert r.target == "bitsandbytes-foundation/bitsandbytes"
    assert "bitsandbytes's code raises this message (bitsandbytes/functional.py:igemmlt" in r.verdict
    # bitsandbytes stopped raising it: the reason says so, so the reporter can try an upgrade first.
    assert "not by later ones up to 0.50.2" in r.verdict
    site = raisers("ValueError", "Please specify `target_modules` in `peft_config`")["peft"]
    assert not site.gone and site.last == "0.21.2"


def test_a_paste_cut_at_the_users_call_weighs_the_raiser_against_the_called_package() -> None:
    text = ("Traceback (most recent call last):\n"
            '  File "train.py", line 9, in <module>\n    model = model.merge_and_unload()\n'
            "NotImplementedError: igemmlt not available (probably built with NO_CUBLASLT)\n")
    r = route(failure_from_text(text))
    reasons = {c["repo"]: c["reasons"] for c in r.ranked}
    assert r.target == "bitsandbytes-foundation/bitsandbytes" and r.raised_in == "bitsandbytes"
    assert any("stops at the user's call into peft" in x for x in reasons["huggingface/peft"])
    # The user's frame is the innermost shown, but the user's code did not raise this.
    assert not any("raised in the user's own code" in x for c in r.ranked for x in c["reasons"])


def test_a_whole_traceback_is_routed_by_its_frames_not_by_the_catalogue(tmp_path: Path) -> None:
    """reprobot's own run shows every frame: a user's script that raises a library's message
    itself is the user's code."""
    from dataclasses import replace

    text = ("Traceback (most recent call last):\n"
            '  File "repro.py", line 1, in <module>\n'
            "    raise NotImplementedError('igemmlt not available (probably built with NO_CUBLASLT)')\n"
            "NotImplementedError: igemmlt not available (probably built with NO_CUBLASLT)\n")
    ran = route(replace(failure_from_text(text), repro_dir=tmp_path))
    assert ran.target is None and "user's own code" in ran.verdict
    # Pasted, the line shown is the user's own raise: still the user's, whoever else words it so.
    pasted = route(failure_from_text(text))
    assert pasted.target is None and "user's own code" in pasted.verdict
    cut = text.replace("    raise NotImplementedError('igemmlt not available (probably built with NO_CUBLASLT)')\n",
                       "    out = layer(x)\n")
    assert route(failure_from_text(cut)).target == "bitsandbytes-foundation/bitsandbytes"


def test_the_build_reads_wheels_and_records_the_releases_that_raise(tmp_path: Path) -> None:
    for version, message in (("1.0.0", "Old message that is long enough"), ("2.0.0", "New message that is long enough")):
        with zipfile.ZipFile(tmp_path / f"fakepkg-{version}-py3-none-any.whl", "w") as zf:
            zf.writestr("fakepkg/core.py", f"def run():\n    raise ValueError('{message}')\n"
                                           f"def keep():\n    raise KeyError('Raised by every release here')\n")
            zf.writestr("fakepkg-1.0.0.dist-info/METADATA", "Name: fakepkg\n")
    rows = build.catalogue([("fakepkg", v, release_wheels.wheel_sources("fakepkg", tmp_path / f"fakepkg-{v}-py3-none-any.whl"))
                            for v in ("1.0.0", "2.0.0")])
    got = {r["template"][0]: (r["first"], r["last"], r["sites"]) for r in rows}
    assert got == {"Old message that is long enough": ("1.0.0", "1.0.0", ["fakepkg/core.py:run"]),
                   "New message that is long enough": ("2.0.0", "2.0.0", ["fakepkg/core.py:run"]),
                   "Raised by every release here": ("1.0.0", "2.0.0", ["fakepkg/core.py:keep"])}


@pytest.mark.parametrize("shape", ["'{}' object has no attribute '{}'", "{} has no attribute {}",
                                   "module {} has no attribute {}", "tuple index out of range"])
def test_pythons_own_shapes_are_left_out(shape: str) -> None:
    assert build._PYTHONS_OWN.match(shape)
    assert not build._PYTHONS_OWN.match("'AcceleratorState' object has no attribute '{}'")
