"""Clean-ups: comments, docstrings, print/logging, unused imports, dead code: exact outputs."""
from __future__ import annotations

from reducer.passes.cleanup import drop_output_calls, drop_unused_imports, strip_comments_and_docstrings
from reducer.passes.rewrites import drop_dead_code
from tests.reducer_support import RecordingOracle, raises, reduce_with

SRC = '''"""Module doc."""
# leading comment
import os, sys
from json import loads, dumps
import logging
logger = logging.getLogger(__name__)
UNUSED = {"a": 1}

def helper():  # trailing
    """Doc."""
    return 1

def fail():
    print("about to fail")
    logger.info("x=%s", 1)
    logger.exception("kept: it prints a traceback")
    loads("{")
fail()
'''


def test_each_cleanup_alone() -> None:
    assert strip_comments_and_docstrings("'''d'''\n# c\nx = 1  # t\ndef f():\n    'doc'\n") == "x = 1\ndef f():\n    pass\n"
    kept = '"""Tool."""\nimport argparse  # cli\nargparse.ArgumentParser(description=__doc__)\n'
    assert strip_comments_and_docstrings(kept) == '"""Tool."""\nimport argparse\nargparse.ArgumentParser(description=__doc__)\n'
    assert drop_output_calls("print(1)\nlogging.warning('w')\nlog.exception('e')\nf()\n") == "log.exception('e')\nf()\n"
    assert drop_unused_imports("import os, sys\nfrom a import b, c as d\nimport x.y\nsys, d, x\n") == \
        "import sys\nfrom a import c as d\nimport x.y\nsys, d, x\n"
    assert drop_dead_code("import os\nA = 1\nB = f()\ndef g():\n    return A\nclass C:\n    x = 1\n") == \
        "import os\nB = f()\n"


def test_bulk_cleanup_in_one_run() -> None:
    oracle = RecordingOracle(raises(ValueError, "Expecting property name"))
    runs = oracle.runs

    out = reduce_with(SRC, oracle, "cleanup_bulk")
    assert out == ('from json import loads\nimport logging\nlogger = logging.getLogger(__name__)\n\n'
                   'def fail():\n    logger.exception("kept: it prints a traceback")\n    loads("{")\nfail()\n')
    assert len(runs) == 1


def test_unused_names_in_multi_imports_removed_one_by_one() -> None:
    src = "from json import dumps, loads, JSONDecoder\nimport os, sys\nloads(sys.argv[0][:0] + '{')\n"
    out = reduce_with(src, raises(ValueError, "Expecting"), "cleanup")
    assert out == "from json import loads\nimport sys\nloads(sys.argv[0][:0] + '{')\n"


def test_literal_kwargs_dict_becomes_keywords() -> None:
    from reducer.passes.cleanup import spread_literal_kwargs
    assert spread_literal_kwargs('f(1, **{"hidden_size": 64, "layers": [1, 2]})\n') == \
        "f(1, hidden_size=64, layers=[1, 2])\n"
    # not an identifier, or a keyword given twice: left as it is
    for src in ('f(**{"a-b": 1})\n', 'f(a=2, **{"a": 1})\n', 'f(**{k: 1})\n'):
        assert spread_literal_kwargs(src) == src
