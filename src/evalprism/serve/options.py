"""The options of `evalprism serve`, declared once (:mod:`evalprism.io.options`). Importing this module
imports nothing heavy."""

from __future__ import annotations

from dataclasses import dataclass

from evalprism.io.options import Options, option
from evalprism.vocabularies import LogLevel


@dataclass(frozen=True)
class ServeOptions(Options):
    """Where the router service listens and how much uvicorn logs."""

    host: str = option("127.0.0.1", help="Address to listen on; other than loopback only with API keys.")
    port: int = option(8000, help="Port to listen on.")
    log_level: LogLevel = option("info", help="uvicorn log level: critical, error, warning, info, debug.")
