"""Object class names: one spelling per COCO class, whatever the detector or the task says.

Darknet's ``coco.names`` (YOLOv3-tiny, the detector that ships) spells six of the 80 COCO
classes differently from the COCO 2017 names that ultralytics models carry ("sofa" vs
"couch", "tvmonitor" vs "tv", ...), and a task says "table" or "television". Every label
that perception publishes, and every class a user or a task names, goes through
:func:`canonical_label`, so "find the sofa" and a "couch" detection meet.

The canonical spelling is the COCO 2017 one (ultralytics' ``coco.yaml``). The table is
deliberately small: exact alternative spellings and a few everyday words for one class,
never a guess between two classes ("glass" could be a cup or a wine glass: not listed).
"""

from __future__ import annotations

from collections.abc import Iterable

__all__ = ["COCO_CLASSES", "SYNONYMS", "canonical_label", "canonical_labels", "same_object"]

#: The 80 COCO classes, COCO 2017 spelling, in the order of their ids.
COCO_CLASSES: tuple[str, ...] = (
    "person", "bicycle", "car", "motorcycle", "airplane", "bus", "train", "truck", "boat",
    "traffic light", "fire hydrant", "stop sign", "parking meter", "bench", "bird", "cat",
    "dog", "horse", "sheep", "cow", "elephant", "bear", "zebra", "giraffe", "backpack",
    "umbrella", "handbag", "tie", "suitcase", "frisbee", "skis", "snowboard", "sports ball",
    "kite", "baseball bat", "baseball glove", "skateboard", "surfboard", "tennis racket",
    "bottle", "wine glass", "cup", "fork", "knife", "spoon", "bowl", "banana", "apple",
    "sandwich", "orange", "broccoli", "carrot", "hot dog", "pizza", "donut", "cake", "chair",
    "couch", "potted plant", "bed", "dining table", "toilet", "tv", "laptop", "mouse",
    "remote", "keyboard", "cell phone", "microwave", "oven", "toaster", "sink",
    "refrigerator", "book", "clock", "vase", "scissors", "teddy bear", "hair drier",
    "toothbrush",
)

#: other spelling -> canonical COCO 2017 name. The first six are Darknet's coco.names.
SYNONYMS: dict[str, str] = {
    "motorbike": "motorcycle",
    "aeroplane": "airplane",
    "sofa": "couch",
    "pottedplant": "potted plant",
    "diningtable": "dining table",
    "tvmonitor": "tv",
    # everyday words a task uses for one class
    "television": "tv",
    "monitor": "tv",
    "table": "dining table",
    "plant": "potted plant",
    "houseplant": "potted plant",
    "fridge": "refrigerator",
    "phone": "cell phone",
    "mobile phone": "cell phone",
    "cellphone": "cell phone",
    "smartphone": "cell phone",
    "mug": "cup",
    "hair dryer": "hair drier",
    "doughnut": "donut",
    "teddy": "teddy bear",
    "ball": "sports ball",
    "people": "person",
    "human": "person",
}


def canonical_label(name: str) -> str:
    """The canonical spelling of a class name: lower case, single spaces, ``_``/``-`` read
    as spaces, synonyms mapped (``"TV_Monitor"`` -> ``"tv"``, ``"sofa"`` -> ``"couch"``).

    A name that is neither a COCO class nor a synonym comes back normalised but otherwise
    unchanged (a custom model's "block" stays "block").
    """
    key = " ".join(name.replace("_", " ").replace("-", " ").lower().split())
    if key in SYNONYMS:
        return SYNONYMS[key]
    squashed = key.replace(" ", "")
    return SYNONYMS.get(squashed, key)


def canonical_labels(names: Iterable[str]) -> tuple[str, ...]:
    """:func:`canonical_label` of each name, duplicates dropped, order kept; blanks skipped."""
    out: list[str] = []
    for n in names:
        if n.strip():
            c = canonical_label(n)
            if c not in out:
                out.append(c)
    return tuple(out)


def same_object(a: str, b: str) -> bool:
    """Whether two class names mean the same class (``same_object("sofa", "couch")``)."""
    return canonical_label(a) == canonical_label(b)
