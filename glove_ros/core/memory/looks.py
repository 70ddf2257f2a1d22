"""What a look outcome says: the one format for what the robot saw at a waypoint.

A look is remembered as ``(W, "look", outcome)``. The outcome names what the camera showed,
in one of two kinds:

``colors=blue,red``
    colour blocks (the HSV detector): a set of colour names, sorted, no counts. This is the
    format every earlier memory, bag fixture and benchmark result uses, unchanged.
``objects=cup,person*2``
    object classes of a trained detector (COCO names, :mod:`glove_ros.core.world.labels`
    spelling): sorted class names, each with ``*N`` when N >= 2 were seen in one frame
    (two people are not one). ``objects=`` is a look that saw nothing.

Everything that asks "was the cup / the red block there?" reads :func:`look_names`, so a
colour and an object class travel the same path through the verifier, the planner and the
answers. Counts are kept in the outcome (a look that saw one person where two were
remembered is a different outcome) but a name is seen or not by :func:`look_names`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

__all__ = ["LOOK_KINDS", "is_look_signature", "look_counts", "look_kind", "look_names",
           "look_signature"]

#: the two kinds of look outcome, as written before the ``=``
LOOK_KINDS = ("colors", "objects")


def look_kind(signature: str) -> str | None:
    """``"colors"`` or ``"objects"`` for a look outcome signature, None for anything else."""
    if not isinstance(signature, str) or "=" not in signature:
        return None
    kind = signature.split("=", 1)[0]
    return kind if kind in LOOK_KINDS else None


def is_look_signature(signature: str) -> bool:
    """True for ``colors=...`` and ``objects=...`` outcomes."""
    return look_kind(signature) is not None


def look_counts(signature: str) -> dict[str, int]:
    """Name -> count of a look signature (``"objects=cup,person*2"`` -> {cup: 1, person: 2};
    colours count 1 each).

    ValueError, naming the expected format, for a string that is not a look signature or
    has a malformed count (``person*0``, ``person*x``).
    """
    kind = look_kind(signature)
    if kind is None:
        raise ValueError(f"not a look outcome signature: {signature!r} (expected 'colors=' or "
                         "'objects=' followed by comma-separated names, e.g. "
                         "'colors=blue,red' or 'objects=cup,person*2')")
    out: dict[str, int] = {}
    for part in signature.split("=", 1)[1].split(","):
        part = part.strip()
        if not part:
            continue
        name, star, count = part.partition("*")
        name = name.strip()
        n = 1
        if star:
            if not count.strip().isdigit() or int(count) < 1:
                raise ValueError(f"malformed count {part!r} in look outcome {signature!r} "
                                 "(expected name*N with N >= 1)")
            n = int(count)
        if name:
            out[name] = out.get(name, 0) + n
    return out


def look_names(signature: str) -> frozenset[str]:
    """The names a look saw, counts dropped (``"objects=cup,person*2"`` -> {cup, person})."""
    return frozenset(look_counts(signature))


def look_signature(seen: Mapping[str, int] | Iterable[str], kind: str = "colors") -> str:
    """The outcome of a look that saw ``seen`` (names, or name -> count).

    ``kind="colors"`` writes a sorted set (counts ignored), exactly as colour looks always
    were; ``kind="objects"`` writes ``name*N`` for counts of 2 or more. Names with a count
    below 1, blanks and names containing ``,``, ``=`` or ``*`` are refused (ValueError), so
    every signature reads back as written.
    """
    if kind not in LOOK_KINDS:
        raise ValueError(f"look kind must be one of {', '.join(LOOK_KINDS)}, got {kind!r}")
    counts: dict[str, int] = {}
    items = seen.items() if isinstance(seen, Mapping) else ((name, 1) for name in seen)
    for name, n in items:
        name = str(name).strip()
        if not name:
            continue
        if any(c in name for c in ",=*"):
            raise ValueError(f"a seen name may not contain ',', '=' or '*': {name!r}")
        if isinstance(n, bool) or not isinstance(n, int):
            raise ValueError(f"count of {name!r} must be an integer, got {n!r}")
        if n >= 1:
            counts[name] = max(counts.get(name, 0), n)
    if kind == "colors":
        return "colors=" + ",".join(sorted(counts))
    return "objects=" + ",".join(name if n == 1 else f"{name}*{n}"
                                 for name, n in sorted(counts.items()))
