"""The gateway's configuration: one frozen dataclass, checked field by field.

A value comes from (later wins) the defaults below, the ``[serve]`` table of a TOML file
(``--config``) and the command-line flags. Every error is a :class:`ConfigError` naming the field
(and the file), raised before the gateway listens.
"""

from __future__ import annotations

import dataclasses
import math
import os
import sys
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from ..errors import ContextCareError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on Python 3.10 only
    import tomli as tomllib

__all__ = ["FINISH_REASONS", "ConfigError", "GatewayConfig", "load_config"]

#: ``finish_reason`` values the abort chunk may carry: standard values every OpenAI client
#: accepts (a new value would break clients that parse it into an enum).
FINISH_REASONS = ("content_filter", "stop", "length")


class ConfigError(ContextCareError, ValueError):
    """A gateway setting is missing, of the wrong type or out of range (the message names it)."""


@dataclass(frozen=True)
class GatewayConfig:
    """Settings of :class:`contextcare.serve.Gateway` (see the README's "Serving" section).

    ``upstream``: base URL of the OpenAI-compatible server, with its API prefix
    (``http://127.0.0.1:8000/v1``); a client path ``/v1/<rest>`` goes to ``upstream + /<rest>``.
    """

    upstream: str
    host: str = "127.0.0.1"
    port: int = 8765
    #: A TOML rules file (``contextcare rules --rules FILE`` checks it); ``None``: the defaults.
    rules: str | None = None
    #: Language of the notices sent to the model: ``"en"`` or ``"zh"``.
    lang: str = "en"
    #: Re-ask the upstream after an abort and splice the continuation into the client's stream.
    auto_continue: bool = False
    #: The abort that makes this many in a row in one request does not auto-continue.
    max_consecutive_aborts: int = 2
    #: ``finish_reason`` of the chunk that ends an aborted stream (see :data:`FINISH_REASONS`).
    abort_finish_reason: str = "content_filter"
    #: Request header that names a conversation (reminders wait for its next request).
    conversation_header: str = "X-Conversation-Id"
    #: Conversations with a pending notice kept at most (least recently used dropped first).
    pending_max: int = 10_000
    #: Seconds a pending notice waits for the next request of its conversation.
    pending_ttl: float = 3600.0
    #: Largest request body accepted on the guarded endpoints (413 above it).
    max_body_bytes: int = 16 * 1024 * 1024
    #: Largest SSE line accepted from the upstream (the stream ends with an error above it).
    max_line_bytes: int = 1024 * 1024
    #: Seconds to connect to the upstream.
    connect_timeout: float = 10.0
    #: Seconds to wait for the upstream's next bytes (the first chunk included).
    read_timeout: float = 600.0
    #: Seconds a shutdown waits for open streams to finish before cutting them.
    shutdown_timeout: float = 30.0
    #: Environment variable holding an API key for the upstream, sent as ``Authorization:
    #: Bearer`` when a request carries no ``Authorization`` of its own. ``None``: no key.
    upstream_api_key_env: str | None = None
    #: Ask for ``stream_options.include_usage`` when a non-streaming request is sent upstream as
    #: a stream, so the re-assembled completion has ``usage``.
    collect_usage: bool = True

    def __post_init__(self) -> None:
        _check_url(self.upstream)
        _check_str(self, "host")
        _check_int(self, "port", 0, 65535)
        if self.rules is not None:
            _check_str(self, "rules")
        if self.lang not in ("en", "zh"):
            raise ConfigError(f"lang must be 'en' or 'zh', got {self.lang!r}")
        _check_bool(self, "auto_continue")
        _check_int(self, "max_consecutive_aborts", 1, 100)
        if self.abort_finish_reason not in FINISH_REASONS:
            raise ConfigError(f"abort_finish_reason must be one of {', '.join(FINISH_REASONS)},"
                              f" got {self.abort_finish_reason!r}")
        _check_str(self, "conversation_header")
        _check_int(self, "pending_max", 0, 10_000_000)
        _check_seconds(self, "pending_ttl")
        _check_int(self, "max_body_bytes", 1024, 1 << 34)
        _check_int(self, "max_line_bytes", 1024, 1 << 30)
        _check_seconds(self, "connect_timeout")
        _check_seconds(self, "read_timeout")
        _check_seconds(self, "shutdown_timeout", allow_zero=True)
        if self.upstream_api_key_env is not None:
            _check_str(self, "upstream_api_key_env")
        _check_bool(self, "collect_usage")

    def upstream_api_key(self) -> str | None:
        """The upstream key from the environment (``None`` when not configured); a configured
        variable that is unset or empty is an error."""
        if self.upstream_api_key_env is None:
            return None
        key = os.environ.get(self.upstream_api_key_env, "")
        if not key:
            raise ConfigError(f"upstream_api_key_env: environment variable"
                              f" {self.upstream_api_key_env} is not set")
        return key


def _check_url(url: object) -> None:
    if not isinstance(url, str) or not url:
        raise ConfigError(f"upstream must be a URL such as http://127.0.0.1:8000/v1, got {url!r}")
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ConfigError(f"upstream must be an http:// or https:// URL, got {url!r}")
    if parts.query or parts.fragment:
        raise ConfigError(f"upstream must not have a query or fragment, got {url!r}")


def _check_str(cfg: GatewayConfig, name: str) -> None:
    value = getattr(cfg, name)
    if not isinstance(value, str) or not value:
        raise ConfigError(f"{name} must be a non-empty string, got {value!r}")


def _check_bool(cfg: GatewayConfig, name: str) -> None:
    value = getattr(cfg, name)
    if not isinstance(value, bool):
        raise ConfigError(f"{name} must be true or false, got {value!r}")


def _check_int(cfg: GatewayConfig, name: str, low: int, high: int) -> None:
    value = getattr(cfg, name)
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigError(f"{name} must be an integer, got {value!r}")
    if not low <= value <= high:
        raise ConfigError(f"{name} must be in [{low}, {high}], got {value}")


def _check_seconds(cfg: GatewayConfig, name: str, *, allow_zero: bool = False) -> None:
    value = getattr(cfg, name)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ConfigError(f"{name} must be a number of seconds, got {value!r}")
    if not math.isfinite(value) or value < 0 or (value == 0 and not allow_zero):
        raise ConfigError(f"{name} must be a positive number of seconds, got {value!r}")
    object.__setattr__(cfg, name, float(value))


FIELDS = tuple(f.name for f in dataclasses.fields(GatewayConfig))


def load_config(path: str | None = None, **overrides: Any) -> GatewayConfig:
    """A :class:`GatewayConfig` from the ``[serve]`` table of the TOML file ``path`` (if given)
    with ``overrides`` on top (``None`` values are ignored, so unset flags keep the file's)."""
    values: dict[str, Any] = {}
    if path is not None:
        try:
            with open(path, "rb") as fh:
                doc = tomllib.load(fh)
        except OSError as exc:
            raise ConfigError(f"{path}: cannot read the config file: {exc.strerror}") from None
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"{path}: not valid TOML: {exc}") from None
        table = doc.get("serve", {})
        extra = sorted(set(doc) - {"serve"})
        if extra:
            raise ConfigError(f"{path}: unknown table or key {extra[0]!r} (settings go in [serve])")
        if not isinstance(table, dict):
            raise ConfigError(f"{path}: [serve] must be a table")
        for key, value in table.items():
            name = key.replace("-", "_")
            if name not in FIELDS:
                raise ConfigError(f"{path}: [serve] has unknown key {key!r}"
                                  f" (known: {', '.join(FIELDS)})")
            values[name] = value
        if isinstance(values.get("rules"), str) and not os.path.isabs(values["rules"]):
            values["rules"] = os.path.join(os.path.dirname(os.path.abspath(path)),
                                           values["rules"])
    for name, value in overrides.items():
        if name not in FIELDS:
            raise ConfigError(f"unknown setting {name!r}")
        if value is not None:
            values[name] = value
    if "upstream" not in values:
        where = f"{path}: " if path is not None else ""
        raise ConfigError(f"{where}upstream is required (--upstream URL or upstream = \"URL\""
                          " in [serve])")
    try:
        return GatewayConfig(**values)
    except ConfigError as exc:
        if path is not None:
            raise ConfigError(f"{path}: {exc}") from None
        raise
