"""The block the host injects into a request: the anchors in view, rendered."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import date

from .._checks import check_lang as _check_lang
from .anchors import (
    DEFAULT_CAP,
    AnchorList,
    Lang,
    _check_cap,
    _check_today,
    _shown,
)
from .folder import Finding

__all__ = [
    "injected_block",
]


# --------------------------------------------------------------------------- the injected block

_TEXTS: dict[str, dict[Lang, str]] = {
    "header": {
        "zh": "常被提起（用户一再回到的事，放在这里作背景；不是待办，不必逐条回应）",
        "en": "Oft-told: things this user keeps coming back to. Background for you, not a to-do"
              " list; there is no need to answer each line.",
    },
    "status": {
        "zh": "状态：在列 {k}/{cap}，沉底 {s} 条，按 {today} 计。",
        "en": "Status: {k}/{cap} in view, {s} sunk, as of {today}.",
    },
    "full": {
        "zh": "列表已满：再加一条时，权重最低的一条会沉底（留在文件里，不会删除）。",
        "en": "The list is full: adding one moves the lowest-weight line to Sunk (it stays in the"
              " file; nothing is deleted).",
    },
    "ok": {"zh": "检查：通过。", "en": "Check: passed."},
    "failed": {
        "zh": "检查未通过。以下问题要由用户修改，请告诉用户，不要替用户改写这些行：",
        "en": "Check failed. The user needs to fix the following; tell them, and do not rewrite"
              " their lines yourself:",
    },
    "more": {"zh": "……另有 {k} 条", "en": "… and {k} more"},
}



#: Most error findings listed in the injected block.
_BLOCK_FINDINGS = 5


def injected_block(anchors: AnchorList, *, today: date, cap: int = DEFAULT_CAP,
                   findings: Sequence[Finding] = (), lang: Lang = "zh") -> str:
    """The text injected into the model's context: a header, the anchors in view in list order
    (comments removed, nothing reordered or filtered), a status line, and the check in one of two
    tones: a short "passed", or the errors and a plain request not to rewrite the user's lines.
    Empty (nothing to inject) when no anchor is in view."""
    today = _check_today(today)
    cap = _check_cap(cap)
    lang = _check_lang(lang)
    view = anchors.in_view
    if not view:
        return ""
    out = [_TEXTS["header"][lang]]
    out += _shown(anchors)
    status = _TEXTS["status"][lang].format(k=len(view), cap=cap, s=len(anchors.sunk),
                                           today=today.isoformat())
    if len(view) >= cap:
        status += (" " if lang == "en" else "") + _TEXTS["full"][lang]
    out.append(status)
    errors = [f for f in findings if f.level == "error"]
    if not errors:
        out.append(_TEXTS["ok"][lang])
    else:
        out.append(_TEXTS["failed"][lang])
        out += ["- " + f.text(lang) for f in errors[:_BLOCK_FINDINGS]]
        if len(errors) > _BLOCK_FINDINGS:
            out.append(_TEXTS["more"][lang].format(k=len(errors) - _BLOCK_FINDINGS))
    return "\n".join(out) + "\n"
