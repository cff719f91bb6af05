# reprobot corpus: click_cli
# Exercises: a click command group (no argparse): options with defaults, a context object carrying
#   settings, a subcommand chosen by the script arguments, a log filter compiled from an option,
#   helper classes for the log source. Click's own frames sit outside the failure.
# Expected failure: re.error: missing ), unterminated subpattern at position 0
#   raised by `re.compile(...)` in LogFilter.__init__
#   (line 44, marked FAILING LINE).
# Ideal result (2 statements):
#   import re
#   re.compile('(error|warn')
from __future__ import annotations

import re
from dataclasses import dataclass

import click

LOG_LINES = [
    "2024-05-01 10:00:01 INFO started",
    "2024-05-01 10:00:02 WARN disk at 91%",
    "2024-05-01 10:00:03 ERROR upload failed",
    "2024-05-01 10:00:04 INFO retry ok",
]


@dataclass
class Settings:
    verbose: bool = False
    color: bool = True
    limit: int = 100


class LogSource:
    def __init__(self, lines: list[str]) -> None:
        self.lines = list(lines)

    def tail(self, n: int) -> list[str]:
        return self.lines[-n:]


class LogFilter:
    def __init__(self, pattern: str, ignore_case: bool) -> None:
        flags = re.IGNORECASE if ignore_case else 0
        self.regex = re.compile(pattern, flags)  # FAILING LINE: the pattern's group is not closed
        self.pattern = pattern

    def keep(self, line: str) -> bool:
        return bool(self.regex.search(line))


def render(lines: list[str], color: bool) -> str:
    if not color:
        return "\n".join(lines)
    return "\n".join(click.style(line, fg="yellow") for line in lines)


@click.group()
@click.option("--verbose/--quiet", default=False)
@click.option("--color/--no-color", default=True)
@click.pass_context
def cli(ctx: click.Context, verbose: bool, color: bool) -> None:
    ctx.obj = Settings(verbose=verbose, color=color)


@cli.command()
@click.option("--match", "pattern", default=".*", help="regular expression to keep")
@click.option("--ignore-case", is_flag=True, default=False)
@click.option("--tail", "n", type=int, default=10)
@click.pass_obj
def grep(settings: Settings, pattern: str, ignore_case: bool, n: int) -> None:
    source = LogSource(LOG_LINES)
    keep = LogFilter(pattern, ignore_case)
    lines = [line for line in source.tail(min(n, settings.limit)) if keep.keep(line)]
    if settings.verbose:
        click.echo(f"{len(lines)} of {n} lines match {pattern!r}")
    click.echo(render(lines, settings.color))


@cli.command()
@click.option("--tail", "n", type=int, default=2)
@click.pass_obj
def show(settings: Settings, n: int) -> None:
    for line in LogSource(LOG_LINES).tail(n):
        click.echo(line)


@cli.command()
@click.pass_obj
def stats(settings: Settings) -> None:
    levels: dict[str, int] = {}
    for line in LOG_LINES:
        level = line.split()[2]
        levels[level] = levels.get(level, 0) + 1
    for level, count in sorted(levels.items()):
        click.echo(f"{level}: {count}")


if __name__ == "__main__":
    cli()
