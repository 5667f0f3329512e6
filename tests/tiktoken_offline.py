"""tiktoken without network: the reference BPE for our tests and benchmarks.

tiktoken downloads its vocabularies on first use and caches them in ``TIKTOKEN_CACHE_DIR``
under the SHA-1 of the download URL, checking the file's SHA-256. bpe-openai ships the same
vocabulary files (gzipped) in its package data, so we decompress them into such a cache and
tiktoken never reaches for the network. Bench code imports this module too.
"""

from __future__ import annotations

import functools
import gzip
import hashlib
import importlib.util
import os
import tempfile
from pathlib import Path
from typing import Any

__all__ = ["offline_encoding", "populate_cache"]

# tiktoken_ext/openai_public.py: where each vocabulary comes from and its expected SHA-256.
_BLOBS = {
    "cl100k_base": (
        "https://openaipublic.blob.core.windows.net/encodings/cl100k_base.tiktoken",
        "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7",
    ),
    "o200k_base": (
        "https://openaipublic.blob.core.windows.net/encodings/o200k_base.tiktoken",
        "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d",
    ),
}

DEFAULT_CACHE = Path(tempfile.gettempdir()) / "contextwarden-tiktoken-cache"


def populate_cache(cache_dir: Path = DEFAULT_CACHE) -> Path:
    """Write both vocabularies into ``cache_dir`` in tiktoken's cache layout; return it."""
    # Locate the package without importing it (its __init__ builds both vocabularies).
    spec = importlib.util.find_spec("bpe_openai")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("bpe-openai is not installed")
    data = Path(list(spec.submodule_search_locations)[0]) / "data"
    cache_dir.mkdir(parents=True, exist_ok=True)
    for name, (url, sha256) in _BLOBS.items():
        target = cache_dir / hashlib.sha1(url.encode()).hexdigest()
        if target.exists() and hashlib.sha256(target.read_bytes()).hexdigest() == sha256:
            continue
        raw = gzip.decompress((data / f"{name}.tiktoken.gz").read_bytes())
        if hashlib.sha256(raw).hexdigest() != sha256:
            raise RuntimeError(f"bpe-openai's {name} vocabulary is not the one tiktoken expects")
        tmp = target.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_bytes(raw)
        tmp.replace(target)
    return cache_dir


@functools.cache
def offline_encoding(name: str, cache_dir: Path = DEFAULT_CACHE) -> Any:
    """``tiktoken.get_encoding(name)``, loaded from the local cache (no network); memoized."""
    import tiktoken

    populate_cache(cache_dir)
    previous = os.environ.get("TIKTOKEN_CACHE_DIR")
    os.environ["TIKTOKEN_CACHE_DIR"] = str(cache_dir)
    try:
        return tiktoken.get_encoding(name)
    finally:
        if previous is None:
            del os.environ["TIKTOKEN_CACHE_DIR"]
        else:
            os.environ["TIKTOKEN_CACHE_DIR"] = previous
