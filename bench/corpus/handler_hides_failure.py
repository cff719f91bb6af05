# reprobot corpus: handler_hides_failure
# Exercises: an export step behind a `@fallback(default)` handler that catches the error, logs it
#   with log.exception and returns the default (an empty report), so the process EXITS 0 with a
#   degraded result and the csv error naming the user's field is only in the log. (The other
#   shape, logging one line and re-raising a generic RuntimeError, makes the generic wrapper the
#   last traceback, which is not the exception a maintainer needs.) Also: rows built from orders
#   with computed columns, a column selection from a report profile, totals nobody needs.
# Expected failure: ValueError: dict contains fields not in fieldnames: 'region'
#   raised by `writer.writerow(row)` in write_rows (line 96, marked FAILING LINE), logged by the
#   fallback handler around export. A good repro ends with the ValueError uncaught and last.
# Ideal result (2 statements):
#   import csv, sys; csv.DictWriter(sys.stdout, ['id']).writerow({'region': 'eu'})
from __future__ import annotations

import csv
import functools
import io
import logging
import sys
from collections.abc import Callable
from dataclasses import asdict, dataclass
from decimal import Decimal
from typing import TypeVar

T = TypeVar("T")

log = logging.getLogger("export")

PROFILES = {
    "finance": ["id", "customer", "total", "currency"],
    "ops": ["id", "customer", "items", "status"],
}
TAX_RATE = Decimal("0.2")
ROUND_TO = Decimal("0.01")


@dataclass
class Order:
    id: int
    customer: str
    items: int
    net: Decimal
    currency: str = "EUR"
    status: str = "open"


ORDERS = [
    Order(1, "acme", 3, Decimal("120.00")),
    Order(2, "globex", 1, Decimal("15.50"), status="shipped"),
    Order(3, "initech", 7, Decimal("980.25"), "USD"),
]


def fallback(default: T) -> Callable[[Callable[..., T]], Callable[..., T]]:
    """Degrade instead of failing: a broken report must not stop the nightly run."""

    def wrap(fn: Callable[..., T]) -> Callable[..., T]:
        @functools.wraps(fn)
        def guarded(*args: object, **kwargs: object) -> T:
            try:
                return fn(*args, **kwargs)
            except (ValueError, KeyError):
                log.exception("%s failed, using the default", fn.__name__)
                return default

        return guarded

    return wrap


def gross(order: Order) -> Decimal:
    return (order.net * (1 + TAX_RATE)).quantize(ROUND_TO)


def region_of(customer: str) -> str:
    return "us" if customer.startswith(("g", "i")) else "eu"


def to_row(order: Order, extra: bool) -> dict[str, object]:
    row: dict[str, object] = asdict(order)
    row["total"] = gross(order)
    if extra:
        row["region"] = region_of(order.customer)
    return row


def select(row: dict[str, object], columns: list[str]) -> dict[str, object]:
    # The ops profile keeps every column it was given, the finance one trims to its own.
    return {k: v for k, v in row.items() if k in columns or k == "region"}


def write_rows(out: io.StringIO, columns: list[str], rows: list[dict[str, object]]) -> None:
    writer = csv.DictWriter(out, fieldnames=columns)
    writer.writeheader()
    for row in rows:
        writer.writerow(row)  # FAILING LINE: 'region' is not one of the profile's columns


@fallback(default="")
def export(profile: str, orders: list[Order], extra: bool = False) -> str:
    columns = PROFILES[profile]
    out = io.StringIO()
    rows = [select(to_row(o, extra), columns) for o in orders]
    write_rows(out, columns, rows)
    return out.getvalue()


def totals(orders: list[Order]) -> dict[str, Decimal]:
    by_currency: dict[str, Decimal] = {}
    for o in orders:
        by_currency[o.currency] = by_currency.get(o.currency, Decimal(0)) + gross(o)
    return by_currency


def main(argv: list[str]) -> int:
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(message)s")
    profile = argv[0] if argv else "finance"
    text = export(profile, ORDERS, extra=True)
    log.info("%d lines exported", text.count("\n"))
    log.info("totals: %s", totals(ORDERS))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
