# reprobot corpus: nested_closures
# Exercises: closures three levels deep (a factory returning a validator factory returning a
#   checker), nonlocal counters, a lambda captured in a dict, functools.partial over a closure,
#   a schedule built from month numbers shifted by an offset computed in an outer scope.
# Expected failure: calendar.IllegalMonthError: bad month number 13; must be 1-12
#   raised by `calendar.monthrange(...)` in make_schedule.<locals>.for_year.<locals>.days_in
#   (line 42, marked FAILING LINE).
# Ideal result (2 statements):
#   import calendar
#   calendar.monthrange(2024, 13)
from __future__ import annotations

import calendar
import functools
from typing import Callable

BILLING_OFFSET = 1
MONTHS = [10, 11, 12]


def make_counter() -> tuple[Callable[[], int], Callable[[], int]]:
    count = 0

    def bump() -> int:
        nonlocal count
        count += 1
        return count

    def read() -> int:
        return count

    return bump, read


def make_schedule(offset: int) -> Callable[[int], Callable[[int], int]]:
    bump, read = make_counter()

    def for_year(year: int) -> Callable[[int], int]:
        def days_in(month: int) -> int:
            bump()
            shifted = month + offset
            return calendar.monthrange(year, shifted)[1]  # FAILING LINE: December + 1 is month 13
        return days_in

    for_year.calls = read  # type: ignore[attr-defined]
    return for_year


def make_formatter(width: int) -> Callable[[str, int], str]:
    def fmt(label: str, value: int) -> str:
        return f"{label:<{width}}{value:>4}"
    return fmt


FORMATS: dict[str, Callable[[int], str]] = {
    "short": lambda n: str(n),
    "long": lambda n: f"{n} days",
}


def totals(days_of: Callable[[int], int], months: list[int]) -> list[int]:
    out = []
    for m in months:
        out.append(days_of(m))
    return out


def unused_closure() -> Callable[[], str]:
    secret = "never"

    def inner() -> str:
        return secret
    return inner


def main() -> None:
    schedule = make_schedule(BILLING_OFFSET)
    days_of = schedule(2024)
    fmt = functools.partial(make_formatter(8), "days")
    counts = totals(days_of, MONTHS)
    for c in counts:
        print(fmt(c), FORMATS["long"](c))
    print("calls", schedule.calls())  # type: ignore[attr-defined]


main()
