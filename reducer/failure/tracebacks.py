"""Find every Python traceback in a run's output.

Tracebacks count wherever they appear: an uncaught exception, a ``logger.exception``
in a worker loop that exits 0, a child process, a chained exception, a faulthandler
dump, a C++ ``terminate called`` abort. Text pasted from a forum (curly quotes, lost
indentation, a log prefix on every line) parses too, so ``--traceback FILE`` works on
a post that only has a traceback.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Iterator

from reducer.failure.outcome import Frame, TracebackRecord

_HEADER = "Traceback (most recent call last):"
_Q = "[\"\u201c\u201d\u2018\u2019']"  # straight and curly quotes, as forums reprint them
# A name or message runs to its last non-space character (".+?\s*$" tried the trailing "\s*$" at
# every character of a line: quadratic on a printed line ending in a million spaces and a letter).
_FRAME = re.compile(rf"^(?P<indent>\s*)File {_Q}(?P<path>.+?){_Q}, line (?P<lineno>\d+), in (?P<func>.*\S)\s*$")
_FAULT_FRAME = re.compile(rf"^\s*File {_Q}(?P<path>.+?){_Q}, line (?P<lineno>\d+) in (?P<func>.*\S)\s*$")
_CARETS = re.compile(r"^\s*[\^~\-]+\s*$")
_REPEATED = re.compile(r"^\s*\[?Previous line repeated \d+ more times?\]?")
# Exception names are capitalised, except a few of the standard library's module-level ones
# (zlib.error, struct.error, re.error, socket.timeout, socket.gaierror), always qualified.
_EXC = re.compile(r"^(?P<type>(?:[A-Za-z_]\w*\.)*_*[A-Z]\w*|(?:[A-Za-z_]\w*\.)+(?:error|timeout|herror|gaierror))"
                  r"(?::(?P<msg>.*))?$")
_CHAIN = re.compile(
    r"^\s*(During handling of the above exception, another exception occurred:"
    r"|The above exception was the direct cause of the following exception:)\s*$")
_FATAL = re.compile(r"^\s*Fatal Python error: (?P<msg>.*\S)\s*$")
_THREAD = re.compile(r"^\s*(Current thread|Thread) 0x[0-9a-fA-F]+ .*\(most recent call first\):\s*$")
_TERMINATE = re.compile(r"^\s*terminate called after throwing an instance of '(?P<type>[^']+)'\s*$")
_WHAT = re.compile(r"^\s*what\(\):\s*(?P<msg>.*)$")
# A line that starts a new log record ends a multi-line exception message: a timestamp, a level
# first, a bracketed level, or one word (thread or logger name) and then the level, as
# "%(threadName)s %(levelname)s %(message)s" writes it.
_LOG_START = re.compile(
    r"^\s*(\d{4}-\d\d-\d\d[ T]\d\d:\d\d|\[\d{4}-\d\d-\d\d|(DEBUG|INFO|WARNING|ERROR|CRITICAL)[:\s]|"
    r"\[(DEBUG|INFO|WARNING|ERROR|CRITICAL)\]|[\w.\-]+ (DEBUG|INFO|WARNING|ERROR|CRITICAL) )")
_EXC_SUFFIXES = ("Error", "Exception", "Interrupt", "Exit", "Warning", "Iteration", "Failure", "error", "timeout")
_MAX_MESSAGE_LINES = 60


@dataclass
class _Pending:
    prefix: str
    frames: list[Frame] = field(default_factory=list)
    lines: list[str] = field(default_factory=list)


def _strip_prefix(line: str, prefix: str) -> str:
    return line[len(prefix):] if prefix and line.startswith(prefix) else line


def _looks_like_exception(text: str, strict: bool) -> re.Match[str] | None:
    m = _EXC.match(text.strip())
    if not m:
        return None
    if strict:
        name = m.group("type").rsplit(".", 1)[-1]
        if not (name.endswith(_EXC_SUFFIXES) or name in ("KeyboardInterrupt", "StopIteration")
                or m.group("msg") is not None):
            return None
    return m


def _bracket_balance(text: str) -> int:
    return sum(text.count(c) for c in "([{") - sum(text.count(c) for c in ")]}")


class _Parser:
    def __init__(self, text: str, stream: str) -> None:
        self.lines = text.splitlines()
        self.stream = stream
        self.i = 0
        self.records: list[TracebackRecord] = []
        self.chain_next = False  # the previous record is the cause of the next one

    def parse(self) -> list[TracebackRecord]:
        while self.i < len(self.lines):
            line = self.lines[self.i]
            pos = line.find(_HEADER)
            if pos >= 0:
                self._python_traceback(prefix=line[:pos])
                continue
            if _FATAL.match(line):
                self._fault_dump()
                continue
            if _TERMINATE.match(line):
                self._cpp_terminate()
                continue
            if _CHAIN.match(line) and self.records:
                self.chain_next = True
            self.i += 1
        return self.records

    def _emit(self, record: TracebackRecord) -> None:
        if self.chain_next and self.records:
            cause = self.records.pop()
            record = TracebackRecord(record.exc_type, record.message, record.frames, record.text,
                                     record.stream, record.kind, cause.chain + (_unchained(cause),))
        self.chain_next = False
        self.records.append(record)

    def _python_traceback(self, prefix: str) -> None:
        # A prefix before the header that is only indentation is not a log prefix.
        if not prefix.strip():
            prefix = ""
        start = self.i
        self.i += 1
        frames: list[Frame] = []
        last_frame_indent: int | None = None
        header_indent = len(self.lines[start]) - len(self.lines[start].lstrip()) if not prefix else 0
        expecting_source = False
        while self.i < len(self.lines):
            raw = _strip_prefix(self.lines[self.i], prefix)
            fm = _FRAME.match(raw)
            if fm:
                frames.append(Frame(fm["path"], int(fm["lineno"]), fm["func"]))
                last_frame_indent = len(fm["indent"])
                expecting_source = True
                self.i += 1
                continue
            if not raw.strip() or _CARETS.match(raw) or _REPEATED.match(raw):
                self.i += 1
                continue
            indent = len(raw) - len(raw.lstrip())
            if frames and expecting_source:
                # Standard layout: the exception line is dedented below the frames.
                dedented = last_frame_indent is not None and indent < last_frame_indent
                exc = _looks_like_exception(raw, strict=not dedented or indent > header_indent)
                if not exc:
                    f = frames[-1]
                    frames[-1] = Frame(f.path, f.lineno, f.func, raw.strip())
                    expecting_source = False
                    self.i += 1
                    continue
            exc = _looks_like_exception(raw, strict=False)
            if exc is None or not frames:
                # Not a traceback after all (or a truncated one): give up on it quietly.
                return
            self._finish_exception(exc, start, prefix, frames)
            return

    def _finish_exception(self, exc: re.Match[str], start: int, prefix: str, frames: list[Frame]) -> None:
        message_lines = [(exc["msg"] or "").lstrip(" ")]
        extra: list[str] = []
        self.i += 1
        balance = _bracket_balance(message_lines[0])
        while self.i < len(self.lines) and len(message_lines) + len(extra) < _MAX_MESSAGE_LINES:
            raw = _strip_prefix(self.lines[self.i], prefix)
            if (not raw.strip() or _HEADER in raw or _CHAIN.match(raw) or _LOG_START.match(raw)
                    or _FRAME.match(raw) or _FATAL.match(raw)):
                break
            if balance > 0:
                # An open bracket: a repr printed across lines is part of the message.
                message_lines.append(raw.rstrip())
                balance += _bracket_balance(raw)
            elif raw.startswith("\t") and not extra:
                # A tab-indented line right under it is the message's own detail (torch's
                # load_state_dict lists "\tUnexpected key(s) ...", "\tsize mismatch for ..."):
                # the first line alone is one message for all of them (pytorch-105963 reduced to
                # an unexpected key where the report is a meta tensor's copy)
                message_lines.append(raw.rstrip())
            else:
                extra.append(raw.rstrip())
            self.i += 1
        text_lines = [_strip_prefix(l, prefix) for l in self.lines[start:self.i]]
        text_lines[0] = text_lines[0][text_lines[0].find(_HEADER):] if prefix else text_lines[0]
        self._emit(TracebackRecord(
            exc_type=exc["type"],
            message="\n".join(message_lines).strip(),
            frames=tuple(frames),
            text="\n".join(text_lines).rstrip(),
            stream=self.stream,
        ))

    def _fault_dump(self) -> None:
        start = self.i
        message = _FATAL.match(self.lines[self.i])["msg"]  # type: ignore[index]
        self.i += 1
        frames: list[Frame] = []
        in_current = False
        while self.i < len(self.lines):
            line = self.lines[self.i]
            if _HEADER in line or _FATAL.match(line):
                break
            tm = _THREAD.match(line)
            if tm:
                # Only the crashing thread's stack says where it crashed.
                in_current = tm.group(1) == "Current thread"
            else:
                fm = _FAULT_FRAME.match(line)
                if fm and in_current:
                    frames.append(Frame(fm["path"], int(fm["lineno"]), fm["func"]))
                elif not fm and line.strip() and not line.startswith((" ", "\t")) \
                        and not line.startswith(("Extension modules", "Thread", "Current")):
                    break
            self.i += 1
        frames.reverse()  # faulthandler prints most recent first
        self._emit(TracebackRecord("FatalPythonError", message, tuple(frames),
                                   "\n".join(self.lines[start:self.i]).rstrip(), self.stream, "crash"))

    def _cpp_terminate(self) -> None:
        start = self.i
        exc_type = _TERMINATE.match(self.lines[self.i])["type"]  # type: ignore[index]
        self.i += 1
        message = ""
        if self.i < len(self.lines) and (wm := _WHAT.match(self.lines[self.i])):
            message = wm["msg"]
            self.i += 1
        self._emit(TracebackRecord(exc_type, message, (), "\n".join(self.lines[start:self.i]),
                                   self.stream, "crash"))


def _unchained(record: TracebackRecord) -> TracebackRecord:
    return TracebackRecord(record.exc_type, record.message, record.frames, record.text,
                           record.stream, record.kind)


_RANK_PREFIX = re.compile(r"^\[(?:rank|default)\d+\]:", re.MULTILINE)


def _by_rank(text: str) -> list[str] | None:
    """torchrun prefixes each line a rank writes with ``[rankN]:``; ranks that fail at once
    interleave their lines. One text per rank (and one for unprefixed lines), ordered by where
    each first shows a traceback; None when no line is prefixed."""
    if not _RANK_PREFIX.search(text):
        return None
    groups: dict[str, list[str]] = {}
    first: dict[str, int] = {}
    for n, line in enumerate(text.splitlines()):
        m = _RANK_PREFIX.match(line)
        key = m.group(0) if m else ""
        groups.setdefault(key, []).append(line)
        if key not in first and _HEADER in line:
            first[key] = n
    order = sorted(groups, key=lambda k: first.get(k, 1 << 60))
    return ["\n".join(groups[k]) for k in order]


def parse_tracebacks(text: str, stream: str = "stderr") -> list[TracebackRecord]:
    """Every traceback in ``text``, in the order printed; chained ones folded into the last.
    Lines of torchrun's ranks (``[rankN]:``) are read rank by rank, however they interleave."""
    ranks = _by_rank(text)
    if ranks is not None and len(ranks) > 1:
        return [r for part in ranks for r in parse_tracebacks(part, stream)]
    records = _Parser(text, stream).parse()
    if not records:
        # A pasted "trace tail" without its header line: parse from the first frame.
        lines = text.splitlines()
        for n, line in enumerate(lines):
            if _FRAME.match(line):
                return _Parser("\n".join(lines[:n] + [_HEADER] + lines[n:]), stream).parse()
    return records


def all_records(records: list[TracebackRecord]) -> Iterator[TracebackRecord]:
    """Each record, then the causes in its chain: every exception a user might pick."""
    for r in records:
        yield r
        yield from r.chain


HANG_ENV = "REPROBOT_HANG_AFTER"
_HANG_PLUMBING = ("threading.py", "multiprocessing/", "selectors.py", "queue.py", "subprocess.py")


def thread_stacks(text: str) -> list[tuple[Frame, ...]]:
    """Every thread stack of the faulthandler dumps in ``text`` (outermost frame first), in the
    order printed; a dump without a "Fatal Python error" line (faulthandler.register's) too."""
    stacks: list[list[Frame]] = []
    current: list[Frame] | None = None
    for line in text.splitlines():
        if _THREAD.match(line) or line.strip() == "Stack (most recent call first):":
            current = []
            stacks.append(current)
            continue
        fm = _FAULT_FRAME.match(line)
        if fm and current is not None:
            current.append(Frame(fm["path"], int(fm["lineno"]), fm["func"]))
        elif line.strip():
            current = None
    return [tuple(reversed(s)) for s in stacks if s]


def hang_record(text: str, seconds: float, stream: str = "stderr",
                spinning: bool | None = None) -> TracebackRecord | None:
    """What a run that made no progress was doing: of all dumped threads (every process), the one
    that waits in the program's own code (holds or waits for a lock), not in the plumbing
    (threading's join, multiprocessing's wait); its innermost frames become the message, so a
    candidate hangs the same way only where it waits at the same functions."""
    from reducer.failure.normalize import library_path
    stacks = thread_stacks(text)
    if not stacks:
        return None

    def waits_in_own_code(stack: tuple[Frame, ...]) -> bool:
        inner = stack[-1]
        return library_path(inner.path) is None or not any(p in inner.path for p in _HANG_PLUMBING)

    def key(stack: tuple[Frame, ...]) -> str:
        return " < ".join(f.func for f in reversed(stack[-3:]))

    own = [s for s in stacks if waits_in_own_code(s)]
    stack = min(own, key=key) if own else stacks[0]
    # Spinning or waiting is part of the message (so of the signature): a candidate that turned
    # a sleeping loop into `while True: pass` hangs at the same frames but not the same way.
    state = "" if spinning is None else (", spinning a core" if spinning else ", waiting")
    message = f"no progress for {seconds:g}s{state}; stack: {key(stack)}"
    lines = [ln for ln in text.splitlines() if _THREAD.match(ln) or _FAULT_FRAME.match(ln)]
    return TracebackRecord("Hang", message, stack, "\n".join([f"Hang: {message}", *lines]).rstrip(), stream, "crash")
