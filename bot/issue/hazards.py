"""What a maintainer should not run blind: a static check of a repro's code.

A repro leaves the machine as an invitation to run it (the draft, the filed issue, the Action's
reply and its pre-filled link). The reducer deletes every statement the failure does not need,
so a side effect still in the result is one the failure depends on; this module names such
lines so that every place the code is shown can say so before the code. It reads the code with
``ast`` and runs nothing.

Kinds, each with a one-line reason per finding:
- ``process``: a program or a shell command (os.system, subprocess, os.exec*/spawn*, pty, ctypes, pip);
- ``network``: a connection outside the Hugging Face Hub (socket, urllib.request, http.client,
  requests, httpx, ftplib, ...), or a URL literal outside the Hub handed to a call;
- ``write-outside``: a write to the home folder, a system path, the Python installation, or a
  shell start-up or credential file named at all;
- ``dynamic-code``: exec/eval/compile of non-literal data, a module imported by a computed name,
  a dangerous module's attribute looked up by a computed name;
- ``unsafe-load``: pickle/marshal/dill/joblib loads, torch.load(weights_only=False),
  numpy.load(allow_pickle=True), yaml.load with an unsafe loader;
- ``remote-code``: trust_remote_code=True, torch.hub.load (code from the Hub or GitHub).

Precision matters as much as recall: a plain tiny-model repro (torch, transformers and peft
calls, from_pretrained of a model id, writes to relative paths or temporary folders, a socket
bound to a free local port for a process group) has no findings. A static check can be evaded
by code built to hide from it; it is a warning for a person, not a sandbox (the Action's sandbox
and the candidates' own HOME are what contain a run).
"""
from __future__ import annotations

import ast
import re
from dataclasses import asdict, dataclass
from typing import Iterable, Iterator

from bot.issue.markdown import code_span, inline
from bot.scrub import scrub

# Said before the code wherever a repro with findings is shown; the Action's publish job looks
# for it in a draft it did not write.
HEADING = "Do not run this repro blind"
MAX_LISTED = 40      # findings listed one by one; past that, one line says how many more
MAX_VALUES = 20      # values followed per assigned name
HEADLINE = "Read the script before running it"   # the one-line form that opens a draft's body
TEXT_MAX = 160

KIND_WORDS = {
    "process": "runs a program or a shell command",
    "network": "reaches the network outside the Hugging Face Hub",
    "write-outside": "writes outside the working folder",
    "dynamic-code": "runs code built from data",
    "unsafe-load": "unpickles data, which can run any code",
    "remote-code": "runs code downloaded from the Hub or GitHub",
    "unchecked": "could not be checked",
    "more": "has more findings",
}


@dataclass(frozen=True)
class Hazard:
    kind: str       # a key of KIND_WORDS
    line: int       # 1-based, in the source as given
    text: str       # the line (or the statement's head), scrubbed, one line, capped
    reason: str     # one line

    def to_dict(self) -> dict[str, object]:
        return asdict(self)

    def __str__(self) -> str:
        return f"line {self.line}: {self.reason}"


# --- what is dangerous, by qualified name ------------------------------------------------------

# (qualified-name prefix, kind, reason). A prefix matches itself and its dotted children.
_BY_NAME: tuple[tuple[str, str, str], ...] = (
    ("os.system", "process", "runs a shell command"),
    ("os.popen", "process", "runs a shell command"),
    ("os.posix_spawn", "process", "starts a program"),
    ("os.startfile", "process", "starts a program"),
    ("subprocess", "process", "starts a program"),
    ("pty.spawn", "process", "starts a program in a terminal"),
    ("asyncio.create_subprocess_exec", "process", "starts a program"),
    ("asyncio.create_subprocess_shell", "process", "runs a shell command"),
    ("platform.popen", "process", "runs a shell command"),
    ("commands", "process", "runs a shell command"),
    ("popen2", "process", "runs a shell command"),
    ("pexpect", "process", "starts a program"),
    ("sh", "process", "runs shell commands"),
    ("plumbum", "process", "runs shell commands"),
    ("ctypes", "process", "calls native code directly (it can run anything)"),
    ("pip", "process", "installs packages"),
    ("webbrowser", "process", "opens a browser"),
    ("socket", "network", "opens a network socket"),
    ("ssl.wrap_socket", "network", "opens a network connection"),
    ("ssl.create_connection", "network", "opens a network connection"),
    ("urllib.request", "network", "fetches a URL"),
    ("urllib.urlopen", "network", "fetches a URL"),
    ("urllib.urlretrieve", "network", "fetches a URL"),
    ("urllib2", "network", "fetches a URL"),
    ("urllib3", "network", "fetches a URL"),
    ("http.client", "network", "opens an HTTP connection"),
    ("httplib", "network", "opens an HTTP connection"),
    ("http.server", "network", "starts a network server"),
    ("socketserver", "network", "starts a network server"),
    ("requests", "network", "fetches a URL"),
    ("httpx", "network", "fetches a URL"),
    ("aiohttp", "network", "fetches a URL"),
    ("ftplib", "network", "opens an FTP connection"),
    ("smtplib", "network", "sends e-mail"),
    ("poplib", "network", "opens a mail connection"),
    ("imaplib", "network", "opens a mail connection"),
    ("telnetlib", "network", "opens a telnet connection"),
    ("nntplib", "network", "opens a news connection"),
    ("xmlrpc", "network", "calls a remote server"),
    ("websocket", "network", "opens a websocket"),
    ("websockets", "network", "opens a websocket"),
    ("paramiko", "network", "opens an SSH connection"),
    ("pycurl", "network", "fetches a URL"),
    ("wget", "network", "fetches a URL"),
    ("asyncio.open_connection", "network", "opens a network connection"),
    ("asyncio.start_server", "network", "starts a network server"),
    ("boto3", "network", "talks to a cloud service"),
    ("botocore", "network", "talks to a cloud service"),
    ("torch.hub.download_url_to_file", "network", "fetches a URL"),
    ("torch.hub.load_state_dict_from_url", "network", "fetches a URL"),
    ("torch.utils.model_zoo.load_url", "network", "fetches a URL"),
    ("pickle.load", "unsafe-load", "unpickles data"),
    ("pickle.loads", "unsafe-load", "unpickles data"),
    ("pickle.Unpickler", "unsafe-load", "unpickles data"),
    ("_pickle", "unsafe-load", "unpickles data"),
    ("cPickle", "unsafe-load", "unpickles data"),
    ("marshal.load", "unsafe-load", "loads marshalled code"),
    ("marshal.loads", "unsafe-load", "loads marshalled code"),
    ("dill.load", "unsafe-load", "unpickles data"),
    ("dill.loads", "unsafe-load", "unpickles data"),
    ("dill.Unpickler", "unsafe-load", "unpickles data"),
    ("cloudpickle.load", "unsafe-load", "unpickles data"),
    ("cloudpickle.loads", "unsafe-load", "unpickles data"),
    ("joblib.load", "unsafe-load", "unpickles data"),
    ("shelve.open", "unsafe-load", "unpickles data"),
    ("pandas.read_pickle", "unsafe-load", "unpickles data"),
    ("jsonpickle.decode", "unsafe-load", "unpickles data"),
    ("yaml.unsafe_load", "unsafe-load", "loads YAML that can build any object"),
    ("torch.package.PackageImporter", "unsafe-load", "loads a package that can run any code"),
    ("types.CodeType", "dynamic-code", "builds a code object"),
    ("types.FunctionType", "dynamic-code", "builds a function from a code object"),
    ("torch.hub.load", "remote-code", "runs hubconf.py fetched from GitHub"),
    ("transformers.dynamic_module_utils.get_class_from_dynamic_module", "remote-code",
     "runs code downloaded from the Hub"),
)
_OS_PREFIXES = ("os.exec", "os.spawn")   # os.execv, os.execlpe, os.spawnl, ...: a family each
# Names whose use is harmless although their module is listed: constants (read, not called), and a
# host's own name and the exceptions a caller catches.
_HARMLESS_ATTRS = re.compile(r"^[A-Z][A-Z0-9_]*$")
_HARMLESS = {"socket.gethostname", "subprocess.CalledProcessError", "subprocess.TimeoutExpired",
             "subprocess.SubprocessError", "requests.exceptions", "urllib3.exceptions", "pip.__version__"}

# Hosts of the Hugging Face Hub: the one network a plain ML repro is expected to reach.
_HUB_HOST = re.compile(r"^(?:[\w-]+\.)*(?:huggingface\.co|hf\.co)$", re.IGNORECASE)
_URL = re.compile(r"^\s*(https?|ftp|ftps|s3|gs|gcs|wss?|sftp|scp)://([^/\s:@?#]*@)?([^/\s:?#]+)", re.IGNORECASE)
# Calls that only show a string: a URL in a message is not a fetch.
_SHOW_ONLY = re.compile(r"^(?:builtins\.)?(?:print|repr|str|format|len|isinstance)$|(?:^|\.)(?:debug|info|warning|"
                        r"warn|error|exception|critical|log|write|format|startswith|endswith|join|split|replace|"
                        r"search|match|fullmatch|findall|sub|compile|quote|urlparse|urlsplit|urljoin)$")

# Files whose mere mention is the attack (a shell start-up or credential file), read or written.
_PRIVATE_FILE = re.compile(
    r"(?:^|[/\\~])\.(?:bashrc|bash_profile|bash_login|bash_logout|profile|zshrc|zprofile|zshenv|zlogin|cshrc|"
    r"tcshrc|login|ssh(?:[/\\]|$)|gnupg|gitconfig|git-credentials|netrc|pypirc|npmrc|docker[/\\]config|"
    r"aws[/\\]credentials|kube[/\\]config|config[/\\]autostart|config[/\\]systemd|huggingface[/\\]token|"
    r"cache[/\\]huggingface[/\\]token)"
    r"|(?:^|/)etc/(?:profile|bash\.bashrc|environment|sudoers|crontab|cron\.|passwd|shadow|ld\.so\.preload|hosts|"
    r"rc\.local|systemd)|authorized_keys|(?:^|/)var/spool/cron",
    re.IGNORECASE)

# Absolute paths whose writes stay harmless: temporary and null devices, the notebook services'
# own working folders (they do not exist on a maintainer's machine, so a write there just fails).
_HARMLESS_ROOTS = re.compile(r"^/(?:tmp|var/tmp|dev/null|dev/shm|dev/stdout|dev/stderr|content|kaggle/working)(?:/|$)")
_HOME_ENV = {"HOME", "USERPROFILE", "XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_CACHE_HOME", "APPDATA", "LOCALAPPDATA"}

# Calls that write (or delete, or move, or change into) the path they are given.
_WRITE_FUNCS = {
    "os.remove", "os.unlink", "os.rmdir", "os.removedirs", "os.rename", "os.renames", "os.replace", "os.makedirs",
    "os.mkdir", "os.chmod", "os.chown", "os.lchown", "os.symlink", "os.link", "os.truncate", "os.utime", "os.mkfifo",
    "os.mknod", "os.chdir", "shutil.copy", "shutil.copy2", "shutil.copyfile", "shutil.copytree",
    "shutil.move", "shutil.rmtree", "shutil.chown", "shutil.copymode", "shutil.copystat", "shutil.make_archive",
    "shutil.unpack_archive", "pathlib.Path.write_text", "pathlib.Path.write_bytes",
}
_WRITE_METHODS = {"write_text", "write_bytes", "touch", "mkdir", "unlink", "rmdir", "rename", "replace",
                  "symlink_to", "hardlink_to", "chmod", "lchmod"}
_WRITE_VERBS = re.compile(r"^(?:save|to_|dump|export)")   # not ``write``: that writes to an open handle
_WRITE_FLAGS = {"O_WRONLY", "O_RDWR", "O_CREAT", "O_APPEND", "O_TRUNC"}
_WRITE_KEYWORDS = re.compile(r"^(?:output|save|logging|log_|cache|out_|dump|export|dest)")
_OPEN_FUNCS = {"builtins.open", "io.open", "codecs.open"}
# Calls that build a path from their first argument, and path methods that keep their receiver's place.
_PATH_FUNCS = {"os.path.join", "os.path.abspath", "os.path.realpath", "os.path.normpath", "os.path.dirname",
               "pathlib.Path", "pathlib.PurePath", "pathlib.PosixPath", "os.fspath", "builtins.str"}
_PATH_METHODS = {"joinpath", "resolve", "absolute", "with_name", "with_suffix", "with_stem"}
# Calls that name the Python installation: writing there patches what every later run imports.
_INSTALL_FUNCS = {"site.getsitepackages", "site.getusersitepackages", "sysconfig.get_paths", "sysconfig.get_path",
                  "inspect.getfile", "inspect.getsourcefile", "distutils.sysconfig.get_python_lib"}


def _under_hub(url_host: str) -> bool:
    return bool(_HUB_HOST.match(url_host))


# --- the scan ---------------------------------------------------------------------------------

def find_hazards(source: str) -> list[Hazard]:
    """Every finding in ``source``, by line; [] for code that does not parse (it cannot run).
    Code too deep for the parser gives one ``unchecked`` finding instead of an error."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []
    except (RecursionError, MemoryError, ValueError):
        return [_unchecked()]
    try:
        return _Scan(source, tree).run()
    except RecursionError:
        return [_unchecked()]


def _unchecked() -> Hazard:
    return Hazard("unchecked", 1, "", "too deeply nested for reprobot to check: read all of it before running it")


def _const_str(node: ast.AST | None) -> str | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr) and node.values and isinstance(node.values[0], ast.Constant):
        return str(node.values[0].value)    # an f-string's literal head: where the path or URL starts
    return None


def _is_literal(node: ast.AST | None) -> bool:
    try:
        ast.literal_eval(node)  # type: ignore[arg-type]
        return True
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return False


def _kw(call: ast.Call, name: str) -> ast.AST | None:
    for k in call.keywords:
        if k.arg == name:
            return k.value
    return None


def _is_const(node: ast.AST | None, *values: object) -> bool:
    return isinstance(node, ast.Constant) and any(node.value is v for v in values)


class _Scan:
    def __init__(self, source: str, tree: ast.Module) -> None:
        self.lines = source.splitlines()
        self.tree = tree
        self.bind: dict[str, set[str]] = {}        # local name -> qualified names it may hold
        self.stars: list[str] = []                 # modules imported with *
        self.values: dict[str, list[ast.AST]] = {}  # local name -> every value assigned to it
        self.defined: set[str] = set()             # names the script defines (shadow builtins)
        self.parent: dict[int, ast.AST] = {}
        self.nodes: list[ast.AST] = []
        self.typing_only: set[int] = set()         # annotations name types; they run nothing
        self.found: dict[tuple[int, str], tuple[ast.AST, str]] = {}
        self._path_memo: dict[int, str | None] = {}
        self._busy: set[str] = set()
        self._names: dict[str, str | None] = {}    # a name's path class, once found
        self._free: dict[str, bool] = {}           # a socket name's "only a free local port"

    # -- set-up: bindings, values, statements --

    def _index(self) -> None:
        """One pass over the tree: each node's parent, the names the script binds (imports,
        assignments, definitions), and which nodes are annotations."""
        stack: list[tuple[ast.AST, bool]] = [(self.tree, False)]
        parent, nodes, typing_only = self.parent, self.nodes, self.typing_only
        while stack:
            node, typing = stack.pop()
            nodes.append(node)
            if typing:
                typing_only.add(id(node))
            annotations = _annotations(node)
            for child in ast.iter_child_nodes(node):
                parent[id(child)] = node
                stack.append((child, typing or (bool(annotations) and any(child is a for a in annotations))))
            if isinstance(node, _BINDERS):
                self._bindings(node)
        # An alias of something dangerous is as dangerous: ``run = subprocess.run``, ``o = __import__("os")``.
        for _ in range(3):
            grew = False
            for name, vals in self.values.items():
                for v in vals:
                    for q in self.resolve(v):
                        if q not in self.bind.setdefault(name, set()):
                            self.bind[name].add(q)
                            grew = True
            if not grew:
                break

    def _value(self, name: str, value: ast.AST) -> None:
        # A name assigned more often than this is no constant path or URL worth following, and
        # following every value at every use would make a hostile script quadratic.
        vals = self.values.setdefault(name, [])
        if len(vals) < MAX_VALUES:
            vals.append(value)

    def _bindings(self, node: ast.AST) -> None:
        if isinstance(node, ast.Import):
            for a in node.names:
                local = a.asname or a.name.split(".")[0]
                self.bind.setdefault(local, set()).add(a.name if a.asname else a.name.split(".")[0])
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            for a in node.names:
                if a.name == "*":
                    self.stars.append(node.module)
                else:
                    self.bind.setdefault(a.asname or a.name, set()).add(f"{node.module}.{a.name}")
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            self.defined.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign, ast.NamedExpr)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for t in targets:
                for name in (n.id for n in ast.walk(t) if isinstance(n, ast.Name)):
                    self.defined.add(name)
                    if isinstance(t, ast.Name) and node.value is not None:
                        self._value(name, node.value)
        elif isinstance(node, (ast.withitem,)) and isinstance(node.optional_vars, ast.Name):
            self._value(node.optional_vars.id, node.context_expr)
            self.defined.add(node.optional_vars.id)
        elif isinstance(node, ast.arg):
            self.defined.add(node.arg)

    # -- names --

    def resolve(self, node: ast.AST) -> set[str]:
        """The qualified names an expression may stand for (``sp.run`` -> ``subprocess.run``)."""
        if isinstance(node, ast.Name):
            if node.id in self.bind:
                return set(self.bind[node.id])
            if node.id in self.defined:
                return set()
            starred = {f"{m}.{node.id}" for m in self.stars if _rule(f"{m}.{node.id}")}
            return starred or {f"builtins.{node.id}"}
        if isinstance(node, ast.Attribute):
            base = self.resolve(node.value)
            # ``__builtins__.exec`` is the builtin; an attribute of any other unbound name is nothing known
            return {f"{q}.{node.attr}" for q in base if not q.startswith("builtins.")} | (
                {f"builtins.{node.attr}"} if "builtins.__builtins__" in base else set())
        if isinstance(node, ast.Call):
            funcs = self.resolve(node.func)
            first = _const_str(node.args[0]) if node.args else None
            if first and funcs & {"builtins.__import__", "importlib.import_module", "importlib.__import__"}:
                return {first if "importlib.import_module" in funcs else first.split(".")[0]}
            if "builtins.getattr" in funcs and len(node.args) >= 2:
                attr = _const_str(node.args[1])
                if attr is not None:
                    return {f"{q}.{attr}" for q in self.resolve(node.args[0])}
        return set()

    # -- paths --

    def path_class(self, node: ast.AST | None) -> str | None:
        """Where a path expression points when it leaves the working folder: ``home`` (with the
        literal when known), ``system``, ``install``; None for relative, temporary or unknown."""
        if node is None:
            return None
        key = id(node)
        if key not in self._path_memo:
            self._path_memo[key] = None   # a cycle through names resolves to "unknown"
            self._path_memo[key] = self._path_class(node)
        return self._path_memo[key]

    def _path_class(self, node: ast.AST) -> str | None:
        text = _const_str(node)
        if text is not None:
            return _literal_class(text)
        if isinstance(node, ast.Name):
            if node.id in self._names:
                return self._names[node.id]
            if node.id in self._busy:
                return None
            self._busy.add(node.id)
            try:
                found = next((c for c in map(self.path_class, self.values.get(node.id, [])) if c), None)
            finally:
                self._busy.discard(node.id)
            self._names[node.id] = found
            return found
        if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Div, ast.Add)):
            right = _const_str(node.right)
            if isinstance(node.op, ast.Div) and right is not None and right.startswith(("/", "~")):
                return _literal_class(right)
            return self.path_class(node.left)
        if isinstance(node, ast.Attribute):
            if node.attr == "__file__" and not (isinstance(node.value, ast.Name) and node.value.id == "__main__"):
                return "install"     # a module's own file: writing next to it patches the library
            if node.attr in ("parent", "parents", "stem", "name", "anchor"):
                return self.path_class(node.value)
            quals = self.resolve(node)
            if quals & {"sys.prefix", "sys.exec_prefix", "sys.base_prefix", "sys.executable"}:
                return "install"
            return None
        if isinstance(node, ast.Subscript):
            if self.resolve(node.value) & {"os.environ"}:
                return "home" if _const_str(node.slice) in _HOME_ENV else None
            return "install" if self.path_class(node.value) == "install" else None  # site.getsitepackages()[0]
        if isinstance(node, ast.Call):
            return self._call_path(node)
        return None

    def _call_path(self, node: ast.Call) -> str | None:
        quals = self.resolve(node.func)
        method = node.func.attr if isinstance(node.func, ast.Attribute) else None
        first = node.args[0] if node.args else None
        if method == "expanduser":
            # name the file when the code spells it: os.path.expanduser("~/.bashrc"), Path("~/.ssh").expanduser()
            inner = self.path_class(first if quals & {"os.path.expanduser"} else node.func.value)  # type: ignore[union-attr]
            return inner if inner and inner.startswith("home:") else "home"
        if any(q.endswith("Path.home") for q in quals):
            return "home"
        if quals & {"os.getenv", "os.environ.get"}:
            return "home" if _const_str(first) in _HOME_ENV else None
        if quals & {"os.path.expandvars"}:
            text = _const_str(first)
            return "home" if text and re.match(r"^\$\{?(HOME|USERPROFILE)\b", text) else None
        if quals & _INSTALL_FUNCS:
            return "install"
        if quals & _PATH_FUNCS:
            # An absolute later part wins (os.path.join("x", "/etc/cron.d")); else the first part decides.
            for arg in reversed(node.args[1:]):
                text = _const_str(arg)
                if text is not None and text.startswith(("/", "~")):
                    return _literal_class(text)
            return self.path_class(first)
        if method in _PATH_METHODS:
            for arg in reversed(node.args):
                text = _const_str(arg)
                if text is not None and text.startswith(("/", "~")):
                    return _literal_class(text)
            return self.path_class(node.func.value)  # type: ignore[union-attr]
        return None

    # -- findings --

    def add(self, node: ast.AST, kind: str, reason: str) -> None:
        line = getattr(node, "lineno", 1)
        self.found.setdefault((line, kind), (node, reason))

    def _text(self, node: ast.AST) -> str:
        stmt: ast.AST | None = node
        while stmt is not None and not isinstance(stmt, ast.stmt):
            stmt = self.parent.get(id(stmt))
        start = getattr(stmt or node, "lineno", 1)
        end = getattr(stmt or node, "end_lineno", start) or start
        body = getattr(stmt, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.stmt):
            end = max(start, body[0].lineno - 1)   # a compound statement: its head, not its block
        end = min(end, start + 2)
        text = " ".join(ln.strip() for ln in self.lines[start - 1:end])
        text = scrub(text).text
        return text if len(text) <= TEXT_MAX else text[:TEXT_MAX - 1] + "\u2026"

    def run(self) -> list[Hazard]:
        self._index()
        for node in self.nodes:
            if isinstance(node, (ast.Name, ast.Attribute)) and id(node) not in self.typing_only \
                    and not isinstance(self.parent.get(id(node)), ast.Attribute):
                self._reference(node)
            if isinstance(node, ast.Call):
                self._call(node)
            elif isinstance(node, ast.Dict):
                for k, v in zip(node.keys, node.values):
                    if _const_str(k) == "trust_remote_code" and not _is_const(v, False, None):
                        self.add(node, "remote-code", "trust_remote_code=True runs code downloaded from the Hub")
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and _PRIVATE_FILE.search(node.value) \
                    and not isinstance(self.parent.get(id(node)), ast.Expr):   # a docstring runs nothing
                self.add(node, "write-outside", f"names a shell start-up or credential file ({_short(node.value)})")
        keys = sorted(self.found)
        # The line's text is scrubbed per finding: only for those listed.
        out = [Hazard(kind, line, self._text(self.found[(line, kind)][0]), scrub(self.found[(line, kind)][1]).text)
               for line, kind in keys[:MAX_LISTED]]
        if len(keys) > MAX_LISTED:
            rest = keys[MAX_LISTED:]
            out.append(Hazard("more", rest[0][0], "", f"{len(rest)} more findings from line {rest[0][0]} on, not "
                              "listed: read the whole script"))
        return out

    def _reference(self, node: ast.AST) -> None:
        """A use of a dangerous name, called or not (``map(os.system, cmds)`` counts too); a
        constant only read (``subprocess.PIPE``, ``socket.AF_INET``) does nothing."""
        call = self.parent.get(id(node))
        if isinstance(node, ast.Attribute) and _HARMLESS_ATTRS.match(node.attr) \
                and not (isinstance(call, ast.Call) and call.func is node):
            return
        for q in sorted(self.resolve(node)):
            hit = _rule(q)
            if hit is None:
                continue
            kind, reason = hit
            if kind == "network" and q.startswith("socket.") and self._free_port(node):
                continue
            self.add(node, kind, f"{reason} ({q})")
            return

    def _free_port(self, node: ast.AST) -> bool:
        """``socket.socket()`` only bound to port 0 on the loopback to learn a free port (a process
        group's rendezvous): nothing leaves the machine."""
        call = self.parent.get(id(node))
        if not isinstance(call, ast.Call) or call.func is not node:
            return False
        holder = self.parent.get(id(call))
        if isinstance(holder, ast.Assign) and len(holder.targets) == 1 and isinstance(holder.targets[0], ast.Name):
            name = holder.targets[0].id
        elif isinstance(holder, ast.withitem) and isinstance(holder.optional_vars, ast.Name):
            name = holder.optional_vars.id
        else:
            return False
        if name not in self._free:
            self._free[name] = self._only_a_free_port(name)
        return self._free[name]

    def _only_a_free_port(self, name: str) -> bool:
        bound = False
        for n in self.nodes:
            if not (isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
                    and isinstance(n.func.value, ast.Name) and n.func.value.id == name):
                continue
            if n.func.attr == "bind" and n.args and _loopback_port_zero(n.args[0]):
                bound = True
            elif n.func.attr not in ("getsockname", "close", "setsockopt"):
                return False
        return bound

    def _call(self, call: ast.Call) -> None:
        funcs = self.resolve(call.func)
        first = call.args[0] if call.args else None
        # exec/eval/compile of anything but a literal; imports by a computed name.
        for q in funcs & {"builtins.exec", "builtins.eval", "builtins.compile"}:
            if first is not None and not _is_literal(first):
                self.add(call, "dynamic-code", f"{q.split('.')[-1]} of data built at run time")
        if funcs & {"builtins.__import__", "importlib.import_module"} and first is not None and _const_str(first) is None:
            self.add(call, "dynamic-code", "imports a module whose name is computed at run time")
        if "builtins.getattr" in funcs and len(call.args) >= 2 and _const_str(call.args[1]) is None:
            target = self.resolve(call.args[0])
            if any(_rule(q + ".x") or q in ("os", "builtins", "builtins.__builtins__", "importlib") for q in target):
                self.add(call, "dynamic-code", "looks up a name computed at run time on a module that runs code")
        # loads that run code unless told otherwise
        if funcs & {"torch.load", "torch.serialization.load"}:
            wo = _kw(call, "weights_only")
            if wo is not None and not _is_const(wo, True):
                self.add(call, "unsafe-load", "torch.load with weights_only=False unpickles, which can run any code")
        if funcs & {"numpy.load"}:
            ap = _kw(call, "allow_pickle")
            if ap is not None and not _is_const(ap, False, None):
                self.add(call, "unsafe-load", "numpy.load with allow_pickle=True unpickles, which can run any code")
        if funcs & {"yaml.load", "yaml.load_all"}:
            loader = _kw(call, "Loader") or (call.args[1] if len(call.args) > 1 else None)
            if loader is None or not any(q.endswith(("SafeLoader", "CSafeLoader", "BaseLoader")) for q in self.resolve(loader)):
                self.add(call, "unsafe-load", "yaml.load without a safe loader can build any object")
        trc = _kw(call, "trust_remote_code")
        if trc is not None and not _is_const(trc, False, None):
            self.add(call, "remote-code", "trust_remote_code=True runs code downloaded from the Hub")
        if any(q in ("os.kill", "os.killpg") for q in funcs) and not (
                first is not None and self.resolve(getattr(first, "func", first)) & {"os.getpid"}):
            self.add(call, "process", "sends a signal to another process")
        self._writes(call, funcs)
        self._urls(call, funcs)

    def _writes(self, call: ast.Call, funcs: set[str]) -> None:
        method = call.func.attr if isinstance(call.func, ast.Attribute) else None
        targets: list[ast.AST | None] = []
        if funcs & _OPEN_FUNCS:
            mode = _kw(call, "mode") or (call.args[1] if len(call.args) > 1 else None)
            if _writes_mode(mode):
                targets.append(_kw(call, "file") or (call.args[0] if call.args else None))
        elif method == "open" and not funcs:
            # ``Path(p).open("a")``: the receiver is the path
            mode = _kw(call, "mode") or (call.args[0] if call.args else None)
            if _writes_mode(mode):
                targets.append(call.func.value)  # type: ignore[union-attr]
        elif funcs & {"os.open"}:
            flags = call.args[1] if len(call.args) > 1 else _kw(call, "flags")
            if flags is None or any(n.attr in _WRITE_FLAGS for n in ast.walk(flags) if isinstance(n, ast.Attribute)):
                targets.append(call.args[0] if call.args else None)
        elif funcs & _WRITE_FUNCS:
            targets += [*call.args, *(k.value for k in call.keywords)]
        elif method in _WRITE_METHODS:
            targets.append(call.func.value)  # type: ignore[union-attr]
        elif (method and _WRITE_VERBS.match(method)) or any(
                _WRITE_VERBS.match(q.rsplit(".", 1)[-1]) for q in funcs if not q.startswith("builtins.")):
            targets += call.args
        targets += [k.value for k in call.keywords if k.arg and _WRITE_KEYWORDS.match(k.arg)]
        for t in targets:
            where = self.path_class(t)
            if where:
                place, _, literal = where.partition(":")
                self.add(call, "write-outside", _WHERE[place] + (f" ({_short(literal)})" if literal else ""))
                return

    def _urls(self, call: ast.Call, funcs: set[str]) -> None:
        name = (call.func.attr if isinstance(call.func, ast.Attribute) else
                call.func.id if isinstance(call.func, ast.Name) else "")
        if _SHOW_ONLY.search(name) or any(_SHOW_ONLY.search(q) for q in funcs):
            return
        for arg in [*call.args, *(k.value for k in call.keywords)]:
            for text in self._strings(arg):
                m = _URL.match(text)
                if m and not _under_hub(m.group(3)):
                    self.add(call, "network", f"fetches from {_short(m.group(3), 60)}, outside the Hugging Face Hub")
                    return

    def _strings(self, node: ast.AST) -> Iterator[str]:
        text = _const_str(node)
        if text is not None:
            yield text
        elif isinstance(node, (ast.List, ast.Tuple, ast.Set)):
            for e in node.elts:
                t = _const_str(e)
                if t is not None:
                    yield t
        elif isinstance(node, ast.Dict):
            for v in node.values:
                t = _const_str(v)
                if t is not None:
                    yield t
        elif isinstance(node, ast.Name):
            for v in self.values.get(node.id, []):
                t = _const_str(v)
                if t is not None:
                    yield t


_WHERE = {"home": "writes into the home folder", "system": "writes to a path outside the working folder",
          "install": "writes into the Python installation (an installed package's folder)"}


def _literal_class(text: str) -> str | None:
    t = text.strip()
    if t.startswith("~"):
        return "home:" + t
    if t.startswith("$HOME") or t.startswith("${HOME}"):
        return "home:" + t
    if re.match(r"^[A-Za-z]:[\\/]", t) or t.startswith("\\\\"):
        return "system:" + t
    if t.startswith("/") and not _HARMLESS_ROOTS.match(t):
        return "system:" + t
    return None


_BINDERS = (ast.Import, ast.ImportFrom, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Assign, ast.AnnAssign,
            ast.AugAssign, ast.NamedExpr, ast.withitem, ast.arg)


def _annotations(node: ast.AST) -> list[ast.AST]:
    if isinstance(node, (ast.AnnAssign, ast.arg)):
        return [node.annotation] if node.annotation is not None else []
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return [node.returns] if node.returns is not None else []
    return []


def _writes_mode(mode: ast.AST | None) -> bool:
    """Whether an ``open`` mode writes: a literal with w, a, x or +; a computed one may."""
    if mode is None:
        return False
    text = _const_str(mode)
    return text is None or bool(set(text) & set("wax+"))


def _loopback_port_zero(addr: ast.AST) -> bool:
    return (isinstance(addr, ast.Tuple) and len(addr.elts) == 2
            and _const_str(addr.elts[0]) in ("", "localhost", "127.0.0.1", "::1")
            and isinstance(addr.elts[1], ast.Constant) and addr.elts[1].value == 0)


def _short(text: str, limit: int = 80) -> str:
    one = " ".join(str(text).split())   # scrubbed with the reason, when the finding is listed
    return one if len(one) <= limit else one[:limit - 1] + "\u2026"


_RULES = {prefix: (kind, reason) for prefix, kind, reason in _BY_NAME}


def _rule(qual: str) -> tuple[str, str] | None:
    """(kind, reason) for a qualified name, or None: its shortest listed dotted prefix decides."""
    parts = qual.split(".")
    if qual.startswith(_OS_PREFIXES):
        return "process", "starts a program"
    heads = [".".join(parts[:i]) for i in range(1, len(parts) + 1)]
    if any(h in _HARMLESS for h in heads):
        return None
    return next((_RULES[h] for h in heads if h in _RULES), None)


# --- saying it --------------------------------------------------------------------------------

def summary(hazards: Iterable[Hazard]) -> str:
    """``runs a program or a shell command (line 3) and writes outside the working folder (lines 5, 8)``"""
    by_kind: dict[str, list[int]] = {}
    for h in hazards:
        by_kind.setdefault(h.kind, []).append(h.line)
    parts = [f"{KIND_WORDS.get(k, k)} ({'line' if len(v) == 1 else 'lines'} {', '.join(map(str, sorted(set(v))))})"
             for k, v in by_kind.items()]
    return parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]


def markdown_items(hazards: Iterable[Hazard]) -> list[dict[str, object]]:
    """What the warning templates list, already inert as markdown: the line, the code (a code
    span) and the reason (escaped prose)."""
    return [{"line": h.line, "code": code_span(h.text) if h.text else "", "reason": inline(h.reason, 200)}
            for h in hazards]


def said_before_code(text: str, phrase: str = HEADING) -> bool:
    """Whether ``phrase`` is said before the script's code fence: the same words inside the
    posted script (a comment, a string) do not count as the warning."""
    at, fence = text.find(f"**{phrase}"), re.search(r"^`{3,}python", text, re.MULTILINE)
    return at != -1 and (fence is None or at < fence.start())


def hazard_context(hazards: list[Hazard], needed: bool | None) -> dict[str, object] | None:
    """What the warning templates (templates/partials/hazards.md.j2) need; None without findings.
    ``needed``: the reduction finished, so the failure needs every line left (None: unknown)."""
    if not hazards:
        return None
    return {"heading": HEADING, "headline": HEADLINE, "summary": summary(hazards), "needed": needed,
            "items": markdown_items(hazards)}


def plain_lines(hazards: Iterable[Hazard]) -> list[str]:
    """One terminal line per finding: ``line 3: os.system("…")  — runs a shell command (os.system)``."""
    return [f"line {h.line}: {h.text}  — {h.reason}" if h.text else f"line {h.line}: {h.reason}" for h in hazards]


__all__ = ["Hazard", "HEADING", "HEADLINE", "KIND_WORDS", "find_hazards", "hazard_context", "markdown_items",
           "plain_lines", "said_before_code", "summary"]
