"""Where bundled files (worlds, config, scenarios) live, and where glove_ros writes its own.

Bundled files: the source checkout, the pip package data or the ROS install. Written files
(the demo's output and memory): the checkout's ``build/`` when running from a checkout,
else the user's data folder, never the current folder, so a command gives the same path
whatever folder it runs in.
"""

from __future__ import annotations

import os
from pathlib import Path

_SOURCE_ROOT = Path(__file__).resolve().parent.parent


def share_dirs() -> list[Path]:
    """Directories that may hold ``worlds/``, ``config/``, ``bench/``, in search order.

    ``GLOVE_ROS_ROOT``, the source checkout, ``glove_ros/data`` (what ``pip install``
    packages) and the ROS package's share directory.
    """
    dirs: list[Path] = []
    env = os.environ.get("GLOVE_ROS_ROOT")
    if env:
        dirs.append(Path(env))
    dirs.append(_SOURCE_ROOT)
    dirs.append(Path(__file__).resolve().parent / "data")  # pip install: package data
    try:  # an installed ROS package (colcon workspace or system install)
        from ament_index_python.packages import get_package_share_directory

        dirs.append(Path(get_package_share_directory("glove_ros")))
    except Exception:  # ament_index missing or package not installed: fine
        pass
    return dirs


def resolve_bundled(name: str, folder: str, suffix: str = ".yaml") -> Path:
    """Resolve ``name`` as a path, else as a bundled file ``folder/name[suffix]``.

    Raises FileNotFoundError listing the bundled choices.
    """
    p = Path(name).expanduser()
    if p.is_file():
        return p
    candidates = [name] if name.endswith(suffix) else [name + suffix, name]
    for base in share_dirs():
        for c in candidates:
            q = base / folder / c
            if q.is_file():
                return q
    available = sorted({f.stem for base in share_dirs() if (base / folder).is_dir()
                        for f in (base / folder).glob(f"*{suffix}")})
    raise FileNotFoundError(
        f"no file '{name}' and no bundled {folder[:-1] if folder.endswith('s') else folder} "
        f"of that name; bundled: {', '.join(available) or 'none found'}"
    )


def resolve_world(name: str) -> Path:
    """A world file path from a path or a bundled world name (e.g. ``jetrover_maze``)."""
    return resolve_bundled(name, "worlds")


def resolve_config(name: str) -> Path:
    """A config file path from a path or a bundled config name (e.g. ``sim``)."""
    return resolve_bundled(name, "config")


def checkout_root() -> Path | None:
    """The source checkout this package runs from (its ``package.xml`` beside the
    ``glove_ros`` package), or None for a pip or ROS install."""
    root = _SOURCE_ROOT
    if (root / "package.xml").is_file() and (root / "glove_ros" / "__init__.py").is_file():
        return root
    return None


def data_dir() -> Path:
    """Absolute folder for what glove_ros writes (demo output, its memory database).

    The checkout's ``build/`` when running from a source checkout, else
    ``$XDG_DATA_HOME/glove_ros`` (``~/.local/share/glove_ros``).
    """
    root = checkout_root()
    if root is not None:
        return root / "build"
    base = os.environ.get("XDG_DATA_HOME") or "~/.local/share"
    return (Path(base).expanduser() / "glove_ros").absolute()


def make_private_dirs(folder: str | os.PathLike[str]) -> None:
    """Create ``folder`` and every missing parent with mode 0700 (memory is private to its
    owner). ``Path.mkdir(mode=..., parents=True)`` gives the mode to the last folder only;
    here each folder created gets it. Folders that exist keep their modes."""
    missing: list[Path] = []
    p = Path(folder)
    while not p.exists() and p != p.parent:
        missing.append(p)
        p = p.parent
    for d in reversed(missing):
        try:
            d.mkdir(mode=0o700)
        except FileExistsError:  # made meanwhile by another process: fine
            pass
