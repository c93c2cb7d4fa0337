#!/usr/bin/env python3
"""readme_demo.py README.md TABLE.md: checks that the README's demo output block is what a
run of the demo printed (TABLE.md: out/demo/report/table.md, the demo's last words).

The README shows one run's output. Compared: the tables, their rows and sparsities, and
the HF folder's size, exactly; perplexities within 0.2%; the pack's size and its ratio
within 1%; that there is one sample line with the same label. Not compared: timings,
token counts and the sample's text. Why the tolerances: the trained weights differ in
their last bits between CPUs, whose OpenBLAS kernels round differently. Measured on one
machine with OPENBLAS_CORETYPE Cooperlake, SkylakeX, Haswell and Sandybridge: BEST's
perplexity spread over 4.4e-4 of itself, the dense and magnitude ones over 1e-6, the pack
over 0.5% (388.5 to 390.5 KB), the BEST token counts (240, 248) and the sample changed;
1 or 2 threads changed nothing. Prints the differences and exits 1 when they disagree.
Run by tests/t_demo.sh.
"""
import sys


def tables(text):
    """{first header cell: [header cells, row cells...]} of the markdown tables in text."""
    out, cur = {}, None
    for line in text.splitlines():
        if not line.startswith("|"):
            cur = None
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if cur is None:
            cur = cells[0]
            out[cur] = [cells]
        elif set("".join(cells)) - set("-:"):
            out[cur].append(cells)
    return out


def code_blocks(text):
    """The fenced code blocks of a markdown text, each as one string."""
    blocks, cur = [], None
    for line in text.splitlines():
        if line.startswith("```"):
            if cur is None:
                cur = []
            else:
                blocks.append("\n".join(cur))
                cur = None
        elif cur is not None:
            cur.append(line)
    return blocks


def sample_label(text):
    lines = [l for l in text.splitlines() if l.startswith("Sample (")]
    return [l.split('"')[0] for l in lines]


def main(readme_path, table_path):
    readme = open(readme_path, encoding="utf-8").read()
    blocks = [b for b in code_blocks(readme) if "| method | sparsity | valid |" in b]
    if len(blocks) != 1:
        sys.exit("%s: %d blocks hold the demo's table, want 1" % (readme_path, len(blocks)))
    run = open(table_path, encoding="utf-8").read()
    want, got = tables(blocks[0]), tables(run)
    bad = []
    if list(want) != list(got):
        sys.exit("tables: README %s, run %s" % (list(want), list(got)))
    for k in want:
        if [r[0] for r in want[k]] != [r[0] for r in got[k]] or [r[1:] for r in want[k][:1]] != [r[1:] for r in got[k][:1]]:
            bad.append("table %s: README rows %s, run %s" % (k, [r[0] for r in want[k]], [r[0] for r in got[k]]))

    def near(what, a, b, rel):
        if not abs(a - b) <= rel * abs(b):
            bad.append("%s: README %g, run %g (they may differ by %g of the run's value)" % (what, a, b, rel))

    if not bad:
        for w, g in zip(want["method"][1:], got["method"][1:]):
            if w[1] != g[1]:
                bad.append("%s sparsity: README %s, run %s" % (w[0], w[1], g[1]))
            near(w[0] + " perplexity", float(w[2]), float(g[2]), 2e-3)
        kb = lambda s: float(s.replace(" KiB", ""))  # (report.py: binary units)
        for w, g in zip(want.get("packed model", [])[1:], got.get("packed model", [])[1:]):
            near(w[0] + " pack KiB", kb(w[1]), kb(g[1]), 1e-2)
            if w[2] != g[2]:
                bad.append("%s HF folder: README %s, run %s" % (w[0], w[2], g[2]))
            near(w[0] + " pack ratio", float(w[3]), float(g[3]), 1e-2)
    if sample_label(blocks[0]) != sample_label(run) or len(sample_label(run)) != 1:
        bad.append("sample line: README %s, run %s" % (sample_label(blocks[0]), sample_label(run)))
    for b in bad:
        print("%s: %s" % (readme_path, b), file=sys.stderr)
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit("usage: readme_demo.py README.md TABLE.md")
    main(sys.argv[1], sys.argv[2])
