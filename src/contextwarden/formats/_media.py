"""Images and other media: estimated token costs and conversion between the providers' shapes.

How it works: docs/formats.md (`contextwarden.formats._media`).
"""

from __future__ import annotations

import base64
import binascii
import io
import math
import re
import struct
from collections.abc import Mapping
from typing import Any

__all__ = [
    "ANTHROPIC_DEFAULT_COST",
    "OPENAI_DEFAULT_COST",
    "anthropic_image_cost",
    "anthropic_source_from_openai",
    "document_cost",
    "image_size",
    "media_cost",
    "openai_image_cost",
    "openai_image_url_from_anthropic",
    "parse_data_url",
]

OPENAI_DEFAULT_COST = 765
ANTHROPIC_DEFAULT_COST = 1600
_UNKNOWN_MEDIA_COST = 1500
_PDF_PAGE_COST = 1500
_AUDIO_TOKENS_PER_SECOND = 10
# Bytes a second of audio by container: 16-bit 24 kHz mono PCM for wav, 128 kbit/s otherwise.
_AUDIO_BYTES_PER_SECOND = {"wav": 48_000, "pcm16": 48_000}
_COMPRESSED_AUDIO_BYTES_PER_SECOND = 16_000
_HEADER_B64_CHARS = 87_384  # ~64 KiB decoded: enough to reach a JPEG's frame header
_DATA_URL = re.compile(r"data:([^;,]*)(?:;[^,]*)?;base64,", re.IGNORECASE)
_PDF_PAGE = re.compile(rb"/Type\s*/Page(?![a-zA-Z])")


def parse_data_url(url: str) -> tuple[str, str] | None:
    """``(media_type, base64 data)`` for a ``data:...;base64,`` URL, else None."""
    m = _DATA_URL.match(url)
    if m is None:
        return None
    return m.group(1), url[m.end() :]


def _b64_prefix(data: str, chars: int = _HEADER_B64_CHARS) -> bytes:
    head = data[: chars - chars % 4]
    try:
        return base64.b64decode(head + "=" * (-len(head) % 4), validate=False)
    except (binascii.Error, ValueError):
        return b""


def image_size(head: bytes) -> tuple[int, int] | None:
    """Width and height read from the first bytes of a PNG, GIF, WebP or JPEG file (the last
    two by ``imagesize``, imported at the first such image: it takes tens of milliseconds)."""
    try:
        if head[:8] == b"\x89PNG\r\n\x1a\n" and len(head) >= 24:
            w, h = struct.unpack(">II", head[16:24])
            return int(w), int(h)
        if head[:6] in (b"GIF87a", b"GIF89a") and len(head) >= 10:
            w, h = struct.unpack("<HH", head[6:10])
            return int(w), int(h)
    except struct.error:
        return None
    if not head.startswith((b"RIFF", b"\xff\xd8")):
        return None
    import imagesize  # type: ignore[import-untyped]

    try:
        w, h = imagesize.get(io.BytesIO(head), exif_rotation=False)
    except (OSError, ValueError, struct.error):
        return None
    return (int(w), int(h)) if w >= 0 and h >= 0 else None


def _openai_tiles(width: int, height: int) -> int:
    if width <= 0 or height <= 0:
        return 4
    scale = min(1.0, 2048 / max(width, height))
    w, h = width * scale, height * scale
    scale = min(1.0, 768 / min(w, h))
    w, h = w * scale, h * scale
    return math.ceil(w / 512) * math.ceil(h / 512)


def openai_image_cost(image_url: Mapping[str, Any]) -> int:
    """Estimated tokens of an OpenAI ``image_url`` object (see docs/formats.md)."""
    if image_url.get("detail") == "low":
        return 85
    url = image_url.get("url")
    size = None
    if isinstance(url, str):
        parsed = parse_data_url(url)
        if parsed is not None:
            size = image_size(_b64_prefix(parsed[1]))
    if size is None:
        return OPENAI_DEFAULT_COST
    return 170 * _openai_tiles(*size) + 85


def anthropic_image_cost(source: Mapping[str, Any]) -> int:
    """Estimated tokens of an Anthropic image ``source`` (see docs/formats.md)."""
    data = source.get("data")
    if source.get("type") != "base64" or not isinstance(data, str):
        return ANTHROPIC_DEFAULT_COST
    size = image_size(_b64_prefix(data))
    if size is None or size[0] <= 0 or size[1] <= 0:
        return ANTHROPIC_DEFAULT_COST
    w, h = float(size[0]), float(size[1])
    scale = min(1.0, 1568 / max(w, h), math.sqrt(1_150_000 / (w * h)))
    return max(1, math.ceil(w * scale * h * scale / 750))


def _pdf_cost(data: str) -> int:
    try:
        raw = base64.b64decode(data, validate=False)
    except (binascii.Error, ValueError):
        return _UNKNOWN_MEDIA_COST
    pages = len(_PDF_PAGE.findall(raw))
    return _PDF_PAGE_COST * pages if pages else _UNKNOWN_MEDIA_COST


def document_cost(source: Mapping[str, Any]) -> int:
    """Estimated tokens of an Anthropic ``document`` source."""
    kind = source.get("type")
    data = source.get("data")
    if kind == "text" and isinstance(data, str):
        return max(1, math.ceil(len(data) / 4))
    if kind == "base64" and isinstance(data, str):
        if source.get("media_type") == "application/pdf":
            return _pdf_cost(data)
        return max(1, math.ceil(len(data) * 3 / 4 / 4))
    return _UNKNOWN_MEDIA_COST


def media_cost(block: Mapping[str, Any]) -> int:
    """Estimated tokens of an opaque media block of either provider."""
    kind = block.get("type")
    if kind == "document":
        source = block.get("source")
        return document_cost(source) if isinstance(source, Mapping) else _UNKNOWN_MEDIA_COST
    if kind == "input_audio":
        audio = block.get("input_audio")
        if isinstance(audio, Mapping) and isinstance(audio.get("data"), str):
            size = len(audio["data"]) * 3 // 4
            rate = _AUDIO_BYTES_PER_SECOND.get(
                str(audio.get("format")), _COMPRESSED_AUDIO_BYTES_PER_SECOND
            )
            return max(1, math.ceil(size / rate * _AUDIO_TOKENS_PER_SECOND))
    elif kind == "file":
        file = block.get("file")
        if isinstance(file, Mapping) and isinstance(file.get("file_data"), str):
            parsed = parse_data_url(file["file_data"])
            if parsed is not None:
                return document_cost({"type": "base64", "media_type": parsed[0], "data": parsed[1]})
    return _UNKNOWN_MEDIA_COST


# -- cross-provider shapes -------------------------------------------------------------------------
def anthropic_source_from_openai(image_url: Mapping[str, Any]) -> dict[str, Any] | None:
    """The Anthropic image ``source`` for an OpenAI ``image_url`` object (None if it has none)."""
    url = image_url.get("url")
    if not isinstance(url, str):
        return None
    parsed = parse_data_url(url)
    if parsed is not None:
        return {"type": "base64", "media_type": parsed[0], "data": parsed[1]}
    return {"type": "url", "url": url}


def openai_image_url_from_anthropic(source: Mapping[str, Any]) -> dict[str, Any] | None:
    """The OpenAI ``image_url`` object for an Anthropic image ``source`` (None if it has none:
    an uploaded ``file`` source, for one)."""
    kind = source.get("type")
    if kind == "base64" and isinstance(source.get("data"), str):
        return {"url": f"data:{source.get('media_type', 'image/png')};base64,{source['data']}"}
    if kind == "url" and isinstance(source.get("url"), str):
        return {"url": source["url"]}
    return None
