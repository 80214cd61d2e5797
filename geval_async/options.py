"""The option words: every fixed set of strings a config, a flag or a cache entry may hold.

Each set is defined once, here, as a ``StrEnum``: the config reader accepts exactly these
words, argparse offers them as ``choices`` (:func:`words`), and the code that dispatches on
one compares against a member, so an unknown word fails where it enters instead of falling
through to a default branch. A member *is* its string (``SamplingMode.LOGPROBS ==
"logprobs"``), so the words stored in cache entries and written to output files are the same
bytes as before.
"""

from __future__ import annotations

from enum import StrEnum
from typing import TypeVar

from .errors import ConfigError

__all__ = [
    "AnswerForm",
    "BatchState",
    "CriterionKind",
    "EntryStatus",
    "Fractional",
    "ItemOutcome",
    "JudgeApi",
    "Left",
    "Normalization",
    "PairOrders",
    "ParserMode",
    "Provider",
    "Reason",
    "Role",
    "SamplingMode",
    "ScoreStatus",
    "StatTest",
    "StepsOrigin",
    "TemplateStyle",
    "parse_option",
    "words",
]


class SamplingMode(StrEnum):
    """``[sampling] mode``: n sampled ratings per item, or one answer with token logprobs."""

    SAMPLES = "samples"
    LOGPROBS = "logprobs"


class ReasoningEffort(StrEnum):
    """``[sampling] reasoning_effort``: how long a reasoning model thinks (the values OpenAI's
    and Gemini's chat-completions endpoints accept); unset, the body carries none."""

    NONE = "none"
    MINIMAL = "minimal"
    LOW = "low"
    MEDIUM = "medium"
    HIGH = "high"
    XHIGH = "xhigh"


class StatTest(StrEnum):
    """``[stats] test``: how two conditions are compared."""

    WELCH = "welch"
    PAIRED_T = "paired-t"
    WILCOXON = "wilcoxon"


class Normalization(StrEnum):
    """``[composite] normalize``: score / scale maximum, or (score - lo) / (hi - lo)."""

    MAX = "max"
    MINMAX = "minmax"


class PanelPool(StrEnum):
    """``[panel] pool``: how a panel's record scores are pooled from its judges' scores."""

    MEAN = "mean"  # PoLL's average pooling (Verga et al. 2024), weighted if weights are set
    MEDIAN = "median"  # weighted median if weights are set


class Provider(StrEnum):
    """``[judge] provider``: the OpenAI chat-completions form or Azure's deployment form."""

    OPENAI = "openai"
    AZURE = "azure"


class JudgeApi(StrEnum):
    """``[judge] api``: which of OpenAI's APIs carries the requests: chat completions, or the
    Responses API (``POST /v1/responses``: one request a draw), where some models live only."""

    CHAT = "chat"
    RESPONSES = "responses"


class CriterionKind(StrEnum):
    """A criterion's ``kind``: a rating (geval, likert) or yes/no rubrics combined."""

    GEVAL = "geval"
    LIKERT = "likert"
    AND = "and"
    OR = "or"
    WEIGHTED = "weighted"
    PAIRWISE = "pairwise"  # two conditions' texts of a group compared: a verdict, not a rating

    @property
    def is_rubric(self) -> bool:
        """Whether this kind asks several yes/no rubrics and combines them."""
        return self in (CriterionKind.AND, CriterionKind.OR, CriterionKind.WEIGHTED)


class PairOrders(StrEnum):
    """A pairwise criterion's ``orders``: each pair asked in both orders (the text shown
    first swapped), or in one order drawn at random (seeded) per pair."""

    BOTH = "both"
    RANDOM = "random"


class ParserMode(StrEnum):
    """A criterion's ``parser``: how a rating is read from the judge's text."""

    LENIENT = "lenient"
    GEVAL = "geval"
    REGEX = "regex"
    FUNCTION = "function"  # the config names a Python function: parser = "module:function"


class Fractional(StrEnum):
    """A criterion's ``fractional``: what a rating between two integer points ("4.5") counts as."""

    KEEP = "keep"  # the value as stated, as the original G-Eval code keeps it
    ROUND = "round"  # the nearest point, halves up
    INVALID = "invalid"


class Reason(StrEnum):
    """Why a sampled answer gave no rating (shown by ``answers``, ``status`` and the report)."""

    NO_RATING = "no_rating"
    OFF_SCALE = "off_scale"
    AMBIGUOUS = "ambiguous"
    FRACTIONAL = "fractional"
    REFUSED = "refused"  # the judge declined, or said nothing
    CUT_OFF = "cut_off"  # max_tokens ended the answer before a rating (finish_reason=length)
    BAD_LOGPROBS = "bad_logprobs"  # logprobs that are not probabilities (a string, NaN, mass > 1)
    LOW_MASS = "low_mass"  # logprobs: too little of the first token's mass on ratings


class AnswerForm(StrEnum):
    """A criterion's ``answer``: the judge answers the point's value or its option number."""

    VALUE = "value"
    OPTION = "option"


class Role(StrEnum):
    """A criterion's ``role``: the chat role the filled prompt is sent as."""

    USER = "user"
    SYSTEM = "system"


class TemplateStyle(StrEnum):
    """A criterion's ``style``: ``{{name}}`` placeholders or single-brace ``{name}`` parts."""

    DOUBLE = "double"
    FORMAT = "format"


class StepsOrigin(StrEnum):
    """Where a criterion's evaluation steps come from (``geval-async steps`` prints it)."""

    GENERATED = "generated"  # asked of the judge once, stored in the cache
    CONFIG = "config"  # written out in the config's ``steps``
    PROMPT = "prompt file"  # inside the criterion's own prompt file


class EntryStatus(StrEnum):
    """A cache entry's ``status`` (stored on disk: these values never change)."""

    OK = "ok"
    REJECTED = "rejected"


class ItemOutcome(StrEnum):
    """What became of one item in a run."""

    OK = "ok"
    REJECTED = "rejected"
    FAILED = "failed"
    STOPPED = "stopped"
    IN_BATCH = "in batch"  # a live batch job holds its request: not sent online


class Left(StrEnum):
    """Where an item of the plan stands before a run: what is left to send (judging/left)."""

    CACHED = "cached"
    REFUSED = "refused"
    IN_BATCH = "in batch"  # what it lacks, a live batch job is asking for
    TO_SEND = "to send"


class BatchState(StrEnum):
    """How far a batch job's submit got, as its ledger record says (see judging/batch)."""

    PREPARING = "preparing"
    UPLOADED = "uploaded"
    SUBMITTED = "submitted"


class ScoreStatus(StrEnum):
    """One record's result on one criterion, as the scoring stage reports it."""

    SCORED = "scored"
    MISSING = "missing"
    REFUSED = "refused"
    NO_VALID = "no valid rating"


def words(options: type[StrEnum]) -> list[str]:
    """The words of a set, as plain strings (argparse ``choices``, help texts)."""
    return [member.value for member in options]


_Option = TypeVar("_Option", bound=StrEnum)


def parse_option(options: type[_Option], value: str, what: str) -> _Option:
    """The member of ``options`` spelt ``value``.

    Raises:
        ConfigError: ``value`` is not one of the words, named as ``what`` (e.g. "test").
    """
    try:
        return options(value)
    except ValueError:
        raise ConfigError(
            f"{what} must be one of {', '.join(words(options))}, not {value!r}"
        ) from None
