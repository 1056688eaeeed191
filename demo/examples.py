"""Events for the example pipelines (conf/pipelines/page_views.yaml, ops_metrics.yaml).

Role: deterministic generators used by the demo and the tests: the same seed gives the same events,
so a test can compute the expected warehouse rows from the events themselves.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from datetime import datetime, timedelta

PAGES = ("/", "/search", "/product/1", "/product/2", "/cart", "/checkout", "/help")
SERVICES = ("api", "auth", "checkout", "search")


def page_views(
    start: datetime, count: int, *, seed: int = 1, users: int = 5, bad_page_every: int = 0
) -> Iterator[dict[str, object]]:
    """Views of ``users`` users after ``start``, about a minute apart, with a 40-minute pause now
    and then (which ends every session); every ``bad_page_every``-th view has a page that is not
    a path. Times increase strictly."""
    rng = random.Random(seed)
    moment = start
    for i in range(count):
        moment += timedelta(seconds=2400 if rng.random() < 0.02 else rng.choice((5, 10, 30, 60, 150)))
        page = rng.choice(PAGES)
        if bad_page_every and i % bad_page_every == bad_page_every - 1:
            page = "javascript:void(0)"
        yield {
            "user_id": rng.randrange(1, users + 1),
            "page": page,
            "referrer": rng.choice(("", "https://search.example", "https://news.example")),
            "duration_ms": rng.randrange(100, 60_000),
            "ts": moment.isoformat(),
        }


def metrics(
    start: datetime, count: int, *, seed: int = 2, cpu_spike_at: int | None = None
) -> Iterator[dict[str, object]]:
    """CPU and latency samples of 3 hosts per service, 10 s apart; ``cpu_spike_at`` makes one
    sample impossible (cpu 250%)."""
    rng = random.Random(seed)
    for i in range(count):
        service = SERVICES[i % len(SERVICES)]
        yield {
            "service": service,
            "host": f"{service}-{rng.randrange(3)}",
            "cpu": 250.0 if i == cpu_spike_at else round(rng.uniform(1, 95), 2),
            "latency_ms": round(rng.lognormvariate(3, 0.6), 2),
            "ts": int((start + timedelta(seconds=10 * i)).timestamp() * 1000),
        }


def encode(events: Iterator[dict[str, object]]) -> Iterator[bytes]:
    for item in events:
        yield json.dumps(item).encode()
