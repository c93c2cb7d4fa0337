# svgcheck.py KIND FILE.svg [ARGS]: checks a picture written by pipelines/report.py or
# best-mask in two ways, and prints ok/not ok lines:
#   - its content, parsed as XML: the series, points, labels, cells it must have;
#   - its rendering by rsvg-convert (librsvg, what GNOME and many viewers use): the
#     picture renders without a warning at its declared size, draws nothing outside its
#     canvas (rendered again with a margin around it, which must stay transparent), and
#     each series, marker, reference line and cell shows its own colour where the SVG
#     puts it (so a point hidden under another, or a title cut at the edge, fails).
# Used by t_pipeline.sh, t_mask.sh and t_demo.sh.
#
#   svgcheck.py curve FILE.svg KEY LOG.jsonl NLINES   a report.py curve of KEY from LOG
#   svgcheck.py ppl FILE.svg LABEL...                 report.py's perplexity plot
#   svgcheck.py heatmap FILE.svg LAYERS [MEAN]        best-mask --plot's heatmap
#   svgcheck.py render FILE.svg                       any of them: the rendering checks only
import json, math, os, re, struct, subprocess, sys, tempfile, zlib
import xml.etree.ElementTree as ET

NS = "{http://www.w3.org/2000/svg}"


def report(ok, what):
    print(("ok - " if ok else "not ok - ") + what)


# --- rendering ---------------------------------------------------------------------------

def png_decode(data):
    """(width, height, rows): rows[y][4x:4x+4] the RGBA of pixel (x, y). 8-bit RGBA or RGB,
    not interlaced: what rsvg-convert writes."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos, idat = 8, b""
    while pos < len(data):
        n, kind = struct.unpack(">I4s", data[pos:pos + 8])
        chunk = data[pos + 8:pos + 8 + n]
        if kind == b"IHDR":
            w, h, depth, ctype, _, _, interlace = struct.unpack(">IIBBBBB", chunk)
            assert depth == 8 and ctype in (2, 6) and interlace == 0, (depth, ctype, interlace)
        elif kind == b"IDAT":
            idat += chunk
        pos += 12 + n
    bpp = 4 if ctype == 6 else 3
    raw, stride, rows, prev = zlib.decompress(idat), w * bpp, [], bytearray(w * bpp)
    for y in range(h):
        f, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b, c = prev[i], prev[i - bpp] if i >= bpp else 0
            if f == 1: line[i] = (line[i] + a) & 255
            elif f == 2: line[i] = (line[i] + b) & 255
            elif f == 3: line[i] = (line[i] + (a + b) // 2) & 255
            elif f == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append(line if bpp == 4 else bytearray(b"".join(bytes(line[i:i + 3]) + b"\xff" for i in range(0, stride, 3))))
        prev = line
    return w, h, rows


def rsvg(svg_text):
    """rsvg-convert's PNG of svg_text: (width, height, rows, stderr)."""
    with tempfile.TemporaryDirectory() as d:
        src, out = os.path.join(d, "in.svg"), os.path.join(d, "out.png")
        open(src, "w").write(svg_text)
        try:
            r = subprocess.run(["rsvg-convert", "-f", "png", "-o", out, src], capture_output=True, text=True)
        except FileNotFoundError:
            return 0, 0, [], "rsvg-convert is not installed (make deps installs librsvg2-bin)"
        if r.returncode != 0:
            return 0, 0, [], r.stderr.strip() or f"exit {r.returncode}"
        w, h, rows = png_decode(open(out, "rb").read())
        return w, h, rows, r.stderr.strip()


def colour(c):
    """(r, g, b) of "#rrggbb" (a heatmap cell's fill); None for anything else."""
    m = re.fullmatch(r"#([0-9a-fA-F]{6})", c or "")
    return tuple(int(m.group(1)[i:i + 2], 16) for i in (0, 2, 4)) if m else None


class Picture:
    """The SVG at path, rendered (its checks reported); shows() asks whether elements are
    visible where drawn, pixel() what was drawn at a point."""

    def __init__(self, path):
        self.name = os.path.basename(path)
        self.text = text = open(path).read()
        self.root = ET.fromstring(text)
        W, H = float(self.root.get("width")), float(self.root.get("height"))
        w, h, self.rows, err = rsvg(text)
        report(w == round(W) and h == round(H) and not err,
               f"{self.name}: rsvg-convert renders it at {w}x{h} (declared {W:g}x{H:g}){', ' + err if err else ''}")
        # the same drawing on a canvas with a margin M on every side: the margin must stay
        # transparent (the white background covers only the declared canvas)
        M = 300
        grown = re.sub(r"<svg ([^>]*)>", lambda m: "<svg " + re.sub(
            r'(width|height|viewBox)="[^"]*"', "", m.group(1)) +
            f' width="{W + 2 * M:g}" height="{H + 2 * M:g}" viewBox="{-M} {-M} {W + 2 * M:g} {H + 2 * M:g}">',
            text, count=1)
        gw, gh, grows, _ = rsvg(grown)
        outside = [(x - M, y - M) for y in range(gh) for x in range(gw)
                   if not (M <= x < M + round(W) and M <= y < M + round(H)) and grows[y][4 * x + 3] != 0]
        xs = sorted({x for x, _ in outside})
        ys = sorted({y for _, y in outside})
        report(gw > 0 and not outside, f"{self.name}: nothing drawn outside its {W:g}x{H:g} canvas" +
               (f" ({len(outside)} pixels drawn from x {xs[0]} to {xs[-1]}, y {ys[0]} to {ys[-1]})" if outside else ""))

    def shows(self, cls, label, points, what, radius=2):
        """The elements of class cls and data-label label are visible at each of points:
        rendered without them, some pixel within radius of the point changes. (A marker
        drawn under another series' marker at the same place changes nothing.)"""
        ET.register_namespace("", NS[1:-1])
        root = ET.fromstring(self.text)
        for parent in list(root.iter()):
            for e in list(parent):
                if e.get("class") == cls and e.get("data-label") == label:
                    parent.remove(e)
        _, _, rows, _ = rsvg(ET.tostring(root, encoding="unicode"))
        def changed(x, y):
            for yy in range(int(round(y)) - radius, int(round(y)) + radius + 1):
                for xx in range(int(round(x)) - radius, int(round(x)) + radius + 1):
                    if 0 <= yy < len(rows) and 0 <= 4 * xx < len(rows[0]) and \
                            max(abs(a - b) for a, b in zip(rows[yy][4 * xx:4 * xx + 3], self.rows[yy][4 * xx:4 * xx + 3])) > 24:
                        return True
            return False
        hidden = [(round(x), round(y)) for x, y in points if not changed(x, y)]
        report(rows and points and not hidden, f"{self.name}: {what} '{label}' visible where drawn ({len(points)} places)" +
               (f"; not at {hidden[:4]}" if hidden else ""))

    def pixel(self, x, y):
        if not (0 <= y < len(self.rows) and 0 <= 4 * x < len(self.rows[0])):
            return None
        r = self.rows[y]
        return tuple(r[4 * x:4 * x + 3])



def polylines(root):
    out = []
    for p in root.iter(NS + "polyline"):
        if p.get("class") != "series":
            continue
        pts = [tuple(map(float, xy.split(","))) for xy in p.get("points").split()]
        out.append((p.get("data-label"), pts))
    return out


def texts(root, cls):
    return [t.text for t in root.iter(NS + "text") if t.get("class") == cls]


def series_shown(pic):
    """Every series' line is visible between its points (the middle of each segment, where
    no marker sits; a sample of 40)."""
    for label, pts in polylines(pic.root):
        mids = [((a[0] + b[0]) / 2, (a[1] + b[1]) / 2) for a, b in zip(pts, pts[1:])]
        if not mids: # one point: no line to see (its marker is checked)
            continue
        pic.shows("series", label, mids[::max(1, len(mids) // 40)], "the line of")


def all_shown(pic):
    """Rendered: each series' line between its points, its markers at every point (none
    hidden under another series' marker), each reference line along it."""
    series_shown(pic)
    labels = {e.get("data-label") for e in pic.root.iter() if e.get("class") == "marker"}
    for label in sorted(labels):
        pts = [marker_centre(e) for e in pic.root.iter() if e.get("class") == "marker" and e.get("data-label") == label]
        pic.shows("marker", label, pts, "the markers of", radius=6)
    for r in pic.root.iter(NS + "line"):
        if r.get("class") == "ref":
            x1, x2, y = float(r.get("x1")), float(r.get("x2")), float(r.get("y1"))
            pic.shows("ref", r.get("data-label"), [((x1 + x2) / 2, y)], "the reference line", radius=12)


def render(path):
    """Any picture of report.py or best-mask: renders, stays on its canvas, shows all."""
    all_shown(Picture(path))


def curve(path, key, log, nlines):
    """The plot of KEY from LOG: NLINES polylines, the first with one point per logged step,
    x strictly increasing, and y in the reverse order of the values (SVG y grows down)."""
    pic = Picture(path)
    root = pic.root
    rows = [json.loads(l) for l in open(log) if l.strip()]
    lines = polylines(root)
    name = pic.name
    report(len(lines) == int(nlines), f"{name}: {len(lines)} polylines (want {nlines})")
    if not lines:
        return
    series_shown(pic)
    label, pts = lines[-1] if key == "sparsity" else lines[0]
    xs = [x for x, _ in pts]
    report(len(pts) == len(rows), f"{name}: {len(pts)} points = {len(rows)} logged steps ({label})")
    report(all(a < b for a, b in zip(xs, xs[1:])), f"{name}: x strictly increasing")
    vals = [r[key] for r in rows]
    ok = all((va < vb) == (pa[1] > pb[1]) for va, pa in zip(vals, pts) for vb, pb in zip(vals, pts) if va != vb)
    report(ok and len(pts) == len(rows), f"{name}: y follows the logged {key} (higher value, higher on the page)")
    report(texts(root, "xlabel") == ["step"] and texts(root, "ylabel") and texts(root, "title"),
           f"{name}: title and axis labels ({texts(root, 'xlabel')}, {texts(root, 'ylabel')})")


def marker_centre(e):
    if e.tag == NS + "circle":
        return float(e.get("cx")), float(e.get("cy"))
    if e.tag == NS + "rect":
        return float(e.get("x")) + float(e.get("width")) / 2, float(e.get("y")) + float(e.get("height")) / 2
    if e.tag == NS + "polygon":
        pts = [tuple(map(float, xy.split(","))) for xy in e.get("points").split()]
        return sum(x for x, _ in pts) / len(pts), sum(y for _, y in pts) / len(pts)
    nums = list(map(float, re.findall(r"-?[0-9.]+", e.get("d"))))
    return sum(nums[0::2]) / (len(nums) // 2), sum(nums[1::2]) / (len(nums) // 2)


def ppl(path, *labels):
    pic = Picture(path)
    root = pic.root
    got = {l for l, _ in polylines(root)} | {r.get("data-label") for r in root.iter(NS + "line") if r.get("class") == "ref"}
    report(set(labels) <= got, f"ppl.svg: series and reference lines {sorted(got)} (want {sorted(labels)})")
    report(texts(root, "xlabel") == ["sparsity"] and texts(root, "ylabel")[0].startswith("perplexity"),
           "ppl.svg: axis labels sparsity, perplexity")
    ok = all(all(a[0] <= b[0] for a, b in zip(p, p[1:])) for _, p in polylines(root))
    report(ok, "ppl.svg: points in sparsity order")
    refs = [(r.get("stroke"), r.get("stroke-dasharray")) for r in root.iter(NS + "line") if r.get("class") == "ref"]
    report(len(set(refs)) == len(refs), f"ppl.svg: each reference line drawn its own way {refs}")
    shapes = {}
    for e in root.iter():
        if e.get("class") == "marker":
            shapes.setdefault(e.get("data-label"), set()).add(e.get("data-shape"))
    report(all(len(s) == 1 for s in shapes.values()) and len({min(s) for s in shapes.values()}) == len(shapes),
           f"ppl.svg: each series marks its points with its own shape {shapes}")
    # the legend shows what the plot draws: a series' marker where it has markers, its line
    # only where it has two points or more (issue 36: line swatches for single dots)
    leg_marks = {e.get("data-label"): e.get("data-shape") for e in root.iter() if e.get("class") == "legend-marker"}
    lines = dict(polylines(root))
    report(all(leg_marks.get(l) == min(s) for l, s in shapes.items()) and
           len([e for e in root.iter(NS + "line") if e.get("class") == "legend-line"]) ==
           len([l for l, p in lines.items() if len(p) >= 2]) + len([e for e in root.iter(NS + "line") if e.get("class") == "ref"]),
           f"ppl.svg: the legend shows each series' marker ({leg_marks}) and a line only for lines")
    all_shown(pic)


def heatmap(path, layers, want=None):
    pic = Picture(path)
    root = pic.root
    cells = [c for c in root.iter(NS + "rect") if c.get("class") == "cell"]
    sp = [float(c.get("data-sparsity")) for c in cells]
    report(len(cells) == 7 * int(layers) and all(0 <= s <= 1 for s in sp),
           f"heatmap: {len(cells)} cells = {layers} layers x 7 modules, sparsities in [0, 1]")
    if want is not None:
        report(abs(sum(sp) / max(len(sp), 1) - float(want)) < 0.1, f"heatmap: mean cell sparsity near {want}")
    # rendered: a corner of every cell (its value is printed at the bottom middle) has
    # exactly its fill (no overlap, nothing on top)
    corner = lambda c: pic.pixel(int(float(c.get("x")) + 3), int(float(c.get("y")) + 3))
    bad = [(c.get("data-layer"), c.get("data-module")) for c in cells
           if not corner(c) or max(abs(a - b) for a, b in zip(corner(c), colour(c.get("fill")))) > 2]
    report(cells and not bad, f"heatmap: every cell renders in its own colour" + (f" (not {bad[:4]})" if bad else ""))
    # the colour scale: sparser cells are brighter (viridis: luminance rises from 0 to 1)
    lum = lambda c: 0.2126 * c[0] + 0.7152 * c[1] + 0.0722 * c[2]
    pairs = sorted((s, lum(colour(c.get("fill")))) for s, c in zip(sp, cells))
    report(all(a[1] <= b[1] + 1 for a, b in zip(pairs, pairs[1:])), "heatmap: brighter cells are sparser")
    # ... spanning the cells' own range (issue 36: a 0-1 scale made 84-99% one colour): the
    # least sparse cell at the scale's dark end, the sparsest at its bright end when they
    # differ by a point or more; the colour bar's labels are that range, in %
    lo, hi = min(sp, default=0), max(sp, default=0)
    if hi - lo >= 0.01:
        ends = (colour(min(cells, key=lambda c: float(c.get("data-sparsity"))).get("fill")),
                colour(max(cells, key=lambda c: float(c.get("data-sparsity"))).get("fill")))
        report(ends == ((68, 1, 84), (253, 231, 37)), f"heatmap: the colours span the cells' range {lo:.4f} to {hi:.4f} {ends}")
    scale = sorted(float(t.get("data-value")) for t in root.iter(NS + "text") if t.get("class") == "scale")
    report(len(scale) == 3 and (hi - lo < 0.01 or (abs(scale[0] - lo) < 1e-6 and abs(scale[-1] - hi) < 1e-6)),
           f"heatmap: a colour bar labelled from {100 * lo:.1f}% to {100 * hi:.1f}% ({scale})")
    # the value in each cell where cells are tall enough (18 px; 10 px for over 40 layers)
    vals = [t for t in root.iter(NS + "text") if t.get("class") == "value"]
    if float(cells[0].get("height")) >= 14:
        report(len(vals) == len(cells) and all(abs(float(t.text) - 100 * s) <= 0.051 for t, s in zip(vals, sp)),
               f"heatmap: each cell shows its sparsity in % ({len(vals)} values, {len(cells)} cells)")


{"curve": curve, "ppl": ppl, "heatmap": heatmap, "render": render}[sys.argv[1]](*sys.argv[2:])
