"""Scrubbing: remove credentials and personal details from anything reprobot prints, stores or files.

Two families of findings:
- *secrets* (tokens, keys, PEM blocks, auth headers, ``*_TOKEN=`` assignments): filing refuses
  to go ahead while one is present (``find_secrets``);
- *private* details (home directories and user names, drive paths, host names, e-mail
  addresses): replaced so the text stays readable, never a reason to refuse.
Site-packages prefixes are shortened to ``<env>/`` because they carry the user's home and
environment name and say nothing a maintainer needs.

All patterns are matched on the original text; overlaps are resolved by priority (the order of
``_RULES``), so ``HF_TOKEN=hf_...`` is reported once, as the token. A ``Finding`` never holds
the secret: only a kind, a redacted preview (public prefix + length) and a line number.
"""
from __future__ import annotations

import base64
import binascii
import bisect
import functools
import getpass
import json
import os
import re
import socket
import urllib.parse
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping, NamedTuple

from bot import scrub_places
from bot.targets import owner_packages

# --- the rules --------------------------------------------------------------------------

# Characters a wrapped token can continue with on the next line.
_TOKEN_CHARS = r"A-Za-z0-9_\-"


@dataclass(frozen=True)
class _TokenKind:
    kind: str
    prefix: str        # the public, documented prefix: safe to show in a preview
    pattern: str       # full single-line pattern
    full_len: int      # typical total length; a shorter piece at a line end may be wrapped
    chars: str = r"A-Za-z0-9"
    head: str = ""     # regex of the prefix, when it is not the literal prefix
    # Literals one of which every match holds: a text without any is not searched at all, so a
    # long message costs a substring search per kind, not a regex scan (default: the prefix).
    needles: tuple[str, ...] = ()

    @property
    def head_re(self) -> str:
        return self.head or re.escape(self.prefix)

    @property
    def literals(self) -> tuple[str, ...]:
        return self.needles or ((self.prefix,) if self.prefix and not self.head else ())


# Linear by construction (tests/test_scrub_linear.py feeds every pattern 1 MB made to defeat it):
# a token's start is a lookbehind that excludes every character of its body, so no start lies
# inside the run an earlier attempt read, and bodies are possessive (``{n,}+``): the end
# assertion rejects every body character, so backtracking into the body could never succeed.
_AWS_HEADS = ("A3T", "AKIA", "ASIA", "ABIA", "ACCA", "AGPA", "AIDA", "AROA", "ANPA", "ANVA", "AIPA")
_GITLAB_HEADS = ("glpat-", "gldt-", "glptt-", "glrt-", "glcbt-", "gloas-", "glft-", "glsoat-", "glimt-", "glagent-",
                 "GR1348941")
_TOKENS: tuple[_TokenKind, ...] = (
    # Hugging Face user access tokens: "hf_" + 34 letters/digits.
    _TokenKind("hf_token", "hf_", r"\bhf_[A-Za-z0-9]{30,}+\b", 37),
    _TokenKind("github_token", "github_pat_", r"\bgithub_pat_[A-Za-z0-9_]{22,}+\b", 93, r"A-Za-z0-9_"),
    # Classic and app tokens: ghp_ (personal), gho_ (OAuth), ghu_/ghs_ (app), ghr_ (refresh).
    _TokenKind("github_token", "gh?_", r"\bgh[pousr]_[A-Za-z0-9]{30,}+\b", 40, head=r"gh[pousr]_",
               needles=("ghp_", "gho_", "ghu_", "ghs_", "ghr_")),
    _TokenKind("aws_access_key", "AKIA", r"\b(?:A3T[A-Z0-9]|AKIA|ASIA|ABIA|ACCA|AGPA|AIDA|AROA|ANPA|ANVA|AIPA)"
               r"[A-Z0-9]{16}\b", 20, r"A-Z0-9", head=r"(?:AKIA|ASIA)", needles=_AWS_HEADS),
    # OpenAI-style secret keys: "sk-", "sk-proj-", "sk-ant-", ... (Anthropic uses the same shape).
    _TokenKind("openai_key", "sk-", r"(?<![\w-])sk-[A-Za-z0-9_\-]{20,}+(?![\w-])", 51, _TOKEN_CHARS),
    _TokenKind("jwt", "eyJ", r"(?<![\w-])eyJ[A-Za-z0-9_\-]{6,}+\.eyJ[A-Za-z0-9_\-]{6,}+\.[A-Za-z0-9_\-]{6,}+", 0),
    # Hugging Face organisation API tokens (legacy): "api_org_" + 34.
    _TokenKind("hf_token", "api_org_", r"\bapi_org_[A-Za-z0-9]{30,}+\b", 42),
    _TokenKind("google_api_key", "AIza", r"\bAIza[0-9A-Za-z_\-]{35}(?![\w-])", 39, _TOKEN_CHARS),
    _TokenKind("npm_token", "npm_", r"\bnpm_[A-Za-z0-9]{36}\b", 40),
    _TokenKind("pypi_token", "pypi-", r"(?<![\w-])pypi-AgE[A-Za-z0-9_\-]{50,}+", 0, _TOKEN_CHARS),
    _TokenKind("stripe_key", "sk_live_", r"\b[rs]k_live_[A-Za-z0-9]{20,}+\b", 0, head=r"[rs]k_live_",
               needles=("k_live_",)),
    _TokenKind("slack_token", "xox", r"(?<![\w-])xox[abposr]-[A-Za-z0-9-]{10,}+", 0, _TOKEN_CHARS,
               head=r"xox[abposr]-", needles=("xox",)),
    # LLM and ML-platform keys with a documented prefix: Groq "gsk_" + 52, Replicate "r8_" + 37,
    # Databricks "dapi" + 32 hex (+ "-<n>"), DigitalOcean "dop_v1_"/"doo_v1_"/"dor_v1_" + 64 hex.
    _TokenKind("groq_key", "gsk_", r"\bgsk_[A-Za-z0-9]{48,}+\b", 56),
    _TokenKind("replicate_token", "r8_", r"\br8_[A-Za-z0-9]{37}\b", 40),
    _TokenKind("databricks_token", "dapi", r"\bdapi[0-9a-f]{32}(?:-\d{1,2})?\b", 36),
    _TokenKind("digitalocean_token", "do?_v1_", r"\bdo[opr]_v1_[0-9a-f]{64}\b", 71, head=r"do[opr]_v1_",
               needles=("_v1_",)),
    # GitLab personal/deploy/trigger/runner/feed/... tokens: "glpat-" + 20, ...
    _TokenKind("gitlab_token", "glpat-", r"(?<![\w-])(?:gl(?:pat|dt|ptt|rt|cbt|oas|ft|soat|imt|agent)-|GR1348941)"
               r"[A-Za-z0-9_\-]{20,}+(?![\w-])", 26, _TOKEN_CHARS, head=r"gl(?:pat|dt|ptt|rt|cbt|oas)-",
               needles=_GITLAB_HEADS),
    # Shopify admin/custom-app/private-app/shared-secret tokens: "shpat_" + 32 hex, ...
    _TokenKind("shopify_token", "shp?_", r"\bshp(?:at|ca|pa|ss)_[0-9a-fA-F]{32}\b", 38, head=r"shp(?:at|ca|pa|ss)_",
               needles=("shp",)),
    _TokenKind("sendgrid_key", "SG.", r"\bSG\.[A-Za-z0-9_\-]{22}\.[A-Za-z0-9_\-]{43}(?![\w-])", 0),
    # Mailgun: the legacy "key-" + 32 hex, and the current 32 hex + "-" + 8 hex + "-" + 8 hex.
    _TokenKind("mailgun_key", "key-", r"(?<![\w-])key-[0-9a-f]{32}(?![\w-])", 0),
    _TokenKind("mailgun_key", "", r"(?<![\w-])[0-9a-f]{32}-[0-9a-f]{8}-[0-9a-f]{8}(?![\w-])", 0, needles=("-",)),
    # The shapes below were detect-secrets' (Yelp's detectors, run by scrub() until issue #39:
    # several of its patterns are superlinear on crafted input, see _find_keyword_assignments).
    # Twilio API keys ("SK" + 32) and account SIDs ("AC" + 32); Mailchimp keys (32 + "-us<dc>").
    _TokenKind("twilio_key", "SK", r"\b(?:AC|SK)[a-z0-9]{32}\b", 0, head=r"(?:AC|SK)", needles=("AC", "SK")),
    _TokenKind("mailchimp_key", "", r"(?<![\w-])[0-9a-z]{32}-us[0-9]{1,2}\b", 0, needles=("-us",)),
    _TokenKind("slack_webhook", "https://hooks.slack.com/services/",
               r"(?i)https://hooks\.slack\.com/services/T[A-Za-z0-9_]++/B[A-Za-z0-9_]++/[A-Za-z0-9_]++", 0,
               needles=("hooks.slack.com",)),
    _TokenKind("square_token", "sq0", r"(?<![\w-])sq0(?:csp|atp)-[0-9A-Za-z_\-]{22,}+(?![\w-])", 0,
               head=r"sq0(?:csp|atp)-", needles=("sq0",)),
    _TokenKind("artifactory_token", "AKC", r"(?<![^\s=:\"])AKC[A-Za-z0-9]{10,}+(?![^\s\"])", 0),
    _TokenKind("artifactory_token", "AP", r"(?<![^\s=:\"])AP[\dA-F][A-Za-z0-9]{8,}+(?![^\s\"])", 0,
               head=r"AP[\dA-F]"),
    # Discord bot tokens: a base64 user id starting M, N or O, a timestamp and an HMAC.
    _TokenKind("discord_bot_token", "", r"(?<![\w-])[MNO][A-Za-z0-9_\-]{23,25}\.[A-Za-z0-9_\-]{6}\."
               r"[A-Za-z0-9_\-]{27,38}(?![\w-])", 0, needles=(".",)),
    # W&B server keys: "local-" + 40 hex (the cloud's are 40 hex alone, see _find_bare_keys).
    _TokenKind("wandb_api_key", "local-", r"(?<![\w-])local-[0-9a-f]{40}(?![\w-])", 0),
)

# A block ends at its END line; one without (a truncated paste, or a message whose normalisation
# mangled the END line) ends where a quote closes the string holding it, else at the end of the
# text: a PEM body never holds a quote, and redacting past one breaks the JSON or code around it.
_PEM_BEGIN = re.compile(r"-----BEGIN ([A-Z0-9 ]{1,40})-----")
_QUOTE = re.compile(r"\\?[\"'`]")
# A PuTTY key file (.ppk): its header, then every line up to the first blank one.
_PUTTY = re.compile(r"PuTTY-User-Key-File-\d+:[^\n]*+(?:\n(?![ \t]*\n)[^\n]*+)*+")
# The labelled rules below are also matched in JSON-escaped text (related.json is scrubbed as JSON,
# where a quote reads \"): _Q is a quote, escaped or not, and values stop at a backslash, so a
# redaction never takes the backslash of an escaped quote with it.
_Q = r"\\?[\"']"
# Normalised messages (reducer/failure/normalize.py: signatures, dedup queries, related.json) have a digit
# run that stands alone replaced by <N> and a long hex run by <HEX>: inside a credential too.
_NORM = r"<(?:N|HEX)>"
# AWS secret access keys have no prefix: only recognisable next to their name.
_AWS_SECRET = re.compile(rf"(?i)(aws_secret_access_key(?:{_Q})?[ \t]*[=:][ \t]*(?:{_Q})?)([A-Za-z0-9/+=]{{40}})"
                         r"(?![A-Za-z0-9/+=])")
# Authorization headers, and the headers APIs read a key or token from instead (GitLab's
# PRIVATE-TOKEN, x-api-key, X-Shopify-Access-Token, X-Auth-Token, ...).
_AUTH_HEADER = re.compile(
    rf"(?i)((?:{_Q})?(?:(?:proxy-)?authorization|(?<![\w-])(?:private-token|x-[a-z0-9-]*?(?:api-key|token)))(?:{_Q})?"
    rf"[ \t]*[:=][ \t]*(?:{_Q})?(?:(?:bearer|token|basic|digest)\s+)?)"
    r"(?![$%{]|<(?!N>|HEX>))(?!(?:bearer|token|basic|digest)\b)([^\s\"',}\\]+)")
# Keys recognisable by what they are passed to: wandb.login(key=<40 hex>), {"key": "<hex>"} (kaggle.json).
_KEY_ARG = re.compile(rf"(?i)(\b(?:api_)?key(?:{_Q})?[ \t]*[=:][ \t]*{_Q})([0-9a-f]{{32,64}})(?={_Q})")
_AZURE_KEY = re.compile(rf"(?i)(AccountKey|SharedAccessKey|sig)=((?:[A-Za-z0-9+/%]|{_NORM}){{16,}}={{0,2}})")
# Credentials in a URL: https://user:password@host (or redis://:password@host); both parts go.
# A password starting with $, { or % is a reference (https://ci:${TOKEN}@host), not a secret.
_URL_CREDENTIALS = re.compile(r"://(?P<cred>([^/\s:@\\\"'<>]*):(?![$<{%])([^/\s@\\\"'<>]+))@")
# A user part alone is a credential too (https://<token>@10.1.2.3/simple, pip's index URLs): only the
# conventional login names of SSH remotes are left.
_URL_USER = re.compile(r"://(?!(?:git|hg|anonymous)@)([^/\s:@\\\"'<>$%{]+)@(?=[\w\[<])")
# (both start with "://": the regex engine then jumps from one to the next, where a lookbehind
# start made it try every position)
# The same, normalised: "https://user:pw@host" reads "https:/<PATH>:pw@host" (the user went into <PATH>).
_URL_CREDENTIALS_NORM = re.compile(r"(?<=:/<PATH>:)[^/\s@\\\"'<>]+(?=@)")
# Env-style assignments: HF_TOKEN=..., OPENAI_API_KEY: ..., os.environ["GH_TOKEN"] = "...".
# A value starting with $ or < is a reference or a placeholder, not a secret (<N> and <HEX> are
# what normalisation left of one: still the secret's remains).
_ENV_ASSIGN = re.compile(
    rf"\b([A-Z][A-Z0-9_]*_(?:TOKEN|KEY|SECRET|PASSWORD|PASSWD|PAT))(?:{_Q})?\]?[ \t]*[=:][ \t]*(?:{_Q})?"
    rf"(?![$%{{]|<(?!N>|HEX>))([^\s\"',;)}}\\]{{4,}})")
# Code-style assignments (api_key="...", hub_token='...'): only a quoted credential-looking literal,
# so tokenizer code such as pad_token = "<pad>" or eos_token=tok.eos_token is left alone.
_CODE_ASSIGN = re.compile(
    rf"(?i)\b([a-z_]*(?:_token|_key|_secret|password|passwd))[ \t]*[=:][ \t]*{_Q}"
    rf"(?=[^\"'\s]*(?:\d|{_NORM}))(?=[^\"'\s]*[A-Za-z])((?:[A-Za-z0-9_\-./+=]|{_NORM}){{16,}}){_Q}")
# Passwords hold any printable character (psycopg2.connect(password="Tr0ub4dor&3")): a quoted value of
# password=/passwd= that is not a placeholder, a reference or a format field.
_PASSWORD_ARG = re.compile(rf"(?i)\b(password|passwd)(?:{_Q})?[ \t]*[=:][ \t]*{_Q}(?![$<{{%])([^\s\"'\\]{{6,}}){_Q}")
# Webhook URLs whose path is the credential: Discord (Slack's are a token kind above).
_WEBHOOK = re.compile(r"(?i)\bhttps?://(?:ptb\.|canary\.)?discord(?:app)?\.com/api/webhooks/(\d{17,20}/[A-Za-z0-9_\-]{60,})")
# Telegram bot tokens: "<bot id>:AA" + 33 (also after "bot" in an API URL, or with the id normalised away).
_TELEGRAM = re.compile(r"(?:(?<![\w-])|(?<=bot))(?:\d{8,10}|<N>|<PATH>):AA[A-Za-z0-9_\-]{33}(?![\w-])")
# A token in normalised text: a documented prefix, then a long run with <N>/<HEX> inside.
_NORMALISED_RUN = re.compile(rf"(?<![\w<>+/.-])(?:[A-Za-z0-9_\-+/.]|{_NORM})++={{0,2}}")
# detect-secrets' KeywordDetector, rewritten linear (its own patterns take about 90 s on 20 KB of
# "password" repeated): a quoted value after a name holding one of these words and an operator
# (``db_password = "..."``, ``"api_key": "..."``, ``secret => '...'``), a quoted value compared
# with such a name (``"..." == password``), and ``private_key "...";``. The name is read once,
# from its word's start (a lookahead finds the word in it), and a value ends at the next quote.
_DENY = (r"(?:api_?key|auth_?key|service_?key|account_?key|db_?key|database_?key|priv_?key|private_?key|client_?key|"
         r"db_?pass|database_?pass|key_?pass|password|passwd|pwd|secret|contrase(?:ñ|n)a)")
_DENY_WORDS = ("key", "pass", "pwd", "secret", "contrase")
_KEYWORD_ASSIGN = re.compile(rf"(?i)(?<!\w)(?=\w*?{_DENY})\w++[\]'\"]{{0,2}}[ \t]*+(?::|={{1,3}}|!==?|=>)[ \t]*+@?"
                             r"([\"'`])([^\n\"'`]*+)\1")
_KEYWORD_COMPARED = re.compile(rf"(?i)([\"'`])([^\n\"'`]*+)\1[ \t]*+[!=]{{2,3}}[ \t]*+\w*?{_DENY}")
_KEYWORD_STATEMENT = re.compile(rf"(?i)(?<!\w)(?=\w*?{_DENY})\w++[^\s\"'`]{{0,50}}+[ \t]*+([\"'`])([^\n\"'`]*+)\1;")
# detect-secrets' IBM Cloud IAM, IBM COS HMAC, Cloudant and SoftLayer detectors: the service's
# name, a key word, an operator (or spaces), and a value of the service's length.
_CLOUD_ASSIGN = re.compile(
    r"(?i)(?<![\w-])[\"']?(?:cloudant|clou|cl|softlayer|sl|ibm[-_]?cloud[-_]?iam|cloud[-_]?iam|ibm[-_]?cloud|"
    r"ibm[-_]?iam|ibm[-_]?cos(?:[-_]?hmac)?|cos(?:[-_]?hmac)?|ibm|iam|cloud)[-_]?(?:api)?[-_]?"
    r"(?:key|pwd|pw|password|pass|token|secret[-_]?(?:access)?[-_]?key)[\"']?\]?[ ]*+(?:=>|:=|::|=|:|(?<=[ ]))[ ]*+"
    r"[\"']?([A-Za-z0-9_\-]{24,64}+)(?![\w-])")
_CLOUD_LENGTHS = frozenset({24, 44, 48, 64})
_CLOUD_WORDS = ("cl", "sl", "ibm", "iam", "cloud", "cos", "softlayer")
# detect-secrets' AWS rule for a secret key named loosely (aws_key = "...", AWS pass: '...'): a
# quoted 40-character value, and within the 45 characters before it "aws" then a key word.
_AWS_VALUE = re.compile(r"(?<=[\"'])[0-9a-zA-Z/+]{40}(?=[\"'])")
_AWS_LOOSE = re.compile(r"(?i)aws.{0,20}?(?:key|pwd|pw|password|pass|token).{0,20}?[\"']$")
# npm's .npmrc: //registry/:_authToken=<token> (a legacy token is a UUID).
_NPM_AUTH = re.compile(r"(?i)(_authToken[ \t]*=[ \t]*)(?![$<{%])([^\s\"'\\]{8,}+)")

# A POSIX path starts where nothing that may be part of a path precedes its first slash, and its
# folders never hold those stops: no start lies inside a path an earlier attempt read, so a
# path-shaped message of any length is read a bounded number of times (``/%/%/%...`` was quadratic).
_STOPS = "\\s\"'<>:=(),;\\[\\]{}`|"
_COMP = rf"[^/{_STOPS}]"
_PATH_START = rf"(?<![^/{_STOPS}])(?<![<>])"
# Site-packages (and dist-packages) prefixes, POSIX and Windows; the rest of the path is kept.
_SITE_POSIX = re.compile(rf"{_PATH_START}(?:/{_COMP}++)*/(?:site|dist)-packages/")
_SITE_WIN = re.compile(r"(?<![\w])[A-Za-z]:\\(?:[^\\/\n\"'<>|*?:]+\\)*?(?:site|dist)-packages\\", re.IGNORECASE)
_PATH_REST = re.compile(r"[^\s\"'<>|*?:,]*")
# A home folder under any mount (/mnt/home/bob, /nfs/home/bob), not only at the root.
# A file:// URL's path too (pip's direct_url.json of a local wheel: file:///home/bob/wheels/x.whl).
_HOME_POSIX = re.compile(r"(?:(?<=file://)|(?<![\w.:/~<>-]))(?:/[\w.-]+)*?(?:/home|/Users|/var/home)/([^/\s\"'<>:]+)"
                         r"|(?<![\w.-])/root(?![\w.-])")
_HOME_WIN = re.compile(r"(?<![\w])[A-Za-z]:[\\/]{1,4}(?:Users|Documents and Settings)[\\/]{1,4}([^\\/\n\"'<>|*?:]+)",
                       re.IGNORECASE)
# Any other absolute drive path (the seed's E:\Folder\...): its folders go, the file name stays.
# A repr doubles the backslashes (E:\\Folder\\x.bin), JSON of a repr doubles them again.
_DRIVE_DIRS = re.compile(r"(?<![\w])[A-Za-z]:[\\/]{1,4}(?:[^\\/\n\"'<>|*?:]+[\\/]{1,4})+")
_DRIVE_ONLY = re.compile(r"(?<![\w])[A-Za-z]:\\[^\\/\s\"'<>|*?:]+(?=[\s\"']|$)")
# An address's local part starts where none of its characters precedes (``a%a%a%...`` with no @
# was quadratic: 10-25 s for 120 KB), and is read once (possessive: it never holds an @).
_EMAIL = re.compile(r"(?<![\w.%+/-])[A-Za-z0-9][A-Za-z0-9._%+-]*+@[A-Za-z0-9-]++(?:\.[A-Za-z0-9-]++)*\.[A-Za-z]{2,24}\b")
# Host names, trackers' projects, buckets and cloud accounts: bot/scrub_places.py.
# IPv6 unique-local (fc00::/7) and link-local (fe80::/10) addresses.
_PRIVATE_IP6 = re.compile(r"(?<![\w:])(?:f[cd][0-9a-f]{2}|fe[89ab][0-9a-f]):[0-9a-f:]*[0-9a-f](?![\w:])", re.IGNORECASE)
# Normalisation cuts a Windows path at a space in a folder name ("C:\\Users\\Jane Doe\\x" reads
# "<PATH> Doe<PATH>"): the words between two <PATH> with the second glued on are the path's rest.
_PATH_GAP = re.compile(r"(?<=<PATH>)(?: [^\s<>\"'`=:;,$]+){1,3}(?=<PATH>)")
_PRIVATE_IP = re.compile(
    r"(?<![\w.])(?:10(?:\.\d{1,3}){3}|192\.168(?:\.\d{1,3}){2}|172\.(?:1[6-9]|2\d|3[01])(?:\.\d{1,3}){2})(?![\w.])")

# Shared roots whose next folder is usually a person's (/data/li/..., /scratch/bob/...): that folder
# goes when it reads like a login name rather than a folder of data.
_USER_ROOT = re.compile(r"(?<![\w.:/~<>-])(?:/[\w.-]+)*?/(?:data|mnt|scratch|work|users|u|nfs|lustre|gpfs|fsx|shared)/"
                        r"([a-z][a-z0-9]{1,15}(?:[._][a-z0-9]{1,15})?)(?=/)")
_USER_ROOT_FOLDERS = tuple(f"/{f}/" for f in ("data", "mnt", "scratch", "work", "users", "u", "nfs", "lustre", "gpfs",
                                                "fsx", "shared"))
_FOLDER_WORDS = frozenset({
    "datasets", "dataset", "models", "shared", "share", "public", "common", "projects", "project", "cache", "caches",
    "hf", "hf_cache", "huggingface", "checkpoints", "ckpt", "ckpts", "outputs", "output", "runs", "logs", "tmp",
    "temp", "nvme", "ssd", "hdd", "raid", "storage", "volumes", "volume", "team", "teams", "group", "groups", "input",
    "inputs", "eval", "tests", "images", "weights", "code", "src", "repos", "repo", "users", "local", "opt", "nfs",
    "lustre", "gpfs", "fsx", "efs", "disk", "disks", "scratch", "workspace", "workspaces", "mnt", "media", "backup",
    "archive", "results", "experiments", "exp", "corpora", "corpus", "raw", "processed", "lib", "bin", "etc", "usr",
    "var", "srv", "content", "drive", "notebooks", "working", "pretrained", "llm", "llms", "ml", "ai", "nlp", "cv",
    "research", "dev", "prod", "staging", "apps", "app", "containers", "conda", "envs", "venv", "venvs", "pip",
    "nvidia", "jobs", "job", "slurm", "batch", "hub", "transformers", "datasets_cache", "wandb", "mlruns", "data1",
    "data2", "models_cache", "downloads", "git", "github", "out", "files", "assets", "resources", "share1", "tools"})
_FOLDER_LIKE = re.compile(r"(?:disk|nvme|sd[a-z]|vol|raid|data|md|gpu|node|shard|part|run|exp|v)\d*")
# A source checkout of a stack package (an editable install, a fork): the folders above the package
# (the person's home, the fork's name) say nothing a maintainer needs, like site-packages' prefix.
SOURCE_PACKAGES = (*owner_packages(), "optimum", "timm", "torchao", "deepspeed", "sentence_transformers", "evaluate")
# The package folder must sit in a src/ layout or in a folder named after it (transformers-fork/):
# a bare torch/ or datasets/ folder is as often a cache or a data folder.
_PKGS = "|".join(SOURCE_PACKAGES)
_PKG_FOLDERS = tuple(f"/{p}/" for p in SOURCE_PACKAGES)
_SOURCE_CHECKOUT = re.compile(rf"{_PATH_START}(?<![.-])(?:~|/{_COMP}++)(?:/{_COMP}++)*?"
                              rf"/(?:src|{_COMP}*(?:{_PKGS}){_COMP}*)/(?=(?:{_PKGS})/[\w.-]+)")
# Hub owners whose repositories are public: anyone else's repository id may be private
# (myorg/internal-llama-7b) and is replaced. One-part ids (bert-base-uncased, gpt2) have no owner.
PUBLIC_HUB_ORGS = frozenset(o.lower() for o in (
    "google", "google-bert", "google-t5", "meta-llama", "facebook", "FacebookAI", "microsoft", "openai",
    "openai-community", "mistralai", "Qwen", "deepseek-ai", "tiiuae", "bigscience", "EleutherAI", "stabilityai",
    "runwayml", "CompVis", "huggingface", "HuggingFaceH4", "HuggingFaceTB", "HuggingFaceM4", "HuggingFaceFW",
    "hf-internal-testing", "trl-lib", "trl-internal-testing", "peft-internal-testing", "allenai", "nvidia",
    "intfloat", "sentence-transformers", "BAAI", "distilbert", "mosaicml", "databricks", "bigcode", "Salesforce",
    "apple", "ibm-granite", "ibm", "amazon", "THUDM", "zai-org", "01-ai", "lmsys", "NousResearch", "TheBloke",
    "unsloth", "black-forest-labs", "laion", "openbmb", "internlm", "moonshotai", "CohereForAI", "CohereLabs",
    "ai21labs", "xai-org", "Alibaba-NLP", "nomic-ai", "jinaai", "mixedbread-ai", "llava-hf", "timm", "stanfordnlp",
    "tatsu-lab", "Open-Orca", "lmms-lab", "neuralmagic", "RedHatAI", "mlx-community", "bartowski",
    "lmstudio-community", "ggml-org", "Lightricks", "Wan-AI", "tencent", "baidu", "ByteDance", "ByteDance-Seed",
    "LiquidAI", "state-spaces", "answerdotai", "cardiffnlp", "dslim", "TinyLlama", "HuggingFaceM4", "openai",
    "TIGER-Lab", "google-research-datasets", "nyu-mll", "rajpurkar", "Salesforce", "wikimedia", "uoft-cs",
    "ylecun", "mnist", "cifar10", "imdb", "glue", "squad", "openai", "hf-tiny-model-private", "microsoft"))
_HUB_ID = r"(?P<owner>(?:\w|<N>)(?:[\w.-]|<N>)*+)/(?P<name>(?:[\w.-]|<N>)++)"
# First path parts of huggingface.co that are pages, not owners.
_HUB_PAGES = frozenset({"docs", "api", "models", "datasets", "spaces", "blog", "learn", "settings", "organizations",
                        "join", "login", "pricing", "papers", "collections", "tasks", "new", "chat", "posts",
                        "changelog", "enterprise", "support", "inference-endpoints", "search"})
# Owners on public code hosts whose repositories are the upstream projects, not a private fork.
PUBLIC_CODE_OWNERS = frozenset(o.lower() for o in (
    "huggingface", "pytorch", "NVIDIA", "microsoft", "google", "google-research", "facebookresearch", "openai",
    "bitsandbytes-foundation", "TimDettmers", "Dao-AILab", "vllm-project", "triton-lang", "deepspeedai",
    "EleutherAI", "unslothai", "mlfoundations", "pypa", "numpy", "python"))
# Where a quoted owner/name is a Hub repository id, not a relative path.
_HUB_CALL = re.compile(
    r"(?i)(?:from_pretrained|load_dataset|snapshot_download|hf_hub_download|pipeline|repo_id|model_id|model_name"
    rf"(?:_or_path)?|pretrained_model_name_or_path|dataset_name|tokenizer_name|model)\s*[(=:]\s*\(?\s*{_Q}{_HUB_ID}(?={_Q})")
_HUB_CALL_WORDS = ("pretrained", "load_dataset", "download", "pipeline", "repo_id", "model", "dataset_name",
                   "tokenizer_name")
_HUB_URL = re.compile(rf"(?i)(?<![\w.-])(?:hf\.co|huggingface\.co)/(?:api/)?(?:(?P<kind>models|datasets|spaces)/)?"
                      rf"{_HUB_ID}")
# Where a message names a repository id outside a call: transformers' "'<id>' is not a local folder
# and is not a valid model identifier", "Can't load tokenizer for '<id>'", "<id> does not appear to
# have a file named ...", huggingface_hub's "Access to model <id> is restricted".
_HUB_BEFORE = re.compile(rf"(?i)(?:can't load [a-z ]{{1,40}}? for |access to (?:model|dataset|space) |path_or_model_id: |"
                         rf"repo(?:sitory)?(?: id)?:? ){_Q}?{_HUB_ID}")
_HUB_AFTER = re.compile(rf"(?<![\w./<>-]){_Q}?{_HUB_ID}{_Q}?(?= is not a local folder| is not a valid model identifier|"
                        r" does not appear to have a file| is not the path to a directory| is gated)")
# The Hub cache's folder of a repository: models--<owner>--<name> (a name never holds "--").
_HUB_CACHE = re.compile(r"(?<![\w-])(?P<kind>models|datasets|spaces)--(?P<owner>(?:[\w.]|-(?!-))++)--"
                        r"(?P<name>(?:[\w.]|-(?!-))++)")
# A package pinned to a fork on a public code host (name @ git+https://github.com/<fork owner>/...).
_VCS_OWNER = re.compile(r"(?i)git\+(?:https?|ssh)://(?:[^@/\s]+@)?(?:github\.com|gitlab\.com|bitbucket\.org)[/:]"
                        r"([\w.-]+)/")
# Bare keys: a long hex or random-looking run with no documented prefix. After a word naming a
# credential it is one; after a word naming a hash (or an @, a /) it is a commit or a digest.
_BARE_HEX = re.compile(r"(?<![\w/@.+-])(?:[0-9a-f]{32,64}|[0-9A-F]{32,64})(?![\w/-])")
_SHORT_HEX = re.compile(r"(?<![\w/@.+-])(?:[0-9a-f]{12,31}|[0-9A-F]{12,31})(?![\w/-])")
_BARE_MIXED = re.compile(r"(?<![\w/+.@-])[A-Za-z0-9+/_-]{32,}+={0,2}(?![\w/+=-])")
# A key is at most a few hundred characters (an AWS session token, the longest, about 1 KiB): a
# longer run is data, and is not weighed character by character.
_KEY_MAX = 4096
# login and wandb: wandb.login("<40 hex>"), `wandb login <40 hex>`, "wandb: <40 hex>" (a W&B key has
# no prefix of its own); a netrc's "password <hex>" is caught by passw.
_KEY_BEFORE = re.compile(r"(?i)(?:key|token|secret|passw\w*|auth\w*|credentials?|signature|bearer|login|wandb)\W{0,4}$")
_HASH_BEFORE = re.compile(r"(?i)(?:sha\d*|commit|rev(?:ision)?|hash|digest|checksum|md5|etag|oid|blob|tree|snapshot|"
                          r"object|build|uuid|version|id)\b\W{0,4}$")
# A message's line break, real or escaped (a repr or JSON writes \n): pieces of one value can
# sit on either side of both.
_BREAK = re.compile(r"\n|(?<!\\)\\++n")
# The label a continued line may start with ("token part 2: ...").
_LABEL = r"(?:[A-Za-z][\w .#()<>-]{0,30}?[ \t]*[:=][ \t]*)?"
# Decodable runs: base64 (standard or URL-safe) and hex.
_B64_RUN = re.compile(r"(?<![A-Za-z0-9+/_-])[A-Za-z0-9+/_-]{16,}+={0,2}")
# An encoded credential is short (a PEM key's base64 is about 3 KiB): a longer run is data (an
# image, a tensor), and is not decoded and searched again.
_ENCODED_MAX = 8192
_HEX_RUN = re.compile(r"(?<![0-9A-Fa-f])(?:[0-9A-Fa-f]{2}){8,}(?![0-9A-Fa-f])")
_CREDENTIAL_PAIR = re.compile(r"[\w.@+-]{1,64}:[^\s:]{8,}")
# Environment variables whose value is a credential, by name (HF_TOKEN, DB_PASSWORD, GITHUB_PAT, ...).
SECRET_ENV_NAME = re.compile(
    r"(?i)(?:^|_)(?:[A-Z0-9]*(?:TOKEN|SECRET|PASSWORD|PASSWD|APIKEY|ACCESSKEY|CREDENTIALS?|COOKIE)|KEY|PAT|PASS|AUTH|"
    r"OAUTH|AUTHORIZATION)(?:_|$)")
_BORING_VALUE = re.compile(r"(?i)[\d.]*|true|false|yes|no|none|null|on|off|enabled?|disabled?")
# Escape sequences (CSI, OSC, DCS, two-character), C0/C1 controls but tab and newline, bidi overrides.
_ANSI = re.compile(r"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)?|[PX^_][^\x1b]*(?:\x1b\\)?|[ -/]*[0-~])?")
_CONTROLS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")

# Local names that are too generic to scrub wherever they appear as words.
_GENERIC_NAMES = frozenset({"", "root", "user", "runner", "admin", "ubuntu", "localhost", "home", "test",
                            "docker", "vagrant", "ec2-user", "jovyan", "colab", "kaggle", "node", "main", "work",
                            "data", "server", "host", "linux", "debian", "fedora", "desktop", "laptop", "master",
                            "worker", "train", "model", "cuda", "python", "default", "container", "sandbox"})


@dataclass(frozen=True)
class Finding:
    """One thing scrubbed or found: its kind and a redacted preview, never the value itself."""

    kind: str
    preview: str
    line: int          # 1-based line in the scrubbed input
    secret: bool       # True: a credential (filing refuses while one is present)
    replacement: str = ""

    def to_dict(self) -> dict[str, object]:
        return {"kind": self.kind, "preview": self.preview, "line": self.line, "secret": self.secret,
                "replacement": self.replacement}

    @classmethod
    def from_dict(cls, d: dict[str, object]) -> "Finding":
        return cls(str(d["kind"]), str(d["preview"]), int(d["line"]), bool(d["secret"]),  # type: ignore[arg-type]
                   str(d.get("replacement", "")))

    def __str__(self) -> str:
        arrow = f" -> {self.replacement}" if self.replacement else ""
        return f"line {self.line}: {self.kind} {self.preview}{arrow}"


@dataclass
class ScrubResult:
    text: str
    findings: list[Finding] = field(default_factory=list)

    @property
    def secrets(self) -> list[Finding]:
        return [f for f in self.findings if f.secret]

    @property
    def changed(self) -> bool:
        return bool(self.findings)


class _Hit(NamedTuple):
    """One match of a rule (a tuple: a message can hold a hundred thousand of them)."""

    start: int
    end: int
    kind: str
    preview: str
    replacement: str
    secret: bool


def _redacted(value: str, shown: str = "") -> str:
    """A preview that names the kind without revealing the value: public prefix + length."""
    return f"{shown}\u2026({len(value)} chars)"


def _secret_hit(kind: str, start: int, end: int, value: str, shown: str = "") -> _Hit:
    return _Hit(start, end, kind, _redacted(value, shown), f"<redacted:{kind}>", True)


# --- the finders, in priority order -------------------------------------------------------

def _has(text: str, needles: Iterable[str]) -> bool:
    """Any of ``needles`` in ``text``: a substring search, far cheaper than a regex scan of a long
    text, run before each rule so a rule only scans a text that can hold its match."""
    return any(n in text for n in needles)


@functools.lru_cache(maxsize=4)
def _lower(text: str) -> str:
    """``text`` lower-cased once per scrub, for the case-insensitive rules' needles."""
    return text.lower()


_RUN12 = re.compile(r"[A-Za-z0-9+/_-]{12}")


@functools.lru_cache(maxsize=4)
def _has_run(text: str) -> bool:
    """``text`` holds 12 token characters in a row: what every bare or encoded key needs (one scan
    for the five patterns that look for one)."""
    return _RUN12.search(text) is not None


def _find_pem(text: str) -> Iterable[_Hit]:
    if "-----BEGIN " in text:
        pos = 0
        while True:
            m = _PEM_BEGIN.search(text, pos)
            if not m:
                break
            # the block ends at its END line, else before the next quote, else with the text;
            # END is looked for only up to that quote, so each character is read once
            quote = _QUOTE.search(text, m.end())
            stop = quote.start() if quote else len(text)
            end_line = f"-----END {m.group(1)}-----"
            at = text.find(end_line, m.end(), stop)
            end = at + len(end_line) if at >= 0 else stop
            label = m.group(1).strip()
            yield _Hit(m.start(), end, "pem_block", f"-----BEGIN {label}-----\u2026({end - m.start()} chars)",
                       f"<redacted:pem_block {label}>", True)
            pos = max(end, m.end())
    if "PuTTY-User-Key-File-" in text:
        for m in _PUTTY.finditer(text):
            yield _Hit(m.start(), m.end(), "putty_key", f"PuTTY-User-Key-File\u2026({len(m.group())} chars)",
                       "<redacted:putty_key>", True)


def strip_controls(text: str) -> str:
    """``text`` without terminal escape sequences, control characters (tab and newline stay; a
    carriage return becomes a newline) or bidi overrides: nothing filed or printed can rewrite
    the terminal or reorder what a reader sees."""
    text = _ANSI.sub("", text).replace("\r\n", "\n").replace("\r", "\n")
    return _CONTROLS.sub("", text)


def _segments(text: str) -> list[tuple[int, str]]:
    """(offset, line) of each line, a line ending at a real or an escaped line break."""
    out, pos = [], 0
    for m in _BREAK.finditer(text):
        out.append((pos, text[pos:m.start()]))
        pos = m.end()
    out.append((pos, text[pos:]))
    return out


@functools.lru_cache(maxsize=None)
def _lead_res(chars: str) -> tuple[re.Pattern[str], re.Pattern[str]]:
    return tuple(re.compile(rf"[ \t>|]*{label}([{chars}]+)") for label in ("", _LABEL))  # type: ignore[return-value]


@functools.lru_cache(maxsize=None)
def _tail_re(tk: _TokenKind) -> re.Pattern[str]:
    """The head of a ``tk`` token and what follows it up to a line break, real or escaped, when the
    next line starts with a character the token could continue with (after a label or not); the
    group ``brk`` is the break."""
    return re.compile(rf"(?<![\w-]){tk.head_re}[{tk.chars}]*+(?=(?P<brk>\n|\\+n)[ \t>|]*(?:(?P<lead>[{tk.chars}]++)|"
                      rf"{_LABEL}[{tk.chars}]))")


# No token kind that wraps is shorter than this (AWS key ids, the shortest, are 20): a piece and its
# continuation shorter together are not tried.
_TOKEN_MIN = 20


def _find_split_tokens(text: str) -> Iterable[_Hit]:
    """A token wrapped across a line break (terminal width, a forum's pasted traceback, "part 1: /
    part 2:" lines): the piece at the end of one line is shorter than the token, the next line
    continues it."""
    if "\n" not in text and "\\" not in text:
        return
    for tk in _TOKENS:
        if not tk.full_len or not _has(text, tk.literals):
            continue
        full_re = re.compile(tk.pattern)
        plain_re, label_re = _lead_res(tk.chars)
        for tail in _tail_re(tk).finditer(text):
            start, end = tail.span()
            if end - start >= tk.full_len:
                continue
            b0 = tail.end("brk")
            # the next line's own start first (its length known from the tail's match), then after
            # a label only where one can be (a ':' or '=' among its first characters)
            plain = tail.end("lead") - b0 if tail.start("lead") >= 0 else 0
            tries = [plain_re] if plain and end - start + plain >= _TOKEN_MIN else []
            if text.find(":", b0, b0 + 40) >= 0 or text.find("=", b0, b0 + 40) >= 0:
                tries.append(label_re)
            if not tries:
                continue
            piece = tail.group()
            for lead_re in tries:
                lead = lead_re.match(text, b0)
                if not lead:
                    continue
                cont = lead.group(1)[:tk.full_len - len(piece)] if tk.kind != "openai_key" else lead.group(1)
                whole = piece + cont
                if not full_re.fullmatch(whole):
                    continue
                preview = _redacted(whole, whole[:4] if tk.head else tk.prefix) + " split across lines"
                yield _Hit(start, end, tk.kind, preview, f"<redacted:{tk.kind}>", True)
                yield _Hit(lead.start(1), lead.start(1) + len(cont), tk.kind, preview, "", True)
                break


def _find_tokens(text: str) -> Iterable[_Hit]:
    for tk in _TOKENS:
        if tk.literals and not _has(text, tk.literals):
            continue
        for m in re.finditer(tk.pattern, text):
            shown = m.group()[:4] if tk.head else tk.prefix
            yield _secret_hit(tk.kind, m.start(), m.end(), m.group(), shown)


# Every documented prefix at once: a normalised run that starts with none is no token.
_ANY_HEAD = re.compile("|".join(f"(?:{tk.head_re})" for tk in _TOKENS if tk.prefix))


def _find_normalised_tokens(text: str) -> Iterable[_Hit]:
    """Tokens cut by normalisation ("sk-proj-<N>TSGG…", "xoxb-<HEX>-<HEX>-bRGa…"): a documented
    prefix, and at least 16 token characters after it besides the placeholders."""
    if "<N>" not in text and "<HEX>" not in text:
        return
    for m in _NORMALISED_RUN.finditer(text):
        run = m.group()
        if "<" not in run or not _ANY_HEAD.match(run):
            continue
        for tk in _TOKENS:
            head = re.match(tk.head_re, run) if tk.prefix else None
            if head and len(re.sub(_NORM, "", run[head.end():])) >= 16:
                yield _secret_hit(tk.kind, m.start(), m.end(), run, run[:4] if tk.head else tk.prefix)
                break


def _find_labelled_secrets(text: str) -> Iterable[_Hit]:
    low = _lower(text)
    if "aws_secret_access_key" in low:
        for m in _AWS_SECRET.finditer(text):
            yield _secret_hit("aws_secret_key", m.start(2), m.end(2), m.group(2))
    if _has(low, ("authorization", "private-token", "x-")):
        for m in _AUTH_HEADER.finditer(text):
            if len(re.sub(_NORM, "", m.group(2))) < 4:  # nothing but what normalisation put there
                continue
            yield _secret_hit("authorization_header", m.start(2), m.end(2), m.group(2))
    if _has(text, ("_TOKEN", "_KEY", "_SECRET", "_PASSWORD", "_PASSWD", "_PAT")):
        for m in _ENV_ASSIGN.finditer(text):
            if len(re.sub(_NORM, "", m.group(2))) < 4:  # only what normalisation put there (API_KEY=<HEX>)
                continue
            yield _secret_hit("secret_assignment", m.start(2), m.end(2), m.group(2), f"{m.group(1)}=")
    if _has(low, ("_token", "_key", "_secret", "password", "passwd")):
        for m in _CODE_ASSIGN.finditer(text):
            yield _secret_hit("secret_assignment", m.start(2), m.end(2), m.group(2), f"{m.group(1)}=")
    if _has(low, ("password", "passwd")):
        for m in _PASSWORD_ARG.finditer(text):
            yield _secret_hit("password", m.start(2), m.end(2), m.group(2), f"{m.group(1)}=")
    if "key" in low:
        for m in _KEY_ARG.finditer(text):
            yield _secret_hit("api_key", m.start(2), m.end(2), m.group(2), "key=")
    if _has(low, ("accountkey", "sharedaccesskey", "sig=")):
        for m in _AZURE_KEY.finditer(text):
            yield _secret_hit("azure_key", m.start(2), m.end(2), m.group(2), f"{m.group(1)}=")
    if "://" in text:
        for m in _URL_CREDENTIALS.finditer(text):
            yield _secret_hit("url_credentials", m.start("cred"), m.end("cred"), m.group("cred"))
        for m in _URL_USER.finditer(text):
            yield _secret_hit("url_credentials", m.start(1), m.end(1), m.group(1))
    if ":/<PATH>:" in text:
        for m in _URL_CREDENTIALS_NORM.finditer(text):
            yield _secret_hit("url_credentials", m.start(), m.end(), m.group())
    if "discord" in low:
        for m in _WEBHOOK.finditer(text):
            yield _secret_hit("discord_webhook", m.start(1), m.end(1), m.group(1))
    if ":AA" in text:
        for m in _TELEGRAM.finditer(text):
            yield _secret_hit("telegram_bot_token", m.start(), m.end(), m.group())
    if "_authtoken" in low:
        for m in _NPM_AUTH.finditer(text):
            yield _secret_hit("npm_token", m.start(2), m.end(2), m.group(2), "_authToken=")
    if "aws" in low:
        for m in _AWS_VALUE.finditer(text):
            if _AWS_LOOSE.search(text, max(0, m.start() - 45), m.start()):
                yield _secret_hit("aws_secret_key", m.start(), m.end(), m.group())
    if _has(low, _CLOUD_WORDS):
        for m in _CLOUD_ASSIGN.finditer(text):
            if len(m.group(1)) in _CLOUD_LENGTHS:
                yield _secret_hit("cloud_credential", m.start(1), m.end(1), m.group(1))
    yield from _find_keyword_assignments(text, low)


def _keyword_value(value: str) -> bool:
    """What detect-secrets' KeywordDetector took for a secret: starts with a word character, does
    not end with a comma or a backtick, six characters at least, and is not our placeholder."""
    return (len(value) >= 6 and bool(re.match(r"\w", value)) and value[-1] not in ",`"
            and not _PLACEHOLDER.search(value))


def _find_keyword_assignments(text: str, low: str) -> Iterable[_Hit]:
    """Quoted values next to a name that says it holds a credential (detect-secrets' KeywordDetector,
    linear: see _KEYWORD_ASSIGN)."""
    if not _has(low, _DENY_WORDS) or not _has(text, ("'", '"', "`")):
        return
    for rx in (_KEYWORD_ASSIGN, _KEYWORD_COMPARED, _KEYWORD_STATEMENT):
        for m in rx.finditer(text):
            if _keyword_value(m.group(2)):
                yield _secret_hit("secret_keyword", m.start(2), m.end(2), m.group(2))


def secret_env_values(environ: Mapping[str, str] | None = None) -> tuple[str, ...]:
    """The values of the variables in ``environ`` (default: this process's) whose names say they
    hold a credential: scrubbed wherever they appear, whatever their shape. Longest first, so
    a value holding another is taken whole. Never stored: callers keep them in memory only."""
    env = os.environ if environ is None else environ
    values = {v for k, v in env.items() if SECRET_ENV_NAME.search(k) and len(v) >= 8
              and not _BORING_VALUE.fullmatch(v)}
    return tuple(sorted(values, key=len, reverse=True))


def _encodings(value: str) -> set[str]:
    """How a value is printed when it is not printed as itself."""
    raw = value.encode()
    forms = {value, urllib.parse.quote(value, safe=""), urllib.parse.quote(value), urllib.parse.quote_plus(value),
             raw.hex(), raw.hex().upper(), json.dumps(value)[1:-1], repr(value)[1:-1]}
    for encode in (base64.b64encode, base64.urlsafe_b64encode):
        b64 = encode(raw).decode()
        forms |= {b64, b64.rstrip("=")}
    return {f for f in forms if len(f) >= 8}


def _split_values(text: str, values: tuple[str, ...]) -> Iterable[_Hit]:
    """A value cut in two: its head ends one line, its rest is on the next (after a label or not)."""
    values = tuple(v for v in values if v[:4] in text)
    if not values:
        return
    segments = _segments(text)
    for (a0, line), (b0, nxt) in zip(segments, segments[1:]):
        end = line.rstrip(" \t'\"")
        for v in values:
            if v[:4] not in end[-len(v):]:  # no head of it ends this line
                continue
            for k in range(len(v) - 4, 3, -1):
                j = nxt.find(v[k:]) if end.endswith(v[:k]) else -1
                if j < 0:
                    continue
                a = a0 + len(end) - k
                yield _Hit(a, a + k, "env_secret", _redacted(v) + " split across lines", "<redacted:env_secret>", True)
                yield _Hit(b0 + j, b0 + j + len(v) - k, "env_secret", "", "", True)
                break


def _env_value_finder(values: tuple[str, ...]) -> Callable[[str], Iterable[_Hit]]:
    forms = sorted({f for v in values for f in _encodings(v)}, key=len, reverse=True)

    def find(text: str) -> Iterable[_Hit]:
        for form in forms:
            for m in re.finditer(re.escape(form), text):
                yield _secret_hit("env_secret", m.start(), m.end(), form)
        yield from _split_values(text, values)
    return find


# Base64 of ASCII text: the first character of every 4 encodes a byte's top six bits, below 32
# (A-Z, a-f); hex of ASCII text: every byte's first digit is 0-7. A run that is neither is data,
# passed over without decoding (a message of 60,000 such runs took 0.3 s to decode).
_ASCII_B64 = re.compile(r"[A-Za-f]*")
_ASCII_HEX = re.compile(r"[0-7]*")


def _decoded(run: str) -> str | None:
    """The ASCII text a base64 or hex run encodes, when it is printable; else None."""
    hex_run = _HEX_RUN.fullmatch(run) is not None
    if not (_ASCII_HEX if hex_run else _ASCII_B64).fullmatch(run[::2] if hex_run else run[::4]):
        return None
    try:
        if hex_run:
            raw = bytes.fromhex(run)
        else:
            b64 = run.rstrip("=").replace("-", "+").replace("_", "/")
            raw = base64.b64decode(b64 + "=" * (-len(b64) % 4), validate=True)
        plain = raw.decode("utf-8")
    except (ValueError, binascii.Error):
        return None
    return plain if plain.replace("\n", "").replace("\t", "").isprintable() else None


def _holds_secret(plain: str, values: tuple[str, ...]) -> bool:
    return (any(re.search(tk.pattern, plain) for tk in _TOKENS if not tk.literals or _has(plain, tk.literals))
            or bool(_CREDENTIAL_PAIR.fullmatch(plain))
            or bool(_URL_CREDENTIALS.search(plain)) or any(v in plain for v in values))


def _encoded_finder(values: tuple[str, ...]) -> Callable[[str], Iterable[_Hit]]:
    """base64 or hex of a credential (a Basic auth value, a printed b64encode(b"user:ghp_...")):
    decoded, it holds a token, a user:password pair or a secret value of the environment."""
    def find(text: str) -> Iterable[_Hit]:
        if not _has_run(text):
            return
        for rx in (_B64_RUN, _HEX_RUN):
            for m in rx.finditer(text):
                if m.end() - m.start() > _ENCODED_MAX:
                    continue
                plain = _decoded(m.group())
                if plain and _holds_secret(plain, values):
                    yield _secret_hit("encoded_secret", m.start(), m.end(), m.group())
    return find


def _looks_random(run: str, *, digit_groups: int = 3) -> bool:
    """Mixed case with digits scattered through it and few lowercase words: a key, not an
    identifier (Qwen2_5_VLForConditionalGeneration holds words; a random run holds none)."""
    body = run.rstrip("=")
    return (len(body) >= 32 and sum(c.isupper() for c in body) >= 3 and sum(c.islower() for c in body) >= 3
            and len(re.findall(r"\d+", body)) >= digit_groups
            and sum(len(w) for w in re.findall("[a-z]{3,}", body)) < 0.5 * len(body))


def _bare_context(text: str, start: int) -> str:
    """'secret' after a word naming a credential, 'hash' after one naming a digest, else 'unknown'."""
    before = text[max(0, start - 40):start].rsplit("\n", 1)[-1]
    if _KEY_BEFORE.search(before):
        return "secret"
    return "hash" if _HASH_BEFORE.search(before) else "unknown"


def _bare_hex(text: str) -> Iterable[tuple[re.Match[str], str]]:
    for m in _BARE_HEX.finditer(text):
        if re.search(r"\d", m.group()) and re.search(r"[a-fA-F]", m.group()):
            yield m, _bare_context(text, m.start())
    # A shorter run only where a word names it a credential: what a reduction left of a key once
    # its signature read the key as <HEX> (12 hex digits or more), "wandb: f5cdcc633b2a1e9a".
    for m in _SHORT_HEX.finditer(text):
        if re.search(r"\d", m.group()) and re.search(r"[a-fA-F]", m.group()) \
                and _bare_context(text, m.start()) == "secret":
            yield m, "secret"


def _find_bare_keys(text: str) -> Iterable[_Hit]:
    if not _has_run(text):
        return
    for m, context in _bare_hex(text):
        if context == "secret":
            # W&B's keys are 40 hex with no prefix: named so when W&B is what precedes it
            kind = "wandb_api_key" if "wandb" in _lower(text[max(0, m.start() - 40):m.start()]) else "hex_key"
            yield _secret_hit(kind, m.start(), m.end(), m.group())
    for m in _BARE_MIXED.finditer(text):
        run = m.group()
        if len(run) > _KEY_MAX:
            continue
        if _looks_random(run) or (_looks_random(run, digit_groups=1) and _bare_context(text, m.start()) == "secret"):
            yield _secret_hit("random_string", m.start(), m.end(), run)


def uncertain_strings(text: str) -> list[Finding]:
    """Bare strings that may be a credential or may be an id (a 40-hex run could be a git commit):
    left in the text, and a person is asked before anything holding one is filed."""
    found = [(m.start(), m.group()) for m, context in _bare_hex(text) if context == "unknown"]
    found += [(m.start(), m.group()) for m in _BARE_MIXED.finditer(text) if len(m.group()) <= _KEY_MAX
              and _looks_random(m.group(), digit_groups=1) and not _looks_random(m.group())]
    found.sort()
    lines = _line_numbers(text, [start for start, _ in found])
    return [Finding("uncertain_string", _redacted(v, v[:3]), line, False) for (_, v), line in zip(found, lines)]


# detect-secrets' entropy detectors (Yelp's): not secrets here, since a draft is full of hashes and
# ids; they are shown to a person instead (``high_entropy``, on a draft GitHub caps at 65,536
# characters). Its other detectors are no longer run by scrub(): several of their patterns are
# superlinear on crafted input (measured on 5, 10, 20 KB: KeywordDetector 5, 23, 89 s on "password"
# repeated; NpmDetector 0.2, 0.9, 2.7 s on "//"; JwtTokenDetector 0.02, 0.09, 0.36 s on "eyJ"); the
# shapes they knew and reprobot did not are reprobot's own linear rules now (_TOKENS,
# _find_labelled_secrets, _find_keyword_assignments).
_PLACEHOLDER = re.compile(r"<redacted:[^<>\n]*>|<(?:env|path|email|host|ip|user-or-host|tmp|user|src|private-org|"
                          r"model|dataset|space|entity|project|workspace|bucket|tenant|service-account)>")
_ENTROPY_TYPES = {"Base64 High Entropy String", "Hex High Entropy String"}


@functools.lru_cache(maxsize=1)
def _entropy_detectors() -> list:
    from detect_secrets.core.plugins.util import get_mapping_from_secret_type_to_class
    return [cls() for t, cls in sorted(get_mapping_from_secret_type_to_class().items()) if t in _ENTROPY_TYPES]


def _detected(text: str, plugins: list) -> Iterable[tuple[int, int, str, str]]:
    """(start, end, secret type, value) for each value the plugins find, line by line."""
    pos = 0
    for n, line in enumerate(text.split("\n"), 1):
        if line.strip():
            # reprobot's own placeholders (text scrubbed before) are never a finding again
            placed = [(m.start(), m.end()) for m in _PLACEHOLDER.finditer(line)]
            for plugin in plugins:
                try:
                    found = plugin.analyze_line(filename="reprobot.draft", line=line, line_number=n)
                except Exception:  # noqa: BLE001 - a detector's own bug must not stop scrubbing
                    continue
                for secret in found:
                    value = secret.secret_value or ""
                    if len(value) < 6:
                        continue
                    for m in re.finditer(re.escape(value), line):
                        if not any(a < m.end() and m.start() < b for a, b in placed):
                            yield pos + m.start(), pos + m.end(), secret.type, value
        pos += len(line) + 1


def high_entropy(text: str) -> list[Finding]:
    """Strings random enough to be a credential nobody has a rule for: not scrubbed (drafts hold
    hashes and ids), shown to a person before anything is filed."""
    hits = [_Hit(a, b, "high_entropy", _redacted(v, v[:3]), "", False)
            for a, b, _kind, v in _detected(text, _entropy_detectors())]
    line_starts = [0] + [m.end() for m in re.finditer("\n", text)]
    seen: set[tuple[int, int]] = set()
    out = []
    for h in sorted(hits, key=lambda h: h.start):
        if (h.start, h.end) in seen:
            continue
        seen.add((h.start, h.end))
        out.append(Finding(h.kind, h.preview, bisect.bisect_right(line_starts, h.start), False))
    return out


def _find_site_packages(text: str) -> Iterable[_Hit]:
    if "-packages/" in text:
        for m in _SITE_POSIX.finditer(text):
            yield _Hit(m.start(), m.end(), "site_packages", "\u2026/site-packages/", "<env>/", False)
    if "-packages\\" not in _lower(text):
        return
    for m in _SITE_WIN.finditer(text):
        # The package-relative rest is kept, with forward slashes like every other frame we show.
        rest = _PATH_REST.match(text, m.end()).group()  # type: ignore[union-attr]
        yield _Hit(m.start(), m.end() + len(rest), "site_packages", "\u2026\\site-packages\\",
                   "<env>/" + rest.replace("\\", "/"), False)


def _find_source_checkouts(text: str) -> Iterable[_Hit]:
    if not _has(text, _PKG_FOLDERS):
        return
    for m in _SOURCE_CHECKOUT.finditer(text):
        yield _Hit(m.start(), m.end(), "source_checkout", "\u2026/<package>/", "<src>/", False)


def _find_user_roots(text: str) -> Iterable[_Hit]:
    if not _has(text, _USER_ROOT_FOLDERS):
        return
    for m in _USER_ROOT.finditer(text):
        name = m.group(1)
        if name in _FOLDER_WORDS or name in _GENERIC_NAMES or _FOLDER_LIKE.fullmatch(name):
            continue
        yield _Hit(m.start(1), m.end(1), "path_user", name[0] + "\u2026", "<user>", False)


def _find_hub_ids(text: str) -> Iterable[_Hit]:
    """Repository ids of owners not known to publish publicly: ``<private-org>/<model>``."""
    low = _lower(text)
    rules = [rx for rx, needles in ((_HUB_CALL, _HUB_CALL_WORDS), (_HUB_URL, ("hf.co/", "huggingface.co/")),
                                    (_HUB_BEFORE, ("load", "access to", "path_or_model_id", "repo")),
                                    (_HUB_AFTER, (" is not a ", " does not appear", " is gated")))
             if "/" in text and _has(low, needles)]
    if "--" in text:
        for m in _HUB_CACHE.finditer(text):
            if m.group("owner").lower() not in PUBLIC_HUB_ORGS:
                what = {"models": "model", "datasets": "dataset", "spaces": "space"}[m.group("kind")]
                yield _Hit(m.start("owner"), m.end("name"), "hub_repo", m.group("kind") + "--\u2026",
                           f"<private-org>--<{what}>", False)
    for rx in rules:
        for m in rx.finditer(text):
            owner = m.group("owner")
            if owner.lower() in PUBLIC_HUB_ORGS or owner.lower() in _HUB_PAGES:
                continue
            what = "dataset" if "dataset" in m.group().lower() else "model"
            yield _Hit(m.start("owner"), m.end("name"), "hub_repo", owner[0] + "\u2026/\u2026",
                       f"<private-org>/<{what}>", False)


def _find_forks(text: str) -> Iterable[_Hit]:
    if "git+" not in _lower(text):
        return
    for m in _VCS_OWNER.finditer(text):
        owner = m.group(1).lower()
        if owner not in PUBLIC_CODE_OWNERS and owner not in PUBLIC_HUB_ORGS:
            yield _Hit(m.start(1), m.end(1), "private_fork", m.group(1)[0] + "\u2026", "<private-org>", False)


def _find_homes(text: str) -> Iterable[_Hit]:
    if _has(text, ("/home/", "/Users/", "/root")):
        for m in _HOME_POSIX.finditer(text):
            yield _Hit(m.start(), m.end(), "home_dir", m.group().split("/")[1] + "/\u2026", "~", False)
    if not _has(_lower(text), ("users", "documents and settings")):
        return
    for m in _HOME_WIN.finditer(text):
        yield _Hit(m.start(), m.end(), "home_dir", "Users\\\u2026", "~", False)


def _find_drive_paths(text: str) -> Iterable[_Hit]:
    if "<PATH> " in text:
        for m in _PATH_GAP.finditer(text):
            yield _Hit(m.start(), m.end(), "drive_path", "<PATH> \u2026<PATH>", "", False)
    if not _has(text, (":\\", ":/")):
        return
    for m in _DRIVE_DIRS.finditer(text):
        sep = re.search(r"[\\/]+$", m.group()).group()  # type: ignore[union-attr]
        yield _Hit(m.start(), m.end(), "drive_path", m.group()[:3] + "\u2026", "<path>" + sep, False)
    for m in _DRIVE_ONLY.finditer(text):
        yield _Hit(m.start(), m.end(), "drive_path", m.group()[:3] + "\u2026", "<path>", False)


def _find_contacts(text: str) -> Iterable[_Hit]:
    if "@" in text:
        for m in _EMAIL.finditer(text):
            start, end = m.span()
            yield _Hit(start, end, "email", "\u2026@" + m.group().rpartition(".")[2], "<email>", False)
    if "." in text:
        for m in _PRIVATE_IP.finditer(text):
            yield _Hit(m.start(), m.end(), "private_ip", m.group().split(".")[0] + ".\u2026", "<ip>", False)
    if ":" in text and _has(_lower(text), ("fc", "fd", "fe8", "fe9", "fea", "feb")):
        for m in _PRIVATE_IP6.finditer(text):
            yield _Hit(m.start(), m.end(), "private_ip", m.group().split(":")[0] + ":\u2026", "<ip>", False)


def _places(finder: Callable[[str], Iterable[scrub_places.Place]]) -> Callable[[str], Iterable[_Hit]]:
    def find(text: str) -> Iterable[_Hit]:
        for p in finder(text):
            yield _Hit(p.start, p.end, p.kind, p.preview, p.replacement, False)
    return find


def _login_names() -> set[str]:
    names: set[str] = set()
    for getter in (getpass.getuser, lambda: os.environ.get("USER", ""), lambda: os.environ.get("USERNAME", "")):
        try:
            names.add(getter())
        except (KeyError, OSError):
            continue
    return names


def local_identity() -> tuple[str, ...]:
    """This machine's host name (long and short) and the user's login name: scrubbed wherever
    they appear as words, unless they are too generic to be personal."""
    names = _login_names()
    try:
        host = socket.gethostname()
        names.update({host, host.split(".")[0]})
    except OSError:
        pass
    # Short or generic names would take ordinary words out of tracebacks ("gpu", "worker").
    return tuple(sorted(n for n in names if len(n) >= 4 and n.lower() not in _GENERIC_NAMES))


def local_users() -> tuple[str, ...]:
    """The user's login names however short ("li"): scrubbed where they are a folder of a path,
    where even two letters are not an ordinary word."""
    return tuple(sorted(n for n in _login_names() if len(n) >= 2 and n.lower() not in _GENERIC_NAMES
                        and n.lower() not in _FOLDER_WORDS))


def _path_name_finder(names: Iterable[str]) -> Callable[[str], Iterable[_Hit]]:
    def find(text: str) -> Iterable[_Hit]:
        for name in names:
            if "/" + name not in text:
                continue
            for m in re.finditer(rf"(?<=/){re.escape(name)}(?=/|[\s\"'`]|$)", text):
                yield _Hit(m.start(), m.end(), "local_name", name[0] + "\u2026", "<user>", False)
    return find


def _identity_finder(names: Iterable[str]) -> Callable[[str], Iterable[_Hit]]:
    def find(text: str) -> Iterable[_Hit]:
        for name in names:
            if name not in text:
                continue
            for m in re.finditer(rf"(?<![\w.-]){re.escape(name)}(?![\w-])", text):
                yield _Hit(m.start(), m.end(), "local_name", name[0] + "\u2026", "<user-or-host>", False)
    return find


def _secret_finders(values: tuple[str, ...]) -> tuple[Callable[[str], Iterable[_Hit]], ...]:
    """In priority order; ``values``: the environment's secret values (``secret_env_values``)."""
    return (_find_pem, _find_split_tokens, _find_tokens, _find_normalised_tokens, _find_labelled_secrets,
            _env_value_finder(values), _encoded_finder(values), _find_bare_keys)


_PRIVATE_FINDERS: tuple[Callable[[str], Iterable[_Hit]], ...] = (
    _find_site_packages, _find_source_checkouts, _find_homes, _find_user_roots, _find_drive_paths, _find_hub_ids,
    _find_forks, _places(scrub_places.storage), _places(scrub_places.tracking), _find_contacts,
    _places(scrub_places.hosts))


def _resolve(text: str, finders: Iterable[Callable[[str], Iterable[_Hit]]]) -> list[_Hit]:
    """All hits, earlier finders winning overlaps; returned in text order. Each finder's hits are
    merged into the kept ones in one pass (inserting one by one was quadratic in the hits)."""
    kept: list[_Hit] = []  # sorted by start, non-overlapping
    for finder in finders:
        new = sorted(finder(text), key=lambda h: (h.start, h.start - h.end))
        if not new:
            continue
        merged: list[_Hit] = []
        i = 0
        for hit in new:
            while i < len(kept) and kept[i].end <= hit.start:
                merged.append(kept[i])
                i += 1
            if merged and merged[-1].end > hit.start or i < len(kept) and kept[i].start < hit.end:
                continue
            merged.append(hit)
        merged.extend(kept[i:])
        kept = merged
    return kept


def _line_numbers(text: str, starts: list[int]) -> list[int]:
    """The 1-based line of each offset in ``starts`` (ascending): newlines counted between one
    offset and the next, so the whole text is counted once, however many offsets."""
    out, line, pos = [], 1, 0
    for start in starts:
        line += text.count("\n", pos, start)
        pos = start
        out.append(line)
    return out


def _findings(text: str, hits: list[_Hit]) -> list[Finding]:
    hits = [h for h in hits if h.replacement or not h.secret]  # a split token's second half: reported once
    # The same thing found twice on one line is reported once (a hostile line can hold 100,000).
    seen = dict.fromkeys((h.kind, h.preview, line, h.secret, h.replacement)
                         for h, line in zip(hits, _line_numbers(text, [h.start for h in hits])))
    return [_finding(*key) for key in seen]


def _finding(kind: str, preview: str, line: int, secret: bool, replacement: str) -> Finding:
    """A Finding made without the frozen dataclass's __init__ (five object.__setattr__ calls, 4 us:
    a message can hold a hundred thousand findings); the same object as Finding(...) makes."""
    f = object.__new__(Finding)
    f.__dict__.update(kind=kind, preview=preview, line=line, secret=secret, replacement=replacement)
    return f


def find_secrets(text: str, *, environ: Mapping[str, str] | None = None) -> list[Finding]:
    """Credentials present in ``text`` (empty list when none): filing refuses while any remain.
    ``environ``: whose secret values count (default: this process's environment)."""
    return _findings(text, _resolve(text, _secret_finders(secret_env_values(environ))))


def _controls_finding(original: str, stripped: str) -> list[Finding]:
    if original == stripped:
        return []
    first = next((i for i, (a, b) in enumerate(zip(original, stripped)) if a != b), len(stripped))
    return [Finding("control_characters", "terminal escapes or bidi overrides", stripped.count("\n", 0, first) + 1,
                    False, "")]


def scrub(text: str, *, names: Iterable[str] | None = None,
          environ: Mapping[str, str] | None = None) -> ScrubResult:
    """``text`` with control characters stripped, secrets redacted and private details replaced,
    and what was found.

    ``names``: host/user names to scrub as words; default: this machine's (``local_identity()``,
    and ``local_users()`` as folders of a path). ``environ``: the environment whose secret-named
    variables' values are scrubbed (default: this process's, ``secret_env_values``).
    Idempotent: scrubbing the result again finds nothing.
    """
    original, text = text, strip_controls(text)
    finders = (*_secret_finders(secret_env_values(environ)), *_PRIVATE_FINDERS,
               _identity_finder(local_identity() if names is None else names),
               _path_name_finder(local_users() if names is None else ()))
    hits = _resolve(text, finders)
    parts: list[str] = []
    pos = 0
    for h in hits:
        parts.append(text[pos:h.start])
        parts.append(h.replacement)
        pos = h.end
    parts.append(text[pos:])
    return ScrubResult("".join(parts), _controls_finding(original, text) + _findings(text, hits))


def scrub_json(value: Any) -> Any:
    """A JSON-able value scrubbed as one JSON document, then read back.

    Unlike ``scrub_tree`` a rule sees a key next to its value, so ``{"HF_TOKEN": "..."}`` is
    caught by its label even when the value alone looks like nothing."""
    # JSON writes a control character as \u001b, which stripping would not see: strip first.
    return json.loads(scrub(json.dumps(_strip_tree(value))).text)


def _strip_tree(value: Any) -> Any:
    if isinstance(value, str):
        return strip_controls(value)
    if isinstance(value, dict):
        return {_strip_tree(k): _strip_tree(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_strip_tree(v) for v in value]
    return value


def scrub_tree(value: Any) -> Any:
    """Every string in a JSON-like value scrubbed (keys too); other values kept as they are."""
    if isinstance(value, str):
        return scrub(value).text
    if isinstance(value, dict):
        return {(scrub_tree(k) if isinstance(k, str) else k): scrub_tree(v) for k, v in value.items()}
    if isinstance(value, list):
        return [scrub_tree(v) for v in value]
    return value
