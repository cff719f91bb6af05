# reprobot corpus: argparse_main
# Exercises: an argparse main with subcommands and script arguments passed through
#   (run it as `argparse_main.py report --since 2024-13-01`, see MANIFEST.json "args");
#   a command table; helper functions called once; a formatter class; code after the
#   failing statement that never runs.
# Expected failure: ValueError: time data '2024-13-01' does not match format '%Y-%m-%d'
#   raised by `datetime.datetime.strptime(value, DATE_FORMAT)` in parse_day (line 52, marked FAILING LINE).
# Ideal result (2 statements): import datetime; datetime.datetime.strptime('2024-13-01', '%Y-%m-%d')
from __future__ import annotations

import argparse
import csv
import datetime
import io
import logging
import sys
from collections.abc import Iterable
from dataclasses import dataclass

log = logging.getLogger("usage-report")

DATE_FORMAT = "%Y-%m-%d"
DEFAULT_WINDOW_DAYS = 7
CURRENCY = "EUR"


@dataclass(frozen=True)
class UsageRow:
    day: datetime.date
    user: str
    gpu_hours: float
    cost: float


SAMPLE_ROWS = """day,user,gpu_hours,cost
2024-01-02,ana,3.5,7.0
2024-01-03,ana,1.0,2.0
2024-01-03,ben,8.25,16.5
2024-01-05,chloe,0.5,1.0
"""


def read_rows(text: str) -> list[UsageRow]:
    rows = []
    for rec in csv.DictReader(io.StringIO(text)):
        rows.append(UsageRow(datetime.date.fromisoformat(rec["day"]), rec["user"],
                             float(rec["gpu_hours"]), float(rec["cost"])))
    return rows


def parse_day(value: str) -> datetime.date:
    return datetime.datetime.strptime(value, DATE_FORMAT).date()  # FAILING LINE


class TableFormatter:
    def __init__(self, currency: str, width: int = 12):
        self.currency = currency
        self.width = width

    def header(self) -> str:
        return "".join(h.ljust(self.width) for h in ("user", "gpu_hours", "cost"))

    def line(self, user: str, hours: float, cost: float) -> str:
        return (user.ljust(self.width) + f"{hours:.2f}".ljust(self.width)
                + f"{cost:.2f} {self.currency}")


def window(rows: Iterable[UsageRow], since: datetime.date, days: int) -> list[UsageRow]:
    until = since + datetime.timedelta(days=days)
    return [r for r in rows if since <= r.day < until]


def totals(rows: Iterable[UsageRow]) -> dict[str, tuple[float, float]]:
    out: dict[str, tuple[float, float]] = {}
    for r in rows:
        hours, cost = out.get(r.user, (0.0, 0.0))
        out[r.user] = (hours + r.gpu_hours, cost + r.cost)
    return out


def cmd_report(args: argparse.Namespace) -> int:
    rows = read_rows(SAMPLE_ROWS)
    since = parse_day(args.since)
    selected = window(rows, since, args.days)
    fmt = TableFormatter(CURRENCY)
    print(fmt.header())
    for user, (hours, cost) in sorted(totals(selected).items()):
        print(fmt.line(user, hours, cost))
    log.info("%d rows in window", len(selected))
    return 0


def cmd_users(args: argparse.Namespace) -> int:
    for user in sorted({r.user for r in read_rows(SAMPLE_ROWS)}):
        print(user)
    return 0


def cmd_check(args: argparse.Namespace) -> int:
    bad = [r for r in read_rows(SAMPLE_ROWS) if r.cost < 0 or r.gpu_hours < 0]
    print("ok" if not bad else f"{len(bad)} bad rows")
    return 1 if bad else 0


COMMANDS = {"report": cmd_report, "users": cmd_users, "check": cmd_check}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="usage-report", description="GPU usage reports")
    parser.add_argument("-v", "--verbose", action="store_true")
    sub = parser.add_subparsers(dest="command", required=True)
    rep = sub.add_parser("report", help="per-user totals for a window")
    rep.add_argument("--since", required=True, help=f"first day, {DATE_FORMAT}")
    rep.add_argument("--days", type=int, default=DEFAULT_WINDOW_DAYS)
    sub.add_parser("users", help="list users")
    sub.add_parser("check", help="validate rows")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.WARNING)
    return COMMANDS[args.command](args)


if __name__ == "__main__":
    sys.exit(main())
