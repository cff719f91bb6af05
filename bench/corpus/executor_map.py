# reprobot corpus: executor_map
# Exercises: concurrent.futures `executor.map(load_plugin, sources)` over plugin config files;
#   one file fails to parse in a worker thread and the exception only surfaces in the main thread
#   when the map's results are iterated (through concurrent/futures frames). Also: a plugin
#   dataclass, defaults filled per section, a dependency sort, a summary nobody needs.
# Expected failure: configparser.DuplicateOptionError: While reading from '<string>' [line  4]:
#   option 'retries' in section 'fetch' already exists
#   raised by `parser.read_string(text)` in parse_plugin (line 72, marked FAILING LINE), re-raised
#   by the map's result iterator in main. Library frames: configparser.py:_read < read_file <
#   read_string, so the executor does not matter.
# Ideal result (2 statements):
#   import configparser; configparser.ConfigParser().read_string('[fetch]\nretries = 3\nretries = 5\n')
from __future__ import annotations

import configparser
import logging
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

log = logging.getLogger("plugins")

MAX_WORKERS = 4
DEFAULTS = {"enabled": "yes", "retries": "1", "timeout": "30"}
SOURCES = {
    "cache.ini": """\
[cache]
backend = memory
size = 512
""",
    "fetch.ini": """\
[fetch]
retries = 3
timeout = 10
retries = 5
requires = cache
""",
    "index.ini": """\
[index]
shards = 4
requires = fetch, cache
""",
    "report.ini": """\
[report]
enabled = no
requires = index
""",
}


@dataclass
class Plugin:
    name: str
    enabled: bool
    retries: int
    timeout: float
    requires: list[str] = field(default_factory=list)
    extra: dict[str, str] = field(default_factory=dict)


def plugin_from_section(name: str, section: configparser.SectionProxy) -> Plugin:
    known = {"enabled", "retries", "timeout", "requires"}
    requires = [r.strip() for r in section.get("requires", "").split(",") if r.strip()]
    extra = {k: v for k, v in section.items() if k not in known}
    return Plugin(name, section.getboolean("enabled"), section.getint("retries"),
                  section.getfloat("timeout"), requires, extra)


def parse_plugin(item: tuple[str, str]) -> list[Plugin]:
    filename, text = item
    parser = configparser.ConfigParser(defaults=DEFAULTS)
    parser.read_string(text)  # FAILING LINE: fetch.ini sets 'retries' twice
    return [plugin_from_section(name, parser[name]) for name in parser.sections()]


def dependency_order(plugins: dict[str, Plugin]) -> list[str]:
    order: list[str] = []
    seen: set[str] = set()

    def visit(name: str) -> None:
        if name in seen:
            return
        seen.add(name)
        for dep in plugins[name].requires:
            if dep in plugins:
                visit(dep)
        order.append(name)

    for name in sorted(plugins):
        visit(name)
    return order


def load_all(sources: dict[str, str]) -> dict[str, Plugin]:
    plugins: dict[str, Plugin] = {}
    with ThreadPoolExecutor(max_workers=MAX_WORKERS) as executor:
        for found in executor.map(parse_plugin, sorted(sources.items())):
            for plugin in found:
                plugins[plugin.name] = plugin
    return plugins


def summary(plugins: dict[str, Plugin], order: list[str]) -> str:
    enabled = [n for n in order if plugins[n].enabled]
    slowest = max(plugins.values(), key=lambda p: p.timeout * p.retries)
    return f"{len(enabled)}/{len(plugins)} enabled, start order {' -> '.join(enabled)}, slowest {slowest.name}"


def main() -> int:
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(message)s")
    plugins = load_all(SOURCES)
    order = dependency_order(plugins)
    log.info(summary(plugins, order))
    return 0


if __name__ == "__main__":
    sys.exit(main())
