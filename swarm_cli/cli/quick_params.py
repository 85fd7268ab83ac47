"""Typer's value coercion without pydantic for the values a run gives most often.

Typer (0.2x, with its own click) checks every parameter's value through a pydantic
``TypeAdapter`` built on first use, even for a value of ``None``; importing pydantic and
building one adapter per option costs a run a tenth of a second or more of CPU before
its first call. For a value the adapter would pass through unchanged (``None``, a string
for a ``str`` option, a number or flag of its own type), or a choice or path that Typer
checks with its own functions anyway, the same result is had directly; anything else
(an error to report, a parser, a date, a list) goes to Typer's own adapter, built then,
so every message and every value stays Typer's.

``install(command)`` does it for one command's parameters. With a Typer that has no such
coercion (before 0.2x), or whose coercion has another shape than this module knows
(``fits``), it does nothing, and Typer checks every value as it would anyway.
"""

from __future__ import annotations

import dataclasses
import inspect
import re
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

try:
    from typer._coercion import RuntimeParam, build_runtime_param
    from typer._param_types import coerce_cli_choice, coerce_cli_path, routes_to_path
except Exception:  # pragma: no cover - an older Typer coerces through click alone
    RuntimeParam = None  # type: ignore[assignment,misc]

_SAME_TYPE = (str, bool, int, float)
# Numbers written plainly (ASCII digits, a point), which int() and float() read as pydantic does.
_PLAIN = {
    int: re.compile(r"[0-9]+").fullmatch,
    float: re.compile(r"[0-9]+(?:\.[0-9]+)?").fullmatch,
}


# The shape of Typer's coercion this module stands in for: the fields of RuntimeParam
# and how RuntimeParam.coerce calls _coerce_value.
_FIELDS = ("parameter_info", "annotation")
_COERCE_VALUE = ("self", "value", "param", "ctx")


def fits(runtime_param: Any) -> bool:
    """True if Typer's ``RuntimeParam`` has the shape this module was written against;
    with any other Typer, every value goes to Typer's own coercion."""
    try:
        fields = tuple(f.name for f in dataclasses.fields(runtime_param))
        called = tuple(inspect.signature(runtime_param._coerce_value).parameters)
    except Exception:
        return False
    return fields == _FIELDS and called == _COERCE_VALUE


class _Unsure(Exception):
    """The quick path cannot tell: Typer's own coercion decides."""


def _within(number: Any, info: Any) -> bool:
    """True if a number passes the option's bounds as it is (no clamping to do)."""
    low, high = info.min, info.max
    return (low is None or number >= low) and (high is None or number <= high)


if RuntimeParam is not None and not fits(RuntimeParam):
    RuntimeParam = None  # type: ignore[assignment,misc]

if RuntimeParam is not None:

    @dataclass(frozen=True)
    class QuickRuntimeParam(RuntimeParam):
        """Typer's coercion of one parameter, its adapter built only when needed."""

        descriptor: Any = None
        _real: list[Any] = field(default_factory=list, compare=False, repr=False)

        def real(self) -> Any:
            if not self._real:
                self._real.append(build_runtime_param(self.descriptor))
            return self._real[0]

        def _coerce_value(self, value: Any, param: Any, ctx: Any) -> Any:
            # RuntimeParam.coerce has already answered None and refused a lone string
            # for a many-valued parameter.
            try:
                return self._quick(value, param, ctx)
            except (_Unsure, AttributeError, TypeError):  # a Typer that moved on, too
                return self.real()._coerce_value(value, param=param, ctx=ctx)

        def _quick(self, value: Any, param: Any, ctx: Any) -> Any:
            """The value as Typer would give it, or ``_Unsure``: Typer's adapter decides."""
            info = self.parameter_info
            annotation = self.annotation
            if info.parser is None and self.descriptor.file_annotation is None:
                if annotation in (int, float) and type(value) is str and _PLAIN[annotation](value):
                    value = annotation(value)  # as pydantic reads them; the bounds below
                if annotation in _SAME_TYPE and type(value) is annotation:
                    if annotation in (str, bool) or _within(value, info):
                        return value
                elif isinstance(annotation, type) and issubclass(annotation, Enum):
                    try:
                        return coerce_cli_choice(
                            value,
                            choices=list(annotation),
                            case_sensitive=info.case_sensitive,
                            ctx=ctx,
                        )
                    except ValueError as exc:
                        # Said plainly: Typer's adapter would say it behind pydantic's
                        # "Value error, ".
                        import typer

                        raise typer.BadParameter(str(exc), ctx=ctx, param=param) from None
                    except Exception:
                        pass  # Typer's adapter says what is wrong
                elif annotation not in _SAME_TYPE and routes_to_path(annotation, info):
                    path_type = info.path_type
                    if path_type is None and isinstance(annotation, type):
                        path_type = annotation
                    try:
                        return coerce_cli_path(
                            value, info, path_type=path_type, param=param, ctx=ctx
                        )
                    except Exception:
                        pass
            raise _Unsure


def install(params: list[Any]) -> None:
    """Give each Typer parameter of ``params`` the quick coercion (before its first use);
    ``None`` and parameters of other kinds are passed over."""
    if RuntimeParam is None:
        return  # pragma: no cover
    for param in params:
        descriptor = getattr(param, "type_descriptor", None)
        if descriptor is None or getattr(param, "_runtime_param", True) is not None:
            continue
        try:
            quick = QuickRuntimeParam(
                parameter_info=descriptor.parameter_info,
                annotation=descriptor.annotation,
                descriptor=descriptor,
            )
        except Exception:  # pragma: no cover - a Typer that moved on: its own coercion
            return
        param._runtime_param = quick


def install_for(command: Any, ctx: Any) -> None:
    """``install`` for a click command's parameters and its help option, as it parses.

    Called then rather than at construction: Typer adds options (completion) afterwards."""
    install([*command.params, command.get_help_option(ctx)])
