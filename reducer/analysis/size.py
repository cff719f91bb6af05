"""The size measure and the fixed total order every candidate is compared under.

A candidate is only ever accepted when it is strictly smaller than the current best under
``(processes, tokens, characters, text)``. A strict, total order is what guarantees the search
ends: every accepted step moves down a well-founded order.

``processes`` counts the places the script starts a worker (``.start()``, ``Pool``,
``ProcessPoolExecutor``, ``spawn``, ``start_processes``), so a candidate that brings a child's
work home is run even while it is larger than the best (the target called in the parent with its
four arguments spelled out): the next candidates shrink it, and it never comes back (issue #38).
A script that starts no process compares as before.

One offer is judged by statements first: the prelude's boundary call on the original, a whole
program whose written-out values (a dataset's items, a batch of ids) can have more tokens than
the code that computed them (``Gate.whole_programs``). It is offered on the original and on the
first retraced result at most (a boundary is recorded twice per reduction at most), so every
other step moves down the order above and the search still ends.
"""
from __future__ import annotations

import io
import tokenize
from dataclasses import dataclass

# Layout tokens carry no content: two programs that differ only in line breaks or indentation
# should compare on their characters, not their token counts. Comments do count, so removing
# one is progress.
_LAYOUT = {tokenize.NEWLINE, tokenize.NL, tokenize.INDENT, tokenize.DEDENT, tokenize.ENDMARKER,
           tokenize.ENCODING}


def _fstring_weight(text: str) -> int:
    """Before Python 3.12 an f-string is one STRING token; count its replacement fields as 3.12's
    tokenizer does (braces plus the expression's tokens), so that `f"{report.mean()}"` is not
    "smaller" than `report.mean()` on one Python and larger on another."""
    import ast
    try:
        node = ast.parse(text, mode="eval").body
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return 1
    if not isinstance(node, ast.JoinedStr):
        return 1
    fields = [v for v in node.values if isinstance(v, ast.FormattedValue)]
    return 1 + sum(2 + count_tokens(ast.unparse(v.value)) for v in fields)


def _weight(tok: tokenize.TokenInfo) -> int:
    if tok.type == tokenize.STRING:
        prefix = tok.string[:len(tok.string) - len(tok.string.lstrip("bBrRuUfF"))]
        if "f" in prefix.lower():
            return _fstring_weight(tok.string)
    return 1


# What starts a worker: a pool, an executor of processes, torch.multiprocessing's spawn /
# start_processes, and ``.start()`` (a Process's, a Thread's).
PROCESS_NAMES = frozenset({"Pool", "ProcessPoolExecutor", "spawn", "start_processes"})


def _counts(source: str) -> tuple[int, int]:
    """(tokens, worker starts) in one pass of the tokenizer."""
    try:
        tokens = processes = 0
        dot = False
        for t in tokenize.generate_tokens(io.StringIO(source).readline):
            if t.type in _LAYOUT:
                continue
            tokens += _weight(t)
            if t.type == tokenize.NAME and (t.string in PROCESS_NAMES or (dot and t.string == "start")):
                processes += 1
            dot = t.type == tokenize.OP and t.string == "."
        return tokens, processes
    except (tokenize.TokenError, IndentationError, SyntaxError):
        # Unparseable text never reaches the oracle; give it a size that sorts last-ish but stays total.
        return len(source.split()), 0


def count_tokens(source: str) -> int:
    return _counts(source)[0]


@dataclass(frozen=True, order=True)
class Size:
    processes: int
    tokens: int
    chars: int
    text: str

    def to_dict(self) -> dict[str, int]:
        return {"tokens": self.tokens, "chars": self.chars,
                "lines": sum(1 for line in self.text.splitlines() if line.strip())}


def size_of(source: str) -> Size:
    tokens, processes = _counts(source)
    return Size(processes, tokens, len(source), source)


def normalize(source: str) -> str:
    """Key for the seen-set: the same program modulo trailing spaces and blank lines."""
    lines = (line.rstrip() for line in source.splitlines())
    return "\n".join(line for line in lines if line)


def count_statements(source: str) -> int:
    """Statements as a reader counts them (simple statements plus compound headers)."""
    import libcst as cst

    class _Count(cst.CSTVisitor):
        n = 0

        def on_visit(self, node: cst.CSTNode) -> bool:
            if isinstance(node, (cst.BaseSmallStatement, cst.BaseCompoundStatement)):
                self.n += 1
            return True

    counter = _Count()
    cst.parse_module(source).visit(counter)
    return counter.n
