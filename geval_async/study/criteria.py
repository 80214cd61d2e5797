"""Criteria: what each one asks the judge and how its answers become a score.

Every criterion is a prompt template plus a kind:

- ``geval`` (default): the judge answers a rating on an integer scale (``scale = [1, 5]``) or on
  declared points (``points = [...]``); the score is the probability-weighted rating Σ p(v)·v.
- ``likert``: the judge picks one of declared points that need not be integers
  (``points = [0, 0.5, 1]``, ``labels = ["no empathy", ...]``); the score is the chosen point, or
  with several samples / logprobs the weighted mean over points. ``answer = "option"`` has the
  judge answer the option number (1..k) instead of the value, which logprobs mode needs when a
  point such as 0.5 is not a single token.
- ``and`` / ``or`` / ``weighted``: several yes/no ``rubrics``, each its own judge request (its
  own cache entry, so editing one rubric re-asks only that rubric). AND is TRUE when every
  rubric holds, OR when any does, and weighted sums the weights of the rubrics that hold.

Templates use ``{{name}}`` placeholders (``style = "double"``, the default) or, for users of the
OpenAI cookbook's G-Eval recipe, single-brace ``{name}`` parts (``style = "format"``, with
``{{``/``}}`` as literal braces). Fixed ``parts`` (inline text or ``{ file = "..." }``) and the
automatic parts ``metric_name``, ``points`` and ``rubric`` fill placeholders that are not
record fields.

How answers are read: ``parser`` (``lenient``, ``geval``, ``regex`` with a ``pattern`` whose
group is named ``rating``, or ``module:function``, imported here so a typo fails at load),
``fractional`` (``keep`` / ``round`` / ``invalid`` for "4.5") and ``options`` (label ->
rating, for answers such as "D" or "Strongly agree").
"""

from __future__ import annotations

import importlib
import importlib.util
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

from ..errors import ConfigError
from ..options import AnswerForm, CriterionKind, Fractional, ParserMode, Role, TemplateStyle
from .definition import DEFINITION_KEYS, Definition, parse_definition
from .input_files import file_problem
from .pairing import PAIRING_KEYS, Pairing, parse_pairing
from .reader import TableReader
from .scale import Scale

# The names of a study's other output files (scoring/output/writer.py): scores/<prefix>_long.csv,
# scores/<prefix>_average.csv, plots/<prefix>_composite.png, stats/<prefix>_ttest.csv,
# _paired.csv, _pairwise.csv and _strengths.csv, plots/<prefix>_n_curve.png,
# <prefix>_report.md/.html, meta/<prefix>_meta.csv.
# (stats/<prefix>_consistency.csv shares no folder with a criterion's files, and "consistency"
# is a criterion of SummEval's: it stays a name a criterion may have.) A criterion's own files are
# scores/<prefix>_<name>.csv, raw/<prefix>_<name>.json and plots/<prefix>_<name>.png, so a
# criterion called "long" would overwrite the long table; the rest are kept out as well, so a
# name never reads as another output's. Compared case-insensitively (macOS, Windows).
RESERVED_NAMES = (
    "average",
    "composite",
    "long",
    "meta",
    "n_curve",
    "paired",
    "pairwise",
    "report",
    "strengths",
    "ttest",
)

CRITERION_KEYS = {
    "name",
    "display_name",
    "prompt",
    "scale",
    "points",
    "labels",
    "answer",
    "fields",
    "role",
    "parser",
    "pattern",
    "kind",
    "rubrics",
    "style",
    "parts",
    "fractional",
    "options",
    *PAIRING_KEYS,
    *DEFINITION_KEYS,
}


@dataclass(frozen=True)
class Rubric:
    """One yes/no question of an AND / OR / weighted-sum criterion."""

    name: str
    text: str
    weight: float = 1.0


@dataclass(frozen=True)
class CriterionConfig:
    """One criterion: template, kind, scale and the record fields it receives.

    ``fields`` maps each template placeholder to the record field that fills it; ``parts`` maps
    other placeholders to fixed text.
    """

    name: str
    display_name: str
    prompt: Path
    scale: Scale
    fields: Mapping[str, str]
    role: Role = Role.USER
    parser: ParserMode = ParserMode.LENIENT
    pattern: str | None = None
    kind: CriterionKind = CriterionKind.GEVAL
    rubrics: tuple[Rubric, ...] = ()
    labels: tuple[str, ...] = ()
    answer: AnswerForm = AnswerForm.VALUE
    style: TemplateStyle = TemplateStyle.DOUBLE
    parts: Mapping[str, str] = field(default_factory=dict)
    fractional: Fractional = Fractional.KEEP
    options: Mapping[str, float] = field(default_factory=dict)
    # parser = "module:function": the function itself, imported when the config is read.
    parser_function: Callable[[str], Any] | None = field(default=None, compare=False)
    # Given by definition (task, criterion text, steps): ``prompt`` is then its form template.
    definition: Definition | None = None
    # kind = "pairwise": what it compares and how (``fields`` are then the pair record's).
    pairing: Pairing | None = None

    @property
    def is_pairwise(self) -> bool:
        return self.pairing is not None

    @property
    def is_rubric(self) -> bool:
        return self.kind.is_rubric

    @property
    def answer_scale(self) -> Scale:
        """The scale the judge's answer is read on (before mapping to the criterion's points)."""
        if self.is_rubric:
            return Scale((0.0, 1.0))
        if self.answer == AnswerForm.OPTION:
            return Scale.integer(1, len(self.scale.points))
        return self.scale

    def points_text(self) -> str:
        """The ``{{points}}`` part: one line per point, with its label when there is one."""
        labels = self.labels or ("",) * len(self.scale.points)
        lines = []
        for number, (point, label) in enumerate(zip(self.scale.points, labels, strict=True), 1):
            value = f"{point:g}"
            head = f"{number}: {value}" if self.answer == AnswerForm.OPTION else value
            lines.append(f"{head} - {label}" if label else head)
        return "\n".join(lines)


def parse_criterion(
    source: Path, index: int, raw: Any, resolve: Callable[[str], Path]
) -> CriterionConfig:
    """Build a CriterionConfig from one ``[[criteria]]`` table ."""
    if not isinstance(raw, dict):
        raise ConfigError(f"{source}: [[criteria]] #{index} must be a table")
    name = raw.get("name")
    t = TableReader(
        source, f"criteria #{index}" + (f" {name!r}" if name else ""), raw, CRITERION_KEYS
    )
    name = t.required("name", str)
    if not name.replace("_", "").replace("-", "").isalnum():
        raise t.error(f"'name' must be letters, digits, '-' or '_' (it names files), not {name!r}")
    if name.casefold() in RESERVED_NAMES:
        raise t.error(
            f"'name' {name!r} is the name of one of the study's other output files "
            f"({', '.join(RESERVED_NAMES)}), which would overwrite this criterion's table or "
            "be overwritten by it: choose another name"
        )
    kind = t.choice("kind", CriterionKind, CriterionKind.GEVAL)
    if kind == CriterionKind.PAIRWISE:
        return _pairwise(t, name, resolve)
    for key in PAIRING_KEYS:
        if key in raw:
            raise t.error(f"{key!r} belongs to kind = 'pairwise' criteria, not to kind = {kind!r}")
    defined = parse_definition(t, resolve, rated=not kind.is_rubric)
    if defined is not None:
        definition, prompt = defined
    else:
        definition, prompt = None, resolve(t.required("prompt", str))
        if (problem := file_problem(prompt)) is not None:
            raise t.error(f"prompt file {prompt} {problem}")
    rubrics = _rubrics(t, kind)
    scale = _scale(t, kind, rubrics)
    labels = tuple(t.get("labels", list, []))
    if labels and (len(labels) != len(scale.points) or not all(isinstance(x, str) for x in labels)):
        raise t.error("'labels' must be one text per point of the scale")
    answer = t.choice("answer", AnswerForm, AnswerForm.VALUE)
    fields_value = t.get("fields", (list, dict), [])
    if isinstance(fields_value, list):
        if not all(isinstance(f, str) for f in fields_value):
            raise t.error("'fields' must be a list of record field names")
        fields = {f: f for f in fields_value}
    else:
        if not all(isinstance(v, str) for v in fields_value.values()):
            raise t.error("'fields' must map placeholders to record field names")
        fields = dict(fields_value)
    parser_word = t.get("parser", str, ParserMode.LENIENT.value)
    function = None
    if ":" in parser_word:
        function = _parser_function(t, parser_word, resolve)
        parser = ParserMode.FUNCTION
    elif parser_word in (ParserMode.LENIENT, ParserMode.GEVAL, ParserMode.REGEX):
        parser = ParserMode(parser_word)
    else:
        raise t.error(
            "'parser' must be one of lenient, geval, regex or 'module:function', "
            f"not {parser_word!r}"
        )
    pattern = t.get("pattern", str)
    if parser == ParserMode.REGEX and not pattern:
        raise t.error(
            "parser = 'regex' needs a 'pattern' with a group named rating: '(?P<rating>\\d)'"
        )
    if pattern is not None and parser != ParserMode.REGEX:
        raise t.error(f"'pattern' needs parser = 'regex' (parser is {parser_word!r})")
    if pattern is not None:
        _check_pattern(t, pattern)
    option_scale = scale if answer == AnswerForm.VALUE else Scale.integer(1, len(scale.points))
    options = _options(t, option_scale)
    if options and kind.is_rubric:
        raise t.error(f"'options' apply to rated criteria, not to kind = {kind.value!r}")
    return CriterionConfig(
        name=name,
        display_name=t.get("display_name", str, name),
        prompt=prompt,
        scale=scale,
        fields=fields,
        role=t.choice("role", Role, Role.USER),
        parser=parser,
        pattern=pattern,
        kind=kind,
        rubrics=rubrics,
        labels=labels,
        answer=answer,
        style=t.choice("style", TemplateStyle, TemplateStyle.DOUBLE),
        parts=_parts(t, resolve),
        fractional=t.choice("fractional", Fractional, Fractional.KEEP),
        options=options,
        parser_function=function,
        definition=definition,
    )


# What a pairwise criterion cannot have: its answer is a verdict between two texts, not a
# rating on a scale, and its prompt is a file of its own.
_NOT_PAIRWISE = (
    "scale",
    "points",
    "labels",
    "answer",
    "rubrics",
    "options",
    "parser",
    "pattern",
    "fractional",
    *DEFINITION_KEYS,
)


def _pairwise(t: Any, name: str, resolve: Callable[[str], Path]) -> CriterionConfig:
    """A ``kind = "pairwise"`` criterion: a prompt, shared fields and compared ones."""
    for key in _NOT_PAIRWISE:
        if key in t.table:
            raise t.error(
                f"{key!r} does not apply to kind = 'pairwise' (its judge answers which of two "
                "texts is better: A, B or a tie); remove it"
            )
    prompt = resolve(t.required("prompt", str))
    if not prompt.is_file():
        raise t.error(f"prompt file {prompt} not found")
    shared = t.get("fields", list, [])
    if not all(isinstance(f, str) for f in shared):
        raise t.error("'fields' must be a list of record field names (shared by the two texts)")
    pairing = parse_pairing(t, {f: f for f in shared})
    return CriterionConfig(
        name=name,
        display_name=t.get("display_name", str, name),
        prompt=prompt,
        scale=Scale((0.0, 1.0)),  # the share of verdicts for the text shown first
        fields=pairing.placeholders,
        role=t.choice("role", Role, Role.USER),
        kind=CriterionKind.PAIRWISE,
        style=t.choice("style", TemplateStyle, TemplateStyle.DOUBLE),
        parts=_parts(t, resolve),
        pairing=pairing,
    )


def _check_pattern(t: Any, pattern: str) -> None:
    try:
        regex = re.compile(pattern)
    except re.error as exc:
        raise t.error(f"'pattern' {pattern!r} is not a valid regex ({exc})") from exc
    if "rating" not in regex.groupindex and regex.groups != 1:
        raise t.error(
            f"'pattern' {pattern!r} needs a group named rating ((?P<rating>...)) or exactly "
            f"one capturing group; it has {regex.groups}"
        )


def _options(t: Any, scale: Scale) -> dict[str, float]:
    """``options = { A = 1, B = 2 }`` or ``{ "Strongly agree" = 5, ... }``: label -> rating."""
    raw = t.get("options", dict, {})
    options = {}
    for label, value in raw.items():
        if not label.strip():
            raise t.error("'options' labels must not be empty")
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise t.error(f"option {label!r} must map to a rating number, not {value!r}")
        if scale.point(float(value)) is None:
            raise t.error(
                f"option {label!r} = {value} is not a point of the scale "
                f"({scale.lo:g}-{scale.hi:g})"
            )
        options[label.strip()] = float(value)
    return options


def _parser_function(
    t: Any, reference: str, resolve: Callable[[str], Path]
) -> Callable[[str], Any]:
    """Import ``module:function``: an installed module, or a .py file next to the config."""
    module_name, _, name = reference.partition(":")
    if not module_name or not name.isidentifier():
        raise t.error(f"'parser' {reference!r} must be 'module:function'")
    path = resolve(module_name if module_name.endswith(".py") else f"{module_name}.py")
    try:
        if path.is_file():
            spec = importlib.util.spec_from_file_location(f"geval_parser_{path.stem}", path)
            if spec is None or spec.loader is None:
                raise ImportError(f"cannot load {path}")
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
        else:
            module = importlib.import_module(module_name)
    except Exception as exc:  # the user's module: any failure to import is a config error
        raise t.error(f"'parser' {reference!r}: cannot import {module_name} ({exc})") from exc
    function = getattr(module, name, None)
    if not callable(function):
        raise t.error(f"'parser' {reference!r}: {module_name} has no function {name!r}")
    return cast(Callable[[str], Any], function)


def _rubrics(t: Any, kind: CriterionKind) -> tuple[Rubric, ...]:
    raw = t.get("rubrics", list)
    if not kind.is_rubric:
        if raw is not None:
            raise t.error(f"'rubrics' needs kind = 'and', 'or' or 'weighted', not {kind!r}")
        return ()
    if not raw:
        raise t.error(f"kind = {kind!r} needs 'rubrics' = [{{ name = ..., text = ... }}, ...]")
    rubrics = []
    for number, item in enumerate(raw, start=1):
        if (
            not isinstance(item, dict)
            or not isinstance(item.get("name"), str)
            or not isinstance(item.get("text"), str)
            or not item["text"].strip()
        ):
            raise t.error(f"rubric #{number} needs a 'name' and a non-empty 'text'")
        unknown = sorted(set(item) - {"name", "text", "weight"})
        if unknown:
            raise t.error(
                f"rubric #{number}: unknown key {unknown[0]!r} (known: name, text, weight)"
            )
        weight = item.get("weight", 1.0)
        if kind == CriterionKind.WEIGHTED and "weight" not in item:
            raise t.error(f"rubric {item['name']!r} needs a 'weight' (kind = 'weighted')")
        if isinstance(weight, bool) or not isinstance(weight, int | float) or weight < 0:
            raise t.error(f"rubric {item['name']!r}: 'weight' must be a number >= 0")
        rubrics.append(Rubric(item["name"], item["text"], float(weight)))
    names = [r.name for r in rubrics]
    if len(set(names)) != len(names):
        raise t.error("rubric names must be unique within a criterion")
    return tuple(rubrics)


def _scale(t: Any, kind: CriterionKind, rubrics: tuple[Rubric, ...]) -> Scale:
    scale_value = t.get("scale", list)
    points_value = t.get("points", list)
    if kind.is_rubric:
        if scale_value is not None or points_value is not None:
            raise t.error(
                f"kind = {kind!r} derives its scale from the rubrics: remove 'scale' / 'points'"
            )
        top = sum(r.weight for r in rubrics) if kind == CriterionKind.WEIGHTED else 1.0
        return Scale((0.0, top)) if top > 0 else Scale((0.0,))
    if points_value is not None:
        if not points_value or not all(
            isinstance(p, int | float) and not isinstance(p, bool) for p in points_value
        ):
            raise t.error("'points' must be a non-empty list of numbers")
        if not all(abs(p) < 1e15 for p in points_value):
            raise t.error("'points' must be ordinary numbers (below 1e15 in size)")
        try:
            return Scale(tuple(sorted(float(p) for p in points_value)))
        except ConfigError as exc:
            raise t.error(f"'points': {exc}") from exc
    if kind == CriterionKind.LIKERT:
        raise t.error("kind = 'likert' needs 'points' = [...] (e.g. [0, 0.5, 1])")
    if scale_value is not None:
        if (
            len(scale_value) != 2
            or not all(isinstance(v, int) and not isinstance(v, bool) for v in scale_value)
            or scale_value[0] >= scale_value[1]
        ):
            raise t.error("'scale' must be [lowest, highest] integers, e.g. [1, 5]")
        try:
            return Scale.integer(scale_value[0], scale_value[1])
        except ConfigError as exc:  # the scale alone cannot say which file and criterion
            raise t.error(f"'scale': {exc}") from exc
    raise t.error("give the rating 'scale' = [lo, hi] (or 'points' = [...])")


def _parts(t: Any, resolve: Callable[[str], Path]) -> dict[str, str]:
    raw = t.get("parts", dict, {})
    parts = {}
    for name, value in raw.items():
        if isinstance(value, str):
            parts[name] = value
        elif isinstance(value, dict) and set(value) == {"file"} and isinstance(value["file"], str):
            path = resolve(value["file"])
            if (problem := file_problem(path)) is not None:
                raise t.error(f"part {name!r}: {path} {problem}")
            try:
                parts[name] = path.read_text(encoding="utf-8-sig").strip("\n")
            except (OSError, UnicodeDecodeError) as exc:
                raise t.error(f"part {name!r}: cannot read {path} ({exc})") from exc
        else:
            raise t.error(f'part {name!r} must be text or {{ file = "path" }}')
    return parts
