// mask_report.h: what a mask did, for people: sparsity per tensor, per layer, per module
// type and in total, as a JSON report (best-mask --report), an SVG heatmap of layers x
// module types (--plot), a short table on a stream, and the achieved sparsity.
//
// Every function here reads a mask (n_params bytes, 1 = keep, laid out like the block)
// with its parameter table and changes nothing. Only prunable tensors count. The files
// are written through temp + rename (base/fileio.h).
//
// Not here: computing a mask, its file and where a tensor sits (mask.h: mask_compute,
// mask_save, mask_module_of, MASK_MODULES), the figures of a whole run (pipelines/).
#ifndef BEST_MASK_REPORT_H
#define BEST_MASK_REPORT_H

#include <stdint.h>
#include <stdio.h>

#include "nn/params.h"    // defines: ParamInfo
#include "sparse/calib.h" // defines: OneShotStats
#include "sparse/mask.h"  // defines: MaskMeta

// Sparsity per tensor, per layer, per module type and in total, as one JSON object
// (format "best-mask-report", and meta's fields where known); with times (a one-shot
// run's; may be NULL) a "seconds" object of its phases (forward, statistics, factor,
// update) and their total, and on a GPU "device_bytes": the walk's allocation and the
// device's memory in use then.
int mask_report_json(const char *path, const uint8_t *mask, const MaskMeta *meta, const OneShotStats *times,
                     const ParamInfo *info, int n_info);
// The allocation heatmap: layers (rows) x module types (columns), cell colour =
// sparsity, with labels and a legend; plain SVG text.
int mask_plot_svg(const char *path, const uint8_t *mask, const ParamInfo *info, int n_info, const char *title);
// A short per-layer table (sparsity in % per module type and in total).
void mask_print_table(FILE *f, const uint8_t *mask, const ParamInfo *info, int n_info);
// The fraction of the prunable weights that mask (n_params) zeroes: the achieved sparsity.
double mask_sparsity(const uint8_t *mask, const ParamInfo *info, int n_info);

#endif
