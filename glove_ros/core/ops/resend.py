"""When to re-send a request that was not answered (planner -> memory, after a restart).

A server that was just restarted answers a request only once it has matched the client's
reply reader; discovery may list it (and the dead one) before that, and a reply sent
earlier is dropped. Waiting a fixed ``call_timeout`` before each re-send made the first
request after a memory-node restart take ~10.5 s (two lost 5 s tries). Re-sending after
short waits that double (1, 2, 4 s, ... capped at the per-try limit), while still taking
the answer to any earlier copy, finds the new server within about a second of its match;
the total patience stays what ``call_timeout`` x (1 + ``call_retries``) gave before.

Re-sending must be safe for the request: the memory node stores a re-sent transition once
(``ExperienceStore.find_resent``).
"""

from __future__ import annotations


def resend_waits(per_try: float, tries: int, first: float = 1.0) -> list[float]:
    """Seconds to wait for an answer after each send, in order.

    Waits start at ``first`` (at most ``per_try``) and double up to ``per_try``; there are
    as many as it takes for their sum to reach ``per_try * tries`` (the last one shortened
    to land on it). ``per_try`` > 0 and ``tries`` >= 1, else ValueError.
    """
    if not per_try > 0 or tries < 1:
        raise ValueError(f"resend_waits: per_try {per_try} must be > 0 and tries {tries} >= 1")
    total = per_try * tries
    waits: list[float] = []
    wait = min(max(first, 1e-3), per_try)
    while sum(waits) < total - 1e-9:
        waits.append(min(wait, total - sum(waits)))
        wait = min(wait * 2.0, per_try)
    return waits
