"""A guarding OpenAI-compatible gateway: ``contextcare serve --upstream URL``.

Point any OpenAI-compatible client (``OPENAI_BASE_URL``) at the gateway and every stream it
relays is watched per delta: a loop is aborted at the upstream (the engine stops generating) and
the client's stream ends cleanly with the detection named; optionally the gateway continues the
reply itself; reminders reach the model with the next request of the conversation. See the
README's "Serving" section, :mod:`contextcare.serve.gateway` for the behaviour and
:class:`GatewayConfig` for the settings. Needs the ``serve`` extra (aiohttp, prometheus_client).
"""

from __future__ import annotations

import importlib
import logging
from typing import TYPE_CHECKING, Any

from ..errors import ContextCareError
from .config import FINISH_REASONS, ConfigError, GatewayConfig, load_config

if TYPE_CHECKING:  # imported lazily at run time (module __getattr__): aiohttp is an extra
    from .gateway import Gateway

__all__ = [
    "FINISH_REASONS",
    "ConfigError",
    "Gateway",
    "GatewayConfig",
    "MissingExtraError",
    "load_config",
    "run",
]


class MissingExtraError(ContextCareError, ImportError):
    """The ``serve`` extra is not installed."""


def _gateway_module() -> Any:
    try:
        return importlib.import_module("contextcare.serve.gateway")
    except ModuleNotFoundError as exc:
        if exc.name in ("aiohttp", "prometheus_client", "multidict"):
            raise MissingExtraError(
                f"the gateway needs {exc.name}: pip install 'contextcare[serve]'") from None
        raise


def __getattr__(name: str) -> Any:
    if name == "Gateway":
        return _gateway_module().Gateway
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def run(config: GatewayConfig, *, log_level: str = "INFO") -> None:
    """Run the gateway until SIGINT/SIGTERM; open streams are drained for up to
    ``config.shutdown_timeout`` seconds. Detections are logged as JSON lines on
    ``contextcare.serve``."""
    gateway = _gateway_module()
    logging.basicConfig(level=getattr(logging, log_level.upper(), logging.INFO),
                        format="%(asctime)s %(name)s %(levelname)s %(message)s")
    try:
        gateway.run_forever(config)
    except OSError as exc:
        raise ConfigError(f"cannot listen on {config.host}:{config.port}:"
                          f" {exc.strerror or exc}") from None
