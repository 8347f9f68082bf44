"""The config file's YAML, round trip (ruamel): parsed with line numbers for errors, and
rewritten by editing only the values that changed, so comments, key order and quoting survive.
Loaded only by what parses or edits the file; a read of an unchanged config takes the parsed
snapshot instead (:mod:`.snapshot`)."""

from __future__ import annotations

import dataclasses
import io
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap, CommentedSeq
from ruamel.yaml.error import YAMLError
from ruamel.yaml.scalarbool import ScalarBoolean

from .._yaml import check_yaml, yaml_problem
from ..errors import ConfigError, did_you_mean, escaped, validation_problem
from ..record import Record, validate
from .models import BackendRow, ModelOverride, Settings

if TYPE_CHECKING:
    from pydantic import ValidationError

__all__ = [
    "LoadedConfig",
    "desired_document",
    "empty",
    "parse",
    "plain",
    "render",
    "render_document",
    "settings_of",
]


class LoadedConfig:
    """A config file as an edit needs it: its settings, its YAML document (comments kept),
    its bytes and its indentation."""

    __slots__ = ("doc", "indent", "raw", "settings")

    def __init__(
        self,
        settings: Settings,
        doc: CommentedMap | None,
        raw: bytes,
        indent: tuple[int, int, int],
    ) -> None:
        self.settings = settings
        self.doc = doc
        self.raw = raw
        self.indent = indent


def empty() -> LoadedConfig:
    """No config file: the defaults, and nothing to keep."""
    return LoadedConfig(Settings(), None, b"", (2, 4, 2))


def _yaml(indent: tuple[int, int, int]) -> YAML:
    yaml = YAML(typ="rt")
    yaml.preserve_quotes = True
    yaml.width = 4096
    mapping, sequence, offset = indent
    yaml.indent(mapping=mapping, sequence=sequence, offset=offset)
    return yaml


def _guess_indent(text: str) -> tuple[int, int, int]:
    """Find how the user indents nested mappings and block sequences, so edits look like theirs.

    Returns ruamel's ``(mapping, sequence, offset)``; a file without nesting gets ``(2, 4, 2)``.
    """
    mapping: int | None = None
    offset: int | None = None
    previous_indent: int | None = None
    previous_opens = False
    for line in text.splitlines():
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        indent = len(line) - len(line.lstrip(" "))
        if previous_opens and previous_indent is not None:
            step = indent - previous_indent
            is_item = stripped.startswith("- ") or stripped == "-"
            if is_item and step >= 0 and offset is None:
                offset = step
            elif not is_item and step > 0 and mapping is None:
                mapping = step
        if mapping is not None and offset is not None:
            break
        previous_indent = indent + (2 if stripped.startswith("- ") else 0)
        previous_opens = stripped.endswith(":")
    mapping = mapping or 2
    offset = 2 if offset is None else offset
    return (mapping, offset + 2, offset)


def parse(path: Path, raw: bytes, known: Settings | None = None) -> LoadedConfig:
    """The document of ``raw`` (the file at ``path``) and its settings: ``known`` (what these
    exact bytes were validated to before), else validated now."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not UTF-8 text (byte {exc.start})") from exc
    try:
        check_yaml(text, str(path), pure=True)  # the round-trip loader's own parser
        doc = _yaml((2, 4, 2)).load(text)
    except RecursionError as exc:
        raise ConfigError(f"{path}: nested too deep to read; flatten the YAML") from exc
    except (YAMLError, ValueError) as exc:  # ValueError: a scalar no conversion takes
        raise ConfigError(yaml_problem(str(path), exc)) from exc
    if doc is None:
        return LoadedConfig(Settings(), None, raw, _guess_indent(text))
    if not isinstance(doc, CommentedMap):
        raise ConfigError(f"{path} line 1: the config must be a mapping of keys to values")
    settings = known if known is not None else settings_of(path, doc)
    return LoadedConfig(settings, doc, raw, _guess_indent(text))


def settings_of(path: Path, doc: CommentedMap) -> Settings:
    """The settings ``doc`` (the YAML document of the file at ``path``) says, validated by
    pydantic; raises :class:`ConfigError` with the line at fault."""
    try:
        settings = validate(Settings, plain(doc))
    except RecursionError as exc:
        raise ConfigError(f"{path}: nested too deep to read; flatten the YAML") from exc
    except ValueError as exc:
        from pydantic import ValidationError

        if not isinstance(exc, ValidationError):
            raise
        raise ConfigError(_describe(path, doc, exc)) from exc
    _check_unique_ids(path, doc, settings)
    return settings


def plain(node: Any) -> Any:
    """The document as plain data. An anchored ``true`` or ``false`` is a ``ScalarBoolean``,
    which is an ``int``: taken as it is, it reached llama-swap's file as ``1``, which a boolean
    field there refuses. It is a ``bool`` here, as the same value without an anchor is."""
    if isinstance(node, dict):
        return {str(k): plain(v) for k, v in node.items()}
    if isinstance(node, list):
        return [plain(v) for v in node]
    if isinstance(node, ScalarBoolean):
        return bool(node)
    return node


def _line_of(doc: CommentedMap, loc: tuple[int | str, ...]) -> int:
    """The 1-based line of the deepest node along ``loc`` that exists in the document."""
    line = 1
    node: Any = doc
    for part in loc:
        try:
            if isinstance(node, CommentedMap) and part in node:
                line = node.lc.key(part)[0] + 1
                node = node[part]
            elif isinstance(node, CommentedSeq) and isinstance(part, int) and part < len(node):
                line = node.lc.item(part)[0] + 1
                node = node[part]
            else:
                break
        except (KeyError, TypeError, AttributeError):
            break
    return line


def _describe(path: Path, doc: CommentedMap, exc: ValidationError) -> str:
    """The one reading (:func:`validation_problem`) with the line it points at."""
    problem = validation_problem(exc)
    line = _line_of(doc, problem.loc)
    if problem.kind in ("extra_forbidden", "missing") and problem.loc:
        said = "unknown" if problem.kind == "extra_forbidden" else "missing"
        parent = problem.field.removesuffix(str(problem.loc[-1])).rstrip(".")
        where = f" in {parent}" if parent else ""
        key = str(problem.loc[-1])
        hint = did_you_mean(key, _keys_at(problem.loc)) if said == "unknown" else ""
        return f'{path} line {line}: {said} key "{escaped(key, 200)}"{where}{hint}'
    return problem.line(f"{path} line {line}")


def _keys_at(loc: tuple[int | str, ...]) -> list[str]:
    """The keys allowed where ``loc`` points: the file's top level, a row, or a model's
    overrides (for "did you mean" on a mistyped key)."""
    model: type[Record] = Settings
    if len(loc) == 3 and loc[0] == "backends":
        model = BackendRow
    elif len(loc) == 3 and loc[0] == "models":
        model = ModelOverride
    elif len(loc) != 1:
        return []
    return [f.name for f in dataclasses.fields(model)]


def _check_unique_ids(path: Path, doc: CommentedMap, settings: Settings) -> None:
    seen: set[str] = set()
    for index, row in enumerate(settings.backends):
        if row.id in seen:
            line = _line_of(doc, ("backends", index))
            raise ConfigError(f'{path} line {line}: duplicate backend id "{row.id}"')
        seen.add(row.id)


# --- writing ---------------------------------------------------------------------------------


def desired_document(loaded: LoadedConfig, settings: Settings) -> dict[str, Any]:
    """What the file should say: every key the user wrote, plus every non-default value."""
    present = set(loaded.doc) if loaded.doc is not None else set()
    defaults = Settings()
    out: dict[str, Any] = {}
    for name in (f.name for f in dataclasses.fields(Settings)):
        value = getattr(settings, name)
        if name not in present and value == getattr(defaults, name):
            continue
        if name == "backends":
            out[name] = [row.to_yaml() for row in value]
        elif name == "models":
            out[name] = {mid: ov.to_yaml() for mid, ov in value.items() if not ov.is_empty()}
        else:
            out[name] = value
    return out


def render(loaded: LoadedConfig, settings: Settings) -> bytes:
    """The new file bytes: the user's document with only the changed values edited."""
    return render_document(loaded, settings)[1]


def render_document(loaded: LoadedConfig, settings: Settings) -> tuple[CommentedMap, bytes]:
    """:func:`render`, and the document those bytes hold (for the parsed snapshot)."""
    desired = desired_document(loaded, settings)
    doc = loaded.doc if loaded.doc is not None else CommentedMap()
    if loaded.doc is None and not desired:
        return doc, loaded.raw
    _merge_map(doc, desired)
    buf = io.StringIO()
    _yaml(loaded.indent).dump(doc, buf)
    return doc, _leading_comments(loaded) + buf.getvalue().encode("utf-8")


def _leading_comments(loaded: LoadedConfig) -> bytes:
    """A file with no document (only comments) keeps its comments above the first values.

    The parser attaches no comment to an empty document, so they are carried over as text:
    comment and blank lines only, never a marker or a ``null`` that would end the document.
    """
    if loaded.doc is not None or not loaded.raw.strip():
        return b""
    lines = loaded.raw.decode("utf-8").splitlines()
    kept = [line for line in lines if not line.strip() or line.lstrip().startswith("#")]
    text = "\n".join(kept).strip("\n")
    return (text + "\n").encode("utf-8") if text else b""


def _is_blank(value: Any) -> bool:
    return value is None or value is False or value == ""


def _to_node(value: Any) -> Any:
    if isinstance(value, dict):
        node = CommentedMap()
        for k, v in value.items():
            node[k] = _to_node(v)
        return node
    if isinstance(value, list):
        return CommentedSeq(_to_node(v) for v in value)
    return value


def _merge_value(old: Any, new: Any) -> Any:
    if isinstance(old, CommentedMap) and isinstance(new, dict):
        _merge_map(old, new)
        return old
    if isinstance(old, CommentedSeq) and isinstance(new, list):
        _merge_seq(old, new)
        return old
    value = plain(old)
    if value == new and isinstance(value, bool) == isinstance(new, bool):
        return old  # 22 and 22.0 are the same value: keep the user's spelling
    return _to_node(new)


def _merge_map(node: CommentedMap, desired: dict[str, Any]) -> None:
    for key in list(node):
        if key not in desired and not _is_blank(node[key]):
            del node[key]
    for key, value in desired.items():
        if key in node:
            merged = _merge_value(node[key], value)
            if merged is not node[key]:
                node[key] = merged
        else:
            node[key] = _to_node(value)


def _row_key(item: Any) -> Any:
    return item.get("id") if isinstance(item, dict) else None


def _merge_seq(node: CommentedSeq, desired: list[Any]) -> None:
    """Edit a list in place, reusing items matched by ``id`` so their comments travel along."""
    keyed = all(isinstance(v, dict) and "id" in v for v in desired) and all(
        isinstance(v, CommentedMap) for v in node
    )
    if keyed:
        by_id = {_row_key(item): item for item in node}
        new_items = []
        for value in desired:
            old = by_id.get(value["id"])
            new_items.append(_merge_value(old, value) if old is not None else _to_node(value))
        if [id(i) for i in new_items] != [id(i) for i in node]:
            node[:] = new_items
        return
    if plain(node) != desired:
        node[:] = [_to_node(v) for v in desired]
