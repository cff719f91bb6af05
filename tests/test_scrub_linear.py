"""The scrubber is bounded on hostile input: every pattern of bot/scrub.py and bot/scrub_places.py
is fed about 1 MB made to defeat it (a run that almost matches, so a backtracking pattern would
retry it from every position), and must finish in well under a second; so must scrub() of each.

A script builds its exception message at run time, so no cap on a draft's size protects the
scrubber: before issue #39, one scrub() of 120 KB of ``a%a%...`` took 10-25 s (the e-mail
pattern was quadratic). Times are CPU seconds of this process (time.process_time), so a loaded
machine does not make a linear pattern look slow; a quadratic one takes minutes on 1 MB.
"""
from __future__ import annotations

import re
import time
from typing import Callable

import pytest

import bot.scrub as scrub_mod
import bot.scrub_places as places
from bot.scrub import scrub

SIZE = 1_000_000
BOUND = 1.0        # CPU seconds: generous for a linear scan of 1 MB (measured: see the report)


class mb:
    """``head``, then ``unit`` repeated to about 1 MB, then ``tail`` (what makes the last attempt
    fail); built when a test runs, so collecting the tests holds no megabytes."""

    def __init__(self, unit: str, tail: str = "", head: str = "") -> None:
        self.unit, self.tail, self.head = unit, tail, head

    def __radd__(self, head: str) -> "mb":
        return mb(self.unit, self.tail, head + self.head)

    def __str__(self) -> str:
        return self.head + (self.unit * (SIZE // len(self.unit) + 1))[:SIZE] + self.tail

    def __repr__(self) -> str:
        return f"{self.head[:12]!r}+{self.unit[:12]!r}*+{self.tail[:6]!r}"


# name of a module-level pattern -> inputs made for it. Each input is what made (or would make)
# that pattern retry a long run from many starting points.
HOSTILE: dict[str, list[mb]] = {
    # bot/scrub.py
    "_PEM_BEGIN": [mb("-----BEGIN A-----"), mb("-----BEGIN " + "A" * 39 + "-")],
    "_QUOTE": [mb("\\")],
    "_ASCII_B64": [mb("A")], "_ASCII_HEX": [mb("7")],
    "_PUTTY": [mb("PuTTY-User-Key-File-2: x\n")],
    "_AWS_SECRET": ["aws_secret_access_key" + mb(" ", "x")],
    "_AUTH_HEADER": ["x-" + mb("a-", "!"), "Authorization: bearer" + mb(" ", "$")],
    "_KEY_ARG": [mb("key='" + "0" * 31 + "'")],
    "_AZURE_KEY": ["AccountKey=" + mb("<N>")],
    "_URL_CREDENTIALS": [mb("://a:"), "://a" + mb(":a")],
    "_URL_USER": ["://" + mb("a")],
    "_URL_CREDENTIALS_NORM": [":/<PATH>:" + mb("a")],
    "_ENV_ASSIGN": [mb("A_", "TOKE"), "A_TOKEN=" + mb(" ", "$")],
    "_CODE_ASSIGN": ["a_key='" + mb("a1/"), mb("a_", "key")],
    "_PASSWORD_ARG": ["password='" + mb("a")],
    "_WEBHOOK": [mb("https://discord.com/api/webhooks/" + "1" * 19 + "/" + "a" * 59 + " ")],
    "_TELEGRAM": [mb("12345678:AA" + "a" * 32 + " ")],
    "_NORMALISED_RUN": [mb("a<N>"), mb("<N>-")],
    "_KEYWORD_ASSIGN": [mb("password", "="), "password='" + mb("a")],
    "_KEYWORD_COMPARED": [mb("'a'=="), "'" + mb("a")],
    "_KEYWORD_STATEMENT": [mb("password" + "a" * 49 + " '")],
    "_CLOUD_ASSIGN": ["cloudant_password" + mb(" ", "x")],
    "_AWS_VALUE": [mb("'" + "a" * 39), mb("'" + "a" * 40)],
    "_NPM_AUTH": ["_authToken=" + mb("a")],
    "_SITE_POSIX": [mb("/%"), mb("/a", "/site-packages"), mb("=/a")],
    "_SITE_WIN": [mb("C:\\a\\"), "C:\\" + mb("a\\")],
    "_HOME_POSIX": [mb("/a", "/home"), mb("/!")],
    "_HOME_WIN": [mb("C:\\Users\\")],
    "_DRIVE_DIRS": [mb("C:\\a"), "C:\\" + mb("a")],
    "_DRIVE_ONLY": [mb("C:\\a:")],
    "_EMAIL": [mb("a%"), mb("a@a.a"), "a@" + mb("a.", "1")],
    "_PRIVATE_IP6": [mb("fc00:"), "fe80::" + mb("a:", "g")],
    "_PATH_GAP": [mb("<PATH> a")],
    "_PRIVATE_IP": [mb("10.1.1.")],
    "_USER_ROOT": [mb("/data/"), mb("/a", "/data/ab")],
    "_SOURCE_CHECKOUT": [mb("/@"), mb("/src", "/peft"), mb("/peft")],
    "_HUB_CALL": ["from_pretrained('" + mb("a")],
    "_HUB_URL": ["huggingface.co/" + mb("a")],
    "_HUB_BEFORE": ["can't load " + "a " * 20 + "for '" + mb("a")],
    "_HUB_AFTER": [mb("a", "/a is not a local folde"), mb("'a/a'")],
    "_HUB_CACHE": ["models--" + mb("a-"), mb("models--a--")],
    "_VCS_OWNER": ["git+https://github.com/" + mb("a")],
    "_BARE_HEX": [mb("0123456789abcdef", "g")],
    "_SHORT_HEX": [mb("0123456789abcdef", "g"), mb("key 0123456789abcd ")],
    "_BARE_MIXED": [mb("aA0", "\u00e9")],
    "_BREAK": [mb("\\")],
    "_RUN12": [mb("a" * 11 + " ")],
    "_B64_RUN": [mb("a", "===")],
    "_HEX_RUN": [mb("0", "0" if SIZE % 2 else "")],
    "_ANSI": ["\x1b[" + mb("0"), "\x1b]" + mb("a")],
    "_CONTROLS": [mb("\x07")],
    "_PLACEHOLDER": ["<redacted:" + mb("a")],
    "_ANY_HEAD": [mb("gh")],
    # bot/scrub_places.py
    "places._CHAIN": [mb("a."), mb("a<N>")],
    "places._PORT_ANYWHERE": [mb(":12"), mb("gpu1:1")],
    "places._DOT_WORD": [mb(".co"), mb(".c")],
    "places._WORD_DOT": [mb("internal")],
    "places._HOST_CONTEXT": [mb("host="), "connect to " + mb("a.", "(")],
    "places._ASSIGNED": [mb("A_", "ADD"), "MASTER_ADDR=" + mb("a-"), "MASTER_ADDR=[" + mb("1")],
    "places._SLURM_CANCELLED": ["*** JOB 1 ON " + mb("a")],
    "places._TRACKER_URL": [mb("wandb.ai/"), "wandb.ai/" + mb("a")],
    "places._LOGGED_IN": ["logged in as: " + mb(" ", "!")],
    "places._TRACKER_ARG": ["project='" + mb("a")],
    "places._BUCKET_URL": [mb("s3://"), "s3://" + mb("a")],
    "places._BUCKET_ARG": ["bucket='" + mb("a")],
    "places._SERVICE_ACCOUNT": [mb("a@a.iam.gserviceaccount.co"), mb("a", "@")],
    "places._GCP_PROJECT": [mb("projects/aaaaa/")],
    "places._PRIVATE_WORD": [mb("interna")],
}
# Patterns only matched at one position, or against a whole value: fed the same way.
AT_START: dict[str, tuple[str, list[mb]]] = {
    "_PATH_REST": ("match", [mb("a")]),
    "_CREDENTIAL_PAIR": ("fullmatch", [mb("a:")]),            # a decoded base64 run
    "SECRET_ENV_NAME": ("search", [mb("_gsk_")]),              # a variable's name
    "_BORING_VALUE": ("fullmatch", [mb("1."), mb("):")]),     # a variable's value
    "_KEY_BEFORE": ("search", [mb(" )")]), "_HASH_BEFORE": ("search", [mb("bot~")]),
    "places._PORT": ("match", [mb(":1")]),
    "places._NAME_RUN": ("match", [mb("a.")]),
    "places._LABEL_WHOLE": ("fullmatch", [mb("a<N"), mb("a")]),
    "places._SEGMENT": ("match", ["/" + mb("a")]),
    "places._HOST_AT": ("search", [mb("://")]),
    "places._EXAMPLE": ("search", [mb(".example.")]),
    "places._PATH_BUCKET_HOSTS": ("fullmatch", [mb("s3-a"), "s3" + mb(".a")]),
    "places._LOOPBACK": ("fullmatch", [mb("127.")]), "places._IPV4": ("fullmatch", [mb("1.")]),
    "places._PRIVATE_V4": ("match", [mb("10.")]), "places._DOCUMENTATION_V4": ("match", [mb("192.")]),
}
# Patterns compiled from parts at run time.
BUILT: dict[str, tuple[re.Pattern[str], str, list[mb]]] = {
    "lead of a wrapped token (after a label)": (scrub_mod._lead_res("A-Za-z0-9")[1], "match",
                                               [mb("a" * 30 + ":"), mb("a ")]),
    "a local name as a word": (re.compile(r"(?<![\w.-])tdelacroix42(?![\w-])"), "finditer", [mb("tdelacroix4")]),
}
# Patterns only ever matched against a short string, fed every prefix of the longest one they can
# see (an exponential pattern shows there, where a linear one costs nothing).
BOUNDED: dict[str, tuple[str, list[str]]] = {
    "_FOLDER_LIKE": ("fullmatch", ["disk" + "1" * 27, "v" * 31]),      # a folder name: 31 characters at most
    "_AWS_LOOSE": ("search", [("aws" * 15)[:45], "aws" + " " * 40 + "ke"]),  # the 45 before a quoted value
    "places._MACHINE": ("fullmatch", ["gpu" + "a" * 60, "a-" * 30 + "gpu", "gpu-" + "a-" * 29 + "1"]),  # a DNS label
}


def _patterns() -> dict[str, re.Pattern[str]]:
    found = {name: p for name, p in vars(scrub_mod).items() if isinstance(p, re.Pattern)}
    found.update({f"places.{name}": p for name, p in vars(places).items() if isinstance(p, re.Pattern)})
    return found


def _cpu(fn: Callable[[], object]) -> float:
    t0 = time.process_time()
    fn()
    return time.process_time() - t0


def test_every_pattern_has_hostile_inputs() -> None:
    """A pattern added later without an input made to defeat it fails here."""
    given = set(HOSTILE) | set(AT_START) | set(BOUNDED)
    assert sorted(set(_patterns()) - given) == [], "give these patterns hostile inputs in HOSTILE"
    assert sorted(given - set(_patterns())) == []


def _cases() -> list[tuple[str, re.Pattern[str], str, mb]]:
    patterns = _patterns()
    cases = [(name, patterns[name], "finditer", text) for name, texts in HOSTILE.items() for text in texts]
    cases += [(name, patterns[name], how, text) for name, (how, texts) in AT_START.items() for text in texts]
    cases += [(name, pattern, how, text) for name, (pattern, how, texts) in BUILT.items() for text in texts]
    # Every token kind: its prefix repeated (a start after each), to a non-ASCII word character
    # that fails every end assertion; a wrapped token's head at the end of every line.
    for i, tk in enumerate(scrub_mod._TOKENS):
        head = (tk.literals or ("a",))[0]
        cases.append((f"_TOKENS[{i}] {tk.kind}", re.compile(tk.pattern), "finditer", mb(head + "a", "\u00e9")))
        if tk.full_len:
            cases.append((f"tail of {tk.kind}", scrub_mod._tail_re(tk), "finditer", mb(head + "a\n")))
    return cases


def _apply(pattern: re.Pattern[str], how: str, text: str) -> None:
    if how == "finditer":
        for _ in pattern.finditer(text):
            pass
    else:
        getattr(pattern, how)(text)


@pytest.mark.parametrize("name,pattern,how,spec", _cases(),
                         ids=lambda v: v if isinstance(v, str) else repr(v) if isinstance(v, mb) else "")
def test_each_pattern_is_linear_on_input_made_to_defeat_it(name: str, pattern: re.Pattern[str], how: str,
                                                           spec: mb) -> None:
    text = str(spec)
    assert len(text) >= SIZE
    took = _cpu(lambda: _apply(pattern, how, text))
    assert took < BOUND, f"{name}: {took:.2f} s CPU on {len(text):,} characters"


@pytest.mark.parametrize("name", sorted(BOUNDED))
def test_patterns_on_bounded_strings_cannot_blow_up(name: str) -> None:
    pattern = _patterns()[name]
    how, texts = BOUNDED[name]
    for text in texts:
        took = _cpu(lambda: [getattr(pattern, how)(text[:k]) for k in range(1, len(text) + 1)])
        assert took < BOUND, f"{name}: {took:.2f} s on {text[:20]!r}..."


# What scrub() as a whole is fed: the red-team's message, then one input per family of rules
# (each also exercises every other rule, which must pass over it quickly).
SCRUB_HOSTILE = {
    "red team: a%a%... (e-mail)": mb("a%"),
    "home folders": mb("/home/"),
    "long hex": mb("0123456789abcdef"),
    "path of %": mb("/%"),
    "dotted names": mb("a.b "),
    "normalised numbers": mb("a<N>"),
    "keyword names": mb("password"),
    "wrapped token heads": mb("hf_a\n"),
    "PEM headers": mb("-----BEGIN A-----"),
    "URL user parts": mb("://a:"),
    "escaped breaks": mb("\\"),
    "mixed-case runs": mb("aA0"),
    "prose": mb("the quick brown fox jumps over the lazy dog. "),
}


def _scrub(text: str) -> object:
    return scrub(text, names=("tdelacroix42",), environ={"ACME_SERVICE_TOKEN": "q1w2e3r4t5y6u7i8"})


@pytest.mark.parametrize("label", sorted(SCRUB_HOSTILE))
def test_scrub_of_a_hostile_megabyte_is_bounded(label: str) -> None:
    text = str(SCRUB_HOSTILE[label])
    took = _cpu(lambda: _scrub(text))
    assert took < BOUND, f"scrub() of {label}: {took:.2f} s CPU on {len(text):,} characters"


def test_scrub_of_a_megabyte_of_matches_is_linear_in_the_matches() -> None:
    """``a@a.a`` repeated: 100,000 addresses, each replaced (and reported once: the same finding on
    one line is one). That is Python work per match, about 4 us, on top of the scans: measured
    0.6-1.2 s CPU here, so the bound is twice the others'; the quadratic pattern took minutes."""
    text = str(mb("a@a.a"))
    took = _cpu(lambda: _scrub(text))
    assert took < 2 * BOUND, f"scrub() of 100,000 addresses: {took:.2f} s CPU"
    result = _scrub(text)
    assert result.text.count("<email>") == 100_000 and "a@a" not in result.text
    assert [f.kind for f in result.findings] == ["email"]
