"""inline_variables and fold_imports: exact outputs, verdicts from exec of each candidate."""
from __future__ import annotations

from tests.reducer_support import RecordingOracle, raises, reduce_with

CHAIN = '''\
import json


def load(text):
    raw = text.strip()
    data = json.loads(raw)
    return data


for item in ["{bad"]:
    out = load(item)
    size = len(out) * 2 + 1
    print(size)
'''


def test_a_value_read_once_in_the_next_statement_moves_into_it() -> None:
    out = reduce_with(CHAIN, raises(ValueError, "Expecting property name"), "inline_variables")
    assert out == ('import json\n\n\ndef load(text):\n    return json.loads(text.strip())\n\n\n'
                   'for item in ["{bad"]:\n    print(len(load(item)) * 2 + 1)\n')


def test_a_name_read_twice_or_later_or_in_a_loop_body_stays() -> None:
    twice = "import json\nraw = '{bad'\nprint(raw)\njson.loads(raw)\n"
    later = "import json\nraw = '{bad'\nprint(1)\njson.loads(raw)\n"
    deferred = "import json\nraw = '{bad'\nf = lambda: json.loads(raw)\nf() or f()\n"
    attribute = "import json\nloads = '{bad'\njson.loads(loads)\n"
    for src in (twice, later, deferred):
        oracle = RecordingOracle(raises(ValueError, "Expecting property name"))
        assert reduce_with(src, oracle, "inline_variables") == src
        assert oracle.runs == []
    # `json.loads` is an attribute's name, not a read of `loads`: only the argument is replaced
    assert reduce_with(attribute, raises(ValueError, "Expecting property name"), "inline_variables") == \
        "import json\njson.loads('{bad')\n"


def test_an_import_the_package_import_reaches_is_folded_into_its_uses() -> None:
    src = ("import os\nimport os.path as osp\nfrom json import decoder as dec\nimport json\n"
           "from json.decoder import JSONDecoder\n\n"
           "print(osp.join('a', 'b'))\nJSONDecoder().decode(dec.__name__)\n")
    out = reduce_with(src, raises(ValueError, "Expecting value"), "fold_imports")
    assert out == ("import os\nimport json\n\n"
                   "print(os.path.join('a', 'b'))\njson.decoder.JSONDecoder().decode(json.decoder.__name__)\n")


def test_an_import_whose_package_is_not_imported_stays() -> None:
    src = "from json.decoder import JSONDecoder\nJSONDecoder().decode('x')\n"
    oracle = RecordingOracle(raises(ValueError, "Expecting value"))
    assert reduce_with(src, oracle, "fold_imports") == src
    assert oracle.runs == []
