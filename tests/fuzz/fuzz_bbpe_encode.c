// fuzz_bbpe_encode.c: libFuzzer target for the byte-level BPE encoder (bbpe_encode).
// The input is text; invalid UTF-8 must be refused, valid UTF-8 must give
//   - the same ids from the hand-written splitters as from PCRE2 running the
//     same regex (Qwen2's and GPT-2's; the PCRE2 copy has it wrapped in (?:...)),
//   - decode(encode(x)) == x: always for GPT-2 (no normalizer), for Qwen2 when x
//     is already NFC.
// Qwen2 is the real ../shared/tokenizers/qwen2/tokenizer.json when present (or
// $SHARED/...), else a tiny tokenizer built here; GPT-2 is always the tiny one.
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>
#include <utf8proc.h>

#include "tok/bbpe.h"

#define QWEN2_RE "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
#define GPT2_RE "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+"

typedef struct { Bbpe *fast, *pcre; BbpeEncoder *ef, *ep; int nfc; } Pair;
static Pair qwen, gpt2;

// UTF-8 of the byte-level character of byte x (GPT-2's bytes_to_unicode).
static void bl_char(int x, char *buf) {
    int cp = x, below = 0;
    for (int b = 0; b < 256; b++) {
        int printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
        if (b == x) { if (!printable) cp = 256 + below; break; }
        below += !printable;
    }
    buf[utf8proc_encode_char(cp, (utf8proc_uint8_t *)buf)] = 0;
}

// A tiny tokenizer.json: 256 byte symbols, a few dozen merges, one special.
static json_t *tiny_json(const char *regex, int nfc) {
    static const char *m[][2] = {
        {"t", "h"}, {"h", "e"}, {"i", "n"}, {"e", "r"}, {"a", "n"}, {"r", "e"}, {"o", "n"}, {"th", "e"},
        {"\xc4\xa0", "t"}, {"\xc4\xa0", "a"}, {"\xc4\xa0t", "he"}, {"\xc4\xa0", "\xc4\xa0"},
        {"\xc4\xa0\xc4\xa0", "\xc4\xa0\xc4\xa0"}, {"\xc4\x8a", "\xc4\x8a"}, {"a", "a"}, {"aa", "aa"},
        {"'", "s"}, {"'", "S"}, {"1", "2"}, {"\xc3\xa4", "\xc2\xb8"}, {"\xc3\x83", "\xc2\xa9"}, {"i", "ng"}, {"n", "g"},
    };
    json_t *vocab = json_object(), *merges = json_array();
    char buf[32];
    int id = 0;
    for (int x = 0; x < 256; x++) {
        bl_char(x, buf);
        json_object_set_new(vocab, buf, json_integer(id++));
    }
    for (size_t i = 0; i < sizeof m / sizeof m[0]; i++) {
        snprintf(buf, sizeof buf, "%s%s", m[i][0], m[i][1]);
        if (!json_object_get(vocab, buf)) json_object_set_new(vocab, buf, json_integer(id++));
        snprintf(buf, sizeof buf, "%s %s", m[i][0], m[i][1]);
        json_array_append_new(merges, json_string(buf));
    }
    return json_pack("{s:[{s:i, s:s, s:b, s:b, s:b, s:b, s:b}], s:o, "
                     "s:{s:s, s:[{s:s, s:{s:s}, s:s, s:b}, {s:s, s:b, s:b}]}, s:{s:s, s:o, s:o}}",
                     "added_tokens", "id", id, "content", "<|endoftext|>", "single_word", 0, "lstrip", 0,
                     "rstrip", 0, "normalized", 0, "special", 1,
                     "normalizer", nfc ? json_pack("{s:s}", "type", "NFC") : json_null(),
                     "pre_tokenizer", "type", "Sequence", "pretokenizers", "type", "Split", "pattern", "Regex",
                     regex, "behavior", "Isolated", "invert", 0, "type", "ByteLevel", "add_prefix_space", 0,
                     "use_regex", 0, "model", "type", "BPE", "vocab", vocab, "merges", merges);
}

static Bbpe *load(json_t *j) {
    Bbpe *b = NULL;
    if (!j || bbpe_load_json(&b, j, "fuzz") < 0) abort();
    return b;
}

// Loads the real Qwen2 tokenizer.json twice (exact regex, wrapped regex), or fails.
static int qwen_shared(Pair *p) {
    const char *shared = getenv("SHARED") ? getenv("SHARED") : "../shared";
    char path[4096];
    snprintf(path, sizeof path, "%s/tokenizers/qwen2/tokenizer.json", shared);
    json_t *j = json_load_file(path, 0, NULL);
    if (!j) return -1;
    p->fast = load(j);
    json_t *pre = json_array_get(json_object_get(json_object_get(j, "pre_tokenizer"), "pretokenizers"), 0);
    json_t *rx = json_object_get(json_object_get(pre, "pattern"), "Regex");
    if (!json_is_string(rx)) abort();
    char *w = malloc(json_string_length(rx) + 8);
    sprintf(w, "(?:%s)", json_string_value(rx));
    json_string_set(rx, w);
    free(w);
    p->pcre = load(j);
    json_decref(j);
    return 0;
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    if (qwen_shared(&qwen) < 0) {
        json_t *j = tiny_json(QWEN2_RE, 1);
        qwen.fast = load(j);
        json_decref(j);
        j = tiny_json("(?:" QWEN2_RE ")", 1);
        qwen.pcre = load(j);
        json_decref(j);
    }
    qwen.nfc = 1;
    json_t *j = tiny_json(GPT2_RE, 0);
    gpt2.fast = load(j);
    json_decref(j);
    j = tiny_json("(?:" GPT2_RE ")", 0);
    gpt2.pcre = load(j);
    json_decref(j);
    Pair *ps[2] = {&qwen, &gpt2};
    for (int i = 0; i < 2; i++) {
        ps[i]->ef = bbpe_encoder_new(ps[i]->fast);
        ps[i]->ep = bbpe_encoder_new(ps[i]->pcre);
    }
    return 0;
}

static void check(Pair *p, const char *s, size_t n, int is_nfc) {
    IdVec a = {0}, b = {0};
    ByteVec back = {0};
    int ra = bbpe_encode(p->ef, &a, s, n), rb = bbpe_encode(p->ep, &b, s, n);
    if (ra != 0 || rb != 0) abort();  // valid UTF-8 was checked by the caller
    if (a.n != b.n || (a.n && memcmp(a.v, b.v, a.n * sizeof *a.v) != 0)) abort();  // splitter != regex
    if (bbpe_decode(p->fast, &back, a.v, a.n) != 0) abort();
    if ((!p->nfc || is_nfc) && (back.n != n || (n && memcmp(back.v, s, n) != 0))) abort();
    idvec_free(&a);
    idvec_free(&b);
    bytevec_free(&back);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    IdVec ids = {0};
    int rc = bbpe_encode(gpt2.ef, &ids, (const char *)data, size);
    idvec_free(&ids);
    // utf8proc's validation is as strict as ours (no surrogates, no overlongs)
    utf8proc_uint8_t *norm = NULL;
    utf8proc_ssize_t r = utf8proc_map(data, (utf8proc_ssize_t)size, &norm, UTF8PROC_STABLE | UTF8PROC_COMPOSE);
    if ((rc == 0) != (r >= 0)) abort();  // we and utf8proc disagree on what is valid UTF-8
    if (rc != 0) { free(norm); return 0; }
    int is_nfc = (size_t)r == size && (size == 0 || memcmp(norm, data, size) == 0);
    free(norm);
    check(&qwen, (const char *)data, size, is_nfc);
    check(&gpt2, (const char *)data, size, 1);
    return 0;
}
