# reprobot corpus: map_filter
# Exercises: calls through builtin higher-order functions: map over a parser, filter with a
#   predicate, sorted(key=...), functools.reduce summing parsed values, a lambda and a
#   method used as callables; the price list is read from a table of strings.
# Expected failure: ValueError: Invalid literal for Fraction: '1.5.2'
#   raised by `fractions.Fraction(text)` in parse_price
#   (line 44, marked FAILING LINE).
# Ideal result (2 statements):
#   import fractions
#   fractions.Fraction('1.5.2')
from __future__ import annotations

import fractions
import functools
import operator
from dataclasses import dataclass

TABLE = """
sku,price,qty,active
A-1,2.50,4,yes
B-7,1.5.2,1,yes
C-3,0.75,10,no
"""


@dataclass
class Item:
    sku: str
    price: str
    qty: int
    active: bool


def parse_row(line: str) -> Item:
    sku, price, qty, active = line.split(",")
    return Item(sku, price, int(qty), active == "yes")


def is_active(item: Item) -> bool:
    return item.active


def parse_price(text: str) -> fractions.Fraction:
    return fractions.Fraction(text)  # FAILING LINE: a typo in the price column


def line_total(item: Item) -> fractions.Fraction:
    return parse_price(item.price) * item.qty


def by_sku(item: Item) -> str:
    return item.sku


class Report:
    def __init__(self, currency: str) -> None:
        self.currency = currency
        self.lines: list[str] = []

    def add(self, item: Item, total: fractions.Fraction) -> None:
        self.lines.append(f"{item.sku}: {float(total):.2f} {self.currency}")

    def render(self) -> str:
        return "\n".join(self.lines)


def rows(table: str) -> list[str]:
    lines = [line.strip() for line in table.strip().splitlines()]
    return lines[1:]


def main() -> None:
    items = list(map(parse_row, rows(TABLE)))
    active = sorted(filter(is_active, items), key=by_sku)
    late = [i for i in active if i.sku >= "B"]
    totals = list(map(line_total, late))
    grand = functools.reduce(operator.add, totals, fractions.Fraction(0))
    report = Report("EUR")
    for item, total in zip(late, totals):
        report.add(item, total)
    print(report.render())
    print("total", float(grand))
    print(sorted(map(lambda i: i.qty, items)))


if __name__ == "__main__":
    main()
