"""The provider's client for batch jobs: the ``openai`` package, made for the judge's provider
(OpenAI or Azure OpenAI), and its errors translated into ours once, at this boundary, with no
key ever in the text (:func:`provider_call`).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

from ...errors import RunStopped
from ...options import Provider
from ...study.plan import Study
from ...study.settings import DEFAULT_BASE_URL
from ..wire.quoted_key import without_key

if TYPE_CHECKING:
    from openai import AsyncOpenAI

__all__ = ["make_client", "provider_call"]


def make_client(study: Study, api_key: str | None) -> AsyncOpenAI:
    """An ``openai`` client for the judge's provider (the key goes into a header only)."""
    import openai

    judge = study.config.judge
    common: dict[str, Any] = {
        "api_key": api_key or "no-key",
        "default_headers": dict(judge.headers),
        "max_retries": 5,
    }
    if judge.provider == Provider.AZURE:
        return openai.AsyncAzureOpenAI(
            azure_endpoint=str(judge.azure_endpoint), api_version=judge.api_version, **common
        )
    return openai.AsyncOpenAI(base_url=judge.base_url or DEFAULT_BASE_URL, **common)


@asynccontextmanager
async def provider_call(
    what: str, key_entry: str = "[judge] api_key_env", key: str | None = None
) -> AsyncIterator[None]:
    """Translate the ``openai`` package's errors into ours, once (no key ever in the text);
    ``key_entry``: where the key's variable is named (a panel judge's ``[[judges]]`` entry,
    :attr:`~geval_async.study.settings.EvalConfig.api_key_entry`); ``key``: the key sent, taken
    out of what the provider says."""
    import openai

    try:
        yield
    except openai.AuthenticationError as exc:
        raise RunStopped(
            f"{what}: the provider refused the API key (HTTP {exc.status_code}); "
            f"check the key variable named by {key_entry}"
        ) from exc
    except openai.NotFoundError as exc:
        raise RunStopped(
            f"{what}: not found (HTTP 404) at the provider; check base_url (or azure_endpoint "
            "and api_version) and that the provider offers the Batch API"
        ) from exc
    except openai.APIStatusError as exc:
        said = without_key(_message(exc.body), key)
        raise RunStopped(f"{what}: HTTP {exc.status_code}: {said}") from exc
    except openai.APIError as exc:
        raise RunStopped(f"{what}: {type(exc).__name__}; run the command again") from exc


def _message(body: object) -> str:
    error = body.get("error", body) if isinstance(body, dict) else body
    message = error.get("message") if isinstance(error, dict) else error
    return str(message)[:300]
