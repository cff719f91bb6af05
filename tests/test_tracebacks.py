"""Traceback parsing on real output: the seeds' forum tracebacks and live runs."""
from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from reducer.failure.tracebacks import all_records, parse_tracebacks

DATA = Path(__file__).parent / "data" / "tracebacks"


def run_py(code: str, tmp_path: Path) -> subprocess.CompletedProcess:
    script = tmp_path / "s.py"
    script.write_text(textwrap.dedent(code))
    return subprocess.run([sys.executable, str(script)], capture_output=True, text=True, cwd=tmp_path,
                          env={"PYTHONFAULTHANDLER": "1", "PATH": "/usr/bin:/bin"}, timeout=60)


def test_seed_meta_tensor_traceback_from_forum_text():
    (rec,) = parse_tracebacks((DATA / "seed_meta_tensor.txt").read_text())
    assert rec.exc_type == "RuntimeError"
    assert rec.message == "Tensor.item() cannot be called on meta tensors"
    funcs = [f.func for f in rec.frames]
    assert funcs[:3] == ["inference_worker_loop", "_worker_load_model", "from_pretrained"]
    assert funcs[-3:] == ["_save_to_state_dict", "as_dict", "meta_local_scalar_dense"]
    # Curly quotes and Windows paths as the forum printed them.
    assert rec.frames[2].path.endswith(r"site-packages\peft\peft_model.py")
    assert rec.frames[2].lineno == 582


def test_seed_keyerror_22_inside_log_lines():
    text = (DATA / "seed_keyerror_22.txt").read_text()
    (rec,) = parse_tracebacks(text)
    assert (rec.exc_type, rec.message) == ("KeyError", "22")
    assert rec.frames[-1].func == "forward"
    assert "shared_kv_states[self.kv_shared_layer_index]" in rec.frames[-1].line
    assert len(rec.frames) == 32
    # The log line after the exception is not part of its message.
    assert "Worker returned error" not in rec.message


def test_seed_is_hf_initialized_trace_with_elided_paths():
    (rec,) = parse_tracebacks((DATA / "seed_is_hf_initialized.txt").read_text())
    assert rec.exc_type == "TypeError"
    assert rec.message == "Params4bit.__new__() got an unexpected keyword argument '_is_hf_initialized'"
    assert [f.func for f in rec.frames][-2:] == ["init_hook", "set_module_tensor_to_device"]


def test_trace_tail_without_header_line_still_parses():
    text = "\n".join((DATA / "seed_is_hf_initialized.txt").read_text().splitlines()[1:])
    (rec,) = parse_tracebacks(text)
    assert rec.exc_type == "TypeError" and len(rec.frames) == 7


def test_logged_and_swallowed_exception_exit_zero(tmp_path):
    proc = run_py("""
        import logging
        logging.basicConfig(format="%(asctime)s | Worker | %(levelname)s | %(message)s")
        log = logging.getLogger("w")
        def load(i):
            return {}[i]
        for job in range(2):
            try:
                load(22 + job)
            except Exception as e:
                log.exception("Worker error: %s", e)
        print("worker done")
    """, tmp_path)
    assert proc.returncode == 0
    recs = parse_tracebacks(proc.stderr)
    assert [(r.exc_type, r.message) for r in recs] == [("KeyError", "22"), ("KeyError", "23")]
    assert recs[0].frames[-1].func == "load"


def test_chained_exceptions_fold_into_the_last(tmp_path):
    proc = run_py("""
        def inner():
            raise KeyError("k")
        def outer():
            try:
                inner()
            except KeyError as e:
                raise RuntimeError("wrapped") from e
        try:
            outer()
        except RuntimeError:
            raise ValueError("while handling")
    """, tmp_path)
    (rec,) = parse_tracebacks(proc.stderr)
    assert (rec.exc_type, rec.message) == ("ValueError", "while handling")
    assert [(c.exc_type, c.message) for c in rec.chain] == [("KeyError", "'k'"), ("RuntimeError", "wrapped")]
    assert [r.exc_type for r in all_records([rec])] == ["ValueError", "KeyError", "RuntimeError"]


def test_multiline_message_with_module_repr(tmp_path):
    proc = run_py("""
        class M:
            def __repr__(self):
                return "Gemma4ClippableLinear(\\n  (linear): Linear(in_features=32, out_features=32, bias=False)\\n)"
        raise ValueError(f"Target module {M()} is not supported. Currently, only `torch.nn.Linear` is.")
    """, tmp_path)
    (rec,) = parse_tracebacks(proc.stderr)
    assert rec.exc_type == "ValueError"
    assert rec.message.startswith("Target module Gemma4ClippableLinear(")
    assert rec.message.endswith("is not supported. Currently, only `torch.nn.Linear` is.")
    assert rec.message.count("\n") == 2


def test_child_process_traceback(tmp_path):
    proc = run_py("""
        import multiprocessing as mp
        def work():
            raise OSError("disk on fire")
        if __name__ == "__main__":
            mp.set_start_method("spawn")
            p = mp.Process(target=work)
            p.start(); p.join()
            print("parent exit", p.exitcode)
    """, tmp_path)
    assert proc.returncode == 0
    (rec,) = parse_tracebacks(proc.stderr)
    assert (rec.exc_type, rec.message) == ("OSError", "disk on fire")
    assert any(f.path.endswith("multiprocessing/process.py") for f in rec.frames)


def test_faulthandler_dump_of_segfault(tmp_path):
    proc = run_py("""
        import os, signal
        def crash():
            os.kill(os.getpid(), signal.SIGSEGV)
        crash()
    """, tmp_path)
    assert proc.returncode == -11
    (rec,) = parse_tracebacks(proc.stderr)
    assert rec.kind == "crash"
    assert (rec.exc_type, rec.message) == ("FatalPythonError", "Segmentation fault")
    assert [f.func for f in rec.frames] == ["<module>", "crash"]


def test_cpp_terminate_abort():
    text = ("terminate called after throwing an instance of 'c10::Error'\n"
            "  what():  CUDA error: device-side assert triggered\n")
    (rec,) = parse_tracebacks(text)
    assert (rec.exc_type, rec.message, rec.kind) == ("c10::Error", "CUDA error: device-side assert triggered", "crash")


def test_log_prefix_on_every_line():
    text = textwrap.dedent("""\
        (worker pid=7) Traceback (most recent call last):
        (worker pid=7)   File "/opt/env/lib/python3.12/site-packages/accelerate/hooks.py", line 12, in f
        (worker pid=7)     g()
        (worker pid=7) torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB. GPU 1 has a total capacity of 4.00 GiB
        (worker pid=7) done
    """)
    (rec,) = parse_tracebacks(text)
    assert rec.exc_type == "torch.OutOfMemoryError"
    assert rec.frames[0].path.endswith("accelerate/hooks.py")
    assert rec.text.startswith("Traceback (most recent call last):")


def test_text_without_tracebacks():
    assert parse_tracebacks("all good\nTraceback is a word\nValueError: not after frames\n") == []


@pytest.mark.parametrize("noise", ["", "Warning: something\n", "\n\n"])
def test_exception_without_message(noise, tmp_path):
    proc = run_py("raise StopIteration\n", tmp_path)
    (rec,) = parse_tracebacks(noise + proc.stderr)
    assert (rec.exc_type, rec.message) == ("StopIteration", "")


def test_a_thread_named_log_line_ends_the_traceback():
    # "%(threadName)s %(levelname)s %(message)s": the summary logged after a worker's traceback
    # (with a timing in it) is not part of that traceback's text
    text = ("req_1 ERROR request GET /items failed\n"
            "Traceback (most recent call last):\n"
            '  File "svc.py", line 9, in handle\n'
            "    parse(q)\n"
            "ValueError: bad query field: 'verbose'\n"
            "MainThread INFO 5 requests, errors=1, worst=1.23ms\n")
    (record,) = parse_tracebacks(text)
    assert record.message == "bad query field: 'verbose'"
    assert record.text.endswith("ValueError: bad query field: 'verbose'")
    # a continuation that only mentions a level in lower case, or a message word, still belongs
    kept = parse_tracebacks("Traceback (most recent call last):\n  File \"a.py\", line 1, in <module>\n"
                            "RuntimeError: CUDA error: device-side assert triggered\n"
                            "CUDA kernel errors might be asynchronously reported\n")[0]
    assert kept.text.endswith("CUDA kernel errors might be asynchronously reported")


def test_the_standard_librarys_lowercase_exceptions_are_exceptions() -> None:
    text = ("Traceback (most recent call last):\n  File \"/w/x.py\", line 3, in <module>\n    zlib.decompress(p)\n"
            "zlib.error: Error -3 while decompressing data: unknown compression method\n")
    (rec,) = parse_tracebacks(text)
    assert rec.exc_type == "zlib.error" and rec.message.startswith("Error -3 while decompressing")
