"""What the secret scanner costs: ordinary texts, and texts built to make a pattern backtrack.

``python -m benchmarks.bench_secrets [--calls N]``: CPU per ``SecretScanner.find`` (the fake runs it on
a propose's content, justification, topic, source and headers; the SDK before sending), the least of
five rounds. The adversarial texts are 8 KB (the content's limit) of what each kind of pattern could
take twice: blanks after a pattern's first word, repeated keys and separators, long runs of a token's
characters. The contract promises (``contracts/secret-patterns.json``, its description) that none of
them costs more than milliseconds.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

from lucy_memory._contract import SecretScanner

LIMIT = 8192  # the content's limit in UTF-8 bytes

ORDINARY = {
    "a propose's content (54 characters)": "The team approved Postgres 16 for the billing service.",
    "an SDK idempotency key": "lm-3f9a1c7e5b2d8f4a6c0e9b1d3f5a7c9e",
    "prose, 120 characters": (
        "We deploy with Kubernetes 1.29 on GKE; the staging cluster is in europe-west1 and uses"
        " Postgres 16 behind PgBouncer."
    ),
    "the same with an accent": (
        "We deploy with Kubernetes 1.29 on GKE; the staging cluster is in europe-west1 and uses"
        " Postgres 16 behind PgBouncer. é"
    ),
    "8 KB of prose": ("The team approved Postgres 16 for the billing service. " * 160)[:LIMIT],
    "8 KB of accented prose": ("Café — naïve résumé “quoted” text. " * 260)[:LIMIT],
}


def _fill(head: str, unit: str) -> str:
    return (head + unit * LIMIT)[:LIMIT]


ADVERSARIAL = {
    "password for + blanks": _fill("password for", " "),
    "password of + tabs": _fill("password of", "\t"),
    "password is + blanks + a zero-width space": _fill("password is", " ")[:-1] + "\u200b",
    "curl + repeated -u": _fill("curl ", "-u "),
    "curl -u + one long user": _fill("curl -u ", "a"),
    "repeated host:port:": _fill("", "a:1:"),
    "a Docker auth of one long run": _fill('"auth": "', "AAAA"),
    "repeated A_TOKEN=": _fill("", "A_TOKEN="),
    "repeated password:": _fill("", "password:"),
    "repeated api_key=": _fill("", "api_key="),
    "api_key: + dotted words": _fill("api_key: ", "a."),
    "repeated 'password for x is '": _fill("", "password for x is "),
    "digits and :AA": _fill("", "12345678:AA"),
    "32 hexadecimal digits and -us, repeated": _fill("", "0123456789abcdef" * 2 + "-us"),
    "repeated lucy_ (each starts a token's 43 characters)": _fill("", "lucy_"),
}


def cost_us(find: Callable[[str], object], text: str, calls: int) -> float:
    """CPU µs per call, the least of five rounds of ``calls`` calls."""
    best = float("inf")
    for _ in range(5):
        started = time.process_time()
        for _ in range(calls):
            find(text)
        best = min(best, (time.process_time() - started) / calls)
    return best * 1e6


def table(texts: dict[str, str], calls: int) -> list[str]:
    scanner = SecretScanner()
    lines = ["| text | characters | µs per find |", "|---|---:|---:|"]
    for name, text in texts.items():
        repeat = calls if len(text) < 1000 else max(1, calls // 100)
        lines.append(f"| {name} | {len(text):,} | {cost_us(scanner.find, text, repeat):,.0f} |")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=2000, help="calls per round for a short text")
    calls = parser.parse_args().calls
    print("\n".join(["Ordinary texts:", "", *table(ORDINARY, calls), ""]))
    print("\n".join(["Texts built to make a pattern backtrack:", "", *table(ADVERSARIAL, calls)]))


if __name__ == "__main__":
    main()
