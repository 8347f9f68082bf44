"""The mechanism every operation's request shares: :class:`Arg` (one field's declaration
beyond its type and default) and :class:`Request` (the base whose ``__post_init__`` checks each
field's limits and the cross-field rule). The requests themselves are in
:mod:`backendmgr.requests`; the CLI's generator is :mod:`backendmgr.cli.options`.

Standard library only: a command line becomes a request without pydantic.
"""

import dataclasses
from collections.abc import Sized
from typing import Any, ClassVar, Final, Self

from .immutable import frozen
from .limits import Bounds

__all__ = ["Arg", "Request", "args_of"]


class Arg:
    """One field's declaration beyond its type and default: the help (the CLI's ``--help`` and
    the API schema's description), how the command line gives it, and its limits.

    ``flag`` is the option's spelling when it is not ``--field-name`` (``--no-smoke`` for
    ``smoke``); a boolean whose default is true is given by such a ``--no-…`` flag.
    ``positional`` makes it an operand. ``low``/``high`` bound a text's length (characters)
    or a list's or mapping's number of items; ``blank=False`` refuses a blank text;
    ``choices`` are the only texts it takes.
    ``api=False`` keeps a field off the HTTP API (a file named on the server: the API reads and
    writes only the configured ones); ``cli=False`` keeps it off the command line (a Python
    caller's option no command offers).

    A plain class, immutable by type (``Final``): every command makes its requests' ``Arg``
    declarations, and a dataclass would cost each start its ``__init__`` compiled (issue 30).
    typing's ``Annotated`` cache hashes one by identity; nothing prints or compares one."""

    __slots__ = (
        "api",
        "blank",
        "bounds",
        "choices",
        "cli",
        "flag",
        "help",
        "high",
        "low",
        "metavar",
        "positional",
    )

    def __init__(
        self,
        help: str,
        *,
        flag: str | None = None,
        positional: bool = False,
        metavar: str | None = None,
        bounds: Bounds | None = None,
        low: int | None = None,
        high: int | None = None,
        blank: bool = True,
        api: bool = True,
        cli: bool = True,
        choices: tuple[str, ...] | None = None,
    ) -> None:
        self.help: Final = help
        self.flag: Final = flag
        self.positional: Final = positional
        self.metavar: Final = metavar
        self.bounds: Final = bounds
        self.low: Final = low
        self.high: Final = high
        self.blank: Final = blank
        self.api: Final = api
        self.cli: Final = cli
        self.choices: Final = choices

    def option(self, name: str) -> str:
        """The option that gives field ``name``: ``flag``, else ``--name-with-dashes``."""
        return self.flag or f"--{name.replace('_', '-')}"

    def text(self, default: object = dataclasses.MISSING) -> str:
        """The help as ``--help`` and the API schema show it: ``{high}`` is the bound's top,
        ``%(default)s`` the ``default`` (when given) as a person writes it (``5``, not
        ``5.0``)."""
        said = self.help.replace("{high}", f"{self.bounds.high:g}") if self.bounds else self.help
        if default is dataclasses.MISSING:
            return said
        shown = f"{default:g}" if isinstance(default, float) else str(default)
        return said.replace("%(default)s", shown)

    def problem(self, value: object) -> str | None:
        """Why ``value`` is outside this field's limits (the words every front end prints)."""
        if value is None:
            return None
        if self.bounds is not None and isinstance(value, int | float):
            return self.bounds.problem(value)
        if self.choices is not None and value not in self.choices:
            return f"must be one of {', '.join(self.choices)}, not {value!r}"
        if isinstance(value, Sized):
            size = len(value)
            unit = "characters" if isinstance(value, str) else "items"
            if not self.blank and isinstance(value, str) and not value.strip():
                return "cannot be empty"
            if self.low is not None and size < self.low:
                return f"must have at least {self.low} {unit[:-1] if self.low == 1 else unit}"
            if self.high is not None and size > self.high:
                return f"must have at most {self.high} {unit}, not {size}"
        return None

    def __get_pydantic_json_schema__(self, schema: Any, handler: Any) -> Any:
        """The field's help and limits in the API's JSON schema (pydantic calls this)."""
        out = handler(schema)
        top = handler.resolve_ref_schema(out)
        said = self.text(top.get("default"))
        if self.flag is not None and self.flag.startswith("--no-"):
            said = f"false: {said}"  # the field is the switch the CLI's --no-… flag turns off
        top.setdefault("description", said)
        target = top
        if "anyOf" in top:  # ``X | None``: the limits belong to X
            target = next((s for s in top["anyOf"] if s.get("type") != "null"), top)
        if self.bounds is not None:
            target.update(self.bounds.json_schema())
        if self.choices is not None:
            target["enum"] = list(self.choices)
        kind = target.get("type")
        low, high = ("minLength", "maxLength") if kind == "string" else ("minItems", "maxItems")
        if kind == "object":
            low, high = "minProperties", "maxProperties"
        if self.low is not None:
            target[low] = self.low
        if self.high is not None:
            target[high] = self.high
        return out


_ARGS: dict[type, tuple[tuple[str, Arg], ...]] = {}


def args_of(cls: type) -> tuple[tuple[str, Arg], ...]:
    """Each field of request class ``cls`` with its :class:`Arg`, in declaration order."""
    found = _ARGS.get(cls)
    if found is None:
        found = tuple(
            (f.name, next(m for m in getattr(f.type, "__metadata__", ()) if isinstance(m, Arg)))
            for f in dataclasses.fields(cls)
        )
        _ARGS[cls] = found
    return found


@frozen(kw_only=True)
class Request:
    """The base of every request: made, it checks itself (each field's limits, then
    :meth:`rule`); a value it refuses is a usage error (exit 2, HTTP 422) in one line."""

    # the API's pydantic validation refuses keys a request does not name (a misspelt option)
    __pydantic_config__: ClassVar[dict[str, Any]] = {"extra": "forbid"}

    def __post_init__(self) -> None:
        problem = self.problem()
        if problem is not None:
            from .errors import UsageError

            raise UsageError(problem)

    def problem(self) -> str | None:
        """The first field outside its limits (``field: why``), else the cross-field rule's."""
        for name, arg in args_of(type(self)):
            said = arg.problem(getattr(self, name))
            if said is not None:
                return f"{name}: {said}"
        return self.rule()

    def rule(self) -> str | None:
        """A rule over several fields, said as the user should read it; none by default."""
        return None

    @classmethod
    def unchecked(cls, **values: Any) -> Self:
        """The request made without its checks, the rest defaulted: for a service that acts on
        more than a user may name at once (``prune`` uninstalling any number of builds)."""
        made = object.__new__(cls)
        for f in dataclasses.fields(cls):
            if f.name in values:
                value = values[f.name]
            elif f.default_factory is not dataclasses.MISSING:
                value = f.default_factory()
            else:
                value = f.default
            object.__setattr__(made, f.name, value)
        return made

    def fields(self) -> dict[str, Any]:
        """The request as plain data (a job's record, the API's echo)."""
        return {name: getattr(self, name) for name, _ in args_of(type(self))}
