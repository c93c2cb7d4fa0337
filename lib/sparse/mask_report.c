// mask_report.c: a mask's reports (see mask_report.h): the JSON report, the SVG heatmap,
// the table and the achieved sparsity, all from one grid of counts per layer and module
// type. Computing masks and their files are mask.c's.
#include "sparse/mask_report.h"

#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"   // defines: ERR, TRY, xcalloc, xrealloc
#include "base/fileio.h"  // defines: AFile
#include "base/vec.h"     // defines: ByteVec
#include "sparse/mask.h"  // defines: mask_count, mask_module_of, MASK_MODULES

// Counts of the prunable weights per (layer, module type), and of those kept.
typedef struct {
    int L;                 // layers (1 + the highest layer index seen)
    uint64_t (*numel)[7];  // (L, 7)
    uint64_t (*kept)[7];   // (L, 7)
} Grid;

static void grid_init(Grid *g, const uint8_t *mask, const ParamInfo *info, int n_info) {
    g->L = 0;
    int l;
    for (int i = 0; i < n_info; i++)
        if (info[i].prunable && mask_module_of(&l, info[i].name) >= 0 && l + 1 > g->L) g->L = l + 1;
    g->numel = xcalloc((size_t)(g->L ? g->L : 1), sizeof *g->numel);
    g->kept = xcalloc((size_t)(g->L ? g->L : 1), sizeof *g->kept);
    for (int i = 0; i < n_info; i++) {
        int mod = info[i].prunable ? mask_module_of(&l, info[i].name) : -1;
        if (mod < 0) continue;
        g->numel[l][mod] += info[i].numel;
        g->kept[l][mod] += mask_count(mask + info[i].offset, info[i].numel);
    }
}

static void grid_free(Grid *g) {
    free(g->numel);
    free(g->kept);
}

static double sparsity_of(uint64_t kept, uint64_t numel) { return numel ? 1.0 - (double)kept / (double)numel : 0.0; }

static json_t *counts_json(uint64_t numel, uint64_t kept) {
    return json_pack("{s:I, s:I, s:I, s:f}", "numel", (json_int_t)numel, "kept", (json_int_t)kept, "pruned",
                     (json_int_t)(numel - kept), "sparsity", sparsity_of(kept, numel));
}

static int write_text(const char *path, const char *text, size_t n) {
    AFile f;
    TRY(afile_open(&f, path));
    if (fwrite(text, 1, n, f.fp) != n) {
        int e = errno;
        afile_abort(&f);
        return ERR("%s: write failed: %s", path, strerror(e));
    }
    return afile_commit(&f);
}

int mask_report_json(const char *path, const uint8_t *mask, const MaskMeta *meta, const OneShotStats *times,
                     const ParamInfo *info, int n_info) {
    Grid g;
    grid_init(&g, mask, info, n_info);
    json_t *tensors = json_array(), *layers = json_array(), *modules = json_object();
    uint64_t tn = 0, tk = 0;
    for (int i = 0; i < n_info; i++) {
        if (!info[i].prunable) continue;
        int l = -1, mod = mask_module_of(&l, info[i].name);
        uint64_t k = mask_count(mask + info[i].offset, info[i].numel);
        json_t *o = counts_json(info[i].numel, k);
        json_object_set_new(o, "name", json_string(info[i].name));
        json_object_set_new(o, "layer", json_integer(l));
        json_object_set_new(o, "module", mod >= 0 ? json_string(MASK_MODULES[mod]) : json_null());
        json_array_append_new(tensors, o);
        tn += info[i].numel;
        tk += k;
    }
    for (int l = 0; l < g.L; l++) {
        uint64_t n = 0, k = 0;
        for (int j = 0; j < 7; j++) n += g.numel[l][j], k += g.kept[l][j];
        json_t *o = counts_json(n, k);
        json_object_set_new(o, "layer", json_integer(l));
        json_array_append_new(layers, o);
    }
    for (int j = 0; j < 7; j++) {
        uint64_t n = 0, k = 0;
        for (int l = 0; l < g.L; l++) n += g.numel[l][j], k += g.kept[l][j];
        json_object_set_new(modules, MASK_MODULES[j], counts_json(n, k));
    }
    json_t *root = json_pack("{s:s, s:o, s:o, s:o, s:o}", "format", "best-mask-report", "total", counts_json(tn, tk),
                             "tensors", tensors, "layers", layers, "modules", modules);
    json_object_set_new(root, "sparsity_requested", isnan(meta->sparsity) ? json_null() : json_real(meta->sparsity));
    if (meta->saliency) json_object_set_new(root, "saliency", json_string(meta->saliency));
    if (meta->group) json_object_set_new(root, "group", json_string(meta->group));
    if (meta->method) json_object_set_new(root, "method", json_string(meta->method));
    if (meta->schedule) json_object_set_new(root, "schedule", json_string(meta->schedule));
    if (meta->pattern) json_object_set_new(root, "pattern", json_string(meta->pattern));
    if (meta->step >= 0) json_object_set_new(root, "step", json_integer(meta->step));
    if (meta->steps > 0) json_object_set_new(root, "steps", json_integer(meta->steps));
    if (times)
        json_object_set_new(root, "seconds",
                            json_pack("{s:f, s:f, s:f, s:f, s:f}", "forward", times->forward, "statistics", times->stats,
                                      "factor", times->factor, "update", times->update, "total",
                                      times->forward + times->stats + times->factor + times->update));
    if (times && times->device_bytes > 0) // on a GPU: the walk's buffers, and the device's use then
        json_object_set_new(root, "device_bytes", json_pack("{s:f, s:f}", "allocated", times->device_bytes,
                                                            "in_use", times->device_in_use));
    char *s = json_dumps(root, JSON_INDENT(1) | JSON_REAL_PRECISION(10));
    json_decref(root);
    grid_free(&g);
    size_t n = strlen(s);
    s = xrealloc(s, n + 2);
    s[n++] = '\n';
    int rc = write_text(path, s, n);
    free(s);
    return rc;
}

// A colour for sparsity x in [0, 1]: a few stops of viridis, linearly interpolated
// (dense = dark purple, sparse = yellow), so the figure reads like the paper's.
static void colour_of(char out[8], double x) {
    static const double stops[5][3] = {
        {68, 1, 84}, {59, 82, 139}, {33, 145, 140}, {94, 201, 98}, {253, 231, 37},
    };
    if (!(x >= 0)) x = 0;
    if (x > 1) x = 1;
    double f = x * 4;
    int i = f >= 4 ? 3 : (int)f;
    double t = f - i;
    int c[3];
    for (int j = 0; j < 3; j++) c[j] = (int)lround(stops[i][j] + t * (stops[i + 1][j] - stops[i][j]));
    snprintf(out, 8, "#%02x%02x%02x", c[0], c[1], c[2]);
}

static void xml_escape(ByteVec *b, const char *s) {
    for (; *s; s++) {
        switch (*s) {
        case '<': bytevec_append(b, "&lt;", 4); break;
        case '>': bytevec_append(b, "&gt;", 4); break;
        case '&': bytevec_append(b, "&amp;", 5); break;
        case '"': bytevec_append(b, "&quot;", 6); break;
        default: bytevec_push(b, *s);
        }
    }
}

static void appendf(ByteVec *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void appendf(ByteVec *b, const char *fmt, ...) {
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    bytevec_append(b, buf, n < (int)sizeof buf ? (size_t)n : sizeof buf - 1);
}

int mask_plot_svg(const char *path, const uint8_t *mask, const ParamInfo *info, int n_info, const char *title) {
    Grid g;
    grid_init(&g, mask, info, n_info);
    const int cw = 44, ch = g.L > 40 ? 10 : 18, left = 70, top = 50, legw = 16;
    const char *t = title ? title : "sparsity per layer and module";
    // wide enough for the title: 13 px sans-serif is at most about 7 px a character
    // the legend's bar is at least 100 px tall, also beside a model of few layers
    int lh = g.L * ch > 100 ? g.L * ch : 100;
    int W = left + 7 * cw + 90, H = top + lh + 50, tw = left + 7 * (int)strlen(t) + 10;
    if (W < tw) W = tw;
    ByteVec b = {0};
    appendf(&b, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
                "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" "
                "font-family=\"sans-serif\" font-size=\"11\">\n",
            W, H, W, H);
    appendf(&b, "<rect width=\"%d\" height=\"%d\" fill=\"white\"/>\n<text x=\"%d\" y=\"18\" font-size=\"13\">", W, H, left);
    xml_escape(&b, t);
    appendf(&b, "</text>\n");
    for (int j = 0; j < 7; j++)
        appendf(&b, "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\">%s</text>\n", left + j * cw + cw / 2, top - 6,
                MASK_MODULES[j]);
    // the colours span the cells' own range (a 0-1 scale made 84-99% one colour), at
    // least one point of sparsity wide
    double lo = 1, hi = 0;
    for (int l = 0; l < g.L; l++)
        for (int j = 0; j < 7; j++)
            if (g.numel[l][j]) {
                double s = sparsity_of(g.kept[l][j], g.numel[l][j]);
                lo = s < lo ? s : lo, hi = s > hi ? s : hi;
            }
    if (hi < lo) lo = 0, hi = 1;
    if (hi - lo < 0.01) {
        double mid = (lo + hi) / 2;
        lo = mid - 0.005 < 0 ? 0 : mid - 0.005 > 0.99 ? 0.99 : mid - 0.005;
        hi = lo + 0.01;
    }
    for (int l = 0; l < g.L; l++) {
        int y = top + l * ch;
        if (ch >= 14 || l % 5 == 0)
            appendf(&b, "<text x=\"%d\" y=\"%d\" text-anchor=\"end\">layer %d</text>\n", left - 6, y + ch - 4, l);
        for (int j = 0; j < 7; j++) {
            double s = sparsity_of(g.kept[l][j], g.numel[l][j]), x = (s - lo) / (hi - lo);
            char col[8];
            colour_of(col, x);
            appendf(&b, "<rect class=\"cell\" data-layer=\"%d\" data-module=\"%s\" data-sparsity=\"%.6f\" x=\"%d\" "
                        "y=\"%d\" width=\"%d\" height=\"%d\" fill=\"%s\"><title>layer %d %s: %.2f%% sparse</title></rect>\n",
                    l, MASK_MODULES[j], s, left + j * cw, y, cw, ch, col, l, MASK_MODULES[j], 100 * s);
            // the value where the cell has room for it, dark on the bright end of the scale
            if (ch >= 14)
                appendf(&b, "<text class=\"value\" x=\"%d\" y=\"%d\" text-anchor=\"middle\" font-size=\"9\" "
                            "fill=\"%s\">%.1f</text>\n", left + j * cw + cw / 2, y + ch - 5,
                        x > 0.6 ? "#000000" : "#ffffff", 100 * s);
        }
    }
    // legend: a colour bar from lo (bottom) to hi (top) in 20 steps, in % sparse
    int lx = left + 7 * cw + 20;
    for (int i = 0; i < 20; i++) {
        char col[8];
        colour_of(col, 1.0 - (i + 0.5) / 20);
        appendf(&b, "<rect class=\"legend\" x=\"%d\" y=\"%.1f\" width=\"%d\" height=\"%.1f\" fill=\"%s\"/>\n", lx,
                top + i * lh / 20.0, legw, lh / 20.0 + 0.5, col);
    }
    appendf(&b, "<text class=\"scale\" data-value=\"%.6f\" x=\"%d\" y=\"%d\">%.1f%%</text>\n"
                "<text class=\"scale\" data-value=\"%.6f\" x=\"%d\" y=\"%d\">%.1f%%</text>\n"
                "<text class=\"scale\" data-value=\"%.6f\" x=\"%d\" y=\"%d\">%.1f%%</text>\n"
                "<text x=\"%d\" y=\"%d\">sparsity</text>\n</svg>\n",
            hi, lx + legw + 4, top + 10, 100 * hi, (lo + hi) / 2, lx + legw + 4, top + lh / 2 + 4, 50 * (lo + hi), lo,
            lx + legw + 4, top + lh, 100 * lo, lx - 10, top - 6);
    grid_free(&g);
    int rc = write_text(path, b.v, b.n);
    bytevec_free(&b);
    return rc;
}

void mask_print_table(FILE *f, const uint8_t *mask, const ParamInfo *info, int n_info) {
    Grid g;
    grid_init(&g, mask, info, n_info);
    fprintf(f, "%6s", "layer");
    for (int j = 0; j < 7; j++) fprintf(f, " %6s", MASK_MODULES[j]);
    fprintf(f, " %7s\n", "total");
    uint64_t tn = 0, tk = 0;
    for (int l = 0; l < g.L; l++) {
        uint64_t n = 0, k = 0;
        fprintf(f, "%6d", l);
        for (int j = 0; j < 7; j++) {
            fprintf(f, " %5.1f%%", 100 * sparsity_of(g.kept[l][j], g.numel[l][j]));
            n += g.numel[l][j], k += g.kept[l][j];
        }
        fprintf(f, " %6.2f%%\n", 100 * sparsity_of(k, n));
        tn += n, tk += k;
    }
    fprintf(f, "%6s %*s %6.2f%% (%llu of %llu prunable weights kept)\n", "all", 7 * 7 - 1, "",
            100 * sparsity_of(tk, tn), (unsigned long long)tk, (unsigned long long)tn);
    grid_free(&g);
}

double mask_sparsity(const uint8_t *mask, const ParamInfo *info, int n_info) {
    uint64_t numel = 0, kept = 0;
    for (int i = 0; i < n_info; i++) {
        if (!info[i].prunable) continue;
        numel += info[i].numel;
        for (size_t j = 0; j < info[i].numel; j++) kept += mask[info[i].offset + j] != 0;
    }
    return sparsity_of(kept, numel);
}
