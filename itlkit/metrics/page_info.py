"""vLLM's info metrics on a page: `vllm:cache_config_info`'s labels (the KV cache's size and
the engine's memory share), which say how much GPU memory the server had."""

from __future__ import annotations

from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from itlkit.errors import SourceError

CACHE_CONFIG = "vllm:cache_config_info"


def cache_config(text: str, *, source: str = "<page>") -> dict[str, str] | None:
    """The labels of the page's last `vllm:cache_config_info` sample (None if it has none)."""
    found = None
    for number, line in enumerate(text.split("\n"), start=1):
        if not line.startswith(CACHE_CONFIG + "{"):
            continue
        try:
            (family,) = text_string_to_metric_families(line + "\n")
            found = dict(family.samples[0].labels)
        except (ValueError, IndexError) as exc:
            raise SourceError(f"{source}:{number}: malformed {CACHE_CONFIG} line ({exc})") from None
    return found


def cache_config_of_texts(pages) -> dict[str, str] | None:
    """`cache_config` of the last of `pages` ((source, text) pairs) that has one."""
    found = None
    for source, text in pages:
        found = cache_config(text, source=source) or found
    return found


def cache_config_of_files(paths) -> dict[str, str] | None:
    """`cache_config` of the last page among `paths` (files or folders of scrapes) that has one."""
    return cache_config_of_texts(_page_texts(paths))


def _page_texts(paths):
    """(file name, text) of every page among `paths`, folders read in name order."""
    for path in map(Path, paths):
        files = sorted(path.glob("*.prom")) if path.is_dir() else [path]
        for file in files:
            if file.suffix != ".json" and file.is_file():
                yield str(file), file.read_text(encoding="utf-8", errors="replace")
