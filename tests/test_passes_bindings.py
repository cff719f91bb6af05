"""reducer/passes/bindings.py: before/after on each rewrite, the shapes each must leave alone,
real reductions (candidates run by a pure-Python oracle), and a property: a program whose
rewritten form fails differently is never changed."""
from __future__ import annotations

import textwrap

import libcst as cst
from hypothesis import given, settings
from hypothesis import strategies as st

from reducer.passes import BY_NAME, STRUCTURE, FINE
from reducer.passes import bindings as B
from reducer.passes.variables import next_statement_bindings
from tests.reducer_support import raises, reduce_with


def _d(text: str) -> str:
    return textwrap.dedent(text).lstrip("\n")


def _alternatives(source: str, find, alternatives) -> list[str]:
    module = cst.parse_module(source)
    return [a for t in find(module) for a in alternatives(module, t) if a is not None]


def test_the_passes_are_in_the_search():
    names = [p.name for p in STRUCTURE + FINE]
    for name in ("path_literals", "fold_kwargs", "fold_appends", "value_functions", "inline_single_use", "attribute_keywords"):
        assert name in names and BY_NAME[name].fn is getattr(B, name)


# ---- fold_kwargs ---------------------------------------------------------------------------------
def test_a_keyword_dict_built_entry_by_entry_becomes_keywords():
    src = _d('''
        kwargs = {}
        quant = make()
        kwargs["quantization_config"] = quant
        kwargs["dtype"] = "bf16"
        kwargs["dtype"] = "f16"
        load("base", device_map="auto", **kwargs)
        ''')
    got = _alternatives(src, B._fold_nodes, B._fold_alternatives)
    assert got == [_d('''
        quant = make()
        load("base", device_map="auto", quantization_config=quant, dtype="f16")
        ''')]


def test_a_dict_display_or_dict_call_folds_and_a_rebound_name_folds_each_time():
    src = _d('''
        kw = dict(a=1)
        f(**kw)
        kw = {"b": 2}
        g(1, **kw)
        ''')
    got = _alternatives(src, B._fold_nodes, B._fold_alternatives)
    assert _d('''
        f(a=1)
        kw = {"b": 2}
        g(1, **kw)
        ''') in got
    assert _d('''
        kw = dict(a=1)
        f(**kw)
        g(1, b=2)
        ''') in got


def test_a_dict_used_elsewhere_or_filled_conditionally_is_left_alone():
    for src in (_d('''
            kw = {}
            kw["a"] = 1
            f(**kw)
            print(kw)
            '''), _d('''
            kw = {}
            if flag:
                kw["a"] = 1
            f(**kw)
            '''), _d('''
            kw = {}
            for i in range(2):
                f(**kw)
            '''), _d('''
            kw = {1: 2}
            f(**kw)
            ''')):
        assert _alternatives(src, B._fold_nodes, B._fold_alternatives) == [], src


# ---- value_functions -----------------------------------------------------------------------------
def test_a_helper_returning_one_expression_called_twice_becomes_a_value():
    src = _d('''
        def tiny_config():
            return Config(hidden=1)
        a = Model(tiny_config())
        b = Model(tiny_config())
        ''')
    assert _alternatives(src, B._value_function_nodes, B._value_function_alternatives) == [_d('''
        tiny_config = Config(hidden=1)
        a = Model(tiny_config)
        b = Model(tiny_config)
        ''')]


def test_helpers_with_parameters_more_statements_or_other_uses_are_left_alone():
    for src in (_d('''
            def f(x):
                return x
            f(1); f(2)
            '''), _d('''
            def f():
                y = 1
                return y
            f(); f()
            '''), _d('''
            def f():
                return 1
            f(); g(f)
            '''), _d('''
            def f():
                return 1
            f()
            ''')):
        assert _alternatives(src, B._value_function_nodes, B._value_function_alternatives) == [], src


# ---- path_literals -------------------------------------------------------------------------------
def test_pathlib_calls_become_their_strings_only_for_pathlib():
    src = _d('''
        import pathlib
        from pathlib import Path as P
        a = P()
        b = pathlib.Path("base")
        c = P("x") / "y"
        d = P(name)
        ''')
    together = B._all_paths(cst.parse_module(src))
    assert together == _d('''
        import pathlib
        from pathlib import Path as P
        a = "."
        b = "base"
        c = "x" / "y"
        d = P(name)
        ''')
    assert _alternatives("def Path():\n    pass\nPath()\n", B._path_nodes, B._path_alternatives) == []


# ---- inline_single_use ---------------------------------------------------------------------------
def test_a_value_read_once_later_in_its_block_is_inlined_with_parentheses_where_needed():
    src = _d('''
        lora = LoraConfig()
        n = a + b
        model = get_peft_model(base, lora)
        print(n * 2)
        ''')
    got = _alternatives(src, B._single_use_nodes, B._single_use_alternatives)
    assert _d('''
        n = a + b
        model = get_peft_model(base, LoraConfig())
        print(n * 2)
        ''') in got
    assert _d('''
        lora = LoraConfig()
        model = get_peft_model(base, lora)
        print((a + b) * 2)
        ''') in got
    assert B.inlined_all(src) == _d('''
        get_peft_model(base, LoraConfig())
        print((a + b) * 2)
        ''').replace("get_peft", "model = get_peft")


def test_reads_in_loops_functions_lambdas_or_twice_are_not_inlined():
    for src in (_d('''
            x = f()
            for i in range(3):
                g(x)
            '''), _d('''
            x = f()
            def h():
                return x
            '''), _d('''
            x = f()
            g(lambda: x)
            '''), _d('''
            x = f()
            g(x, x)
            '''), _d('''
            x = f()
            x += 1
            g(x)
            '''), _d('''
            g(x)
            x = f()
            ''')):
        assert _alternatives(src, B._single_use_nodes, B._single_use_alternatives) == [], src


def test_inline_single_use_leaves_the_next_statement_to_inline_variables():
    """The two inlining passes never propose the same site: a read in the very next (simple)
    statement is inline_variables' (structural: nothing runs in between), the rest is this one's."""
    src = _d('''
        lora = LoraConfig()
        model = get_peft_model(base, lora)
        cfg = make()
        print(1)
        train(cfg)
        flag = check()
        if flag:
            go()
        ''')
    module = cst.parse_module(src)
    mine = [module.code_for_node(line).strip() for line, _, _ in B._single_use(module)]
    theirs = [module.code_for_node(line).strip() for line in next_statement_bindings(module)]
    assert theirs == ["lora = LoraConfig()"]
    assert mine == ["cfg = make()", "flag = check()"]     # further down; a compound statement next
    assert "get_peft_model(base, LoraConfig())" not in "".join(_alternatives(src, B._single_use_nodes,
                                                                          B._single_use_alternatives))
    assert "get_peft_model(base, lora)" in B.inlined_all(src)


# ---- real reductions -----------------------------------------------------------------------------
_LOADER = _d('''
    from pathlib import Path

    class Config:
        def __init__(self, **kw):
            self.kw = kw

    def load(path, quantization_config=None, offload=False):
        if str(path) == "." and quantization_config.kw.get("double") and offload:
            raise RuntimeError("cannot be called on meta tensors")

    def tiny():
        return Config(double=True)

    home = Path()
    kwargs = {}
    quant = tiny()
    kwargs["quantization_config"] = quant
    kwargs["offload"] = True
    base = tiny()
    load(home, **kwargs)
    ''')


def test_the_scaffolding_around_a_failing_load_goes():
    oracle = raises(RuntimeError, "meta tensors")
    assert oracle(_LOADER)
    out = reduce_with(_LOADER, oracle, "path_literals", "fold_kwargs", "value_functions", "inline_single_use",
                      "propagate_constants", "delete_statements", "cleanup")
    assert oracle(out)
    assert "kwargs" not in out and "Path" not in out and "def tiny" not in out, out
    assert 'load(".", quantization_config=' in out.replace("'", '"'), out


@settings(max_examples=12, deadline=None)
@given(strict=st.booleans(), late=st.booleans())
def test_a_rewrite_that_changes_the_failure_is_never_kept(strict, late):
    """``strict``: the loader needs a real Path, so the literal must be refused. ``late``: the
    keyword's value changes between the dict's entry and the call, so folding it (which reads
    the value at the call) must be refused. The original fails in every case; the result too."""
    src = _d(f'''
        from pathlib import Path
        state = [True]

        def load(path, offload=False):
            if offload and (isinstance(path, Path) or not {strict}):
                raise RuntimeError("cannot be called on meta tensors")

        kwargs = {{}}
        kwargs["offload"] = state[0]
        if {late}:
            state[0] = False
        load(Path(), **kwargs)
        ''')
    oracle = raises(RuntimeError, "meta tensors")
    assert oracle(src)
    out = reduce_with(src, oracle, "path_literals", "fold_kwargs", "inline_single_use")
    assert oracle(out)
    assert ("Path()" in out) == strict, out
    assert ("**kwargs" in out) == late, out


# ---- fold_appends --------------------------------------------------------------------------------
def _folds(src: str) -> list[str]:
    return _alternatives(src, B._append_nodes, B._append_alternatives)


def test_a_list_filled_by_appends_becomes_one_display_at_the_last_append():
    # a collecting loop written as its one step (single_element): the entry is bound in between
    src = _d('''
        labels = [0]
        ids = encode("a b")
        labels.append(ids)
        labels.extend([1, 2])
        labels += [3]
        collate(labels)
        ''')
    assert _folds(src) == [_d('''
        ids = encode("a b")
        labels = [0, ids, 1, 2, 3]
        collate(labels)
        ''')]


def test_appends_that_read_the_list_or_come_after_a_use_or_in_a_branch_stay():
    for src in (_d('''
            x = []
            x.append(len(x))
            '''), _d('''
            x = []
            print(x)
            x.append(1)
            '''), _d('''
            x = []
            if flag:
                x.append(1)
            '''), _d('''
            x = []
            x.extend(other)
            x.insert(0, 1)
            ''')):
        assert _folds(src) == [], src


def test_appends_after_a_use_are_not_folded_into_the_binding():
    src = _d('''
        x = []
        x.append(1)
        show(x)
        x.append(2)
        ''')
    assert _folds(src) == [_d('''
        x = [1]
        show(x)
        x.append(2)
        ''')]


def test_a_fold_that_changes_the_failure_is_refused():
    # folding at the last append evaluates the first entry after `state` changed: the candidate
    # fails differently and the gate keeps the appends; without that change the fold is kept
    src = _d('''
        state = [3]
        batch = []
        batch.append(state[0])
        state[0] = 7
        batch.append(1)
        if batch[0] == 7:
            raise ValueError("expected a batch of 1")
        raise IndexError("index 3 is out of bounds")
        ''')
    oracle = raises(IndexError, "out of bounds")
    assert oracle(src) and len(_folds(src)) == 1
    out = reduce_with(src, oracle, "fold_appends")
    assert oracle(out) and "batch.append(state[0])" in out, out
    plain = src.replace("state[0] = 7\n", "")
    out = reduce_with(plain, oracle, "fold_appends")
    assert "batch = [state[0], 1]" in out and ".append" not in out, out


# ---- attribute_keywords --------------------------------------------------------------------------
def test_a_setting_put_on_an_object_goes_into_the_call_after_it():
    # heldout5's generation worker: the model's own generation config, then generate()
    src = _d('''
        model = Model()
        model.generation_config = GenerationConfig(do_sample=True, temperature=0.0)
        log("ready")
        model.generate(ids, max_new_tokens=2)
        ''')
    got = _alternatives(src, B._attribute_settings, lambda m, f: [B._as_keyword(m, f)])
    assert got == [_d('''
        model = Model()
        log("ready")
        model.generate(ids, max_new_tokens=2, generation_config=GenerationConfig(do_sample=True, temperature=0.0))
        ''')]


def test_a_call_that_has_the_keyword_takes_star_keywords_or_an_object_bound_again_is_left_alone():
    for src in (_d('''
                    model.generation_config = a
                    model.generate(ids, generation_config=b)
                    '''),
                _d('''
                    model.generation_config = a
                    model.generate(ids, **kw)
                    '''),
                _d('''
                    model.generation_config = a
                    model = other()
                    model.generate(ids)
                    ''')):
        assert B._attribute_settings(cst.parse_module(src)) == [], src


def test_a_method_that_does_not_read_the_keyword_is_refused_by_the_run():
    # the run decides: a method that takes no such keyword fails otherwise, so the setting stays
    src = _d('''
        class Box:
            def __init__(self):
                self.limit = 3

            def put(self, items):
                if len(items) > self.limit:
                    raise OverflowError("too many items for the box")

        box = Box()
        box.limit = 1
        box.put([1, 2])
        ''')
    out = reduce_with(src, raises(OverflowError, "too many"), "attribute_keywords")
    assert "box.limit = 1" in out and "box.put([1, 2])" in out
    # one that reads it as the attribute takes it
    reads = src.replace("def put(self, items):", "def put(self, items, limit=None):").replace(
        "len(items) > self.limit", "len(items) > (self.limit if limit is None else limit)")
    out = reduce_with(reads, raises(OverflowError, "too many"), "attribute_keywords")
    assert "box.limit = 1" not in out and "box.put([1, 2], limit=1)" in out

