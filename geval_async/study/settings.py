"""What a study is: the typed, checked settings that one config file describes.

:mod:`geval_async.study.config` builds these from a TOML file (and from overrides); every
later stage reads them and nothing else.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from functools import cached_property
from pathlib import Path
from urllib.parse import urlsplit

from ..errors import ConfigError
from ..options import (
    JudgeApi,
    Normalization,
    PanelPool,
    Provider,
    ReasoningEffort,
    SamplingMode,
    StatTest,
)
from .criteria import CriterionConfig
from .pricing import PRICES
from .shard import Shard

DEFAULT_BASE_URL = "https://api.openai.com/v1"


@dataclass(frozen=True)
class DataConfig:
    """Where the records are and which of their fields identify them."""

    path: Path
    id_field: str = "id"
    group_field: str | None = None
    condition_field: str | None = None
    # The field naming the model that wrote each text (``[data] writer``): a judge's scores of
    # its own family's texts are then set against the others' (self-preference).
    writer_field: str | None = None


@dataclass(frozen=True)
class JudgeConfig:
    """The judge endpoint: OpenAI chat-completions form or Azure OpenAI's deployment form."""

    model: str
    provider: Provider = Provider.OPENAI
    base_url: str | None = None
    api_key_env: str = "OPENAI_API_KEY"
    azure_endpoint: str | None = None
    deployment: str | None = None
    api_version: str | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    # Which API carries the requests; an endpoint that answers chat completions "only
    # supported in v1/responses" is switched to the Responses API whatever this says.
    api: JudgeApi = JudgeApi.CHAT
    # The Responses API keeps a response for 30 days unless told not to: a study's texts are
    # often private, so it is told not to unless the config says otherwise.
    store: bool = False

    @property
    def url(self) -> str:
        """The full chat-completions URL (also what the endpoint's learned facts are kept
        under, whichever API carries the requests)."""
        if self.provider == Provider.AZURE:
            endpoint = (self.azure_endpoint or "").rstrip("/")
            return (
                f"{endpoint}/openai/deployments/{self.deployment}/chat/completions"
                f"?api-version={self.api_version}"
            )
        return f"{(self.base_url or DEFAULT_BASE_URL).rstrip('/')}/chat/completions"

    @property
    def responses_url(self) -> str:
        """The full Responses API URL (Azure serves it on its v1 surface, the deployment
        named as the body's model)."""
        if self.provider == Provider.AZURE:
            return f"{(self.azure_endpoint or '').rstrip('/')}/openai/v1/responses"
        return f"{(self.base_url or DEFAULT_BASE_URL).rstrip('/')}/responses"

    @property
    def is_local(self) -> bool:
        """Whether the judge is on this machine (a local server may need no key)."""
        host = urlsplit(self.url).hostname or ""
        return host in ("127.0.0.1", "localhost", "::1") or host.startswith("127.")

    def api_key(self) -> str | None:
        """The key from the environment, or None. Never stored, logged or hashed."""
        return os.environ.get(self.api_key_env) or None

    def auth_headers(self, key: str | None) -> dict[str, str]:
        """Request headers carrying the key in this provider's form."""
        headers = dict(self.headers)
        if key:
            if self.provider == Provider.AZURE:
                headers["api-key"] = key
            else:
                headers["Authorization"] = f"Bearer {key}"
        return headers


@dataclass(frozen=True)
class SamplingConfig:
    """How each item is judged: n sampled ratings, or one answer with token logprobs."""

    mode: SamplingMode = SamplingMode.SAMPLES
    n: int = 10
    temperature: float = 1.0
    top_p: float = 1.0
    max_tokens: int = 5
    top_logprobs: int = 20
    seed: int | None = None
    # Logprobs mode: an answer with less of its first token's mass on ratings is invalid
    # (low_mass). Scoring only: not sent, not part of a cache key.
    min_valid_mass: float = 0.5
    reasoning_effort: ReasoningEffort | None = None  # None: not sent (nor part of the key)
    # Draws spent by need (samples mode, rated criteria): each item is asked ``first_draws``,
    # then more in rounds while its standard error is above ``target_se``, up to n; or the
    # study's ``draws`` are spent where the ratings disagree most. Neither changes a key: an
    # adaptive study's draws are the first draws of the fixed study with the same n.
    target_se: float | None = None
    first_draws: int = 3
    draws: int | None = None

    @property
    def choices_per_item(self) -> int:
        """How many judge answers (choices) one item needs."""
        return 1 if self.mode == SamplingMode.LOGPROBS else self.n

    @property
    def adaptive(self) -> bool:
        """Whether items get their draws by need (``target_se`` or ``draws``) rather than n."""
        return self.mode == SamplingMode.SAMPLES and (
            self.target_se is not None or self.draws is not None
        )


@dataclass(frozen=True)
class LimitsConfig:
    """Client-side limits; none of these changes an answer, so none is part of a cache key."""

    rpm: float | None = None
    tpm: float | None = None
    concurrency: int = 16
    retries: int = 8
    timeout: float = 60.0
    backoff: float = 0.5
    max_backoff: float = 60.0
    max_wait: float = 120.0  # the longest 429 wait honoured (s); a longer one stops the run
    max_answer_bytes: int = 1_000_000  # an answer body above this is refused, never stored
    # The Batch API's enqueued-token limit of the judge model (None: learned from a batch
    # that failed for it); ``run --batch`` keeps its queued tokens at or under it.
    batch_queue_tokens: int | None = None


@dataclass(frozen=True)
class CompositeConfig:
    """The 100-point composite: which criteria, normalised how."""

    criteria: tuple[str, ...]
    normalize: Normalization = Normalization.MAX


@dataclass(frozen=True)
class StatsConfig:
    """The two conditions compared, the test and the FDR level.

    ``test`` is None when the config names none: the design then chooses (the paired t-test
    when the same groups appear under both conditions, Welch's otherwise;
    ``StudyResults.summary_test``). A test the config names is always the one used.
    """

    conditions: tuple[str, ...] = ()
    alpha: float = 0.05
    test: StatTest | None = None

    @property
    def stated_test(self) -> StatTest:
        """The test the config names, Welch's when it names none (kept beside a paired
        summary, as before the design chose)."""
        return self.test if self.test is not None else StatTest.WELCH


@dataclass(frozen=True)
class JudgeFile:
    """Another judge's scores in a CSV or JSONL file, and how its columns map to the study.

    Attributes:
        path: the file.
        keys: record field (a dotted path, or the ``[data] id`` field) -> the file's column
            holding it; together the keys pick one record per row ({} = the id, in a column
            named like ``[data] id``).
        scores: criterion -> the file's column with its score ({} = a column named after each
            criterion, where there is one).
    """

    path: Path
    keys: Mapping[str, str] = field(default_factory=dict)
    scores: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "path", Path(self.path))  # a str from Python code is fine


@dataclass(frozen=True)
class MetaConfig:
    """Meta-evaluation: the record field (dotted path) holding each criterion's human score,
    the judges' files, and the bootstrap over documents (see :mod:`geval_async.meta`).

    The same human scores carry the judge's scores to the human scale when scoring: ``labelled``
    is the share of the labelled records used (drawn with ``seed``; 1 uses them all) and
    ``coverage`` the level of the intervals on the human scale.
    """

    human: Mapping[str, str] = field(default_factory=dict)
    bootstrap: int = 1000
    seed: int = 0
    confidence: float = 0.95
    judges: Mapping[str, JudgeFile] = field(default_factory=dict)
    labelled: float = 1.0
    coverage: float = 0.9


@dataclass(frozen=True)
class BiasConfig:
    """``[bias]``: how the report looks for what the judge reacts to besides quality.

    Attributes:
        length_fields: criterion -> the record field whose length is "the text judged" (a
            criterion not named: the fields its prompt inserts that differ between the
            records of a group, else every field it inserts).
        judge_family: the judge's model family when the family table does not know its name.
        interval, confidence: whether the length correlation gets an interval (Bonett and
            Wright's, from its size alone), and at which level.
    """

    length_fields: Mapping[str, str] = field(default_factory=dict)
    judge_family: str | None = None
    interval: bool = True
    confidence: float = 0.95


@dataclass(frozen=True)
class OutputConfig:
    """Where tables, statistics, plots and raw exports go."""

    path: Path
    prefix: str = "geval"


@dataclass(frozen=True)
class PanelJudge:
    """One judge of a panel (a ``[[judges]]`` table): its name, its endpoint, and its own
    sampling and limits (the study's ``[sampling]`` and ``[limits]`` with its own keys on top)."""

    name: str
    judge: JudgeConfig
    sampling: SamplingConfig
    limits: LimitsConfig
    own_sampling: frozenset[str] = frozenset()  # the keys its own [judges.sampling] sets


@dataclass(frozen=True)
class PanelConfig:
    """``[panel]``: how the judges' record scores are pooled into the panel's.

    ``weights`` maps judge names to non-negative weights; a judge it does not name weighs 1.
    """

    pool: PanelPool = PanelPool.MEAN
    weights: Mapping[str, float] = field(default_factory=dict)

    def weight(self, judge: str) -> float:
        """The weight of the judge called ``judge``."""
        return float(self.weights.get(judge, 1.0))


@dataclass(frozen=True)
class EvalConfig:
    """A whole study, as loaded from one TOML file (plus overrides)."""

    source: Path
    data: DataConfig
    judge: JudgeConfig
    sampling: SamplingConfig
    limits: LimitsConfig
    criteria: tuple[CriterionConfig, ...]
    cache_path: Path
    output: OutputConfig
    composite: CompositeConfig
    stats: StatsConfig
    limit: int | None = None
    meta: MetaConfig = field(default_factory=MetaConfig)
    bias: BiasConfig = field(default_factory=BiasConfig)
    prices: Mapping[str, tuple[float, float]] = field(default_factory=dict)
    max_cost: float | None = None
    shard: Shard | None = None
    # A panel (``[[judges]]``): every judge, in the file's order. Empty for one ``[judge]``.
    # In a panel config, ``judge``, ``sampling`` and ``limits`` are the first judge's, so that
    # code that sees one judge sees a real one; :meth:`members` is the panel's way in.
    judges: tuple[PanelJudge, ...] = ()
    panel: PanelConfig = field(default_factory=PanelConfig)
    # The name of the ``[[judges]]`` table a one-judge study was taken from (:meth:`for_judge`),
    # so that its messages name that table; None for a config's own ``[judge]``.
    judge_name: str | None = None
    # The sampling keys that judge's own ``[judges.sampling]`` sets (:meth:`sampling_entry`).
    judge_sampling: frozenset[str] = frozenset()
    # The ``kind = "pairwise"`` criteria (:mod:`.pairing`), kept apart from ``criteria``,
    # which rate: planned and judged with them, scored by the pairwise statistics.
    pairwise: tuple[CriterionConfig, ...] = ()

    @property
    def is_panel(self) -> bool:
        """Whether the config lists ``[[judges]]`` (even one) rather than one ``[judge]``."""
        return bool(self.judges)

    @property
    def judge_names(self) -> tuple[str, ...]:
        """The panel's judge names, in the file's order (empty for one ``[judge]``)."""
        return tuple(j.name for j in self.judges)

    def for_judge(self, name: str) -> EvalConfig:
        """The one-judge study of the panel's judge ``name``: its endpoint, sampling and
        limits, the same records, criteria and cache, and outputs named
        ``<prefix>-judge-<name>`` beside the panel's.

        Raises:
            ConfigError: the config has no judge called ``name``.
        """
        for member in self.judges:
            if member.name == name:
                return replace(
                    self,
                    judge=member.judge,
                    sampling=member.sampling,
                    limits=member.limits,
                    judges=(),
                    panel=PanelConfig(),
                    output=replace(self.output, prefix=f"{self.output.prefix}-judge-{name}"),
                    judge_name=name,
                    judge_sampling=member.own_sampling,
                )
        known = ", ".join(self.judge_names) or "none: it has one [judge]"
        raise ConfigError(f"{self.source}: no judge named {name!r} (the config's judges: {known})")

    def members(self) -> tuple[EvalConfig, ...]:
        """One one-judge study per judge of the panel; ``(self,)`` for one ``[judge]``."""
        return tuple(self.for_judge(j.name) for j in self.judges) if self.judges else (self,)

    @property
    def price_table(self) -> dict[str, tuple[float, float]]:
        """Built-in prices with the config's ``[prices]`` added (model prefix -> in, out)."""
        return {**PRICES, **self.prices}

    def criterion(self, name: str) -> CriterionConfig:
        """The criterion called ``name``."""
        criterion = self._criteria_by_name.get(name)
        if criterion is None:
            raise ConfigError(f"{self.source}: no criterion named {name!r}")
        return criterion

    @cached_property
    def _criteria_by_name(self) -> dict[str, CriterionConfig]:
        # Looked up by name once for each criterion by the tables and reports: a scan each
        # would make them grow with the square of the criteria.
        return {criterion.name: criterion for criterion in self.criteria}

    @property
    def judge_entry(self) -> str:
        """The table that sets this study's judge, as messages name it: ``[judge]``, or a
        panel judge's ``[[judges]] name = "gpt"`` (its one-judge study, :meth:`for_judge`)."""
        return "[judge]" if self.judge_name is None else f'[[judges]] name = "{self.judge_name}"'

    def sampling_entry(self, key: str) -> str:
        """The table that sets the sampling key ``key``, as messages name it: ``[sampling]``,
        or ``[[judges]] name = "gpt" [judges.sampling]`` where that judge's own table sets it."""
        if key in self.judge_sampling:
            return f"{self.judge_entry} [judges.sampling]"
        return "[sampling]"

    @property
    def api_key_entry(self) -> str:
        """Where the judge's API key variable is named: ``[judge] api_key_env``, or a panel
        judge's ``[[judges]] name = "gpt" api_key_env = "GPT_KEY"``."""
        if self.judge_name is None:
            return "[judge] api_key_env"
        return f'{self.judge_entry} api_key_env = "{self.judge.api_key_env}"'

    def required_api_key(self) -> str | None:
        """The judge's API key (None for a local judge without one); ConfigError when a
        remote judge has none, naming the table that names the key's variable (``[judge]``,
        or a panel judge's ``[[judges]]`` entry), never the key. The CLI and ``ga.judge``
        both ask here, for one message."""
        key = self.judge.api_key()
        if key is None and not self.judge.is_local:
            raise ConfigError(
                f"no API key: set the environment variable {self.judge.api_key_env} "
                f"(named by {self.api_key_entry} in {self.source})"
            )
        return key


@dataclass(frozen=True)
class MetaStudy:
    """A study as meta-evaluation sees it: the records, their human scores, the judges' files
    and where the tables go. ``config`` is the whole study when its own judge (the cache) is
    evaluated too; a config of records, ``[meta]`` and judge files alone has none.
    """

    source: Path
    data: DataConfig
    criteria: tuple[str, ...]
    meta: MetaConfig
    output: OutputConfig
    limit: int | None = None
    config: EvalConfig | None = None

    @classmethod
    def of(cls, config: EvalConfig) -> MetaStudy:
        """The meta-evaluation view of a whole study."""
        return cls(
            source=config.source,
            data=config.data,
            criteria=tuple(c.name for c in config.criteria),
            meta=config.meta,
            output=config.output,
            limit=config.limit,
            config=config,
        )
