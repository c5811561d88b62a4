"""The error of an ONNX model that cannot become a chain, with the config field it concerns."""

from __future__ import annotations

from ...errors import ConfigError


class OnnxImportError(ConfigError):
    """A model, cut or node the importer refuses; ``field`` is ``onnx``, ``from``, ``to`` or ``batch``."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field
