"""A test stand-in for the ROS 2 ``launch`` and ``launch_ros`` Python packages.

Neither is on PyPI (no ``ros-launch`` / ``ros-launch-ros`` wheel), so this machine cannot
import the real ones. The stand-in implements the part of their API the glove_ros launch
files use, with the same constructor keywords (an unknown keyword is a TypeError, as it is
for the real classes), and a :class:`LaunchContext` that evaluates launch arguments,
``LaunchConfiguration`` and ``OpaqueFunction`` the way ``launch.LaunchService`` does. A
``Node`` turns into the command line launch_ros would run: the installed executable,
``arguments``, then ``--ros-args`` with ``__node``, ``__ns``, one ``--params-file`` per
parameter file or dict (dicts written to a temporary YAML under ``/**``) and the remaps.

``install(monkeypatch)`` puts the stand-in modules in ``sys.modules``;
:func:`load_launch_file` imports a ``*.launch.py`` file and calls its
``generate_launch_description()``.
"""

from __future__ import annotations

import importlib.util
import sys
import tempfile
import types
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any


class LaunchDescription:
    """``launch.LaunchDescription``: a list of entities."""

    def __init__(self, initial_entities: Iterable[Any] | None = None) -> None:
        self.entities = list(initial_entities or [])


class LaunchConfiguration:
    """``launch.substitutions.LaunchConfiguration``: a launch argument's value."""

    def __init__(self, variable_name: str, *, default: str | None = None) -> None:
        self.variable_name = variable_name
        self.default = default

    def perform(self, context: LaunchContext) -> str:
        """The value in ``context`` (SubstitutionFailure in real launch when unset)."""
        value = context.launch_configurations.get(self.variable_name, self.default)
        if value is None:
            raise LookupError(f"launch configuration '{self.variable_name}' does not exist")
        return value


class DeclareLaunchArgument:
    """``launch.actions.DeclareLaunchArgument``."""

    def __init__(self, name: str, *, default_value: str | None = None,
                 description: str | None = None, choices: list[str] | None = None) -> None:
        self.name = name
        self.default_value = default_value
        self.description = description
        self.choices = choices


class OpaqueFunction:
    """``launch.actions.OpaqueFunction``: ``function(context, *args, **kwargs)`` returns
    more entities."""

    def __init__(self, *, function: Any, args: Iterable[Any] | None = None,
                 kwargs: Mapping[str, Any] | None = None) -> None:
        self.function = function
        self.args = list(args or [])
        self.kwargs = dict(kwargs or {})


class ExecuteProcess:
    """``launch.actions.ExecuteProcess``."""

    def __init__(self, *, cmd: list[Any], output: str = "log", name: str | None = None,
                 cwd: str | None = None, env: Mapping[str, str] | None = None,
                 respawn: bool = False, respawn_delay: float | None = None,
                 emulate_tty: bool = False) -> None:
        self.cmd = cmd
        self.output = output
        self.name = name
        self.cwd = cwd
        self.env = env
        self.respawn = respawn
        self.respawn_delay = respawn_delay
        self.emulate_tty = emulate_tty


class Node:
    """``launch_ros.actions.Node``."""

    def __init__(self, *, executable: str, package: str | None = None, name: str | None = None,
                 namespace: str | None = None, exec_name: str | None = None,
                 parameters: list[Any] | None = None,
                 remappings: list[tuple[str, str]] | None = None,
                 ros_arguments: list[str] | None = None, arguments: list[str] | None = None,
                 output: str = "log", respawn: bool = False,
                 respawn_delay: float | None = None, emulate_tty: bool = False) -> None:
        self.package = package
        self.executable = executable
        self.name = name
        self.namespace = namespace
        self.exec_name = exec_name
        self.parameters = list(parameters or [])
        self.remappings = list(remappings or [])
        self.ros_arguments = list(ros_arguments or [])
        self.arguments = list(arguments or [])
        self.output = output
        self.respawn = respawn
        self.respawn_delay = respawn_delay
        self.emulate_tty = emulate_tty

    def command(self, context: LaunchContext, param_dir: Path) -> list[str]:
        """The command line launch_ros would run for this node."""
        from ament_index_python.packages import get_package_prefix

        exe = Path(get_package_prefix(self.package)) / "lib" / self.package / self.executable
        cmd = [str(exe), *(context.text(a) for a in self.arguments), "--ros-args"]
        if self.name:
            cmd += ["-r", f"__node:={self.name}"]
        if self.namespace:
            cmd += ["-r", f"__ns:={self.namespace}"]
        for i, params in enumerate(self.parameters):
            if isinstance(params, Mapping):
                import yaml

                path = Path(tempfile.mkstemp(prefix=f"{self.name}_{i}_", suffix=".yaml",
                                             dir=param_dir)[1])
                path.write_text(yaml.safe_dump({"/**": {"ros__parameters": dict(params)}}))
                cmd += ["--params-file", str(path)]
            else:
                cmd += ["--params-file", context.text(params)]
        for old, new in self.remappings:
            cmd += ["-r", f"{context.text(old)}:={context.text(new)}"]
        return cmd + [context.text(a) for a in self.ros_arguments]


class PathJoinSubstitution:
    """``launch.substitutions.PathJoinSubstitution``: path parts (strings or substitutions)
    joined with ``os.path.join``."""

    def __init__(self, substitutions: Iterable[Any]) -> None:
        self.substitutions = list(substitutions)

    def perform(self, context: LaunchContext) -> str:
        """The joined path."""
        import os

        return os.path.join(*(context.text(s) for s in self.substitutions))


class FindPackageShare:
    """``launch_ros.substitutions.FindPackageShare``: a package's share directory."""

    def __init__(self, package: Any) -> None:
        self.package = package

    def perform(self, context: LaunchContext) -> str:
        """The share directory (PackageNotFoundError when the package is not installed)."""
        from ament_index_python.packages import get_package_share_directory

        return get_package_share_directory(context.text(self.package))


class PythonLaunchDescriptionSource:
    """``launch.launch_description_sources.PythonLaunchDescriptionSource``."""

    def __init__(self, launch_file_path: Any) -> None:
        self.launch_file_path = launch_file_path


class IncludeLaunchDescription:
    """``launch.actions.IncludeLaunchDescription`` (kept as an action, not expanded: the
    included file belongs to another package)."""

    def __init__(self, launch_description_source: Any, *,
                 launch_arguments: Iterable[tuple[Any, Any]] | None = None) -> None:
        self.launch_description_source = launch_description_source
        self.launch_arguments = list(launch_arguments or [])


class LaunchContext:
    """What ``launch.LaunchService`` does with a description, minus running processes:
    declares the arguments (defaults, then the given values) and expands OpaqueFunctions."""

    def __init__(self, arguments: Mapping[str, str] | None = None) -> None:
        self.launch_configurations: dict[str, str] = {}
        self._given = dict(arguments or {})

    def text(self, value: Any) -> str:
        """A string or a substitution, performed."""
        return value.perform(self) if hasattr(value, "perform") else str(value)

    def visit(self, description: LaunchDescription) -> list[Any]:
        """Every action of ``description`` in order, OpaqueFunctions replaced by what they
        return. A declared argument without a default and without a value is an error, as
        in real launch."""
        out: list[Any] = []
        pending = list(description.entities)
        while pending:
            entity = pending.pop(0)
            if isinstance(entity, DeclareLaunchArgument):
                if entity.name in self._given:
                    self.launch_configurations[entity.name] = self._given[entity.name]
                elif entity.default_value is not None:
                    self.launch_configurations[entity.name] = entity.default_value
                else:
                    raise ValueError(f"Required launch argument '{entity.name}' was not "
                                     "provided")
                out.append(entity)
            elif isinstance(entity, OpaqueFunction):
                pending = list(entity.function(self, *entity.args, **entity.kwargs) or []) \
                    + pending
            else:
                out.append(entity)
        return out


def install(monkeypatch: Any) -> None:
    """Put the stand-in ``launch`` and ``launch_ros`` modules in ``sys.modules`` (undone
    by ``monkeypatch`` after the test)."""
    modules = {
        "launch": {"LaunchDescription": LaunchDescription, "LaunchContext": LaunchContext},
        "launch.actions": {"DeclareLaunchArgument": DeclareLaunchArgument,
                           "ExecuteProcess": ExecuteProcess, "OpaqueFunction": OpaqueFunction,
                           "IncludeLaunchDescription": IncludeLaunchDescription},
        "launch.launch_description_sources": {
            "PythonLaunchDescriptionSource": PythonLaunchDescriptionSource},
        "launch.substitutions": {"LaunchConfiguration": LaunchConfiguration,
                                 "PathJoinSubstitution": PathJoinSubstitution},
        "launch_ros": {},
        "launch_ros.actions": {"Node": Node},
        "launch_ros.substitutions": {"FindPackageShare": FindPackageShare},
    }
    for name, attrs in modules.items():
        mod = types.ModuleType(name)
        mod.__dict__.update(attrs)
        monkeypatch.setitem(sys.modules, name, mod)
    sys.modules["launch"].actions = sys.modules["launch.actions"]
    sys.modules["launch"].substitutions = sys.modules["launch.substitutions"]
    sys.modules["launch"].launch_description_sources = \
        sys.modules["launch.launch_description_sources"]
    sys.modules["launch_ros"].actions = sys.modules["launch_ros.actions"]
    sys.modules["launch_ros"].substitutions = sys.modules["launch_ros.substitutions"]
    monkeypatch.delitem(sys.modules, "glove_common", raising=False)


def load_launch_file(path: Path, monkeypatch: Any) -> LaunchDescription:
    """Import ``path`` (a ``*.launch.py``) and return its ``generate_launch_description()``."""
    monkeypatch.setattr(sys, "path", list(sys.path))  # the launch file prepends its folder
    spec = importlib.util.spec_from_file_location(path.name.replace(".", "_"), path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.generate_launch_description()
