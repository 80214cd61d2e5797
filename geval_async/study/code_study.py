"""A study built in code: records, criteria and settings given in Python, saved as files.

A notebook holds its texts in a DataFrame and its criteria in cells. :func:`define_study` takes
them as they are (a DataFrame, a list of dicts, or the path of a records file; each
:class:`Criterion` with its prompt's text or file; the judge and every setting under the
config's own names), and :meth:`CodeStudy.save` writes the study a config file describes: the
config, the records (as JSONL, unless they are a file already) and one prompt file a criterion.

Settings have one way in: the saved config is read back by :func:`~.config.load_config`, the
same reader, checks and errors as a study written by hand, and the prompts' texts are the
files' texts, so a study built in code and the same study written as files send the same
requests and share their cached answers. Everything is written to a folder beside the target
and checked there first (the config read, the records' first pass, every template filled), so
bad input leaves nothing half-written; its one-line error names the argument that caused it
(``n=500: [sampling] 'n' must be at most 128``, ``Criterion('con'): [criteria #1 'con'] ...``,
``records: row 3, record 'r3': field 'text' is missing``).
"""

from __future__ import annotations

import hashlib
import math
import os
import shutil
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from ..errors import ConfigError
from .config import parse_config
from .criteria import CRITERION_KEYS
from .prepare import prepare_study
from .sections import SECTION_KEYS
from .toml_text import toml_text

__all__ = ["SETTINGS", "CodeStudy", "Criterion", "define_study", "id_text"]

# Each keyword setting and the [table] key it is: every key of [judge], [sampling] and
# [limits] under its own name, and the few of [data], [cache] and [output].
SETTINGS: dict[str, tuple[str, str]] = {
    **{key: ("judge", key) for key in sorted(SECTION_KEYS["judge"])},
    **{key: ("sampling", key) for key in sorted(SECTION_KEYS["sampling"])},
    **{key: ("limits", key) for key in sorted(SECTION_KEYS["limits"])},
    "id": ("data", "id"),
    "group": ("data", "group"),
    "condition": ("data", "condition"),
    "writer": ("data", "writer"),
    "limit": ("data", "limit"),
    "cache": ("cache", "path"),
    "output": ("output", "path"),
    "prefix": ("output", "prefix"),
}
# Sections given whole, as a dict in the file's words (stats={"conditions": ["A", "B"]}).
TABLES = ("composite", "stats", "meta", "panel", "prices", "bias")
RECORDS_FILE = "records.jsonl"
# The key is read from the environment at run time, never taken as a value: a study saved
# from code is a config file to publish, and its errors are printed in notebooks.
KEY_GIVEN = (
    "{argument}: the API key itself is not taken (it would be saved with the study): set an "
    "environment variable to it and name the variable, api_key_env='OPENAI_API_KEY'"
)


class Criterion:
    """One criterion, as a ``[[criteria]]`` table of the config says it.

    Args:
        name: the criterion's name (it names its output files).
        prompt: the prompt's text, or the path of its file (a path names an existing file).
        scale: the rating scale, e.g. ``(1, 5)``.
        fields: the record fields the prompt's placeholders receive: a list of names, or
            placeholder -> field.
        keys: any other key of a ``[[criteria]]`` table, under its name (``kind``, ``points``,
            ``labels``, ``parser``, ``rubrics``, ``definition``, ``task``, ``steps``, ...).
    """

    def __init__(
        self,
        name: str,
        prompt: str | os.PathLike[str] | None = None,
        *,
        scale: tuple[int, int] | Sequence[int] | None = None,
        fields: Sequence[str] | Mapping[str, str] = (),
        **keys: Any,
    ) -> None:
        self.name, self.prompt, self.scale, self.keys = name, prompt, scale, keys
        self.fields = dict(fields) if isinstance(fields, Mapping) else list(fields)

    def __repr__(self) -> str:
        return f"Criterion({self.name!r})"

    def table(self, prompt_file: str | None) -> dict[str, Any]:
        """The ``[[criteria]]`` table, its prompt read from ``prompt_file``."""
        table: dict[str, Any] = {"name": self.name}
        if prompt_file is not None:
            table["template" if "definition" in self.keys else "prompt"] = prompt_file
        if self.scale is not None:
            table["scale"] = list(self.scale)
        if self.fields:
            table["fields"] = self.fields
        table |= {k: v for k, v in self.keys.items() if k not in ("prompt", "template")}
        if isinstance(table.get("parts"), Mapping):
            table["parts"] = {name: self._part(name, v) for name, v in table["parts"].items()}
        return table

    def _part(self, name: str, value: Any) -> Any:
        """A fixed part as text: a part ``{"file": path}`` (the working folder's path, which
        the saved config's folder would not find) read as the config reads it."""
        if not (isinstance(value, Mapping) and set(value) == {"file"}):
            return value
        path = Path(os.fspath(value["file"])).expanduser()
        try:
            return path.read_text(encoding="utf-8-sig").strip("\n")
        except (OSError, UnicodeDecodeError) as exc:
            raise ConfigError(f"{self!r}: part {name!r}: cannot read {path} ({exc})") from exc

    def prompt_text(self) -> str | None:
        """The prompt's text (or, given by definition, its form template's); None: none."""
        given = self.keys.get("template") if "definition" in self.keys else self.prompt
        if given is None:
            return None
        if isinstance(given, str) and not _names_file(given):
            return given
        path = Path(os.fspath(given)).expanduser()
        try:
            return path.read_text(encoding="utf-8-sig")
        except FileNotFoundError:
            raise ConfigError(f"{self!r}: prompt file {path} not found") from None
        except (OSError, UnicodeDecodeError) as exc:
            raise ConfigError(f"{self!r}: cannot read the prompt file {path} ({exc})") from exc


def _names_file(text: str) -> bool:
    """A one-line text that names an existing file, or reads as a file's name."""
    if "\n" in text or "{" in text:
        return False
    return Path(text).expanduser().is_file() or text.strip().endswith((".txt", ".md"))


@dataclass(frozen=True)
class CodeStudy:
    """A study built in code (:func:`define_study`), to be saved as files and run."""

    records: Any  # a DataFrame, a sequence of dicts, or a records file's path
    criteria: tuple[Criterion, ...]
    judge: str | Mapping[str, Any] | Sequence[Mapping[str, Any]] | None
    name: str
    settings: Mapping[str, Any]

    @property
    def records_path(self) -> Path | None:
        """The records file, when the records are one (None: held in Python)."""
        if isinstance(self.records, str | os.PathLike):
            return Path(os.fspath(self.records)).expanduser().resolve()
        return None

    def save(self, folder: str | os.PathLike[str]) -> Path:
        """Write the study to ``folder``: ``<name>.toml``, ``records.jsonl`` (records held in
        Python; a records file is named by its path) and ``prompts/<criterion>.txt``. Returns
        the config's path; ``geval-async run`` runs it.

        Raises:
            ConfigError: an argument is invalid (the message names it); nothing is written.
        """
        folder = Path(folder).resolve()
        return self._write(folder, *self._content(folder))

    def save_by_content(self, base: str | os.PathLike[str]) -> Path:
        """Save the study to a folder of ``base`` named by its content,
        ``<name>-<digest>``: the same study always gets the same folder, and is written
        once (a notebook's cell run again writes nothing); another gets a folder of its own,
        so results read from an earlier one keep their records. Returns the config's path.
        """
        base = Path(base).resolve()
        # The content's relative paths are the same in every folder of ``base``.
        document, files = self._content(base / self.name)
        digest = hashlib.sha256(toml_text(document).encode("utf-8"))
        for name in sorted(files):
            digest.update(name.encode("utf-8") + b"\0" + files[name])
        folder = base / f"{self.name}-{digest.hexdigest()[:12]}"
        config = folder / f"{self.name}.toml"
        return config if config.is_file() else self._write(folder, document, files)

    def _write(self, folder: Path, document: dict[str, Any], files: dict[str, bytes]) -> Path:
        folder.parent.mkdir(parents=True, exist_ok=True)
        config_name = f"{self.name}.toml"
        files = {**files, config_name: toml_text(document).encode("utf-8")}
        staging = Path(tempfile.mkdtemp(prefix=f".{folder.name}-", dir=folder.parent))
        try:
            for name, content in files.items():
                (staging / name).parent.mkdir(parents=True, exist_ok=True)
                (staging / name).write_bytes(content)
            self._check(document, staging / config_name, folder)
            for name in files:
                (folder / name).parent.mkdir(parents=True, exist_ok=True)
                os.replace(staging / name, folder / name)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
        return folder / config_name

    def _check(self, document: Mapping[str, Any], source: Path, folder: Path) -> None:
        """Read the staged config and prepare its study, as a run will; ConfigError naming
        the argument (not the staged file) when anything is wrong."""
        try:
            config = parse_config(document, source)
            prepare_study(config)
        except ConfigError as exc:
            raise self._named(str(exc), source, folder) from None

    def _named(self, message: str, source: Path, folder: Path) -> ConfigError:
        staged_records = f"{source.parent / RECORDS_FILE}: "
        if message.startswith(staged_records):  # records held in Python: a row's number
            rest = message.removeprefix(staged_records).replace("line ", "row ")
            return ConfigError(f"records: {rest}")
        for criterion in self.criteria:  # its prompt file, as the template's checks name it
            staged_prompt = f"{source.parent / _prompt_file(criterion)}: "
            if message.startswith(staged_prompt):
                return ConfigError(f"{criterion!r}: {message.removeprefix(staged_prompt)}")
        if not message.startswith(f"{source}: "):
            return ConfigError(message.replace(str(source.parent), str(folder)))
        rest = message.removeprefix(f"{source}: ")
        for tag, argument in sorted(self._arguments().items(), key=lambda kv: -len(kv[0])):
            if rest.startswith(tag):
                return ConfigError(f"{argument}: {rest}")
        return ConfigError(f"{self.name}: {rest}")

    def _arguments(self) -> dict[str, str]:
        """How a config error's start ("[sampling] 'n'") names the argument it came from."""
        named: dict[str, str] = {}
        for keyword, value in self.settings.items():
            if keyword in SETTINGS:
                section, key = SETTINGS[keyword]
                named[f"[{section}] {key!r}"] = _argument(keyword, value)
                named.setdefault(f"[{section}]", _argument(keyword, value))
            else:
                named[f"[{keyword}]"] = _argument(keyword, value)
        for number, criterion in enumerate(self.criteria, start=1):
            named[f"[criteria #{number}"] = repr(criterion)
        named["[judge]"] = named["[judges]"] = _argument("judge", self.judge)
        return named

    def _content(self, folder: Path) -> tuple[dict[str, Any], dict[str, bytes]]:
        """The config document for a study saved in ``folder``, and the files beside it
        (relative name -> bytes)."""
        files: dict[str, bytes] = {}
        records = self.records_path
        data: dict[str, Any] = {"path": _relative(records, folder) if records else RECORDS_FILE}
        if records is None:
            files[RECORDS_FILE] = records_jsonl(self.records, self.settings)
        sections: dict[str, dict[str, Any]] = {"data": data}
        judges = _judge_tables(self.judge)
        if isinstance(judges, dict):
            sections["judge"] = judges
        for section in ("sampling", "limits"):
            sections[section] = {}
        sections["cache"] = {"path": "cache"}
        sections["output"] = {"path": "out"}
        for keyword, value in self.settings.items():
            if keyword in SETTINGS:
                section, key = SETTINGS[keyword]
                if section in ("cache", "output") and key == "path":
                    value = os.fspath(value)
                sections.setdefault(section, {})[key] = value
        # Paths given in code are the working folder's, as a flag's are; the file's are its own.
        for section in ("cache", "output"):
            sections[section]["path"] = _relative(Path(sections[section]["path"]), folder)
        document: dict[str, Any] = {k: v for k, v in sections.items() if v}
        document |= {k: v for k, v in self.settings.items() if k in TABLES}
        # Another judge's scores file, named in code: the working folder's path too.
        judge_files = document.get("meta", {}).get("judges")
        if isinstance(judge_files, Mapping):
            document["meta"] = {
                **document["meta"],
                "judges": {
                    name: {**table, "path": _relative(Path(os.fspath(table["path"])), folder)}
                    if isinstance(table, Mapping)
                    and isinstance(table.get("path"), str | os.PathLike)
                    else table
                    for name, table in judge_files.items()
                },
            }
        tables = []
        for criterion in self.criteria:
            text = criterion.prompt_text()
            prompt_file = None
            if text is not None:
                prompt_file = _prompt_file(criterion)
                files[prompt_file] = text.encode("utf-8")
            tables.append(criterion.table(prompt_file))
        document["criteria"] = tables
        if isinstance(judges, list):
            document["judges"] = judges
        return document, files


def define_study(
    records: Any,
    criteria: Criterion | Iterable[Criterion],
    *,
    judge: str | Mapping[str, Any] | Sequence[Mapping[str, Any]] | None = None,
    name: str = "study",
    **settings: Any,
) -> CodeStudy:
    """A study built in code; :meth:`CodeStudy.save` writes it as files.

    Args:
        records: a pandas DataFrame, a list of dicts, or the path of a records file (JSON,
            JSONL, CSV, TSV or Parquet). Without an ``id`` column (and no ``id`` setting that
            names another), a row's id is its index (a DataFrame's) or its position.
        criteria: one :class:`Criterion` or several.
        judge: the judge's model name, a ``[judge]`` table as a dict, or a panel: a list of
            ``[[judges]]`` tables.
        name: the study's name: its config file's stem and its output files' prefix.
        settings: any key of ``[judge]``, ``[sampling]`` and ``[limits]`` under its name
            (``base_url``, ``api_key_env``, ``n``, ``mode``, ``temperature``, ``rpm``,
            ``concurrency``, ...); ``id``, ``group``, ``condition``, ``writer``, ``limit``;
            ``cache`` and ``output`` (folders, relative to the working folder); ``prefix``;
            and the tables ``composite``, ``stats``, ``meta``, ``panel``, ``prices``,
            ``bias`` as dicts.

    Raises:
        ConfigError: an argument of the wrong kind or an unknown setting.
    """
    if "api_key" in settings:
        raise ConfigError(KEY_GIVEN.format(argument="api_key"))
    tables = (
        [judge] if isinstance(judge, Mapping) else [] if isinstance(judge, str | None) else judge
    )
    if any(isinstance(table, Mapping) and "api_key" in table for table in tables):
        raise ConfigError(KEY_GIVEN.format(argument="judge"))
    unknown = sorted(set(settings) - set(SETTINGS) - set(TABLES))
    if unknown:
        # Named, not shown: an unknown keyword's value may be a secret (token=..., key=...).
        raise ConfigError(
            f"{unknown[0]}: unknown setting (known: {', '.join(sorted([*SETTINGS, *TABLES]))})"
        )
    chosen = (criteria,) if isinstance(criteria, Criterion) else tuple(criteria)
    for criterion in chosen:
        if not isinstance(criterion, Criterion):
            raise ConfigError(f"criteria: {criterion!r} is not a Criterion(name, prompt, ...)")
        unknown = sorted(set(criterion.keys) - CRITERION_KEYS)
        if unknown:
            raise ConfigError(
                f"{criterion!r}: unknown key {unknown[0]!r} (known keys: "
                f"{', '.join(sorted(CRITERION_KEYS))})"
            )
    if not isinstance(records, str | os.PathLike | Sequence) and not hasattr(records, "columns"):
        raise ConfigError(
            f"records: a DataFrame, a list of dicts or a file's path, not {type(records).__name__}"
        )
    if judge is None and "model" not in settings and "deployment" not in settings:
        raise ConfigError("judge: name the judge's model (judge='gpt-4o-mini'), or a panel")
    return CodeStudy(records, chosen, judge, name, dict(settings))


def _argument(keyword: str, value: Any) -> str:
    """How an error names the argument ``keyword=value``: with its value, except where the
    value may carry the key (a header, a judge's table, the key's variable given the key)."""
    if keyword in ("api_key_env", "headers") or (keyword == "judge" and not isinstance(value, str)):
        return keyword
    return f"{keyword}={value!r}"


def _prompt_file(criterion: Criterion) -> str:
    return f"prompts/{criterion.name}.txt"


def _judge_tables(
    judge: str | Mapping[str, Any] | Sequence[Mapping[str, Any]] | None,
) -> dict[str, Any] | list[dict[str, Any]]:
    if judge is None:
        return {}
    if isinstance(judge, str):
        return {"model": judge}
    if isinstance(judge, Mapping):
        return dict(judge)
    tables = [dict(j) for j in judge if isinstance(j, Mapping)]
    if isinstance(judge, Sequence) and tables and len(tables) == len(judge):
        return tables
    raise ConfigError(f"judge={judge!r}: a model name, a dict, or a list of dicts (a panel)")


def _relative(path: Path, folder: Path) -> str:
    """``path`` (the working folder's when relative) as the saved config names it."""
    target = Path(os.path.abspath(path.expanduser()))
    try:
        return Path(os.path.relpath(target, folder)).as_posix()
    except ValueError:  # another drive (Windows): only the full path reaches it
        return str(target)


def records_jsonl(records: Any, settings: Mapping[str, Any]) -> bytes:
    """Records held in Python as the JSONL a records file holds: one object a row, the id,
    group and condition as text, a missing value (None, NaN) left out."""
    id_field, named_id = str(settings.get("id", "id")), "id" in settings
    keys = [str(settings[k]) for k in ("group", "condition") if settings.get(k)]
    if hasattr(records, "columns"):  # a pandas DataFrame
        rows: Iterable[tuple[Any, Any]] = zip(
            records.index, records.to_dict(orient="records"), strict=True
        )
    else:
        rows = enumerate(records)
    lines = []
    for position, row in rows:
        if not isinstance(row, Mapping):
            raise ConfigError(f"records: row {position + 1}: a record must be a dict")
        fields = {str(k): v for k, v in row.items() if not _missing(v)}
        if id_field in fields or not named_id:  # ids of their own, or the rows' positions
            fields[id_field] = id_text(fields.get(id_field, position))
        for key in keys:
            if key in fields:
                fields[key] = id_text(fields[key])
        lines.append(orjson.dumps(fields, option=orjson.OPT_SERIALIZE_NUMPY, default=str))
    return b"\n".join(lines) + b"\n"


def id_text(value: Any) -> str:
    """An id (or group, condition) as text, as ``str`` writes it (a NumPy number as the
    Python number it holds: ``7``, ``7.0``), as a Parquet file's number id is read."""
    if isinstance(value, str):
        return value
    if hasattr(value, "item") and hasattr(value, "dtype"):  # a NumPy scalar
        value = value.item()
    return str(value)


def _missing(value: Any) -> bool:
    if value is None:
        return True
    if isinstance(value, float):
        return math.isnan(value)
    # pandas' own markers of a missing value (NA, NaT), without importing pandas here
    return type(value).__name__ in ("NAType", "NaTType")
