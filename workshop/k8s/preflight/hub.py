"""The Hub's side of the preflight: may this token download the model's gated weights?

`huggingface_hub`'s `auth_check` asks the Hub exactly that (GET /api/models/<id>/auth-check) without
downloading anything: GatedRepoError when the licence was not accepted with the token's account,
RepositoryNotFoundError for a misspelled (or private) id. The token is read from HF_TOKEN (as the TrainJob's
Secret gives it) and never printed."""

from __future__ import annotations

from workshop.k8s.preflight.model import FAIL, NOT_CHECKED, NOT_NEEDED, PASS, Check
from workshop.lang import N_, _
from workshop.plan.models import hub_token, resolve_source

HUB = N_("gated weights on the Hub")
TOKENS_PAGE = "https://huggingface.co/settings/tokens"


def _network_errors() -> tuple[type[BaseException], ...]:
    """What a request that never reached the Hub raises: OSError, or the HTTP client's own errors (httpx, or
    httpx2 that newer huggingface_hub releases use)."""
    import importlib

    found: list[type[BaseException]] = [OSError]
    for name in ("httpx2", "httpx"):
        try:
            found.append(importlib.import_module(name).HTTPError)
        except (ImportError, AttributeError):
            continue
    return tuple(found)


def hub_check(model: str | None, *, token: str | None = None, endpoint: str | None = None) -> Check:
    """One verdict for the model's weights; `token` defaults to HF_TOKEN, `endpoint` to the Hub's."""
    if not model:
        return Check(HUB, NOT_CHECKED, _("no model named (--model, or the plan file's model)"))
    source = resolve_source(model)
    if source.kind != "hub":
        return Check(HUB, NOT_NEEDED, _("{model} is not a hub id: nothing is downloaded").format(model=model))
    token = token if token is not None else hub_token()
    page = f"https://huggingface.co/{model}"
    if not token:
        return Check(
            HUB,
            NOT_CHECKED,
            _(
                "HF_TOKEN is not set: export the token of the account that accepted the licence at {page}"
            ).format(page=page),
        )
    from huggingface_hub import HfApi

    try:
        HfApi(endpoint=endpoint).auth_check(model, token=token)
    except Exception as exc:  # noqa: BLE001 - every answer but success is judged by _refused
        return _refused(exc, model, page)
    return Check(HUB, PASS, _("this token may download {model}").format(model=model))


def _refused(exc: Exception, model: str, page: str) -> Check:
    """The Hub's refusal (or silence) as a verdict: what the learner fixes, or why it could not be asked."""
    from huggingface_hub.errors import (
        GatedRepoError,
        HfHubHTTPError,
        OfflineModeIsEnabled,
        RepositoryNotFoundError,
    )

    if isinstance(exc, GatedRepoError):
        return Check(
            HUB,
            FAIL,
            _("{model} is gated and this token's account may not download it").format(model=model),
            _(
                "accept the licence at {page} with the account that owns the token and wait for the approval "
                "e-mail"
            ).format(page=page),
        )
    if isinstance(exc, RepositoryNotFoundError):
        return Check(
            HUB,
            FAIL,
            _("no model {model} on the Hub, or it is private and this token cannot see it").format(
                model=model
            ),
            _(
                "check the spelling (e.g. meta-llama/Meta-Llama-3-8B), or use a token that can see it: {page}"
            ).format(page=TOKENS_PAGE),
        )
    if isinstance(exc, OfflineModeIsEnabled):
        return Check(HUB, NOT_CHECKED, _("hub unreachable: HF_HUB_OFFLINE is set"))
    if isinstance(exc, HfHubHTTPError):
        status = exc.response.status_code if exc.response is not None else None
        if status == 401:
            return Check(
                HUB,
                FAIL,
                _("the Hub rejected the token (401)"),
                _("make a new token: {page}").format(page=TOKENS_PAGE),
            )
        return Check(HUB, NOT_CHECKED, _("hub unreachable: it answered {status}").format(status=status))
    if isinstance(exc, _network_errors()):
        return Check(HUB, NOT_CHECKED, _("hub unreachable ({error})").format(error=type(exc).__name__))
    raise exc
