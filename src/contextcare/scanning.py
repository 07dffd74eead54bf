"""What every scan of recorded traces shares, whichever engine runs it (``contextcare scan`` in
one process, :mod:`contextcare.ray` on a cluster): the ruleset named on the command line, the
summary line, and the exit status of ``--fail-on``."""

from __future__ import annotations

from collections.abc import Mapping

from ._engine import Ruleset
from .presets import default_ruleset

__all__ = ["FAIL_ACTIONS", "load_ruleset", "summary_line", "exit_status"]

#: ``--fail-on LEVEL``: the actions whose detections make a scan exit with status 1.
FAIL_ACTIONS: Mapping[str, tuple[str, ...]] = {"abort": ("abort",), "remind": ("abort", "remind")}


def load_ruleset(spec: str) -> Ruleset:
    """``"default"`` for :func:`contextcare.default_ruleset`, else the path of a rules file
    (:func:`contextcare.tomlrules.load_rules`)."""
    if spec == "default":
        return default_ruleset()
    from .tomlrules import load_rules

    rules, options = load_rules(spec)
    return Ruleset(rules, **options)


def summary_line(summary: Mapping[str, int]) -> str:
    """``N streams, M detections (A abort, R remind[, C record])``."""
    return (f"{summary['streams']} streams, {summary['detections']} detections"
            f" ({summary['abort']} abort, {summary['remind']} remind"
            + (f", {summary['record']} record" if summary["record"] else "") + ")")


def exit_status(summary: Mapping[str, int], fail_on: str | None) -> int:
    """1 when ``fail_on`` names a level and the summary counts a detection of one of its
    actions, else 0."""
    return 1 if any(summary[action] for action in FAIL_ACTIONS.get(fail_on or "", ())) else 0
