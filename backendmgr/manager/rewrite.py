"""One rewrite of the llama-swap config, in two steps: :func:`stage` reads what is there and
checks everything it will write (the record of the last write, a hand edit, the text and what
llama-swap would read of it), writing nothing; :meth:`Staged.commit` then writes. A change
stages under the config lock before it writes the config (:meth:`.generate.Generator.change`),
so a rewrite that would be refused leaves the config as it was too."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..changes import generated
from ..digest import sha256_hex
from ..errors import Refused, VerificationError

if TYPE_CHECKING:
    from ..api_models import GenerateResult
    from ..emit.document import Document
    from ..emit.plan import Entry, Skip
    from ..emit.regen import Current
    from .models import Plan

__all__ = ["Rewrite", "Staged", "stage"]


class Rewrite:
    """What one run of ``generate`` did, before it is a :class:`GenerateResult`: a change's
    regeneration reads only its warnings, and loads no result class for them."""

    __slots__ = (
        "backup",
        "message",
        "models",
        "models_changed",
        "skipped",
        "target",
        "warnings",
        "written",
    )

    def __init__(self, target: Path, models: int, skipped: list[Skip]) -> None:
        self.target = target
        self.models = models
        self.skipped = skipped
        self.message = f"{target} is up to date"
        self.written = False
        self.backup: str | None = None
        self.models_changed: list[str] | None = None  # set when the file is written
        self.warnings: list[str] = []

    def result(self) -> GenerateResult:
        """``generate``'s result: the keys a document shows are those the run set."""
        from ..api_models import GenerateResult, SkippedModel

        done: dict[str, Any] = {}
        if self.backup is not None:
            done["backup"] = self.backup
        if self.written:
            done["models_changed"] = self.models_changed
        result = GenerateResult(
            message=self.message,
            changed=self.written,
            output=str(self.target),
            written=self.written,
            models=self.models,
            skipped=[
                SkippedModel(id=s.id, reason=s.reason)
                for s in sorted(self.skipped, key=lambda s: s.id)
            ],
            **done,
        )
        result.warn(*self.warnings)
        return result


def rewrite_of(plan: Plan, target: Path, entries: int) -> Rewrite:
    """A run of ``generate`` from ``plan`` (``entries`` models written) that has written
    nothing yet."""
    rewrite = Rewrite(target, entries, _skipped(plan))
    rewrite.warnings += plan.found.stopped  # a models folder a walk's bound stopped
    return rewrite


def _skipped(plan: Plan) -> list[Skip]:
    """The models ``plan`` leaves out: those planned as skipped, and those discovery skipped."""
    from ..emit.plan import Skip

    skipped = [p for p in plan.plans if isinstance(p, Skip)]
    return skipped + [Skip(s.id, s.path, s.reason) for s in plan.found.skipped]


def render(plan: Plan, entries: list[Entry], skipped: list[Skip] | None = None) -> Document:
    """The document ``generate`` writes from ``plan`` (``entries``: its entries)."""
    from .._version import __version__
    from ..emit.document import build_document

    return build_document(
        version=__version__,
        inputs_hash=plan.digest,
        health_check_timeout=plan.settings.health_check_timeout,
        passthrough=plan.settings.llama_swap,
        entries=entries,
        skipped=_skipped(plan) if skipped is None else skipped,
    )


class Staged:
    """A rewrite read and checked, not written: :meth:`commit` writes it (nothing when
    ``body`` is None: the file is up to date)."""

    __slots__ = ("body", "current", "edited", "models", "record", "rewrite")

    def __init__(self, rewrite: Rewrite, record: Path, current: Current) -> None:
        self.rewrite = rewrite
        self.record = record  # where the digest of what is written is kept
        self.current = current  # what is at the output now, read once
        self.body: bytes | None = None  # the text to write
        self.models: dict[str, Any] = {}  # its models, as the text was proved to read back
        self.edited: str | None = None  # :func:`..emit.regen.hand_edit` of the file there

    def commit(self) -> None:
        """Keep a hand-edited file as ``.bak``, then write the text and its record (blocking)."""
        from .._fs import atomic_write_bytes
        from ..emit.regen import keep_copy, record_written

        body, rewrite, record = self.body, self.rewrite, self.record
        if body is None:
            return
        target = rewrite.target
        if self.edited is not None and target.is_file():
            backup = keep_copy(target)
            rewrite.backup = str(backup)
            rewrite.warnings.append(f"{target} {_edited(self.edited)}; kept that copy as {backup}")
        digest = sha256_hex(body)
        before = _old_models(record, target, self.current)
        atomic_write_bytes(target, body, files_only=True)  # a FIFO there is someone's pipe
        record_written(record, digest)
        _keep_models(record, target, body, digest, self.models)
        rewrite.written = True
        rewrite.models_changed = _changed_models(before, self.models)
        generated(target, rewrite.models_changed)
        rewrite.message = f"wrote {target}: {rewrite.models} models, {len(rewrite.skipped)} skipped"


def _edited(why: str) -> str:
    """How a warning says the file was edited (``why``: :func:`..emit.regen.hand_edit`'s)."""
    return f"may have been modified by hand ({why})" if why else "was modified by hand"


def stage(
    plan: Plan, target: Path, home: Path, *, force: bool, config: Path | None = None
) -> Staged:
    """What a rewrite of ``target`` from ``plan`` will write, with everything that could
    refuse it checked first (blocking): a record of the last write that cannot be replaced
    (:class:`Refused`), a text llama-swap would not read (:class:`VerificationError`).
    ``home``: the data home the record is kept in; ``config``: the config file a change
    writes after this, named as unchanged too when the text is refused."""
    from ..emit.document import dump
    from ..emit.regen import hand_edit, read_current, read_record, written_record
    from ..emit.verify import reread_emitted

    current = read_current(target)  # the file as it is now, read and hashed once
    record = written_record(home, target)
    recorded = read_record(record)
    if recorded.refusal is not None:
        raise Refused(recorded.refusal)
    entries = plan.entries()
    staged = Staged(rewrite_of(plan, target, len(entries)), record, current)
    edited = hand_edit(recorded, current)
    if current.header == plan.digest and not force and edited is None:
        return staged
    document = render(plan, entries, staged.rewrite.skipped)
    text = dump(document)
    # what llama-swap would read: the text re-read, its shape, its macros (issue 28)
    data, wrong = reread_emitted(document, text)
    if wrong or data is None:
        unchanged = f"{config} and {target} are" if config is not None else f"{target} is"
        raise VerificationError(
            f"the llama-swap config would be invalid: {wrong[0]}; {unchanged} unchanged"
        )
    staged.body = text.encode()
    if edited is not None:  # the file holds exactly what is written now: ours, record or not
        staged.edited = hand_edit(recorded, current, staged.body)
    models = data.get("models")
    staged.models = models if isinstance(models, dict) else {}
    return staged


def _parsed_path(record: Path) -> Path:
    """Where the models of the file last written are kept, parsed, beside its record."""
    return record.with_name(record.stem + ".parsed.json")


def _old_models(record: Path, target: Path, current: Current) -> dict[str, Any] | None:
    """The models of the file about to be replaced (``current``: its bytes, read once), to
    say which entries changed: the kept parse when its bytes are those backendmgr wrote, else
    the file parsed (bounded). An absent or unreadable file has none; None: it is no YAML
    mapping of models."""
    from .._yaml import parser_name
    from ..config.snapshot import load_parsed

    if current.raw is None or current.digest is None:
        return {}
    parser = f"{parser_name()} safe"
    kept = load_parsed(_parsed_path(record), target, current.raw, parser, digest=current.digest)
    if kept is not None:
        return kept
    return _models_of(current.raw.decode("utf-8", "replace"))


def _keep_models(
    record: Path, target: Path, body: bytes, digest: str, models: dict[str, Any]
) -> None:
    """Keep what was just written as parsed (an input of the next rewrite's comparison,
    stamped with ``digest``, the SHA-256 of ``body``, the bytes it came from: a hand edit or
    another version is parsed again). ``models`` is what the text was proved to read back
    as: plain data."""
    from .._yaml import parser_name
    from ..config.snapshot import save_parsed

    parser = f"{parser_name()} safe"
    save_parsed(_parsed_path(record), target, body, parser, models, digest=digest, plain=True)


def _models_of(text: str) -> dict[str, Any] | None:
    """The models of a file backendmgr did not just write (a hand edit): bounded first, as any
    user YAML is (libyaml's composer would crash the process on a deep enough nesting)."""
    from .._yaml import load_yaml

    try:
        data = load_yaml(text, "the llama-swap config")
    except Exception:  # a file edited into nonsense: every entry counts as changed
        return None
    models = data.get("models") if isinstance(data, dict) else None
    return models if isinstance(models, dict) else None


def _changed_models(old: dict[str, Any] | None, new: dict[str, Any]) -> list[str]:
    """The ids whose llama-swap entries the rewrite added, removed or changed (``old``
    None: the old file was no mapping of models, so every entry counts)."""
    if old is None:
        return sorted(new)
    return sorted(str(k) for k in set(old) | set(new) if old.get(k) != new.get(k))
