"""What "the same failure" means: equivalences and non-equivalences of Signatures."""
from __future__ import annotations

import hashlib
import re
from pathlib import Path

from reducer.failure.normalize import library_path, normalize_message
from reducer.failure.outcome import Frame, Outcome, TracebackRecord
from reducer.failure.signature import MatchOptions, Signature, distinct_failures, matches, signature_of
from reducer.failure.tracebacks import parse_tracebacks

DATA = Path(__file__).parent / "data" / "tracebacks"


def seed(name: str) -> TracebackRecord:
    (rec,) = parse_tracebacks((DATA / name).read_text())
    return rec


def to_posix(text: str) -> str:
    """The same traceback as a Linux venv would print it."""
    def repl(m: re.Match) -> str:
        return "/usr/lib/python3.12/site-packages/" + m.group(1).replace("\\", "/")
    text = re.sub(r"E:\\Folder\\gemma_env\\Lib\\site-packages\\([^\u201d\"]+)", repl, text)
    return text.replace("E:\\Folder\\inference_worker.py", "/home/someone/inference_worker.py")


def test_keyerror_22_and_13_match():
    text = (DATA / "seed_keyerror_22.txt").read_text()
    (a,) = parse_tracebacks(text)
    (b,) = parse_tracebacks(text.replace("KeyError: 22", "KeyError: 13"))
    assert a.message != b.message
    assert signature_of(a) == signature_of(b)
    assert signature_of(a).message == "<N>"


def test_a_set_printed_in_hash_seed_order_is_one_message():
    """peft's "Target modules {'q_proj', 'v_proj'} not found" prints the set in the order of the
    run's PYTHONHASHSEED: two runs of one failure must not read as two failures."""
    a = normalize_message("Target modules {'v_proj', 'q_proj'} not found in the base model.")
    assert a == normalize_message("Target modules {'q_proj', 'v_proj'} not found in the base model.")
    assert "{'q_proj', 'v_proj'}" in a
    # a dict, one element or mixed values keep their order: only a set of strings is sorted
    assert normalize_message("{'b': 'x', 'a': 'y'}") == "{'b': 'x', 'a': 'y'}"
    assert normalize_message("got {'b', 1}") == "got {'b', <N>}"


def test_windows_and_posix_paths_give_one_signature():
    text = (DATA / "seed_meta_tensor.txt").read_text()
    (win,) = parse_tracebacks(text)
    (posix,) = parse_tracebacks(to_posix(text))
    assert posix.frames[3].path == "/usr/lib/python3.12/site-packages/peft/peft_model.py"
    assert signature_of(win) == signature_of(posix)
    assert signature_of(win).id == signature_of(posix).id


def test_line_numbers_do_not_matter():
    text = (DATA / "seed_meta_tensor.txt").read_text()
    (a,) = parse_tracebacks(text)
    (b,) = parse_tracebacks(re.sub(r"line (\d+)", lambda m: f"line {int(m.group(1)) + 7}", text))
    assert [f.lineno for f in a.frames] != [f.lineno for f in b.frames]
    assert signature_of(a) == signature_of(b)


def test_meta_tensor_and_is_hf_initialized_stay_apart():
    meta, hf_init = seed("seed_meta_tensor.txt"), seed("seed_is_hf_initialized.txt")
    assert signature_of(meta) != signature_of(hf_init)
    # Even with the message ignored and no frames, the exception type differs.
    loose = MatchOptions(frames=0, ignore_message=True)
    assert signature_of(meta, loose) != signature_of(hf_init, loose)
    # And the message keeps the quoted keyword: another kwarg is another bug.
    other = TracebackRecord(hf_init.exc_type, hf_init.message.replace("_is_hf_initialized", "device"),
                            hf_init.frames, "")
    assert signature_of(other) != signature_of(hf_init)


def test_user_frames_are_excluded():
    rec = seed("seed_meta_tensor.txt")
    sig = signature_of(rec, MatchOptions(frames=50))
    assert not any("inference_worker" in f for f in sig.frames)
    assert sig.frames[0] == "torch_meta_registrations.py:meta_local_scalar_dense"
    assert "accelerate/hooks.py:attach_align_device_hook_on_blocks" in sig.frames
    # The recursion printed four times and "repeated 3 more times" counts once.
    assert sig.frames.count("accelerate/hooks.py:attach_align_device_hook_on_blocks") == 1


def test_a_task_failing_in_a_pool_worker_is_the_same_failure_called_in_the_parent():
    # Two library frames, then the worker's plumbing: the task called directly (bring_home)
    # must have the same signature, or the child can never be brought home.
    lib = "/venv/lib/python3.11/site-packages/transformers/generation/utils.py"
    stdlib = "/usr/lib/python3.11/"
    raised = [Frame(lib, 2845, "generate"), Frame(lib, 2409, "_prepare_special_tokens")]
    worker = TracebackRecord("ValueError", "decoder_start_token_id has to be defined", tuple(
        [Frame(stdlib + "multiprocessing/process.py", 314, "_bootstrap"),
         Frame(stdlib + "multiprocessing/process.py", 108, "run"),
         Frame(stdlib + "concurrent/futures/process.py", 263, "_process_worker"),
         Frame("/home/u/job.py", 100, "generate_titles")] + raised), "")
    parent = TracebackRecord("ValueError", "decoder_start_token_id has to be defined",
                             (Frame("/home/u/job.py", 12, "<module>"), Frame("/home/u/job.py", 100, "generate_titles"),
                              *raised), "")
    assert signature_of(worker) == signature_of(parent)
    assert signature_of(worker).frames == ("transformers/generation/utils.py:_prepare_special_tokens",
                                           "transformers/generation/utils.py:generate")


def test_a_module_failing_under_ddp_is_the_same_failure_called_on_the_module():
    lib = "/venv/lib/python3.11/site-packages/"
    raised = [Frame(lib + "transformers/models/reformer/modeling_reformer.py", 2100, "forward"),
              Frame(lib + "transformers/models/reformer/modeling_reformer.py", 1900, "forward")]
    message = "If training, sequence length 13 has to be a multiple of least common multiple chunk_length 8."
    wrapped = TracebackRecord("ValueError", message, tuple(
        [Frame("/home/u/lm.py", 112, "run"), Frame(lib + "torch/nn/modules/module.py", 1776, "_wrapped_call_impl"),
         Frame(lib + "torch/nn/modules/module.py", 1787, "_call_impl"),
         Frame(lib + "torch/nn/parallel/distributed.py", 1660, "forward"),
         Frame(lib + "torch/nn/parallel/distributed.py", 1480, "_run_ddp_forward"),
         Frame(lib + "torch/nn/modules/module.py", 1787, "_call_impl")] + raised), "")
    direct = TracebackRecord("ValueError", message, (Frame("/home/u/repro.py", 3, "<module>"), *raised), "")
    assert signature_of(wrapped) == signature_of(direct)
    # what DDP raises itself keeps its own frame
    own = TracebackRecord("RuntimeError", "Expected to have finished reduction in the prior iteration", (
        Frame("/home/u/lm.py", 112, "run"), Frame(lib + "torch/nn/parallel/distributed.py", 1660, "forward"),
        Frame(lib + "torch/nn/parallel/distributed.py", 1500, "_pre_forward")), "")
    assert signature_of(own).frames == ("torch/nn/parallel/distributed.py:_pre_forward",)


def test_what_called_the_user_s_code_is_not_part_of_the_failure():
    # a Trainer runs the user's callback, which calls generate: the Trainer's frames say how the
    # script got there; the same generate call made directly is the same failure
    gen = "/venv/lib/python3.11/site-packages/transformers/generation/utils.py"
    trainer = "/venv/lib/python3.11/site-packages/transformers/"
    raised = [Frame(gen, 2796, "generate"), Frame(gen, 2542, "_get_deprecated_gen_repo")]
    message = "Contrastive Search requires `trust_remote_code=True` in your `generate` call"
    via_trainer = TracebackRecord("ValueError", message, tuple(
        [Frame("/home/u/train.py", 140, "<module>"), Frame(trainer + "trainer.py", 2100, "train"),
         Frame(trainer + "trainer_callback.py", 560, "call_event"), Frame("/home/u/train.py", 101, "on_evaluate")]
        + raised), "")
    direct = TracebackRecord("ValueError", message, (Frame("/home/u/repro.py", 3, "<module>"), *raised), "")
    assert signature_of(via_trainer) == signature_of(direct)
    assert signature_of(via_trainer, MatchOptions(frames=20)).frames == (
        "transformers/generation/utils.py:_get_deprecated_gen_repo", "transformers/generation/utils.py:generate")
    # raised in the user's own code: the library frames that called it are what is known of it
    own = TracebackRecord("KeyError", "'labels'", tuple(
        [Frame("/home/u/train.py", 140, "<module>"), Frame(trainer + "trainer.py", 2100, "train"),
         Frame(trainer + "trainer_callback.py", 560, "call_event"), Frame("/home/u/train.py", 101, "on_evaluate")]), "")
    assert signature_of(own).frames == ("transformers/trainer_callback.py:call_event", "transformers/trainer.py:train")


def test_frames_option_controls_strictness():
    rec = seed("seed_meta_tensor.txt")
    assert len(signature_of(rec, MatchOptions(frames=1)).frames) == 1
    assert len(signature_of(rec, MatchOptions(frames=5)).frames) == 5
    frames = tuple(rec.frames)
    # A different caller above the innermost three frames: same by default, different at 8.
    changed = TracebackRecord(rec.exc_type, rec.message,
                              (Frame("/x/site-packages/trl/trainer.py", 1, "train"),) + frames[3:], "")
    assert signature_of(changed) == signature_of(rec)
    assert signature_of(changed, MatchOptions(frames=20)) != signature_of(rec, MatchOptions(frames=20))


def test_ignore_message_option():
    rec = seed("seed_is_hf_initialized.txt")
    other = TracebackRecord(rec.exc_type, "Int8Params.__new__() got an unexpected keyword argument 'x'",
                            rec.frames, "")
    assert signature_of(rec) != signature_of(other)
    assert signature_of(rec, MatchOptions(ignore_message=True)) == signature_of(other, MatchOptions(ignore_message=True))


def test_device_index_kept_unless_asked():
    a = TracebackRecord("RuntimeError", "Expected all tensors to be on the same device, but found at "
                        "least two devices, cuda:0 and cpu!", (), "")
    b = TracebackRecord(a.exc_type, a.message.replace("cuda:0", "cuda:1"), (), "")
    assert signature_of(a) != signature_of(b)
    opts = MatchOptions(normalize_devices=True)
    assert signature_of(a, opts) == signature_of(b, opts)


def test_oom_sizes_normalised_device_kept():
    msg = ("CUDA out of memory. Tried to allocate 20.00 MiB. GPU 1 has a total capacity of 4.00 GiB of "
           "which 0 bytes is free.")
    assert normalize_message(msg) == ("CUDA out of memory. Tried to allocate <N> MiB. GPU 1 has a total "
                                      "capacity of <N> GiB of which <N> bytes is free.")


def test_normalisation_placeholders():
    assert normalize_message("cannot open /tmp/tmpk2j3h4x_/w.py at 0x7f3a2b") == "cannot open <PATH> at <ADDR>"
    assert normalize_message(r"offload dir E:\Folder\offload_temp missing") == "offload dir <PATH> missing"
    assert normalize_message("<module 'peft' from '/a/b/peft/__init__.py'> has no x") == "<module 'peft'> has no x"
    assert normalize_message("Target module Gemma4ClippableLinear(\n  (linear): Linear(in_features=32)\n) "
                             "is not supported") == "Target module Gemma4ClippableLinear(...) is not supported"
    assert normalize_message("'model.layers.13.mlp'") == "'model.layers.<N>.mlp'"
    assert normalize_message("Params4bit float16") == "Params4bit float16"


def test_library_path_forms():
    assert library_path(r"E:\Folder\gemma_env\Lib\site-packages\peft\peft_model.py") == "peft/peft_model.py"
    assert library_path("/usr/lib/python3.12/dist-packages/peft/peft_model.py") == "peft/peft_model.py"
    assert library_path("/usr/lib/python3.12/multiprocessing/process.py") == "multiprocessing/process.py"
    assert library_path(".../accelerate/hooks.py") == "accelerate/hooks.py"
    assert library_path("/home/u/project/worker.py") is None
    assert library_path("/home/u/transformers/src/transformers/trainer.py") == "transformers/trainer.py"
    assert library_path("/home/u/myproj/src/myproj/train.py") is None
    assert library_path("<frozen runpy>") is None


def test_signature_prints_on_one_line_and_hashes_stably():
    sig = Signature("KeyError", "<N>", ("transformers/models/gemma4/modeling_gemma4.py:forward",))
    assert sig.one_line() == "KeyError: <N> @ transformers/models/gemma4/modeling_gemma4.py:forward"
    assert "\n" not in signature_of(seed("seed_meta_tensor.txt")).one_line()
    # The id is a pure function of the content: the same on every machine and run.
    canon = '["KeyError","<N>",["transformers/models/gemma4/modeling_gemma4.py:forward"]]'
    assert sig.id == hashlib.sha256(canon.encode()).hexdigest()[:10] == "f54e3449f2"
    assert Signature.from_dict(sig.to_dict()) == sig


def test_distinct_failures_and_match():
    meta, keyerr = seed("seed_meta_tensor.txt"), seed("seed_keyerror_22.txt")
    outcome = Outcome(returncode=0, wall_time=1.0, tracebacks=[meta, keyerr, meta])
    choices = distinct_failures(outcome)
    assert [s for s, _ in choices] == [signature_of(meta), signature_of(keyerr)]
    assert matches(outcome, signature_of(keyerr))
    assert not matches(Outcome(returncode=1, wall_time=1.0, tracebacks=[meta]), signature_of(keyerr))


def test_a_message_s_detail_lines_say_which_failure_it_is():
    # torch's load_state_dict puts the failure under a generic first line; pytorch-105963's report
    # (a meta tensor's copy) reduced to an unexpected key while only the first line counted
    def record(*details: str) -> TracebackRecord:
        text = ("Traceback (most recent call last):\n"
                '  File "/home/u/repro.py", line 5, in <module>\n    m.load_state_dict(sd)\n'
                '  File "/venv/lib/python3.11/site-packages/torch/nn/modules/module.py", line 2624, in load_state_dict\n'
                "    raise RuntimeError(\n"
                "RuntimeError: Error(s) in loading state_dict for Net:\n" + "".join("\t%s\n" % d for d in details)
                + "a log line after it\n")
        (rec,) = parse_tracebacks(text)
        return rec
    meta = 'While copying the parameter named "%s", whose dimensions in the model are torch.Size([%d, 16]) and ' \
           "whose dimensions in the checkpoint are torch.Size([%d, 16]), an exception occurred : " \
           "('Cannot copy out of meta tensor; no data!',)."
    unexpected = record('Unexpected key(s) in state_dict: "embedding.weight".')
    one = record(meta % ("embedding.weight", 50, 50))
    two = record(meta % ("emb.weight", 2, 2), meta % ("fc.weight", 4, 4),
                 meta.replace("%d, 16", "%d") % ("fc.bias", 4, 4))
    assert signature_of(unexpected) != signature_of(one)
    # which parameters, how many and their sizes change as the model shrinks: the same failure
    assert signature_of(one) == signature_of(two)
    assert signature_of(record('Unexpected key(s) in state_dict: "a.weight", "b.bias".')) == signature_of(unexpected)
    # the first line stays the headline (what the exception hook writes of a raised exception)
    assert one.headline == "RuntimeError: Error(s) in loading state_dict for Net:"
    assert "a log line" not in one.message
