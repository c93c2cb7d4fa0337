// spm_model.c: reads a tokenizer.model (sentencepiece's ModelProto, protobuf wire format
// parsed by hand, every length checked) into an Spm (spm_internal.h). A truncated or
// corrupt file is an error, never a crash. What is read: the pieces, the trainer spec
// (model type, byte fallback, unk/bos/eos pieces, the <unk> surface), the normalizer spec
// (flags and the precompiled charsmap). Deliberate gaps, each an error at load: model
// types other than BPE, a denormalizer charsmap. The self-test samples are not run.
// The tokenizer.json reader is spm_json.c; encoding is spm.c's.
#include "tok/spm.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"       // defines: ERR, TRY, xmalloc, xcalloc, xrealloc, xstrdup
#include "tok/spm_internal.h" // defines: struct Spm, spm_new, spm_push_piece, spm_index

typedef struct {
    const uint8_t *base, *p, *end;  // base: start of the file, for byte offsets in messages
    const char *path;
} Pb;

static int pb_varint(Pb *r, uint64_t *v) {
    uint64_t x = 0;
    size_t at = (size_t)(r->p - r->base);
    for (int shift = 0; shift < 64; shift += 7) {
        if (r->p >= r->end) return ERR("%s: truncated varint at byte %zu", r->path, at);
        uint8_t b = *r->p++;
        x |= (uint64_t)(b & 0x7F) << shift;
        if (!(b & 0x80)) {
            *v = x;
            return 0;
        }
    }
    return ERR("%s: varint longer than 10 bytes at byte %zu", r->path, at);
}

// Reads a tag; wire types 0 (varint), 1 (fixed64), 2 (bytes) and 5 (fixed32) only.
static int pb_tag(Pb *r, uint32_t *field, int *wire) {
    size_t at = (size_t)(r->p - r->base);
    uint64_t tag;
    TRY(pb_varint(r, &tag));
    *field = (uint32_t)(tag >> 3);
    *wire = (int)(tag & 7);
    if (*field == 0 || tag >> 32) return ERR("%s: bad field number in tag at byte %zu", r->path, at);
    if (*wire != 0 && *wire != 1 && *wire != 2 && *wire != 5)
        return ERR("%s: unsupported wire type %d (field %u) at byte %zu", r->path, *wire, *field, at);
    return 0;
}

static int pb_bytes(Pb *r, const uint8_t **p, size_t *n) {
    size_t at = (size_t)(r->p - r->base);
    uint64_t len;
    TRY(pb_varint(r, &len));
    if (len > (uint64_t)(r->end - r->p))
        return ERR("%s: truncated or corrupt: length %llu at byte %zu runs past the end of its message "
                   "(%zu bytes left)", r->path, (unsigned long long)len, at, (size_t)(r->end - r->p));
    *p = r->p;
    *n = (size_t)len;
    r->p += len;
    return 0;
}

static int pb_fixed32(Pb *r, uint32_t *v) {
    if (r->end - r->p < 4)
        return ERR("%s: truncated fixed32 at byte %zu", r->path, (size_t)(r->p - r->base));
    *v = (uint32_t)r->p[0] | (uint32_t)r->p[1] << 8 | (uint32_t)r->p[2] << 16 | (uint32_t)r->p[3] << 24;
    r->p += 4;
    return 0;
}

static int pb_skip(Pb *r, int wire) {
    uint64_t v;
    const uint8_t *p;
    size_t n;
    if (wire == 0) return pb_varint(r, &v);
    if (wire == 2) return pb_bytes(r, &p, &n);
    size_t k = wire == 1 ? 8 : 4;
    if ((size_t)(r->end - r->p) < k)
        return ERR("%s: truncated fixed%zu at byte %zu", r->path, 8 * k, (size_t)(r->p - r->base));
    r->p += k;
    return 0;
}

static Pb pb_sub(const Pb *r, const uint8_t *p, size_t n) {
    return (Pb){.base = r->base, .p = p, .end = p + n, .path = r->path};
}

typedef struct { const uint8_t *p; size_t n; } Str;

typedef struct {
    int model_type, byte_fallback, ws_suffix, has_unk_surface;
    Str unk_surface, unk_piece, bos_piece, eos_piece;
} TrainerSpec;

typedef struct {
    Str name, charsmap;
    int add_dummy_prefix, remove_extra_ws, escape_ws;
} NormSpec;

typedef struct { Str piece; float score; int type; } PieceMsg;

// A field the caller expects with wire type `want` but that came with another is an
// unknown field to protobuf: skipped, as libprotobuf does.
#define PB_EXPECT(want) if (wire != (want)) { TRY(pb_skip(&r, wire)); continue; }

static int pb_read_piece(const Pb *outer, const uint8_t *p, size_t n, PieceMsg *m) {
    Pb r = pb_sub(outer, p, n);
    *m = (PieceMsg){.type = PIECE_NORMAL};
    while (r.p < r.end) {
        uint32_t field;
        int wire;
        uint64_t v;
        uint32_t u = 0;
        TRY(pb_tag(&r, &field, &wire));
        if (field == 1) {
            PB_EXPECT(2);
            TRY(pb_bytes(&r, &m->piece.p, &m->piece.n));
        } else if (field == 2) {
            PB_EXPECT(5);
            TRY(pb_fixed32(&r, &u));
            memcpy(&m->score, &u, 4);
        } else if (field == 3) {
            PB_EXPECT(0);
            TRY(pb_varint(&r, &v));
            // proto2 keeps an unknown enum value out of the field: the type stays as it was
            if (v >= 1 && v <= 6) m->type = (int)v;
        } else {
            TRY(pb_skip(&r, wire));
        }
    }
    return 0;
}

// Fields we do not read are skipped; repeated singular fields merge (last value wins).
static int pb_read_trainer(const Pb *outer, const uint8_t *p, size_t n, TrainerSpec *t) {
    Pb r = pb_sub(outer, p, n);
    while (r.p < r.end) {
        uint32_t field;
        int wire;
        uint64_t v;
        TRY(pb_tag(&r, &field, &wire));
        Str *str = field == 44 ? &t->unk_surface : field == 45 ? &t->unk_piece
                 : field == 46 ? &t->bos_piece : field == 47 ? &t->eos_piece : NULL;
        if (str) {
            PB_EXPECT(2);
            TRY(pb_bytes(&r, &str->p, &str->n));
            if (field == 44) t->has_unk_surface = 1;
        } else if (field == 3 || field == 35 || field == 24) {
            PB_EXPECT(0);
            TRY(pb_varint(&r, &v));
            if (field == 3 && v >= 1 && v <= 4) t->model_type = (int)v;
            if (field == 35) t->byte_fallback = v != 0;
            if (field == 24) t->ws_suffix = v != 0;
        } else {
            TRY(pb_skip(&r, wire));
        }
    }
    return 0;
}

static int pb_read_normalizer(const Pb *outer, const uint8_t *p, size_t n, NormSpec *ns) {
    Pb r = pb_sub(outer, p, n);
    while (r.p < r.end) {
        uint32_t field;
        int wire;
        uint64_t v;
        TRY(pb_tag(&r, &field, &wire));
        if (field == 1 || field == 2) {
            PB_EXPECT(2);
            Str *str = field == 1 ? &ns->name : &ns->charsmap;
            TRY(pb_bytes(&r, &str->p, &str->n));
        } else if (field >= 3 && field <= 5) {
            PB_EXPECT(0);
            TRY(pb_varint(&r, &v));
            int *flag = field == 3 ? &ns->add_dummy_prefix : field == 4 ? &ns->remove_extra_ws
                                                                        : &ns->escape_ws;
            *flag = v != 0;
        } else {
            TRY(pb_skip(&r, wire));
        }
    }
    return 0;
}

// The precompiled charsmap blob: u32 trie size, the Darts double array, then the
// NUL-terminated replacement strings. Checked as sentencepiece checks it.
static int spm_set_charsmap(Spm *s, Str cm) {
    if (cm.n == 0) return 0;
    if (cm.n <= 4) return ERR("%s: normalizer charsmap of %zu bytes is broken", s->path, cm.n);
    uint32_t trie = (uint32_t)cm.p[0] | (uint32_t)cm.p[1] << 8 | (uint32_t)cm.p[2] << 16
                    | (uint32_t)cm.p[3] << 24;
    if (trie > cm.n - 4)
        return ERR("%s: normalizer charsmap trie of %u bytes exceeds its blob (%zu bytes)",
                   s->path, trie, cm.n);
    s->cm_n = trie / 4;
    s->cm_unit = xmalloc((s->cm_n ? s->cm_n : 1) * sizeof *s->cm_unit);
    for (size_t i = 0; i < s->cm_n; i++) {
        const uint8_t *q = cm.p + 4 + 4 * i;
        s->cm_unit[i] = (uint32_t)q[0] | (uint32_t)q[1] << 8 | (uint32_t)q[2] << 16 | (uint32_t)q[3] << 24;
    }
    s->cm_norm_len = cm.n - 4 - trie;
    s->cm_norm = xmalloc(s->cm_norm_len + 1);
    memcpy(s->cm_norm, cm.p + 4 + trie, s->cm_norm_len);
    s->cm_norm[s->cm_norm_len] = 0;
    if (s->cm_n == 0) {  // an empty trie maps nothing
        free(s->cm_unit);
        s->cm_unit = NULL;
    }
    return 0;
}

static const char *model_type_name(int t) {
    return t == 1 ? "unigram" : t == 2 ? "bpe" : t == 3 ? "word" : t == 4 ? "char" : "unknown";
}

int spm_load_model(Spm **out, const uint8_t *data, size_t n, const char *path) {
    *out = NULL;
    if (!path) path = "tokenizer.model";
    Pb r = {.base = data, .p = data, .end = data + n, .path = path};
    TrainerSpec ts = {.model_type = 1};  // proto2 default: UNIGRAM
    NormSpec ns = {.add_dummy_prefix = 1, .remove_extra_ws = 1, .escape_ws = 1};
    NormSpec dns = ns;
    PieceMsg *pieces = NULL;
    size_t n_pieces = 0, cap = 0;
    int rc = -1;
    Spm *s = NULL;
    uint8_t *norm = NULL;
    if (n == 0) {
        ERR("%s: empty file", path);
        goto done;
    }
    while (r.p < r.end) {
        uint32_t field;
        int wire;
        const uint8_t *p;
        size_t len;
        if (pb_tag(&r, &field, &wire) < 0) goto done;
        if (wire != 2 || field < 1 || field > 5) {
            if (pb_skip(&r, wire) < 0) goto done;
            continue;
        }
        if (pb_bytes(&r, &p, &len) < 0) goto done;
        if (field == 1) {
            if (n_pieces == cap) {
                cap = cap ? 2 * cap : 1024;
                pieces = xrealloc(pieces, cap * sizeof *pieces);
            }
            if (pb_read_piece(&r, p, len, &pieces[n_pieces++]) < 0) goto done;
        } else if (field == 2) {
            if (pb_read_trainer(&r, p, len, &ts) < 0) goto done;
        } else if (field == 3) {
            if (pb_read_normalizer(&r, p, len, &ns) < 0) goto done;
        } else if (field == 5) {
            if (pb_read_normalizer(&r, p, len, &dns) < 0) goto done;
        }  // field 4: self-test samples, not run
    }
    if (ts.model_type != 2) {
        ERR("%s: unsupported model type %s (only BPE is implemented)", path, model_type_name(ts.model_type));
        goto done;
    }
    if (dns.charsmap.n) {
        ERR("%s: a denormalizer charsmap is not supported", path);
        goto done;
    }
    if (n > UINT32_MAX) {  // piece offsets are 32-bit
        ERR("%s: file of %zu bytes is too large for a tokenizer.model", path, n);
        goto done;
    }
    s = spm_new(RULES_SPM, path);
    s->byte_fallback = ts.byte_fallback;
    s->ws_suffix = ts.ws_suffix;
    s->add_dummy_prefix = ns.add_dummy_prefix;
    s->remove_extra_ws = ns.remove_extra_ws;
    s->escape_ws = ns.escape_ws;
    if (spm_set_charsmap(s, ns.charsmap) < 0) goto done;
    norm = xmalloc(n_pieces ? n_pieces : 1);
    for (size_t i = 0; i < n_pieces; i++) {
        const PieceMsg *m = &pieces[i];
        spm_push_piece(s, (const char *)m->piece.p, m->piece.n, m->score, m->type);
        norm[i] = m->type == PIECE_NORMAL || m->type == PIECE_USER || m->type == PIECE_UNUSED;
        if (m->type == PIECE_UNKNOWN) {
            if (s->unk_id >= 0) {
                ERR("%s: unk is already defined (pieces %d and %zu)", path, s->unk_id, i);
                goto done;
            }
            s->unk_id = (int32_t)i;
        }
        if (m->type == PIECE_BYTE && !ts.byte_fallback) {
            ERR("%s: byte piece %zu is found although byte_fallback is false", path, i);
            goto done;
        }
    }
    if (s->n == 0) {  // spm_push_piece never ran: give the tables their one offset
        s->off = xcalloc(1, sizeof *s->off);
    }
    if (spm_index(s, norm) < 0) goto done;
    if (s->unk_id < 0) {
        ERR("%s: unk is not defined (no piece of type UNKNOWN)", path);
        goto done;
    }
    if (s->byte_fallback) {
        for (int b = 0; b < 256; b++) {
            if (s->type[s->byte_id[b]] != PIECE_BYTE) {
                ERR("%s: there are not 256 byte pieces although byte_fallback is true (no <0x%02X>)",
                    path, b);
                goto done;
            }
        }
    }
    // user-defined pieces, matched first in the normalizer and when splitting. Darts
    // keys are C strings, so a piece is matched up to its first NUL.
    for (int32_t i = 0; i < s->n; i++)
        if (s->type[i] == PIECE_USER)
            spm_trie_add(&s->user, (const uint8_t *)piece_ptr(s, i), strnlen(piece_ptr(s, i), piece_len(s, i)), i);
    // bos/eos: the trainer's piece names, when they name a control piece
    Str names[2] = {ts.bos_piece, ts.eos_piece};
    const char *defaults[2] = {"<s>", "</s>"};
    for (int k = 0; k < 2; k++) {
        const char *p = names[k].n ? (const char *)names[k].p : defaults[k];
        size_t len = names[k].n ? names[k].n : strlen(defaults[k]);
        int32_t id = piece_to_id(s, p, len);
        *(k == 0 ? &s->bos_id : &s->eos_id) = s->type[id] == PIECE_CONTROL ? id : -1;
    }
    if (ts.has_unk_surface) {
        s->unk_surface_len = ts.unk_surface.n;
        s->unk_surface = xmalloc(ts.unk_surface.n + 1);
        memcpy(s->unk_surface, ts.unk_surface.p, ts.unk_surface.n);
    } else {
        s->unk_surface = xstrdup(" \xE2\x81\x87 ");
        s->unk_surface_len = strlen(s->unk_surface);
    }
    if (s->has_unused) s->cut = CUT_NONE;  // resegmentation state spans the whole text
    rc = 0;
done:
    free(pieces);
    free(norm);
    if (rc < 0) {
        spm_free(s);
        return -1;
    }
    *out = s;
    return 0;
}
