"""``kcoord pipeline report``: the page, rendered in headless Chromium, shows the
groups' lag table and draws their lines in the charts."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections import Counter

import pytest

from kcoord.pipeline import report


def _chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if not found:
        reason = "Chromium is not installed (Debian: apt-get install chromium)"
        if os.environ.get("KCOORD_REQUIRE_CHROMIUM") == "1":
            pytest.fail(f"{reason} (KCOORD_REQUIRE_CHROMIUM=1)", pytrace=False)
        pytest.skip(reason)
    return found


def _headless(chromium: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu",
                           "--hide-scrollbars", "--no-first-run", *args],
                          capture_output=True, text=True, timeout=120, check=True)


def _hex(color: str) -> tuple[int, int, int]:
    return tuple(int(color[i:i + 2], 16) for i in (1, 3, 5))


def test_series_sum_the_latest_lag_of_each_partition_per_time_step():
    rows = [("g", "t", 0, 0, 10, 1), ("g", "t", 1, 0, 5, 2),  # bucket 0: both partitions
            ("g", "t", 0, 2, 3, 1),  # bucket 2: partition 0 only; 1 keeps its lag of 5
            ("h", "t", 0, 1, None, 1)]  # a commit with no known end offset
    got = report.series(rows, lo=1_000, width_ms=2_000)
    assert got["g"] == {"time": [3_000, 5_000, 7_000], "lag": [15, 15, 8], "rate": [1.5, 0.0, 0.5]}
    assert got["h"] == {"time": [5_000], "lag": [None], "rate": [0.5]}


def test_the_report_page_shows_the_groups_lag_and_charts(spark, store, tmp_path):
    chromium = _chromium()
    path = report.write(spark, [str(store.data_dir)], str(tmp_path / "report"))
    url = f"file://{path}"
    dom = _headless(chromium, "--dump-dom", url).stdout
    for group in ("billing", "audit", "trimmed"):
        assert f"<td>{group}</td>" in dom
    billing_lag = sum(store.end_offsets[(t, p)] - committed
                      for (g, t, p), (committed, _m) in store.fetched.items() if g == "billing")
    assert f'<td class="num">{billing_lag:,}</td>' in dom
    assert dom.count("<polyline") >= 2 and dom.count("<svg") == 2

    shot = tmp_path / "report.png"
    _headless(chromium, "--window-size=1000,1600", f"--screenshot={shot}", url)
    from PIL import Image

    rgb = Image.open(shot).convert("RGB").tobytes()
    pixels = Counter(zip(rgb[0::3], rgb[1::3], rgb[2::3]))
    groups = sorted({g for g, *_ in store.commits})  # the charts' groups, in legend order
    billing = _hex(report.PALETTE[groups.index("billing")])
    # A legend square is 12x12 pixels in each of the two charts; billing's lines
    # (its commits are spread over a few hundred milliseconds) paint more.
    assert pixels[billing] > 2 * 144 + 40, pixels.most_common(8)
    assert '<title>billing</title>' in dom
    for i, _group in enumerate(groups):
        assert pixels[_hex(report.PALETTE[i])] >= 2 * 144 * 0.9
    assert pixels[(255, 255, 255)] < 0.97 * sum(pixels.values())  # not a blank page


def test_the_page_says_when_compaction_has_removed_older_commits():
    note = "compaction has already cleaned 2 __consumer_offsets partition(s) (up to offset 9)"
    page = report.render([], [], {}, ["./data"], 0, note)
    assert f'<p class="note">Note: {note}.</p>' in page
    assert 'class="note"' not in report.render([], [], {}, ["./data"], 0)
