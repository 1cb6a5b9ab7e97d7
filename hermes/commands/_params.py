"""Plain CLI values without pydantic: typer >= 0.26 coerces every parameter through a pydantic
``TypeAdapter``, which costs every command line time before any work starts (importing
pydantic, building an adapter per parameter; docs/benchmarks.md).

:func:`light_params` gives each parameter of the assembled click command a coercion that takes
the values Hermes' commands use (text, a path, decimal digits, lists of them, numbers already
typed) straight, and hands anything else to typer's own coercion, built only then: the value
of a valid input is the one typer gives, and an invalid one fails with typer's own message.
On a typer that coerces without pydantic (no ``_runtime_param``), it does nothing.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

_PLAIN = (str, int, float, bool, Path)


def light_params(command: Any) -> None:
    """Give every typer parameter of ``command`` (a click group or command) the light
    coercion, unless one is set already or the typer in use has no such hook."""
    try:
        from typer._coercion import build_runtime_param
        from typer._param_types import coerce_cli_path
    except ImportError:  # pragma: no cover - a typer without pydantic coercion
        return

    def give(param: Any) -> None:
        desc = getattr(param, "type_descriptor", None)
        if desc is None or getattr(param, "_runtime_param", False) is not None:
            return
        kind = _kind(desc)
        if kind is not None:
            param._runtime_param = Light(desc, kind, build_runtime_param, coerce_cli_path)

    todo = [command]
    while todo:
        cmd = todo.pop()
        todo.extend(getattr(cmd, "commands", {}).values())
        for param in cmd.params:
            give(param)
        _wrap_help_option(cmd, give)


def _wrap_help_option(cmd: Any, give: Any) -> None:
    """The ``--help`` option is made when a context first asks for it: give it the light
    coercion then."""
    made = getattr(cmd, "get_help_option", None)
    if made is None:  # pragma: no cover - not a click command
        return

    def get_help_option(ctx: Any) -> Any:
        option = made(ctx)
        if option is not None:
            give(option)
        return option

    cmd.get_help_option = get_help_option


def _kind(desc: Any) -> tuple[type, bool] | None:
    """(element type, is a list) of a parameter the light coercion takes; None otherwise."""
    info = desc.parameter_info
    if info.parser is not None or getattr(info, "clamp", None) or desc.file_annotation:
        return None
    ann = desc.annotation
    many = getattr(ann, "__origin__", None) is list
    if many:
        args = getattr(ann, "__args__", ())
        ann = args[0] if len(args) == 1 else None
    if ann not in _PLAIN:
        return None
    if ann is Path and (info.resolve_path or info.allow_dash or info.path_type is not None):
        return None
    return ann, many


class Light:
    """typer's ``RuntimeParam.coerce`` for plain values; typer's own for the rest."""

    def __init__(self, desc: Any, kind: tuple[type, bool], build: Any, coerce_path: Any) -> None:
        self.desc = desc
        self.type, self.many = kind
        self._build = build
        self._coerce_path = coerce_path
        self._typer: Any = None
        info = desc.parameter_info
        self.lo, self.hi = info.min, info.max

    def typer(self) -> Any:
        if self._typer is None:
            self._typer = self._build(self.desc)
        return self._typer

    def coerce(self, value: Any, param: Any, ctx: Any) -> Any:
        multi = param.multiple or param.nargs == -1
        if value is None:
            return () if multi else None
        if self.many and multi and isinstance(value, (list, tuple)):
            out = [self._one(v, param, ctx) for v in value]
            if all(v is not _NO for v in out):
                return out
        elif not self.many and not multi:
            out = self._one(value, param, ctx)
            if out is not _NO:
                return out
        return self.typer().coerce(value, param=param, ctx=ctx)

    def _one(self, value: Any, param: Any, ctx: Any) -> Any:
        t = self.type
        if t is bool:
            return value if type(value) is bool else _NO
        if t is str:
            return value if type(value) is str else _NO
        if t is Path:
            if type(value) is str and "\x00" not in value:
                value = Path(value)
            if not isinstance(value, Path):
                return _NO
            return self._coerce_path(value, self.desc.parameter_info, path_type=Path,
                                     param=param, ctx=ctx)
        if type(value) is str:
            if t is not int or not _digits(value):
                return _NO
            value = int(value)
        elif type(value) is not t:  # an int default of a float option, a bool: typer decides
            return _NO
        if (self.lo is not None and value < self.lo) or (self.hi is not None and value > self.hi):
            return _NO  # out of range: typer's message
        return value


_NO = object()


def _digits(text: str) -> bool:
    """Decimal digits, an optional leading minus: text ``int()`` and pydantic read alike."""
    body = text[1:] if text[:1] == "-" else text
    return 0 < len(body) <= 4300 and body.isascii() and body.isdigit()
