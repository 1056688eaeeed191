"""Realistic web activity for the demo: page views of users in two data centers.

Role: the demo's producers. Visits follow each region's day (busy evenings, quiet nights, in that
region's time zone), a visit walks a shop's funnel (home → search → product → cart → checkout) with
most visitors leaving early, time on page is long-tailed, and the first view of a visit carries a
referrer. Events fit conf/pipelines/page_views.yaml (user_id, page, referrer, duration_ms, ts) and
carry more fields that pipeline does not read (data center, country, device), as real events do.
A few are broken the ways real ones are: a page that is not a path (quarantined by the output's
expectations) and a truncated message (quarantined by the load). Same seed, same events.
"""

from __future__ import annotations

import json
import math
import random
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import NamedTuple

FUNNEL = (
    ("/", ("/search", "/product/{n}", "/help")),
    ("/search", ("/product/{n}", "/search", "/")),
    ("/product/{n}", ("/cart", "/product/{n}", "/search")),
    ("/cart", ("/checkout", "/product/{n}")),
    ("/checkout", ("/checkout/done",)),
    ("/help", ("/", "/search")),
)
NEXT = dict(FUNNEL)
REFERRERS = ("", "", "https://www.google.com/", "https://news.example/", "https://social.example/", "email")
DEVICES = ("desktop", "mobile", "mobile", "tablet")


@dataclass(frozen=True, slots=True)
class DataCenter:
    """One region: its cluster's name, its users (disjoint id ranges) and its time zone offset."""

    name: str
    countries: tuple[str, ...]
    first_user: int
    users: int
    utc_offset_hours: int


DATA_CENTERS = (
    DataCenter("us-east", ("US", "CA", "BR", "MX"), 1, 3000, -5),
    DataCenter("eu-west", ("DE", "FR", "GB", "ES", "NL"), 100_001, 3000, 1),
)


class Message(NamedTuple):
    """One page view as produced: keyed by user (a user's views stay in order in one partition),
    timestamped with the view's time (CreateTime), so rewinding to a time finds it."""

    key: bytes
    value: bytes
    timestamp_ms: int


def _busyness(moment: datetime, utc_offset_hours: int) -> float:
    """Relative traffic at ``moment`` in a region: low at 4 am, highest around 8 pm local time."""
    local_hour = (moment.hour + moment.minute / 60 + utc_offset_hours) % 24
    return 0.15 + 0.85 * (1 + math.cos((local_hour - 20) / 24 * 2 * math.pi)) / 2


def activity(
    center: DataCenter, start: datetime, end: datetime, count: int, *, seed: int = 11, broken_every: int = 2500
) -> list[Message]:
    """About ``count`` JSON page views in ``center`` between ``start`` and ``end``, in time order
    (the order a data center's log receives them); every ``broken_every``-th one is broken."""
    rng = random.Random(f"{seed}-{center.name}")
    span = (end - start).total_seconds()
    views: list[tuple[datetime, dict[str, object]]] = []
    while len(views) < count:
        moment = start + timedelta(seconds=rng.random() * span)
        if rng.random() > _busyness(moment, center.utc_offset_hours):
            continue  # visits are drawn in proportion to the hour's traffic
        user = center.first_user + rng.randrange(center.users)
        country, device = rng.choice(center.countries), rng.choice(DEVICES)
        page, referrer = "/", rng.choice(REFERRERS)
        for _ in range(rng.choice((1, 1, 2, 3, 4, 6, 9))):
            if moment >= end:
                break
            product = rng.randrange(1, 400)
            concrete = page.format(n=product)
            duration = int(min(rng.lognormvariate(9.6, 0.9), 600_000))  # median ~15 s, long tail
            views.append(
                (
                    moment,
                    {
                        "user_id": user,
                        "page": concrete,
                        "referrer": referrer,
                        "duration_ms": duration,
                        "ts": moment.isoformat(timespec="milliseconds"),
                        "dc": center.name,
                        "country": country,
                        "device": device,
                    },
                )
            )
            if page not in NEXT or rng.random() < 0.35:
                break  # most visits end early
            moment += timedelta(milliseconds=duration + rng.randrange(500, 4000))
            page, referrer = rng.choice(NEXT[page]), ""
    views.sort(key=lambda item: item[0])
    out = []
    for index, (moment, view) in enumerate(views[:count]):
        if broken_every and index % broken_every == broken_every // 2:
            view["page"] = "javascript:void(0)"  # a tracking bug: not a path
        encoded = json.dumps(view, separators=(",", ":")).encode()
        if broken_every and index % (broken_every * 4) == broken_every * 3:
            encoded = encoded[: len(encoded) // 2]  # a truncated write upstream: not JSON
        out.append(Message(str(view["user_id"]).encode(), encoded, int(moment.timestamp() * 1000)))
    return out
