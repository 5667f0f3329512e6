"""Media helpers: header sniffing, the providers' image cost rules, shape conversion."""

from __future__ import annotations

import base64
import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from contextwarden.formats._media import (
    anthropic_image_cost,
    anthropic_source_from_openai,
    document_cost,
    image_size,
    openai_image_cost,
    openai_image_url_from_anthropic,
    parse_data_url,
)

from .providers import png_data


def _jpeg(width: int, height: int) -> bytes:
    app0 = b"\xff\xe0" + struct.pack(">H", 16) + b"JFIF\x00" + b"\x00" * 9
    sof = b"\xff\xc0" + struct.pack(">HBHHB", 11, 8, height, width, 1) + b"\x01\x11\x00"
    return b"\xff\xd8" + app0 + sof + b"\xff\xd9"


def _gif(width: int, height: int) -> bytes:
    return b"GIF89a" + struct.pack("<HH", width, height) + b"\x00" * 8


def _webp_vp8x(width: int, height: int) -> bytes:
    body = b"VP8X" + struct.pack("<I", 10) + b"\x00" * 4
    body += (width - 1).to_bytes(3, "little") + (height - 1).to_bytes(3, "little")
    return b"RIFF" + struct.pack("<I", len(body) + 4) + b"WEBP" + body


@given(st.integers(1, 60000), st.integers(1, 60000))
def test_image_size_reads_every_header(w: int, h: int) -> None:
    assert image_size(base64.b64decode(png_data(w, h))) == (w, h)
    assert image_size(_jpeg(w, h)) == (w, h)
    assert image_size(_gif(w % 65536, h % 65536)) == (w % 65536, h % 65536)
    assert image_size(_webp_vp8x(w, h)) == (w, h)


def test_image_size_of_garbage_is_unknown() -> None:
    assert image_size(b"") is None
    assert image_size(b"\xff\xd8\x00\x01") is None
    assert image_size(b"not an image at all") is None


@pytest.mark.parametrize(
    ("size", "tiles"),
    [((512, 512), 1), ((1024, 1024), 4), ((2048, 4096), 6), ((100, 3000), 4), ((800, 600), 4)],
)
def test_openai_tile_rule(size: tuple[int, int], tiles: int) -> None:
    url = f"data:image/png;base64,{png_data(*size)}"
    assert openai_image_cost({"url": url}) == 170 * tiles + 85
    assert openai_image_cost({"url": url, "detail": "low"}) == 85


def test_anthropic_pixel_rule() -> None:
    def cost(w: int, h: int) -> int:
        return anthropic_image_cost(
            {"type": "base64", "media_type": "image/png", "data": png_data(w, h)}
        )

    assert cost(750, 100) == 100
    assert cost(200, 200) == 54  # ceil(40000 / 750)
    assert 1500 <= cost(8000, 8000) <= 1600  # scaled to ~1.15 MP, the documented cap
    assert anthropic_image_cost({"type": "url", "url": "https://x"}) == 1600


def test_document_costs() -> None:
    pdf = b"%PDF-1.4\n" + b"1 0 obj << /Type /Page >>\n" * 3 + b"<< /Type /Pages >>"
    data = base64.b64encode(pdf).decode()
    assert document_cost({"type": "base64", "media_type": "application/pdf", "data": data}) == 4500
    assert document_cost({"type": "text", "data": "abcd" * 10}) == 10
    assert document_cost({"type": "file", "file_id": "f"}) == 1500


def test_shape_conversion_both_ways() -> None:
    data = png_data(10, 10)
    src = anthropic_source_from_openai({"url": f"data:image/png;base64,{data}"})
    assert src == {"type": "base64", "media_type": "image/png", "data": data}
    assert openai_image_url_from_anthropic(src) == {"url": f"data:image/png;base64,{data}"}
    assert anthropic_source_from_openai({"url": "https://x/a.png"}) == {
        "type": "url",
        "url": "https://x/a.png",
    }
    assert openai_image_url_from_anthropic({"type": "file", "file_id": "f"}) is None
    assert parse_data_url("https://x") is None
    assert parse_data_url("data:image/jpeg;base64,AAAA") == ("image/jpeg", "AAAA")
