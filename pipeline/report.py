"""``kcoord pipeline report``: one static HTML page, no scripts, no network.

The page holds the lag per group and per partition now, and two charts drawn
as inline SVG: each group's total lag over time (at each time step, the sum
over its partitions of the lag at their latest commit so far) and its commit
rate.  Spark does the heavy work (the lag at every commit, bucketed in time);
the page is drawn from the small result.
"""

from __future__ import annotations

import html
import math
import os
from datetime import datetime, timezone

from kcoord.pipeline import segments

BUCKETS = 120
PALETTE = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf", "#8c564b",
           "#e377c2", "#7f7f7f", "#bcbd22")
WIDTH, HEIGHT, PAD_LEFT, PAD_BOTTOM, PAD_TOP = 760, 260, 70, 40, 16


def series(rows, lo: int, width_ms: int) -> dict[str, dict[str, list]]:
    """Per group: the bucket times, the total lag at each bucket (forward-filled per
    partition) and commits per second in each bucket.

    ``rows``: (group, topic, partition, bucket, lag at the bucket's last commit,
    commits in the bucket)."""
    by_group: dict[str, dict[int, list]] = {}
    for group, topic, partition, bucket, lag, commits in rows:
        by_group.setdefault(group, {}).setdefault(bucket, []).append(((topic, partition), lag, commits))
    out = {}
    for group, buckets in sorted(by_group.items()):
        current: dict = {}
        times, lags, rates = [], [], []
        for bucket in range(min(buckets), max(buckets) + 1):
            n = 0
            for tp, lag, commits in buckets.get(bucket, ()):
                current[tp] = lag
                n += commits
            known = [v for v in current.values() if v is not None]
            times.append(lo + bucket * width_ms + width_ms)
            lags.append(sum(known) if known else None)
            rates.append(n / (width_ms / 1000.0))
        out[group] = {"time": times, "lag": lags, "rate": rates}
    return out


def _fmt_time(ms: int | None, millis: bool = False) -> str:
    if ms is None or ms < 0:
        return ""
    text = datetime.fromtimestamp(ms / 1000, timezone.utc).strftime("%Y-%m-%d %H:%M:%S.%f")
    return text[:-3] if millis else text[:-7]


def _fmt_number(v) -> str:
    if v is None:
        return "–"
    if isinstance(v, float) and not v.is_integer():
        return f"{v:,.2f}".rstrip("0").rstrip(".")
    return f"{int(v):,}"


def chart(title: str, data: dict[str, dict[str, list]], field: str, unit: str) -> str:
    """An SVG line chart of ``data[group][field]`` against ``data[group]["time"]``."""
    points = [(t, v) for d in data.values() for t, v in zip(d["time"], d[field]) if v is not None]
    esc = html.escape
    if not points:
        return f'<figure><figcaption>{esc(title)}</figcaption><p class="empty">no commits</p></figure>'
    t0, t1 = min(p[0] for p in points), max(p[0] for p in points)
    v1 = max(max(p[1] for p in points), 1)
    v1 = _nice_ceiling(v1)
    plot_w, plot_h = WIDTH - PAD_LEFT - 10, HEIGHT - PAD_BOTTOM - PAD_TOP

    def x(t):
        return PAD_LEFT + (plot_w * (t - t0) / (t1 - t0) if t1 > t0 else plot_w / 2)

    def y(v):
        return PAD_TOP + plot_h - plot_h * v / v1

    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" '
             f'role="img" aria-label="{esc(title)}">',
             f'<rect x="{PAD_LEFT}" y="{PAD_TOP}" width="{plot_w}" height="{plot_h}" '
             'fill="#fafafa" stroke="#ccc"/>']
    for i in range(5):
        v = v1 * i / 4
        parts.append(f'<line x1="{PAD_LEFT}" x2="{PAD_LEFT + plot_w}" y1="{y(v):.1f}" y2="{y(v):.1f}" '
                     'stroke="#e4e4e4"/>')
        parts.append(f'<text x="{PAD_LEFT - 6}" y="{y(v) + 4:.1f}" text-anchor="end" '
                     f'class="tick">{_fmt_number(v)}</text>')
    millis = t1 - t0 < 60_000  # a short span: the ends differ only in milliseconds
    parts.append(f'<text x="{PAD_LEFT}" y="{HEIGHT - 12}" class="tick">{_fmt_time(t0, millis)}</text>')
    parts.append(f'<text x="{PAD_LEFT + plot_w}" y="{HEIGHT - 12}" text-anchor="end" '
                 f'class="tick">{_fmt_time(t1, millis)} UTC</text>')
    for i, (group, d) in enumerate(data.items()):
        color = PALETTE[i % len(PALETTE)]
        runs, run = [], []
        for t, v in zip(d["time"], d[field]):
            if v is None:
                if run:
                    runs.append(run)
                run = []
            else:
                run.append(f"{x(t):.1f},{y(v):.1f}")
        if run:
            runs.append(run)
        for r in runs:
            if len(r) == 1:
                cx, cy = r[0].split(",")
                parts.append(f'<circle cx="{cx}" cy="{cy}" r="3" fill="{color}"/>')
            else:
                parts.append(f'<polyline fill="none" stroke="{color}" stroke-width="2.5" '
                             f'points="{" ".join(r)}"><title>{esc(group)}</title></polyline>')
    parts.append("</svg>")
    legend = "".join(f'<span class="key"><i style="background:{PALETTE[i % len(PALETTE)]}"></i>'
                     f'{esc(g)}</span>' for i, g in enumerate(data))
    return (f'<figure><figcaption>{esc(title)} <small>({esc(unit)})</small></figcaption>'
            f'{"".join(parts)}<div class="legend">{legend}</div></figure>')


def _nice_ceiling(v: float) -> float:
    magnitude = 10 ** math.floor(math.log10(v))
    for step in (1, 2, 2.5, 5, 10):
        if v <= step * magnitude:
            return step * magnitude
    return 10 * magnitude


def _table(headers: list[str], rows: list[list], numeric: set[int]) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in headers)
    body = "".join(
        "<tr>" + "".join(f'<td class="num">{_fmt_number(v)}</td>' if i in numeric
                         else f"<td>{html.escape('' if v is None else str(v))}</td>"
                         for i, v in enumerate(row)) + "</tr>" for row in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


STYLE = """
body { font: 14px/1.4 system-ui, sans-serif; margin: 24px; color: #222; }
h1 { font-size: 22px; } h2 { font-size: 17px; margin-top: 28px; }
table { border-collapse: collapse; margin: 8px 0; }
th, td { border: 1px solid #ddd; padding: 4px 10px; } th { background: #f2f2f2; text-align: left; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
figure { margin: 12px 0; } figcaption { font-weight: 600; margin-bottom: 4px; }
.tick { font-size: 11px; fill: #555; } .legend .key { margin-right: 14px; }
.legend i { display: inline-block; width: 12px; height: 12px; margin-right: 4px; vertical-align: -1px; }
.meta { color: #666; } .empty { color: #888; } .note { color: #8a5a00; }
"""


def render(groups: list, partitions: list, data: dict, data_dirs: list[str], generated: int,
           note: str | None = None) -> str:
    """The page from collected rows: ``groups`` (group, lag, max partition lag,
    partitions, last commit), ``partitions`` (group, topic, partition, committed,
    end offset, lag) and the ``series`` of each group; ``note``: what the page
    cannot show (commits compaction has removed)."""
    esc = html.escape
    note_html = f'<p class="note">Note: {esc(note)}.</p>' if note else ""
    group_rows = [[g, lag, mx, n, _fmt_time(last)] for g, lag, mx, n, last in groups]
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>kcoord consumer lag</title>
<style>{STYLE}</style></head><body>
<h1>Consumer lag</h1>
<p class="meta">Store: {esc(", ".join(data_dirs))} · generated {_fmt_time(generated)} UTC ·
{len(groups)} groups, {len(partitions)} partitions with committed offsets</p>
{note_html}
<h2>Groups</h2>
{_table(["group", "lag", "max partition lag", "partitions", "last commit (UTC)"], group_rows, {1, 2, 3})}
<h2>Lag over time</h2>
{chart("Total lag per group", data, "lag", "messages")}
<h2>Commit rate</h2>
{chart("Offset commits per group", data, "rate", "commits per second")}
<h2>Partitions</h2>
{_table(["group", "topic", "partition", "committed offset", "end offset", "lag"], partitions, {2, 3, 4, 5})}
</body></html>
"""


def write(spark, data_dirs: list[str], out: str) -> str:
    """Compute the report's data with Spark and write ``<out>/report.html``."""
    from pyspark.sql import functions as F

    from kcoord.pipeline import jobs

    per_partition, per_group = jobs.lag(spark, data_dirs)
    groups = [tuple(r) for r in per_group.orderBy("group").select(
        "group", "lag", "max_partition_lag", "partitions", "last_commit").collect()]
    partitions = [list(r) for r in per_partition.orderBy("group", "topic", "partition").select(
        "group", "topic", "partition", "committed_offset", "end_offset", "lag").collect()]
    history = jobs.lag_history(spark, data_dirs).cache()
    lo, hi = history.agg(F.min("commit_timestamp"), F.max("commit_timestamp")).first()
    data = {}
    if lo is not None:
        width = max(1, math.ceil((hi - lo + 1) / BUCKETS))
        rows = (history.withColumn("bucket", F.floor((F.col("commit_timestamp") - lo) / width).cast("int"))
                .groupBy("group", "topic", "partition", "bucket")
                .agg(F.max_by("lag", "commit_timestamp").alias("lag"), F.count(F.lit(1)).alias("n"))
                .collect())
        data = series([tuple(r) for r in rows], lo, width)
    history.unpersist()
    os.makedirs(out, exist_ok=True)
    path = os.path.join(out, "report.html")
    now = int(datetime.now(timezone.utc).timestamp() * 1000)
    with open(path, "w", encoding="utf-8") as f:
        f.write(render(groups, partitions, data, list(data_dirs), now,
                       segments.compaction_note(data_dirs)))
    return os.path.abspath(path)
