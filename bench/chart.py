#!/usr/bin/env python3
"""bench/chart.py: draws bench/run's results as an SVG bar chart.

    bench/chart.py RESULTS.jsonl OUT.svg [--title TEXT] [--note TEXT]

RESULTS.jsonl is what `bench/run --json FILE` keeps (one line per row and
repetition). For each workload, one bar per peer: its median rate as a ratio
to the workload's raw hiredis baseline (the ceiling most of its rows name,
e.g. raw-async for seq, raw-sync-poll for contend), with the rate itself written beside the
bar. Raw baselines are grey, dlock rows blue, other peers (node-redlock)
orange. Rows without a rate (the watchdog) and failed rows are listed under
the chart. Standard library only; writes plain SVG 1.1.
"""
import collections
import json
import statistics
import sys
from xml.sax.saxutils import escape

COLORS = {"raw": "#9e9e9e", "dlock": "#1f77b4", "peer": "#ff7f0e"}


def load(path):
    rows, order = {}, []
    for line in open(path):
        line = line.strip()
        if not line:
            continue
        e = json.loads(line)
        if e["id"] not in rows:
            rows[e["id"]] = {"ceiling": e["ceiling"], "runs": [], "errors": 0}
            order.append(e["id"])
        if "r" in e:
            rows[e["id"]]["runs"].append(e["r"])
        else:
            rows[e["id"]]["errors"] += 1
    return rows, order


def rate(runs):
    for key in ("cs_per_s", "cycles_per_s"):
        v = [r[key] for r in runs if isinstance(r.get(key), (int, float))]
        if v:
            return statistics.median(v)
    return None


def kind(peer):
    if peer.startswith("raw"):
        return "raw"
    if peer.startswith("dlock"):
        return "dlock"
    return "peer"


def human(v):
    if v >= 10000:
        return f"{v / 1000:,.0f}k/s"
    if v >= 1000:
        return f"{v / 1000:,.1f}k/s"
    return f"{v:,.0f}/s"


def draw(rows, order, title, note):
    groups = []  # [workload, baseline peer, baseline rate, [(peer, kind, rate)]]
    skipped = []
    refs = {}  # workload -> Counter of the rows' first ceilings
    for id_ in order:
        wl = id_.split(".", 1)[0]
        first = rows[id_]["ceiling"].split(";")[0]
        if first != "-":
            refs.setdefault(wl, collections.Counter())[first] += 1
    for id_ in order:
        wl, peer = id_.split(".", 1)
        row = rows[id_]
        r = rate(row["runs"])
        if r is None:
            skipped.append(f"{id_}: " + ("failed" if row["errors"] and not row["runs"] else "no rate"))
            continue
        if not groups or groups[-1][0] != wl:
            groups.append([wl, None, None, []])
        groups[-1][3].append((peer, kind(peer), r))
    # Each workload's baseline: the raw row most of its rows are measured
    # against (bench/run's first ceiling), else its first raw row.
    for g in groups:
        wl, bars = g[0], g[3]
        ref = refs[wl].most_common(1)[0][0].split(".", 1)[1] if wl in refs else None
        for peer, _, r in bars:
            if peer == ref or (ref is None and g[1] is None):
                g[1], g[2] = peer, r
    label_w, bar_w, right_w = 330, 420, 150
    width = label_w + bar_w + right_w
    row_h, gap_h, head_h = 18, 26, 22
    max_ratio = 1.0
    for _, _, base, bars in groups:
        for _, _, r in bars:
            if base:
                max_ratio = max(max_ratio, r / base)
    max_ratio = max(1.2, round(max_ratio + 0.1, 1))
    y = 66
    body = []
    for wl, base_peer, base, bars in groups:
        body.append(f'<text x="8" y="{y + 14}" class="wl">{escape(wl)}'
                    f'<tspan class="small"> (ratio to {escape(base_peer or "?")})</tspan></text>')
        y += head_h
        for peer, k, r in bars:
            ratio = r / base if base else None
            w = bar_w * (ratio / max_ratio) if ratio else 0
            body.append(f'<text x="{label_w - 8}" y="{y + 13}" text-anchor="end">{escape(peer)}</text>')
            body.append(f'<rect x="{label_w}" y="{y + 2}" width="{w:.1f}" height="{row_h - 4}" fill="{COLORS[k]}"/>')
            txt = f"{ratio:.2f}× · {human(r)}" if ratio else human(r)
            body.append(f'<text x="{label_w + w + 6:.1f}" y="{y + 13}">{escape(txt)}</text>')
            y += row_h
        y += gap_h - row_h // 2
    x1 = label_w + bar_w / max_ratio
    grid = (f'<line x1="{x1:.1f}" y1="58" x2="{x1:.1f}" y2="{y - 10}" stroke="#444" '
            f'stroke-dasharray="4 3"/><text x="{x1:.1f}" y="56" text-anchor="middle" '
            f'class="small">1.0 = raw hiredis</text>')
    foot = []
    for line in ([note] if note else []) + ([f"not drawn: {'; '.join(skipped)}"] if skipped else []):
        foot.append(f'<text x="8" y="{y + 4}" class="small">{escape(line)}</text>')
        y += 16
    height = y + 8
    legend = "".join(
        f'<rect x="{label_w + i * 110}" y="{30}" width="12" height="12" fill="{COLORS[k]}"/>'
        f'<text x="{label_w + i * 110 + 16}" y="{40}" class="small">{name}</text>'
        for i, (k, name) in enumerate([("raw", "raw hiredis"), ("dlock", "dlock"), ("peer", "other peer")]))
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
            f'viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="12">\n'
            '<style>.wl{font-weight:bold;font-size:13px}.small{font-size:11px;fill:#444}'
            '.title{font-weight:bold;font-size:14px}</style>\n'
            f'<rect width="{width}" height="{height}" fill="#fff"/>\n'
            f'<text x="8" y="20" class="title">{escape(title)}</text>\n{legend}\n{grid}\n'
            + "\n".join(body + foot) + "\n</svg>\n")


def main(argv):
    args, title, note = [], "bench/run: median rate per workload, as a ratio to raw hiredis", ""
    i = 1
    while i < len(argv):
        if argv[i] == "--title":
            title, i = argv[i + 1], i + 2
        elif argv[i] == "--note":
            note, i = argv[i + 1], i + 2
        else:
            args.append(argv[i])
            i += 1
    if len(args) != 2:
        sys.stderr.write(__doc__)
        return 2
    rows, order = load(args[0])
    with open(args[1], "w") as f:
        f.write(draw(rows, order, title, note))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
