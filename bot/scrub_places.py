"""Where a person's runs, data and machines live, in a message: host names, tracking projects,
storage buckets, cloud accounts and tenants, private Hub repositories. None of it is a credential;
all of it is the reporter's infrastructure, which a maintainer does not need to act on a failure.
bot/scrub.py replaces each like a user name (never a reason to refuse filing).

Each finder yields ``Place``s; bot/scrub.py resolves overlaps with its other rules. Every pattern
is linear (tests/test_scrub_linear.py): a name is read from its start only (a lookbehind excludes
every character it may hold), possessively, and what decides whether it is private is Python on
the name alone (a DNS name is at most 253 characters, a label 63: longer runs are not names).

A company host name is told by how it looks, since a name under a public suffix may be anyone's:
- an internal suffix or label (``*.internal``, ``*.corp``, ``*.local``, ``git.corp.acme.com``);
- a machine's or a service's first label and a domain outside the public ones reprobot knows
  (``gpu-node-17.acme-research.net``, ``mlflow.acme-research.net``);
- any non-public name where only a host can stand: ``MASTER_ADDR=``, ``host='...'``, before a
  port (``:29500``, NCCL's ``<45678>``), after "connect to", and a SLURM node list.
Documentation names (``example.com``, ``*.example``, ``*.test``) and loopback stay.
"""
from __future__ import annotations

import heapq
import re
from dataclasses import dataclass
from typing import Iterator


@dataclass(frozen=True)
class Place:
    start: int
    end: int
    kind: str
    preview: str        # names the kind, never the value
    replacement: str


def _has(text: str, needles: tuple[str, ...]) -> bool:
    return any(n in text for n in needles)


# --- host names ----------------------------------------------------------------------------

# A label may hold <N>, where normalisation took its digits (gpu-node-<N>.dgx.cluster.local).
_LABEL = r"(?:[a-z0-9-]|<N>)++"
# A dotted name, read whole from its first label (nothing of a name may precede it).
_CHAIN = re.compile(rf"(?<![\w.>-]){_LABEL}(?:\.{_LABEL})++", re.IGNORECASE)
# A single label right before a port: gpu-node-17:29500, NCCL's gpu-node-17<45678>.
_PORT_AFTER = r"(?::(?:\d{2,5}(?!\d)|<N>)|<(?:\d{2,5}|<N>)>)"
_PORT = re.compile(_PORT_AFTER)
# Found from the port back (a port is rare; a label before one is read backwards, 63 at most).
_PORT_ANYWHERE = re.compile(rf"{_PORT_AFTER}|\]:(?:\d|<N>)")
_LABEL_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-<>N")
_LABEL_WHOLE = re.compile(r"(?:[a-z0-9-]|<N>)++", re.IGNORECASE)

INTERNAL_SUFFIXES = frozenset({"internal", "local", "lan", "corp", "intra", "intranet", "home", "localdomain"})
# One-dot names ending in .local or .home read like Python attribute access (threading.local).
_TWO_LABEL_SUFFIXES = frozenset({"internal", "lan", "corp", "intranet", "localdomain"})
PRIVATE_LABELS = frozenset({"internal", "intranet", "intra", "corp", "lan", "local", "localdomain", "private",
                            "priv"})
# Top-level domains a company's name sits under (and the ones a private label may precede).
# Those that are also common attribute names (.to, .id, .in, .app, .host, .run) are left out:
# "host=args.host" and "worker3.model.to" are code.
PUBLIC_TLDS = frozenset((
    "com net org io ai dev cloud co edu gov mil int eu info biz xyz tech uk de fr nl ch se fi dk es pl cz ru ua "
    "cn jp kr sg hk tw au nz ca br mx ar cl za il ae tr gr ie lu hu ro bg sk si hr rs ee lv lt vn ph pk bd eg ng "
    "ke ma sa qa th pt").split())
# Source and data files: "trainer.py:2241" is a file and a line, not a host and a port.
_FILE_SUFFIXES = frozenset((
    "py pyx pyi pxd c h cc cpp cxx hpp cu cuh js ts rs go java rb pl sh ipynb json jsonl yaml yml toml cfg ini txt "
    "md rst log so dylib dll lua swift kt scala m mm proto cmake mk bin pt pth ckpt safetensors onnx gguf csv tsv "
    "parquet arrow npy npz pkl pickle h5 hdf5 zip gz tar whl out err lock tmp bak").split())
# Domains whose names are the public services every ML script talks to, and their documentation.
PUBLIC_DOMAINS = (
    "huggingface.co", "hf.co", "hf.space", "github.com", "githubusercontent.com", "github.io", "gitlab.com",
    "bitbucket.org", "pytorch.org", "python.org", "pypi.org", "pythonhosted.org", "pypa.io", "readthedocs.io",
    "readthedocs.org", "nvidia.com", "nvidia.cn", "numpy.org", "scipy.org", "pydata.org", "tensorflow.org",
    "google.com", "googleapis.com", "gstatic.com", "microsoft.com", "azure.com", "windows.net", "amazonaws.com",
    "aws.amazon.com", "amazon.com", "anaconda.org", "anaconda.com", "conda-forge.org", "wandb.ai", "wandb.me",
    "mlflow.org", "openai.com", "anthropic.com", "cohere.com", "mistral.ai", "kaggle.com", "stackoverflow.com",
    "arxiv.org", "wikipedia.org", "docker.com", "docker.io", "nvcr.io", "ghcr.io", "quay.io", "npmjs.org",
    "npmjs.com", "crates.io", "rust-lang.org", "apple.com", "modelscope.cn", "hf-mirror.com", "deepspeed.ai",
    "triton-lang.org", "lightning.ai", "ray.io", "anyscale.com", "comet.com", "comet.ml", "neptune.ai",
    "clear.ml", "slack.com", "discord.com", "telegram.org", "cloudflare.com", "jax.dev", "onnx.ai",
    "onnxruntime.ai", "vllm.ai", "sglang.ai", "ollama.com", "kernel.org", "ubuntu.com", "debian.org",
    "fedoraproject.org", "archlinux.org", "opensource.org", "apache.org", "mozilla.org", "w3.org", "ietf.org",
    "colab.research.google.com", "cuda.nvidia.com", "intel.com", "amd.com", "ibm.com", "oracle.com",
    "digitalocean.com", "paperspace.com", "lambdalabs.com", "runpod.io", "vast.ai", "modal.com", "replicate.com",
    "together.ai", "groq.com", "databricks.com", "snowflake.com", "sentry.io", "codecov.io", "circleci.com",
    "travis-ci.com", "shields.io", "bit.ly", "youtube.com", "twitter.com", "x.com", "linkedin.com")
# Documentation's own names (RFC 2606) and loopback: never anyone's.
_EXAMPLE = re.compile(r"(?:^|\.)(?:example\.(?:com|net|org)|example|test|invalid|localhost)$|^localhost(?:\.localdomain)?$"
                      r"|^ip6-localhost$")
# A first label naming a machine: a word a cluster names nodes by, with a number (gpu-node-17,
# node017, dgx-a100-03, worker3, cn0123, login2, ip-10-0-1-2); <N> is a number normalised away.
# Matched against one label (at most 63 characters); its parts are dash-separated, so no two
# quantifiers can share a character.
_MACHINE = re.compile(r"(?:[a-z0-9]+-)*?(?:gpu|gpus|node|nodes|worker|workers|compute|cn|gn|hpc|host|srv|server|"
                      r"login|dgx|cpu|vm|pod|box|machine|instance|ip|slurm|trn|h100|a100|h200|v100|mi300|"
                      r"master|head|ws|desktop|laptop|station)[a-z]*(?:-[a-z]+)*-?(?:\d+|<N>)(?:[-a-z0-9]|<N>)*",
                      re.IGNORECASE)
# A first label naming a self-hosted service (mlflow.acme-research.net, wandb.corp-ml.io).
_SERVICE = frozenset((
    "mlflow wandb comet neptune clearml aim tracking tracker experiments artifacts artifact artifactory minio s3 "
    "storage jupyter jupyterhub notebook notebooks git gitlab gitea jenkins ci nexus registry harbor pypi mirror "
    "proxy vault grafana prometheus ray dask spark db postgres mysql redis mongo kafka airflow kubeflow argo "
    "triton vllm tgi inference llm models model-registry labelstudio label-studio").split())
# Where only a host can stand: host='...', hostname: ..., "connect to ...", remote=[...], peer [...]
# (MASTER_ADDR= and the other variables are _ASSIGNED's). The name is read from the context on.
_HOST_CONTEXT = re.compile(r"(?i)(?:\bhost(?:name)?(?:\\?['\"])?\]?[ \t]*[=:][ \t]*(?:\\?['\"])?(?:[a-z][a-z0-9+.-]*://)?"
                           r"|\bconnect(?:ion|ing|ed)? (?:to|with) \[?|\bremote=\[?|\bpeer \[?)"
                           rf"(?P<name>{_LABEL}(?:\.{_LABEL})++)(?![\w.(-])")
_CONTEXT_WORDS = ("host", "connect", "remote=", "peer ")
# Where a name is a host whatever it looks like, when it carries a private label.
_HOST_AT = re.compile(r"(?:://|@|host='|host=\"|host: |=|='|=\"|: ')$")
_PRIVATE_WORD = re.compile("internal|intra|corp|lan|local|priv")
_PUBLIC_SET = frozenset(PUBLIC_DOMAINS)


def _public(name: str) -> bool:
    """``name`` is one of PUBLIC_DOMAINS or under one (a set lookup per dot, not a scan of the list)."""
    at = 0
    while True:
        if name[at:] in _PUBLIC_SET:
            return True
        at = name.find(".", at) + 1
        if not at:
            return False


def _documentation(name: str) -> bool:
    return bool(_EXAMPLE.search(name))


def _machine(label: str) -> bool:
    return len(label) <= 63 and bool(_MACHINE.fullmatch(label))


def _host_kind(text: str, start: int, end: int) -> bool:
    """The dotted name text[start:end] is a private host name by its looks, or by a private label
    where only a host stands (see the module's docstring); the names right after host= or "connect
    to" are _HOST_CONTEXT's. Cheap tests first: a message can hold a dotted name every few
    characters."""
    if end - start > 253:
        return False
    name = text[start:end].lower()
    last = name[name.rfind(".") + 1:]
    nxt = text[end:end + 1]
    port = (nxt == ":" or nxt == "<") and _PORT.match(text, end) is not None
    private = _PRIVATE_WORD.search(name) is not None
    # a name ends before anything that continues an identifier or a call (threading.local())
    whole = not nxt or not (nxt.isalnum() or nxt in "_.(")
    if not (port or private):
        # only a name that ends in a domain and starts with a machine's or a service's label
        # (or an internal suffix) can be a company's here
        if not whole or name.count(".") < 2 or last not in PUBLIC_TLDS and last not in INTERNAL_SUFFIXES:
            return False
    labels = name.split(".")
    if max(map(len, labels)) > 63 or not min(map(len, labels)):
        return False
    if whole and (len(labels) >= 3 and last in INTERNAL_SUFFIXES or len(labels) == 2 and last in _TWO_LABEL_SUFFIXES):
        return True
    private = private and any(label in PRIVATE_LABELS for label in labels)
    if private and (port or whole and (_HOST_AT.search(text[max(0, start - 8):start])
                                       or any(label in PRIVATE_LABELS for label in labels[1:-1])
                                       and last in PUBLIC_TLDS)):
        return True
    # before a port the name must end like a domain ("accelerate.utils.other:123" is a logger's
    # line); elsewhere its first label must name a machine or a service
    if last not in PUBLIC_TLDS or not (port or whole and len(labels) >= 3 and (_machine(labels[0])
                                                                             or labels[0] in _SERVICE)):
        return False
    return not (_documentation(name) or _public(name))


def _private_name(name: str) -> bool:
    """A name after host=, "connect to": private when it ends like a domain (host=self.config.host
    is code) and is not public, documentation or loopback."""
    low = name.lower()
    last = low[low.rfind(".") + 1:]
    return (last in PUBLIC_TLDS or last in INTERNAL_SUFFIXES) and not (
        _LOOPBACK.fullmatch(low) or _documentation(low) or _public(low))


# A dotted name worth a closer look: one of its labels is a top-level domain, an internal suffix
# or a private label, or a port follows it. Decided in C for each name, so a message of dotted
# names that are none of these ("a.b a.b ...") never reaches _host_kind.
def _trie(words: frozenset[str] | set[str]) -> str:
    """A regex alternation of ``words`` as a trie (``c(?:o(?:m|rp)?|n)``): each character is
    compared once, where a flat alternation of 150 words compares the first one 150 times."""
    tree: dict = {}
    for word in words:
        node = tree
        for ch in word:
            node = node.setdefault(ch, {})
        node[""] = {}

    def walk(node: dict) -> str:
        ends = "" in node
        branches = [re.escape(ch) + walk(child) for ch, child in sorted(node.items()) if ch]
        if not branches:
            return ""
        body = branches[0] if len(branches) == 1 else "(?:" + "|".join(branches) + ")"
        return f"(?:{body})?" if ends else body
    return walk(tree)


_WORDS = _trie(PUBLIC_TLDS | INTERNAL_SUFFIXES | PRIVATE_LABELS)
# Where a dotted name worth a closer look is: a label that is a top-level domain, an internal
# suffix or a private label, or a port right after a name. Each is a literal-led search, so a
# message of dotted names that are none of these ("a.b a.b ...") costs a scan in C and no Python.
# (case-insensitive inside only: a pattern-wide IGNORECASE would stop the regex engine from
# jumping from one "." to the next)
_DOT_WORD = re.compile(rf"\.(?i:{_WORDS})(?![a-zA-Z0-9-])")
_WORD_DOT = re.compile(rf"(?<![a-z0-9-])(?:{_trie(PRIVATE_LABELS)})\.", re.IGNORECASE)
_NAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-<>")
_NAME_RUN = re.compile(r"[A-Za-z0-9.<>-]*+")


def _dotted_names(text: str) -> Iterator[re.Match[str]]:
    """The dotted names around each anchor, each once. A name is at most 253 characters, so the
    walk back to its start stops there: a longer run holds no name, and is passed over whole."""
    anchors = heapq.merge(*((m.start() for m in rx.finditer(text)) for rx in (_DOT_WORD, _WORD_DOT, _PORT)))
    done = 0
    for pos in anchors:
        if pos < done:
            continue
        lo = max(done, pos - 254)
        start = pos
        while start > lo and text[start - 1] in _NAME_CHARS:
            start -= 1
        done = _NAME_RUN.match(text, pos).end()  # type: ignore[union-attr]
        if start == pos - 254 and start > 0 and text[start - 1] in _NAME_CHARS:
            continue
        yield from _CHAIN.finditer(text, start, done)


def hosts(text: str) -> Iterator[Place]:
    if "." in text:
        for m in _dotted_names(text):
            if _host_kind(text, m.start(), m.end()):
                yield Place(m.start(), m.end(), "hostname", "\u2026." + m.group().rsplit(".", 1)[-1], "<host>")
        if _has(text.lower(), _CONTEXT_WORDS):
            for m in _HOST_CONTEXT.finditer(text):
                if _private_name(m.group("name")):
                    yield Place(m.start("name"), m.end("name"), "hostname", "\u2026", "<host>")
    if ":" in text or "<" in text:
        for m in _PORT_ANYWHERE.finditer(text):
            end = start = m.start()
            while start > end - 64 and start and text[start - 1] in _LABEL_CHARS:
                start -= 1
            # a label standing alone (a dotted name's last label is the name's, above)
            if start == end or text[start - 1:start] in (".", "_") or text[start - 1:start] in _LABEL_CHARS:
                continue
            label = _LABEL_WHOLE.fullmatch(text, start, end)
            if label and _machine(label.group().lower()):
                yield Place(start, end, "hostname", label.group()[:1] + "\u2026", "<host>")
    yield from _assigned_hosts(text)
    yield from _slurm_nodes(text)


# MASTER_ADDR=gpu-node-17, RDZV_ENDPOINT="host:29400", HOSTNAME=..., {'NCCL_HOST': '...'}: the value
# is a machine whatever it looks like (loopback aside); a bracketed SLURM range stays one value.
# A value is a literal: quoted ({'MASTER_ADDR': '...'}, os.environ["MASTER_ADDR"] = "..."), or right
# after "=" (MASTER_ADDR=... in a shell or an environment dump); os.environ["MASTER_ADDR"] = args.addr
# is code, and stays.
_ASSIGNED = re.compile(r"\b(?:[A-Z][A-Z0-9_]*_)?(?:ADDR|ADDRESS|HOST|HOSTNAME|HOSTS|ENDPOINT|SERVER|NODELIST|NODENAME|"
                       r"SUBMIT_HOST|LAUNCH_NODE_IPADDR)(?:(?:\\?['\"])?\]?[ \t]*[=:][ \t]*\\?['\"]|=)"
                       r"(?:[a-z][a-z0-9+.-]*://)?(?:[^\s@/'\"\\]*@)?"
                       r"((?:[A-Za-z0-9-]|<N>|\[[\d,\-]{1,64}\])++(?:\.(?:[A-Za-z0-9-]|<N>)++)*+)")
_LOOPBACK = re.compile(r"localhost(?:\.localdomain)?|127(?:\.\d{1,3}){3}|0\.0\.0\.0|::1?|ip6-localhost")
_IPV4 = re.compile(r"\d{1,3}(?:\.\d{1,3}){3}")
_PRIVATE_V4 = re.compile(r"10\.|192\.168\.|172\.(?:1[6-9]|2\d|3[01])\.")
# Documentation's own addresses (RFC 5737): never anyone's, like example.com.
_DOCUMENTATION_V4 = re.compile(r"192\.0\.2\.|198\.51\.100\.|203\.0\.113\.")


def _assigned_hosts(text: str) -> Iterator[Place]:
    if not _has(text, ("ADDR", "HOST", "ENDPOINT", "SERVER", "NODE")):
        return
    for m in _ASSIGNED.finditer(text):
        value = m.group(1)
        if _LOOPBACK.fullmatch(value) or value.isdigit() or _documentation(value.lower()) or _public(value.lower()):
            continue
        if _IPV4.fullmatch(value):
            if _PRIVATE_V4.match(value) or _DOCUMENTATION_V4.match(value):
                continue  # bot/scrub.py's private-address rule names a private one
            yield Place(m.start(1), m.end(1), "public_ip", value.split(".")[0] + ".\u2026", "<ip>")
        elif not value.replace("<N>", "").replace("-", "").isdigit():
            yield Place(m.start(1), m.end(1), "hostname", value[:1] + "\u2026", "<host>")


# slurmstepd: error: *** JOB 123 ON gpu-node-017 CANCELLED AT ... ***
_SLURM_CANCELLED = re.compile(r"\*\*\* (?:JOB|STEP) [\w.<>]{1,64} ON ([\w.<>\[\],-]{1,128}) CANCELLED")


def _slurm_nodes(text: str) -> Iterator[Place]:
    if "CANCELLED" in text:
        for m in _SLURM_CANCELLED.finditer(text):
            if m.group(1).startswith("<host>"):
                continue
            yield Place(m.start(1), m.end(1), "hostname", m.group(1)[:1] + "\u2026", "<host>")


# --- experiment trackers --------------------------------------------------------------------

# The first path parts of each tracker's site that are its own pages, not an entity or workspace.
_TRACKER_PAGES = (r"(?:site|authorize|settings|home|login|signup|quickstart|pricing|fully-connected|support|registry|"
                  r"docs|blog|api|graphql|files|account-settings|organizations|product|learn|about|careers)")
_TRACKER_URL = re.compile(
    r"(?i)(?<![\w.-])(?:https?://)?(?:www\.|api\.|app\.)?(?P<site>wandb\.ai|comet\.(?:com|ml)|neptune\.ai)/"
    rf"(?!{_TRACKER_PAGES}(?:[/?#\s'\")]|$))(?P<entity>[\w.-]{{1,64}}+)(?:/(?P<project>[\w.-]{{1,128}}+))?")
# "wandb: Currently logged in as: alice (acme-ml)." and the like.
_LOGGED_IN = re.compile(r"(?i)\blogged in as:?[ \t]++(?P<user>[\w.@+-]{1,64}+)(?:[ \t]++\((?P<entity>[\w.-]{1,64}+)\))?")
# wandb.init(entity=..., project=...), Experiment(workspace=..., project_name=...), neptune project=...
_TRACKER_ARG = re.compile(r"(?i)\b(?P<key>entity|project|project_name|workspace)[ \t]*+=[ \t]*+(?P<q>\\?['\"])"
                          r"(?P<value>[^'\"\\\n]{1,128}+)(?P=q)")


def tracking(text: str) -> Iterator[Place]:
    low = text.lower()
    if _has(low, ("wandb.ai/", "comet.com/", "comet.ml/", "neptune.ai/")):
        for m in _TRACKER_URL.finditer(text):
            label = "<workspace>" if "wandb" not in m.group("site").lower() else "<entity>"
            yield Place(m.start("entity"), m.end("entity"), "tracking_project", m.group("site") + "/\u2026", label)
            if m.group("project"):
                yield Place(m.start("project"), m.end("project"), "tracking_project", m.group("site") + "/\u2026/\u2026",
                            "<project>")
    if "logged in as" in low:
        for m in _LOGGED_IN.finditer(text):
            yield Place(m.start("user"), m.end("user"), "tracking_user", "logged in as \u2026", "<user>")
            if m.group("entity"):
                yield Place(m.start("entity"), m.end("entity"), "tracking_project", "(\u2026)", "<entity>")
    if _has(low, ("entity", "project", "workspace")):
        for m in _TRACKER_ARG.finditer(text):
            key = m.group("key").lower()
            label = "<entity>" if key == "entity" else "<workspace>" if key == "workspace" else "<project>"
            if not m.group("value").startswith("<"):
                yield Place(m.start("value"), m.end("value"), "tracking_project", f"{key}=\u2026", label)


# --- storage buckets, cloud accounts and tenants ---------------------------------------------

# (no lookbehind first, so the engine jumps to the schemes' first letters; what precedes is checked
# on each match: "bugs://" is no bucket)
_BUCKET_URL = re.compile(r"(?:s3[an]?|gs|gcs|az|abfss?|wasbs?|adl|r2|oss|cos|minio)://"
                         r"(?P<bucket>[^/\s\"'<>@:\\]{1,255}+)")
# Hosts whose first labels are the customer's: <bucket>.s3[.<region>].amazonaws.com,
# <account>.blob.core.windows.net, <workspace>.azuredatabricks.net, <resource>.openai.azure.com.
_TENANT_SUFFIXES = (".blob.core.windows.net", ".dfs.core.windows.net", ".file.core.windows.net",
                    ".queue.core.windows.net", ".table.core.windows.net", ".web.core.windows.net",
                    ".azuredatabricks.net", ".cloud.databricks.com", ".openai.azure.com", ".cognitiveservices.azure.com",
                    ".r2.cloudflarestorage.com", ".inference.ml.azure.com", ".sagemaker.aws")
# Path-style bucket hosts: the bucket is the URL's first folder.
# (a region is dot-separated: s3.us-east-1.amazonaws.com, s3-us-west-2.amazonaws.com; "[.-][a-z0-9-]+"
# repeated was exponential on "s3-a-a-a...")
_PATH_BUCKET_HOSTS = re.compile(r"s3(?:-[a-z0-9-]++)?(?:\.[a-z0-9-]++)*?\.amazonaws\.com|storage\.googleapis\.com|"
                                r"storage\.cloud\.google\.com")
_SEGMENT = re.compile(r"/([^/\s\"'<>?#\\]{1,255}+)")
# boto3's Bucket="...", bucket_name='...'
_BUCKET_ARG = re.compile(r"(?i)\b(?:bucket|bucket_name|container_name)[ \t]*+[=:][ \t]*+(?P<q>\\?['\"])"
                         r"(?P<bucket>[^'\"\\\n]{1,255}+)(?P=q)")
# GCP: service accounts (name@project.iam.gserviceaccount.com) and projects/<id>/... resource names.
_SERVICE_ACCOUNT = re.compile(r"(?i)(?<![\w.+:-])(?:serviceAccount:)?[\w.+-]{1,64}+@[\w-]{1,63}+\.iam\.gserviceaccount\.com")
_GCP_PROJECT = re.compile(r"\bprojects/(?P<project>[a-z][a-z0-9-]{4,28}[a-z0-9])/(?=locations|secrets|topics|"
                          r"subscriptions|buckets|zones|regions|serviceAccounts|datasets|models|endpoints|instances)")


def _cloud_hosts(text: str) -> Iterator[Place]:
    """Buckets and tenants in a cloud's host names, read from the same dotted names as hosts()."""
    for m in _CHAIN.finditer(text):
        name = m.group().lower()
        labels = name.split(".")
        if name.endswith(".amazonaws.com"):
            at = next((i for i, label in enumerate(labels) if label.startswith("s3")), 0)
            if at >= 1:   # virtual-hosted style: the labels before s3 are the bucket
                yield Place(m.start(), m.start() + len(".".join(labels[:at])), "bucket", "\u2026.s3", "<bucket>")
                continue
        suffix = next((s for s in _TENANT_SUFFIXES if name.endswith(s)), None)
        if suffix and len(name) > len(suffix):
            yield Place(m.start(), m.end() - len(suffix), "cloud_tenant", "\u2026" + suffix, "<tenant>")
        elif _PATH_BUCKET_HOSTS.fullmatch(name) and text[m.end():m.end() + 1] == "/":
            seg = _SEGMENT.match(text, m.end())
            if seg and not seg.group(1).startswith("<"):
                yield Place(seg.start(1), seg.end(1), "bucket", "\u2026/bucket", "<bucket>")


def storage(text: str) -> Iterator[Place]:
    low = text.lower()
    if "://" in text:
        for m in _BUCKET_URL.finditer(text):
            before = text[m.start() - 1:m.start()]
            if before.isalnum() or before in ("_", "+", ".", "-") or m.group("bucket").startswith("<"):
                continue
            yield Place(m.start("bucket"), m.end("bucket"), "bucket", m.group()[:5] + "\u2026", "<bucket>")
    if _has(low, ("amazonaws.com", "storage.googleapis.com", "storage.cloud.google.com", "windows.net", "databricks",
                  "azure.com", "cloudflarestorage", "sagemaker.aws")):
        yield from _cloud_hosts(text)
    if _has(low, ("bucket", "container_name")):
        for m in _BUCKET_ARG.finditer(text):
            if not m.group("bucket").startswith("<"):
                yield Place(m.start("bucket"), m.end("bucket"), "bucket", "bucket=\u2026", "<bucket>")
    if "gserviceaccount.com" in low:
        for m in _SERVICE_ACCOUNT.finditer(text):
            yield Place(m.start(), m.end(), "service_account", "\u2026@\u2026 (GCP)",
                        "<service-account>")
    if "projects/" in text:
        for m in _GCP_PROJECT.finditer(text):
            yield Place(m.start("project"), m.end("project"), "cloud_project", "projects/\u2026", "<project>")
