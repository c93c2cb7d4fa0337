#!/usr/bin/env python3
"""report.py: the pictures and the summary of a pruning run, from the files the tools wrote.

    report.py --out DIR [--title TEXT] [--run NAME] [--model NAME]   this run and its model
              [--log LABEL=LOG.jsonl]...          best-train's metrics (docs/best-train.md)
              [--after LABEL=OTHER]...            LABEL's run continues OTHER's: drawn after its last step
              [--heatmap LABEL=FILE.svg]...       best-mask --plot pictures, copied
              [--ppl METHOD:SPARSITY:DATA=EVAL.json]...   best-eval --json perplexities
              [--mask-report REPORT.json]         best-mask --report of the run's mask: the
                                                  sparsity it achieved, beside SPARSITY
              [--results FILE.jsonl]...           perplexity rows of other runs, to compare
              [--pack LABEL=PACK:MODEL_DIR]...    packed size against the HF folder's
              [--speed LABEL=GEN.jsonl]...        best-eval --generate --json lines
              [--zeroshot LABEL=ZS.json]...       best-eval --tasks --json: accuracy per task
              [--sample LABEL=GEN.json]           one generation, quoted in the summary
              [--print]                           also print the summary's table on stdout

writes into DIR (each file through a temporary name and a rename):
    loss.svg, lr.svg, sparsity.svg   one polyline per log, one point per logged step
                                     (sparsity: target dashed, counted solid)
    heatmap-N.svg                    the heatmaps, as best-mask drew them
    ppl.svg                          perplexity against sparsity, one line per model, method
                                     and data set (a run sharing a sparsity with another of
                                     its label gets its own line); dense rows are dashed
                                     reference lines
    results.jsonl                    {"run", "model", "method", "sparsity", "data", "ppl"} per
                                     perplexity, this run's and those of --results
    summary.md                       the tables and links to the pictures
    table.md                         the summary's tables without the pictures (what the
                                     demo prints at its end)

Python's standard library only (no matplotlib): the plots are SVG written here, plain
enough for a test to parse with xml.etree (tests/t_pipeline.sh does). Each data series is a
<polyline class="series" data-label="..."> whose points are in drawing order; axes carry
<text class="xlabel"> and <text class="ylabel">.
Not here: running anything (the makefiles do), the heatmap itself (best-mask draws it).
"""
import argparse
import json
import math
import os
import shutil
import sys
from xml.sax.saxutils import escape

W, H = 640, 400                 # picture size in px
ML, MR, MT, MB = 70, 150, 40, 50  # margins: left (y ticks), right (legend), top (title), bottom
COLORS = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf"]


def atomic_write(path, text):
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(tmp, path)


def nice_ticks(lo, hi, n=5):
    """About n round tick values covering [lo, hi]."""
    if hi <= lo:
        hi = lo + 1.0
    raw = (hi - lo) / n
    mag = 10 ** math.floor(math.log10(raw))
    step = min((m * mag for m in (1, 2, 5, 10) if m * mag >= raw), default=10 * mag)
    t = math.ceil(lo / step) * step
    out = []
    while t <= hi + 1e-9 * step:
        out.append(round(t, 12))
        t += step
    return out


def fmt(v):
    if v == 0:
        return "0"
    a = abs(v)
    if a >= 1e5 or a < 1e-3:
        return f"{v:.0e}"
    return f"{v:g}" if a >= 1 else f"{v:.4g}"


def marker(i, x, y, c, label):
    """Point of series i: a filled circle, then a hollow square, a hollow diamond, a cross,
    so that two series through the same point (BEST and BEST packed) both show."""
    k = i % 4
    a = f'class="marker" data-label="{escape(label)}" data-shape="{["circle", "square", "diamond", "cross"][k]}"'
    if k == 0:
        return f'<circle {a} cx="{x:.2f}" cy="{y:.2f}" r="3" fill="{c}"/>'
    if k == 1:
        return f'<rect {a} x="{x - 5:.2f}" y="{y - 5:.2f}" width="10" height="10" fill="none" stroke="{c}" stroke-width="1.5"/>'
    if k == 2:
        return (f'<polygon {a} points="{x:.2f},{y - 7:.2f} {x + 7:.2f},{y:.2f} {x:.2f},{y + 7:.2f} {x - 7:.2f},{y:.2f}" '
                f'fill="none" stroke="{c}" stroke-width="1.5"/>')
    return (f'<path {a} d="M{x - 6:.2f},{y - 6:.2f} L{x + 6:.2f},{y + 6:.2f} M{x - 6:.2f},{y + 6:.2f} '
            f'L{x + 6:.2f},{y - 6:.2f}" stroke="{c}" stroke-width="1.5"/>')


def line_plot(path, title, xlabel, ylabel, series, ylog=False, refs=(), xrange=None):
    """series: [(label, xs, ys, dashed)]; refs: [(label, y)] horizontal dashed lines;
    xrange: (x0, x1) to show at least. Points whose y is None or not finite (or <= 0 on a
    log axis) are left out. The picture widens to the right for long legend labels (about 7
    px a character), so that the plot keeps its size and nothing is cut."""
    names = [label for label, _ in refs] + [label for label, *_ in series]
    mr = max(MR, 45 + 7 * max(map(len, names), default=0))
    w = W - MR + mr

    def ok(y):
        return y is not None and math.isfinite(y) and (y > 0 or not ylog)
    pts = [(x, y) for _, xs, ys, _ in series for x, y in zip(xs, ys) if ok(y)]
    ys_all = [y for _, y in pts] + [y for _, y in refs if ok(y)]
    xs_all = [x for x, _ in pts]
    x0, x1 = (min(xs_all), max(xs_all)) if xs_all else (0.0, 1.0)
    if xrange:
        x0, x1 = min(x0, xrange[0]), max(x1, xrange[1])
    if x1 <= x0:
        x0, x1 = x0 - 0.5, x1 + 0.5
    f = (lambda y: math.log10(y)) if ylog else (lambda y: y)
    y0, y1 = (min(map(f, ys_all)), max(map(f, ys_all))) if ys_all else (0.0, 1.0)
    if y1 <= y0:
        y0, y1 = y0 - 0.5, y1 + 0.5
    pad = 0.05 * (y1 - y0)
    y0, y1 = y0 - pad, y1 + pad
    if not ylog and min(ys_all, default=1) >= 0 and y0 < 0:
        y0 = 0.0
    pw, ph = w - ML - mr, H - MT - MB

    def px(x):
        return ML + (x - x0) / (x1 - x0) * pw

    def py(y):
        return MT + ph - (f(y) - y0) / (y1 - y0) * ph

    o = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{H}" viewBox="0 0 {w} {H}" '
         f'font-family="sans-serif" font-size="12">',
         f'<rect width="{w}" height="{H}" fill="white"/>',
         f'<text class="title" x="{w / 2:.1f}" y="22" text-anchor="middle" font-size="14">{escape(title)}</text>',
         f'<rect class="frame" x="{ML}" y="{MT}" width="{pw}" height="{ph}" fill="none" stroke="#333"/>']
    for t in nice_ticks(x0, x1):
        x = px(t)
        o.append(f'<line x1="{x:.1f}" y1="{MT + ph}" x2="{x:.1f}" y2="{MT + ph + 5}" stroke="#333"/>')
        o.append(f'<text class="xtick" x="{x:.1f}" y="{MT + ph + 18}" text-anchor="middle">{fmt(t)}</text>')
    if ylog:
        yticks = [10 ** e for e in range(math.floor(y0), math.ceil(y1) + 1) if y0 <= e <= y1]
        if len(yticks) < 2:
            yticks = [10 ** t for t in nice_ticks(y0, y1)]
    else:
        yticks = nice_ticks(y0, y1)
    for t in yticks:
        y = py(t)
        o.append(f'<line x1="{ML - 5}" y1="{y:.1f}" x2="{ML + pw}" y2="{y:.1f}" stroke="#ddd"/>')
        o.append(f'<text class="ytick" x="{ML - 8}" y="{y + 4:.1f}" text-anchor="end">{fmt(t)}</text>')
    o.append(f'<text class="xlabel" x="{ML + pw / 2:.1f}" y="{H - 12}" text-anchor="middle">{escape(xlabel)}</text>')
    o.append(f'<text class="ylabel" x="16" y="{MT + ph / 2:.1f}" text-anchor="middle" '
             f'transform="rotate(-90 16 {MT + ph / 2:.1f})">{escape(ylabel)}{" (log scale)" if ylog else ""}</text>')
    legend = []
    # reference lines (the dense model on each data set): each its own grey and dash, named
    # in the legend (a label on the line would sit on the points near it)
    REF_STYLES = [("#555", "2 3"), ("#999", "9 4"), ("#333", "1 5"), ("#777", "6 2 1 2")]
    for i, (label, y) in enumerate(refs):
        if ok(y):
            c, dash = REF_STYLES[i % len(REF_STYLES)]
            o.append(f'<line class="ref" data-label="{escape(label)}" x1="{ML}" y1="{py(y):.1f}" x2="{ML + pw}" '
                     f'y2="{py(y):.1f}" stroke="{c}" stroke-dasharray="{dash}"/>')
            legend.append((label, c, dash, None, True))
    for i, (label, xs, ys, dashed) in enumerate(series):
        c = COLORS[i % len(COLORS)]
        p = " ".join(f"{px(x):.2f},{py(y):.2f}" for x, y in zip(xs, ys) if ok(y))
        dash = ' stroke-dasharray="6 4"' if dashed else ""
        o.append(f'<polyline class="series" data-label="{escape(label)}" fill="none" stroke="{c}" '
                 f'stroke-width="1.5"{dash} points="{p}"/>')
        n = sum(1 for y in ys if ok(y))
        if n <= 12:  # few points: mark them, each series its own shape
            for x, y in zip(xs, ys):
                if ok(y):
                    o.append(marker(i, px(x), py(y), c, label))
        # the legend shows what the plot draws: the line where there is one (2 points or
        # more), the marker where there are markers
        legend.append((label, c, "6 4" if dashed else None, i if n <= 12 else None, n >= 2))
    for k, (label, c, dash, mark, drawn) in enumerate(legend):
        y = MT + 10 + 18 * k
        dash = f' stroke-dasharray="{dash}"' if dash else ""
        if drawn:
            o.append(f'<line class="legend-line" x1="{w - mr + 10}" y1="{y}" x2="{w - mr + 30}" y2="{y}" stroke="{c}" '
                     f'stroke-width="2"{dash}/>')
        if mark is not None:
            o.append(marker(mark, w - mr + 20, y, c, label).replace('class="marker"', 'class="legend-marker"', 1))
        o.append(f'<text class="legend" x="{w - mr + 35}" y="{y + 4}">{escape(label)}</text>')
    o.append("</svg>")
    atomic_write(path, "\n".join(o) + "\n")


def split_kv(s, what):
    if "=" not in s:
        sys.exit(f"report.py: {what} {s!r}: want LABEL=FILE")
    k, v = s.split("=", 1)
    return k, v


def read_log(path):
    rows = []
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if line.strip():
                try:
                    rows.append(json.loads(line))
                except json.JSONDecodeError as e:
                    sys.exit(f"report.py: {path}:{n}: not JSON ({e})")
    if not rows:
        sys.exit(f"report.py: {path}: no steps logged")
    return rows


def model_bytes(d):
    return sum(os.path.getsize(os.path.join(d, f)) for f in os.listdir(d)
               if f.startswith("model") and f.endswith(".safetensors"))


def gen_rate(path):
    """(tokens/s, tokens, seconds) over the JSON lines of best-eval --generate --json."""
    tok = sec = 0.0
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.strip():
                g = json.loads(line)
                tok += g["new_tokens"]
                sec += g["seconds"]
    return (tok / sec if sec > 0 else float("nan")), int(tok), sec


def human_bytes(n):
    """Binary units, as the tools print sizes (base/progress.h's human_units)."""
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024


def merge_dense(rows):
    """The dense rows of one model from several runs are one row when they agree on every
    data set they share (each run evaluates the same dense model; the run cell lists them
    all); when they disagree, each run keeps its own."""
    out, dense = [], {}
    for r in rows:
        if r["method"] == "dense":
            dense.setdefault(r["model"], {}).setdefault(r["run"], []).append(r)
        else:
            out.append(r)
    for model, by_run in dense.items():
        per_data = {}
        for rs in by_run.values():
            for r in rs:
                per_data.setdefault(r["data"], set()).add(json.dumps(r["ppl"]))
        if len(by_run) > 1 and all(len(v) == 1 for v in per_data.values()):
            name, seen = ", ".join(sorted(by_run)), set()
            for ru in sorted(by_run):
                for r in by_run[ru]:
                    if r["data"] not in seen:
                        seen.add(r["data"])
                        out.append(dict(r, run=name))
        else:
            out += [r for rs in by_run.values() for r in rs]
    return out


def data_order(d):
    """WikiText-2 first, C4 second (the papers' order), then the others by name."""
    return ({"wikitext2": 0, "wiki": 0, "c4": 1}.get(d, 2), d)


def method_order(m, given):
    """dense first, then this run's methods in the order of its --ppl, then the others by
    name (so that a comparison of runs does not depend on the order they were given in)."""
    return (m != "dense", given.index(m) if m in given else len(given), m)


def row_order(r, given):
    return (r["model"], r["sparsity"], method_order(r["method"], given), r["run"], data_order(r["data"]))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--title", default="pruning run")
    ap.add_argument("--run", default="")    # this run's name in the tables (best.mk: its OUT)
    ap.add_argument("--model", default="")  # the model it prunes (best.mk: MODEL's folder name)
    ap.add_argument("--mask-report")        # best-mask --report of the run's mask: its achieved sparsity
    ap.add_argument("--log", action="append", default=[])
    ap.add_argument("--after", action="append", default=[])  # LABEL=OTHER: LABEL's steps follow OTHER's last
    ap.add_argument("--heatmap", action="append", default=[])
    ap.add_argument("--ppl", action="append", default=[])
    ap.add_argument("--results", action="append", default=[])
    ap.add_argument("--pack", action="append", default=[])
    ap.add_argument("--speed", action="append", default=[])
    ap.add_argument("--zeroshot", action="append", default=[])
    ap.add_argument("--sample")
    ap.add_argument("--print", action="store_true")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    md = [f"# {a.title}", ""]

    # Training curves: one point per logged step, in step order.
    logs = [(k, read_log(v)) for k, v in map(lambda s: split_kv(s, "--log"), a.log)]
    # a run that continues another (BEST after pretraining) is drawn after its last step, not
    # over it: its steps shifted by that many (the table keeps its own step counts)
    shift = {}
    for k, other in map(lambda s: split_kv(s, "--after"), a.after):
        prev = dict(logs).get(other)
        if k not in dict(logs) or not prev:
            sys.exit(f"report.py: --after {k}={other}: no --log of that name")
        shift[k] = prev[-1]["step"] + shift.get(other, 0)
    if logs:
        def col(rows, key, k=None):
            return [r.get(key) + shift.get(k, 0) if key == "step" else r.get(key) for r in rows]
        line_plot(os.path.join(a.out, "loss.svg"), "training loss", "step", "loss",
                  [(k, col(r, "step", k), col(r, "loss"), False) for k, r in logs])
        line_plot(os.path.join(a.out, "lr.svg"), "learning rate", "step", "learning rate",
                  [(k, col(r, "step", k), col(r, "lr"), False) for k, r in logs])
        sp = []
        for k, r in logs:
            if not any(x.get("sparsity") for x in r) and len(logs) > 1:
                continue  # a dense run among sparse ones: nothing to show
            if any(x is not None for x in col(r, "sparsity_target")):
                sp.append((f"{k} target", col(r, "step", k), col(r, "sparsity_target"), True))
            sp.append((f"{k} actual", col(r, "step", k), col(r, "sparsity"), False))
        line_plot(os.path.join(a.out, "sparsity.svg"), "sparsity of the prunable weights", "step", "sparsity", sp)
        md += ["## Training", "", "| run | steps | first loss | last loss | final sparsity | tokens/s (run average) |",
               "|---|---:|---:|---:|---:|---:|"]
        for k, r in logs:
            # best-train's own average (its progress line's figure); logs from before it
            # existed: the tokens of the logged steps over the sum of their times
            avg = r[-1].get("tokens_per_s_avg")
            if avg is None:
                steps = [x["tokens_per_s"] for x in r if x.get("tokens_per_s")]
                avg = len(steps) / sum(1 / t for t in steps) if steps else float("nan")
            md.append(f"| {k} | {r[-1]['step']} | {r[0]['loss']:.3f} | {r[-1]['loss']:.3f} | "
                      f"{r[-1]['sparsity']:.4f} | {avg:.0f} |")
        md += ["", "![loss](loss.svg) ![lr](lr.svg) ![sparsity](sparsity.svg)", ""]

    # Where the sparsity went: best-mask's own pictures.
    if a.heatmap:
        md += ["## Sparsity per layer and module", ""]
        for i, (k, v) in enumerate(split_kv(s, "--heatmap") for s in a.heatmap):
            name = f"heatmap-{i + 1}.svg"
            shutil.copyfile(v, os.path.join(a.out, name + ".tmp"))
            os.replace(os.path.join(a.out, name + ".tmp"), os.path.join(a.out, name))
            md += [f"{k}:", "", f"![{k}]({name})", ""]

    # Perplexity: this run's evaluations, plus rows of other runs. A row is one run's
    # perplexity of one method at one sparsity on one data set; rows are kept apart by run
    # and model, never merged by their label (two runs labelled alike are two rows, and a
    # note says so), and ordered by their content, not by the order the runs were given.
    rows = []
    achieved = None  # the sparsity the run's mask has, where its rule gives a little less (Wanda's rows)
    if a.mask_report:
        with open(a.mask_report, encoding="utf-8") as f:
            achieved = json.load(f)["total"]["sparsity"]
    for s in a.ppl:
        k, v = split_kv(s, "--ppl")
        parts = k.rsplit(":", 2)
        if len(parts) != 3:
            sys.exit(f"report.py: --ppl {s!r}: want METHOD:SPARSITY:DATA=FILE")
        with open(v, encoding="utf-8") as f:
            e = json.load(f)
        rows.append({"run": a.run, "model": a.model, "method": parts[0], "sparsity": float(parts[1]),
                     "data": parts[2], "ppl": float("nan") if e["ppl"] is None else e["ppl"]})  # null: NaN/inf
        if achieved is not None and parts[0] != "dense":
            rows[-1]["achieved"] = achieved
    given = list(dict.fromkeys(r["method"] for r in rows))  # this run's methods, in its order
    for p in a.results:
        with open(p, encoding="utf-8") as f:
            for n, line in enumerate(f, 1):
                if not line.strip():
                    continue
                try:
                    r = json.loads(line)
                    r["sparsity"], r["ppl"] = float(r["sparsity"]), float("nan" if r["ppl"] is None else r["ppl"])
                    r["method"], r["data"] = str(r["method"]), str(r["data"])
                except (json.JSONDecodeError, KeyError, TypeError, ValueError) as e:
                    sys.exit(f"report.py: {p}:{n}: not a perplexity row ({e})")
                # rows written before runs were named: the run is the folder above report/
                r.setdefault("run", os.path.dirname(os.path.dirname(os.path.abspath(p))) if
                             os.path.basename(os.path.dirname(os.path.abspath(p))) == "report" else p)
                r.setdefault("model", "")
                rows.append(r)
    rows = merge_dense(rows)
    rows.sort(key=lambda r: row_order(r, given))
    atomic_write(os.path.join(a.out, "results.jsonl"), "".join(json.dumps(r) + "\n" for r in rows))
    table = []
    if rows:
        datas = sorted(dict.fromkeys(r["data"] for r in rows), key=data_order)
        models = sorted(dict.fromkeys(r["model"] for r in rows))
        runs = sorted(dict.fromkeys(r["run"] for r in rows))
        keys = sorted(dict.fromkeys((r["model"], r["run"], r["method"], r["sparsity"]) for r in rows),
                      key=lambda k: (k[0], k[3], method_order(k[2], given), k[1]))
        # two runs with one label at one sparsity (and model): named apart everywhere
        clash = {}
        for mo, ru, me, sp in keys:
            clash.setdefault((mo, me, sp), []).append(ru)
        clash = {k: v for k, v in clash.items() if len(v) > 1}
        series, refs = [], []
        for mo in models:
            for d in datas:
                for me in sorted(dict.fromkeys(r["method"] for r in rows if r["data"] == d and r["model"] == mo),
                                 key=lambda m: method_order(m, given)):
                    mine = [r for r in rows if (r["model"], r["data"], r["method"]) == (mo, d, me)]
                    # one line through the runs of this method; a run that shares a sparsity
                    # with another gets its own line, named by its run
                    per_sp = {}
                    for r in mine:
                        per_sp.setdefault(r["sparsity"], set()).add(r["run"])
                    shared = {ru for rs in per_sp.values() if len(rs) > 1 for ru in rs}
                    groups = [(None, [r for r in mine if r["run"] not in shared])]
                    groups += [(ru, [r for r in mine if r["run"] == ru]) for ru in sorted(shared)]
                    for ru, grp in groups:
                        pts = sorted((r["sparsity"], r["ppl"]) for r in grp if math.isfinite(r["ppl"]))
                        if not pts:  # every perplexity NaN or inf (or no rows): the table says so
                            continue
                        label = me + (f" ({d})" if len(datas) > 1 else "") + (f" [{mo}]" if len(models) > 1 else "")
                        label += f" [{ru}]" if ru is not None else ""
                        if me == "dense":
                            refs.append((label, pts[0][1]))
                        else:
                            series.append((label, [x for x, _ in pts], [y for _, y in pts], False))
        ys = [r["ppl"] for r in rows if r["ppl"] > 0 and math.isfinite(r["ppl"])]
        ylog = bool(ys) and max(ys) / min(ys) > 20
        line_plot(os.path.join(a.out, "ppl.svg"), "perplexity against sparsity", "sparsity", "perplexity",
                  series, ylog=ylog, refs=refs, xrange=(0.0, 1.0))
        # the model and run columns, unless no row names one (report.py run by hand)
        named = [(i, h) for i, h in ((0, "model"), (1, "run")) if any(k[i] for k in keys)]
        table += ["| " + "".join(f"{h} | " for _, h in named) + "method | sparsity | " + " | ".join(datas) + " |",
                  "|" + "---|" * len(named) + "---|---:|" + "---:|" * len(datas)]
        for k in keys:
            mo, ru, me, sp = k
            cells = []
            for d in datas:
                v = [r["ppl"] for r in rows if (r["model"], r["run"], r["method"], r["sparsity"], r["data"]) ==
                     (mo, ru, me, sp, d)]
                cells.append(f"{v[0]:.3f}" if v and v[0] < 1e4 else (f"{v[0]:.3g}" if v else "-"))
            ach = [r["achieved"] for r in rows if (r["model"], r["run"], r["method"], r["sparsity"]) == (mo, ru, me, sp)
                   and r.get("achieved") is not None]
            spc = f"{sp:g}" + (f" ({100 * ach[0]:.2f}% achieved)" if ach and abs(ach[0] - sp) >= 5e-5 else "")
            table.append("| " + "".join(f"{k[i] or '-'} | " for i, _ in named) + f"{me} | {spc} | " +
                         " | ".join(cells) + " |")
        table.append("")
        for (mo, me, sp), rs in sorted(clash.items()):
            table.append(f"Runs {', '.join(rs)} share the label '{me}' at sparsity {sp:g}"
                         f"{f' ({mo})' if mo else ''}: each has its own row and line; name them apart with "
                         f"LABEL= (docs/pipelines.md).")
        if clash:
            table.append("")
        md += ["## Perplexity", ""] + table + ["![perplexity against sparsity](ppl.svg)", ""]

    # Zero-shot accuracy: one row per run, one column per task (acc_norm where the harness
    # reports it, as the pruning papers' tables do, else acc) with the harness's standard
    # error, then our unweighted mean; the documents per task under the table, and a run
    # cut by --limit says so in the heading.
    if a.zeroshot:
        runs = []
        for k, v in (split_kv(s, "--zeroshot") for s in a.zeroshot):
            with open(v, encoding="utf-8") as f:
                runs.append((k, json.load(f)))
        runs.sort(key=lambda kr: (kr[0] != "dense", kr[0]))
        tasks = sorted(dict.fromkeys(t for _, r in runs for t in r["tasks"]))
        zt = ["| zero-shot | " + " | ".join(tasks) + " | mean |", "|---|" + "---:|" * (len(tasks) + 1)]
        for k, r in runs:
            cells = []
            for t in tasks:
                x = r["tasks"].get(t)
                if x is None:
                    cells.append("-")
                    continue
                norm = "acc_norm" in x
                acc, se = x["acc_norm" if norm else "acc"], x.get("acc_norm_stderr" if norm else "acc_stderr")
                cells.append(f"{100 * acc:.2f}" + (f" ± {100 * se:.2f}" if se is not None else ""))
            zt.append(f"| {k} | " + " | ".join(cells) + f" | {100 * r['mean_acc_norm_or_acc']:.2f} |")
        ns = {json.dumps({t: x.get("n") for t, x in sorted(r["tasks"].items())}) for _, r in runs}
        zt.append("")
        for k, r in (runs if len(ns) > 1 else runs[:1]):
            who = f" ({k})" if len(ns) > 1 else ""
            zt.append(f"Documents per task{who}: " + ", ".join(f"{t} {x.get('n', '?')}" for t, x in
                                                               sorted(r["tasks"].items())) + ".")
        zt += ["", "(accuracy in %, ± the harness's standard error: acc_norm for arc_easy, arc_challenge, hellaswag, "
               "openbookqa; acc for the others; lm-evaluation-harness's protocol, docs/best-eval.md)", ""]
        limits = sorted({r["limit"] for _, r in runs if r.get("limit")})
        head = "## Zero-shot accuracy"
        if limits:
            head += (f" (LIMITED: the first {' or '.join(map(str, limits))} documents of each task, "
                     "not comparable with full runs)")
        table += ([head.replace("## ", "") + ":", ""] if limits else []) + zt  # (table.md has no headings)
        md += [head, ""] + zt

    extra = []
    if a.pack:
        extra += ["| packed model | pack | HF folder | ratio |", "|---|---:|---:|---:|"]
        for k, v in (split_kv(s, "--pack") for s in a.pack):
            pack, model = v.rsplit(":", 1)
            pb, db = os.path.getsize(pack), model_bytes(model)
            extra.append(f"| {k} | {human_bytes(pb)} | {human_bytes(db)} | {pb / db:.3f} |")
        extra.append("")
    if a.speed:
        extra += ["| decoding | tokens/s | tokens | seconds |", "|---|---:|---:|---:|"]
        for k, v in (split_kv(s, "--speed") for s in a.speed):
            r, n, sec = gen_rate(v)
            extra.append(f"| {k} | {r:.0f} | {n} | {sec:.3f} |")
        extra.append("")
    if a.sample:
        k, v = split_kv(a.sample, "--sample")
        with open(v, encoding="utf-8") as f:
            g = json.load(f)
        text = (g["prompt"] + g["text"]).replace("<|endoftext|>", "").strip()
        extra += [f"Sample ({k}, greedy): \"{text}\"", ""]
    if extra:  # the heading names what is under it
        parts = [n for n, given in (("packing", a.pack), ("decoding", a.speed), ("a sample", a.sample)) if given]
        head = parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]
        md += ["## " + head[0].upper() + head[1:], ""] + extra
    atomic_write(os.path.join(a.out, "summary.md"), "\n".join(md).rstrip() + "\n")
    atomic_write(os.path.join(a.out, "table.md"), "\n".join(table + extra).rstrip() + "\n")
    if a.print:
        print("\n".join(table + extra).rstrip())


if __name__ == "__main__":
    main()
