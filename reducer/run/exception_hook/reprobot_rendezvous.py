"""reprobot: this run's own rendezvous (stdlib only; loaded by sitecustomize when
REPROBOT_RENDEZVOUS is set). See reducer/run/rendezvous.py.

While REPROBOT_MASTER_PORT names the run's port:
* ``os.environ["MASTER_PORT"] = X`` (also through setdefault/update) stores the run's port, where X
  is a port a user's run could listen on (1024-65535; anything else is stored as it is);
* a ``tcp://HOST:PORT`` init_method of torch.distributed uses the run's port, and a
  ``file://PATH`` one a file in the run's own temp folder (the same for every rank of the run).
Nothing is imported ahead: torch.distributed.rendezvous is patched right after its first import.
"""
import os
import sys

from reprobot_after_import import when_imported

_PORT_ENV = "REPROBOT_MASTER_PORT"
_MODULE = "torch.distributed.rendezvous"


def _port():
    try:
        value = os.environ.get(_PORT_ENV)
    except Exception:
        return None
    return value if value and value.isdigit() else None


def _usable(value):
    """Only a port a user's run could listen on is swapped for the run's: a value that could
    not ("", "abc", "0", "80") fails here as it fails for a maintainer, so a reduction cannot
    shrink the script's own port to one that only works under this patch."""
    try:
        return 1024 <= int(str(value)) <= 65535
    except (TypeError, ValueError):
        return False


def _patch_environ():
    cls = type(os.environ)
    real = cls.__setitem__
    if getattr(real, "_reprobot", False):
        return

    def __setitem__(self, key, value):
        if key == "MASTER_PORT" and self is os.environ and _usable(value):
            port = _port()
            if port is not None:
                value = port
        return real(self, key, value)
    __setitem__._reprobot = True
    __setitem__.__wrapped__ = real
    cls.__setitem__ = __setitem__


def _file_usable(url):
    """Whether torch's file:// handler, unpatched, would get a file it can create: it reads the
    URL's path (``urlparse``), refuses an empty one, and the store needs an existing folder."""
    from urllib.parse import urlparse
    try:
        path = urlparse(url).path
    except ValueError:
        return False
    if not path or path.endswith("/") or os.path.isdir(path):
        return False
    return os.path.isdir(os.path.dirname(path) or ".")


def _host(url):
    """The host a file:// URL names (none, or ``localhost``, for a path of this machine)."""
    from urllib.parse import urlparse
    host = urlparse(url).netloc
    return host if host not in ("", "localhost") else ""


def _rewrite(url):
    port = _port()
    if port is None or not isinstance(url, str):
        return url
    import re
    if url.startswith("tcp://"):
        # only a port a maintainer's run could listen on (``_usable``): ``:0`` behaves as it would there
        return re.sub(r"^(tcp://(?:\[[^\]]*\]|[^/:?]*)):(\d+)",
                      lambda m: "%s:%s" % (m.group(1), port) if _usable(m.group(2)) else m.group(0), url)
    if url.startswith("file://"):
        tmp = os.environ.get("TMPDIR")
        if not tmp:
            return url
        rest = url[len("file://"):]
        path, sep, query = rest.partition("?")
        if not _file_usable(url):
            # a file torch could not make for a maintainer ("path missing" for file://r, whose
            # "r" is a host; a folder; a folder that does not exist): so here too, or a reduction
            # that emptied the path (spawn_gc_lm_ddp) passes only under this patch
            return url
        if _host(url):
            # file://name/rdzv: torch drops the host and makes /rdzv, which only root may (a
            # relative folder written into the URL, spawn_gc_lm_ddp): a file in a folder that does
            # not exist fails here as it fails for a maintainer who is not root
            return "file://" + os.path.join(tmp, "reprobot-no-folder", "rendezvous") + sep + query
        name = os.path.basename(path.rstrip("/")) or "rendezvous"
        return "file://" + os.path.join(tmp, "reprobot-rdzv-%s-%s" % (port, name)) + sep + query
    return url


def _patch_rendezvous(module):
    handlers = getattr(module, "_rendezvous_handlers", None)
    if not isinstance(handlers, dict):
        return
    for scheme in ("tcp", "file"):
        real = handlers.get(scheme)
        if real is None or getattr(real, "_reprobot", False):
            continue

        def handler(url, *args, _real=real, **kwargs):
            return _real(_rewrite(url), *args, **kwargs)
        handler._reprobot = True
        handler.__wrapped__ = real
        handlers[scheme] = handler


def install():
    _patch_environ()
    when_imported(_MODULE, _patch_rendezvous)


try:
    install()
except BaseException:
    pass
