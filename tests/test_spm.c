// test_spm.c: lib/tok/spm*.c (the readers spm_model.c and spm_json.c, the encoder and
// decoder spm.c) against ids derived by hand (tiny models built here, byte by byte, so
// these run without ../shared), against the llama.cpp LLaMA-SPM cases (ids
// made by sentencepiece), round trips, and damaged tokenizer.model files (truncated at
// every length, bytes flipped), which must be refused or survive, never crash.
//
// The full-corpus comparison with sentencepiece and HF tokenizers (C4, WikiText) is
// tests/t_tokenize_oracle.sh. With SPM_TEST_JSON=path/to/tokenizer.json (a LLaMA-2
// tokenizer.json in the legacy Prepend+Replace layout, e.g. from transformers'
// LlamaConverter) the cases are also checked through spm_load_json.
//
// `test_spm --write-corpus DIR` writes the tiny models as the fuzz seed corpus
// (tests/fuzz/corpus/spm_model).
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "base/error.h"
#include "base/fileio.h"
#include "tok/spm.h"
#include "test.h"

// ---------------------------------------------------------------------------------
// A ModelProto written by hand: tag = field << 3 | wire type; wire 0 varint, 2 bytes,
// 5 fixed32.

static void put_varint(ByteVec *b, uint64_t v) {
    while (v >= 0x80) {
        bytevec_push(b, (char)(v | 0x80));
        v >>= 7;
    }
    bytevec_push(b, (char)v);
}
static void put_bytes(ByteVec *b, uint32_t field, const void *p, size_t n) {
    put_varint(b, field << 3 | 2);
    put_varint(b, n);
    bytevec_append(b, p, n);
}
static void put_uint(ByteVec *b, uint32_t field, uint64_t v) {
    put_varint(b, field << 3 | 0);
    put_varint(b, v);
}
static void put_piece(ByteVec *b, const char *piece, float score, int type) {
    ByteVec m = {0};
    put_bytes(&m, 1, piece, strlen(piece));
    uint32_t u;
    memcpy(&u, &score, 4);
    put_varint(&m, 2 << 3 | 5);
    for (int k = 0; k < 4; k++) bytevec_push(&m, (char)(u >> (8 * k)));
    if (type != 1) put_uint(&m, 3, (uint64_t)type);
    put_bytes(b, 1, m.v, m.n);
    bytevec_free(&m);
}

enum { UNK = 2, CTL = 3, BYTE = 6 };
#define WS "\xe2\x96\x81"

// The tiny vocabulary; ids in comments. "bc" outranks "ab"; "aa" ties with itself.
// TINY_BF adds the 256 byte pieces (13 + byte) and byte_fallback; TINY_USER adds the
// user-defined piece "<sep>" (13) and remove_extra_whitespaces.
enum { TINY_BF = 1, TINY_USER = 2 };
static void make_tiny(ByteVec *b, int flags) {
    int byte_fallback = flags & TINY_BF;
    b->n = 0;
    put_piece(b, "<unk>", 0, UNK);  // 0
    put_piece(b, "<s>", 0, CTL);    // 1
    put_piece(b, "</s>", 0, CTL);   // 2
    put_piece(b, WS, -1, 1);        // 3
    put_piece(b, "a", -2, 1);       // 4
    put_piece(b, "b", -3, 1);       // 5
    put_piece(b, "c", -4, 1);       // 6
    put_piece(b, "ab", -5, 1);      // 7
    put_piece(b, "bc", -0.5f, 1);   // 8
    put_piece(b, WS "a", -6, 1);    // 9
    put_piece(b, "abc", -7, 1);     // 10
    put_piece(b, WS "ab", -8, 1);   // 11
    put_piece(b, "aa", -1, 1);      // 12
    if (flags & TINY_USER) put_piece(b, "<sep>", 0, 4);  // 13
    if (byte_fallback) {
        for (int i = 0; i < 256; i++) {  // 13 + byte
            char name[8];
            snprintf(name, sizeof name, "<0x%02X>", i);
            put_piece(b, name, 0, BYTE);
        }
    }
    ByteVec t = {0};
    put_uint(&t, 3, 2);  // model_type BPE
    if (byte_fallback) put_uint(&t, 35, 1);
    put_bytes(b, 2, t.v, t.n);
    ByteVec ns = {0};
    put_bytes(&ns, 1, "identity", 8);
    put_uint(&ns, 3, 1);  // add_dummy_prefix
    put_uint(&ns, 4, (flags & TINY_USER) != 0);  // remove_extra_whitespaces
    put_uint(&ns, 5, 1);  // escape_whitespaces
    put_bytes(b, 3, ns.v, ns.n);
    bytevec_free(&t);
    bytevec_free(&ns);
}

// T_OK for a load: the library's message is printed only when it failed.
#define LOAD_OK(cond, ...) (T_OK((cond) || (printf("#   %s\n", err_msg()), 0), __VA_ARGS__))

static int ids_eq(const IdVec *v, const int32_t *want, size_t n) {
    return v->n == n && (n == 0 || memcmp(v->v, want, n * sizeof *want) == 0);
}

static int same_bytes(const char *a, size_t na, const char *b, size_t nb) {
    return na == nb && (na == 0 || memcmp(a, b, na) == 0);
}

static void print_ids(const char *what, const int32_t *v, size_t n) {
    printf("#   %s:", what);
    for (size_t i = 0; i < n; i++) printf(" %d", v[i]);
    printf("\n");
}

// Encodes text and compares with want (n ids); prints both on a mismatch.
static int check_encode(SpmEncoder *e, const char *text, const int32_t *want, size_t n) {
    IdVec v = {0};
    int ok = spm_encode(e, &v, text, strlen(text)) == 0 && ids_eq(&v, want, n);
    if (!ok) {
        print_ids("got ", v.v, v.n);
        print_ids("want", want, n);
    }
    idvec_free(&v);
    return ok;
}

static int check_decode(const Spm *s, const int32_t *ids, size_t n, const char *want, size_t want_len) {
    ByteVec b = {0};
    int ok = spm_decode(s, &b, ids, n) == 0 && same_bytes(b.v, b.n, want, want_len);
    if (!ok) printf("#   got [%.*s]\n", (int)b.n, b.v ? b.v : "");
    bytevec_free(&b);
    return ok;
}

#define N(a) (sizeof(a) / sizeof *(a))
#define ENC(e, text, ...) check_encode(e, text, (int32_t[]){__VA_ARGS__}, N(((int32_t[]){__VA_ARGS__})))
#define DEC(s, want, ...) check_decode(s, (int32_t[]){__VA_ARGS__}, N(((int32_t[]){__VA_ARGS__})), want, strlen(want))

static void test_tiny(void) {
    ByteVec b = {0};
    make_tiny(&b, 0);
    Spm *s = NULL;
    if (!LOAD_OK(spm_load_model(&s, (const uint8_t *)b.v, b.n, "tiny.model") == 0, "load a hand-built ModelProto")) return;
    T_OK(spm_vocab_size(s) == 13 && spm_bos_id(s) == 1 && spm_eos_id(s) == 2, "tiny: vocab 13, bos 1, eos 2");
    SpmEncoder *e = spm_encoder_new(s);
    // "▁abc": bc (-0.5) first, then ▁a (-6); "▁abc" is no piece
    T_OK(ENC(e, "abc", 9, 8), "tiny: the highest score merges first (abc -> ▁a bc)");
    T_OK(ENC(e, "ab", 11), "tiny: merges chain (ab -> ▁ab)");
    T_OK(ENC(e, "aaa", 3, 12, 4), "tiny: equal scores merge leftmost first (aaa -> ▁ aa a)");
    T_OK(ENC(e, "cab", 3, 6, 7), "tiny: cab -> ▁ c ab");
    T_OK(ENC(e, "xy z", 3, 0, 3, 0), "tiny: no byte fallback: a run of unknown characters is one <unk>");
    IdVec v = {0};
    T_OK(spm_encode(e, &v, "", 0) == 0 && v.n == 0, "tiny: empty text gives no ids");
    T_OK(ENC(e, " a", 3, 9), "tiny: a leading space is its own ▁ after the dummy prefix");
    T_OK(ENC(e, "abc abc", 9, 8, 9, 8), "tiny: words repeat through the cache");
    T_OK(DEC(s, "abc", 9, 8), "tiny: decode drops the dummy-prefix space");
    T_OK(DEC(s, "abc", 1, 9, 8, 2), "tiny: decode skips control pieces");
    T_OK(DEC(s, " ab", 3, 11), "tiny: decode keeps a second leading space");
    T_OK(DEC(s, " \xe2\x81\x87 c", 0, 6), "tiny: decode of <unk> is \" \xe2\x81\x87 \"");
    T_OK(spm_decode(s, &(ByteVec){0}, (int32_t[]){13}, 1) < 0 && strstr(err_msg(), "tiny.model"),
         "tiny: decode refuses an id outside the vocab (%s)", err_msg());
    idvec_free(&v);
    spm_encoder_free(e);
    spm_free(s);

    make_tiny(&b, TINY_USER);
    if (LOAD_OK(spm_load_model(&s, (const uint8_t *)b.v, b.n, "tiny-user.model") == 0, "load a tiny model with a user-defined piece")) {
        e = spm_encoder_new(s);
        // "▁a▁<sep>b" after the normalizer; <sep> never merges
        T_OK(ENC(e, "  a  <sep>b  ", 9, 3, 13, 5), "tiny-user: extra spaces go, <sep> stays whole");
        T_OK(ENC(e, "a<sep><sep>", 9, 13, 13), "tiny-user: <sep><sep>");
        T_OK(DEC(s, "a <sep>b", 9, 3, 13, 5), "tiny-user: decode");
        spm_encoder_free(e);
        spm_free(s);
    }

    make_tiny(&b, TINY_BF);
    if (!LOAD_OK(spm_load_model(&s, (const uint8_t *)b.v, b.n, "tiny-bf.model") == 0, "load a tiny model with byte fallback")) return;
    e = spm_encoder_new(s);
    T_OK(ENC(e, "x\xc3\xa9", 3, 13 + 'x', 13 + 0xC3, 13 + 0xA9), "tiny-bf: unknown characters become their bytes");
    T_OK(DEC(s, "x\xc3\xa9", 3, 13 + 'x', 13 + 0xC3, 13 + 0xA9), "tiny-bf: byte pieces decode to bytes");
    T_OK(DEC(s, "\xef\xbf\xbd" "a", 13 + 0xC3, 4), "tiny-bf: a cut UTF-8 sequence decodes to U+FFFD");
    T_OK(ENC(e, "a\xff", 9, 13 + 0xEF, 13 + 0xBF, 13 + 0xBD), "tiny-bf: invalid UTF-8 is U+FFFD, as sentencepiece");
    spm_encoder_free(e);
    spm_free(s);
    bytevec_free(&b);
}

// Models sentencepiece refuses, each with the reason in the message.
static void test_refused(void) {
    struct { const char *want; int kind; } cases[] = {
        {"unsupported model type unigram", 0}, {"unk is not defined", 1}, {"is already defined", 2},
        {"byte_fallback is false", 3}, {"not 256 byte pieces", 4}, {"truncated or corrupt", 5}, {"empty file", 6},
        {"exceeds its blob", 7},
    };
    for (size_t k = 0; k < N(cases); k++) {
        ByteVec b = {0}, t = {0};
        switch (cases[k].kind) {
        case 0: put_piece(&b, "<unk>", 0, UNK); break;  // no trainer_spec: model_type is UNIGRAM
        case 1: put_piece(&b, "a", 0, 1); break;
        case 2: put_piece(&b, "<unk>", 0, UNK), put_piece(&b, "a", 0, 1), put_piece(&b, "a", 0, 1); break;
        case 3: put_piece(&b, "<unk>", 0, UNK), put_piece(&b, "<0x00>", 0, BYTE); break;
        case 4: put_piece(&b, "<unk>", 0, UNK), put_piece(&b, "<0x00>", 0, BYTE), put_uint(&t, 35, 1); break;
        case 5: put_piece(&b, "<unk>", 0, UNK), b.n -= 2; break;
        case 6: break;
        case 7: {  // a charsmap whose trie size leaves its header no room (fuzz finding)
            make_tiny(&b, 0);
            ByteVec ns = {0};
            const uint8_t cm[6] = {5, 0, 0, 0, 'x', 'y'};
            put_bytes(&ns, 1, "custom", 6);
            put_bytes(&ns, 2, cm, sizeof cm);
            put_bytes(&b, 3, ns.v, ns.n);
            bytevec_free(&ns);
            break;
        }
        }
        if (cases[k].kind != 0 && cases[k].kind != 6 && cases[k].kind != 7) {
            put_uint(&t, 3, 2);
            if (cases[k].kind != 5) put_bytes(&b, 2, t.v, t.n);
        }
        Spm *s = NULL;
        int rc = spm_load_model(&s, (const uint8_t *)(b.v ? b.v : ""), b.n, "bad.model");
        T_OK(rc < 0 && strstr(err_msg(), cases[k].want) && strstr(err_msg(), "bad.model"),
             "refused: %s (%s)", cases[k].want, err_msg());
        spm_free(s);
        bytevec_free(&b);
        bytevec_free(&t);
    }
}

// A tiny HF tokenizer.json (legacy layout): ids come from merge ranks, not scores.
static void test_tiny_json(void) {
    const char *text =
        "{\"added_tokens\": [{\"id\": 1, \"content\": \"<s>\", \"single_word\": false, \"lstrip\": false,"
        "   \"rstrip\": false, \"normalized\": false, \"special\": true},"
        "  {\"id\": 2, \"content\": \"</s>\", \"single_word\": false, \"lstrip\": false,"
        "   \"rstrip\": false, \"normalized\": false, \"special\": true}],"
        " \"normalizer\": {\"type\": \"Sequence\", \"normalizers\": [{\"type\": \"Prepend\", \"prepend\": \"" WS "\"},"
        "  {\"type\": \"Replace\", \"pattern\": {\"String\": \" \"}, \"content\": \"" WS "\"}]},"
        " \"pre_tokenizer\": null,"
        " \"model\": {\"type\": \"BPE\", \"unk_token\": \"<unk>\", \"fuse_unk\": true, \"byte_fallback\": false,"
        "  \"vocab\": {\"<unk>\": 0, \"<s>\": 1, \"</s>\": 2, \"" WS "\": 3, \"a\": 4, \"b\": 5, \"c\": 6,"
        "   \"ab\": 7, \"bc\": 8, \"" WS "a\": 9, \"abc\": 10},"
        "  \"merges\": [\"a b\", \"" WS " a\", \"b c\", \"ab c\"]}}";
    json_error_t je;
    json_t *root = json_loads(text, 0, &je);
    if (!T_OK(root != NULL, "tiny json parses (%s)", root ? "" : je.text)) return;
    Spm *s = NULL;
    if (LOAD_OK(spm_load_json(&s, root, "tiny.json") == 0, "load a tiny tokenizer.json")) {
        SpmEncoder *e = spm_encoder_new(s);
        // ▁ a b c: "a b" has rank 0, so ab first (sentencepiece would take bc), then abc
        T_OK(ENC(e, "abc", 3, 10), "tiny json: merge rank decides (abc -> ▁ abc)");
        T_OK(ENC(e, "ac", 9, 6), "tiny json: ac -> ▁a c");
        T_OK(ENC(e, "a<s>b", 9, 1, 3, 5), "tiny json: added tokens are cut out first; each piece gets its ▁");
        T_OK(ENC(e, "xy", 3, 0), "tiny json: fused <unk>");
        T_OK(DEC(s, "abc", 1, 3, 10, 2), "tiny json: decode");
        spm_encoder_free(e);
        spm_free(s);
    }
    json_decref(root);
}

// ---------------------------------------------------------------------------------
// The llama.cpp LLaMA-SPM cases: inputs split by "\n__ggml_vocab_test__\n", one line
// of expected ids (no BOS) per input.

typedef struct { char *text; size_t len; IdVec want; } Case;

// bufs[0..1] receive the two files, which the cases point into; the caller frees them.
static size_t load_cases(Case **out, char **bufs, const char *shared) {
    char inp[512], outp[512];
    snprintf(inp, sizeof inp, "%s/tokenizers/cases/llama-spm.inp", shared);
    snprintf(outp, sizeof outp, "%s/tokenizers/cases/llama-spm.out", shared);
    char *a, *b;
    size_t na, nb;
    bufs[0] = bufs[1] = NULL;
    if (file_read_all(&a, &na, inp) < 0) return 0;
    bufs[0] = a;
    if (file_read_all(&b, &nb, outp) < 0) return 0;
    bufs[1] = b;
    const char *sep = "\n__ggml_vocab_test__\n";
    size_t n = 0, cap = 64;
    Case *c = calloc(cap, sizeof *c);
    char *p = a, *line = b;
    for (;;) {
        char *q = strstr(p, sep);
        char *eol = strchr(line, '\n');
        if (!q || !eol) break;
        if (n == cap) c = realloc(c, (cap *= 2) * sizeof *c);
        c[n] = (Case){.text = p, .len = (size_t)(q - p)};
        *eol = 0;
        for (char *t = line; *t;) {
            char *end;
            long id = strtol(t, &end, 10);
            if (end == t) break;
            idvec_push(&c[n].want, (int32_t)id);
            t = end;
        }
        n++;
        p = q + strlen(sep);
        line = eol + 1;
    }
    *out = c;
    return n;
}

static void test_cases(const char *shared, Spm *s, const char *what) {
    Case *c = NULL;
    char *bufs[2];
    size_t n = load_cases(&c, bufs, shared);
    if (!T_OK(n > 0, "%s: read the llama-spm cases", what)) {
        free(bufs[0]), free(bufs[1]), free(c);
        return;
    }
    SpmEncoder *e = spm_encoder_new(s);
    size_t same = 0, round = 0;
    IdVec v = {0};
    ByteVec d = {0};
    for (size_t i = 0; i < n; i++) {
        v.n = 0;
        int ok = spm_encode(e, &v, c[i].text, c[i].len) == 0 && ids_eq(&v, c[i].want.v, c[i].want.n);
        same += ok;
        if (!ok) {
            printf("#   case %zu [%.*s]\n", i, (int)c[i].len, c[i].text);
            print_ids("got ", v.v, v.n);
            print_ids("want", c[i].want.v, c[i].want.n);
        }
        d.n = 0;
        round += spm_decode(s, &d, v.v, v.n) == 0 && same_bytes(d.v, d.n, c[i].text, c[i].len);
    }
    T_OK(same == n, "%s: %zu of %zu llama-spm cases give sentencepiece's ids", what, same, n);
    T_OK(round == n, "%s: decode(encode(x)) == x on %zu of %zu cases", what, round, n);
    idvec_free(&v);
    bytevec_free(&d);
    spm_encoder_free(e);
    for (size_t i = 0; i < n; i++) idvec_free(&c[i].want);
    free(c);
    free(bufs[0]);
    free(bufs[1]);
}

// LLaMA round trips: lossless for valid UTF-8 (the dummy prefix comes back off) except
// that a literal "▁" comes back as a space.
static void test_roundtrip(Spm *s) {
    const char *texts[] = {"Hello world", " leading space", "  two", "trailing  ", "\t\ttabs\n\nnewlines\n",
                           "emoji \xf0\x9f\x98\x80 and \xe4\xb8\xad\xe6\x96\x87", "a\x01" "b\x7f", "", " "};
    SpmEncoder *e = spm_encoder_new(s);
    int ok = 1;
    IdVec v = {0};
    ByteVec d = {0};
    for (size_t i = 0; i < N(texts); i++) {
        v.n = 0, d.n = 0;
        size_t len = strlen(texts[i]);
        if (spm_encode(e, &v, texts[i], len) < 0 || spm_decode(s, &d, v.v, v.n) < 0
            || !same_bytes(d.v, d.n, texts[i], len)) {
            printf("#   [%s] -> [%.*s]\n", texts[i], (int)d.n, d.v ? d.v : "");
            ok = 0;
        }
    }
    T_OK(ok, "llama: decode(encode(x)) == x on %zu strings", N(texts));
    v.n = 0, d.n = 0;
    T_OK(spm_encode(e, &v, "a" WS "b", 5) == 0 && spm_decode(s, &d, v.v, v.n) == 0 && d.n == 3
             && memcmp(d.v, "a b", 3) == 0, "llama: a literal \"▁\" decodes as a space");
    idvec_free(&v);
    bytevec_free(&d);
    spm_encoder_free(e);
}

// Damage: truncations must be refused, except a cut that falls exactly between two
// top-level fields after the trainer_spec (a valid, shorter ModelProto: at most a
// couple of lengths); flipped bits must be refused or give a model that encodes and
// decodes without crashing.
static void test_damage(const uint8_t *data, size_t n, const char *path, int n_flips) {
    size_t cuts = 0, refused = 0, loaded = 0;
    size_t step = n / 1000 + 1;
    for (size_t len = 0; len < n; len += (len < 2048 ? 1 : step)) {
        Spm *s = NULL;
        cuts++;
        if (spm_load_model(&s, data, len, path) < 0) refused += strstr(err_msg(), path) != NULL;
        else loaded++;
        spm_free(s);
    }
    T_OK(refused + loaded == cuts && loaded <= 2, "%s: %zu of %zu truncations refused with a message, %zu at a field boundary loaded",
         path, refused, cuts, loaded);
    uint8_t *b = malloc(n);
    size_t flips = 0;
    loaded = 0;
    uint64_t x = 88172645463325252ull;
    for (int k = 0; k < n_flips; k++) {
        memcpy(b, data, n);
        for (int j = 0; j < 1 + k % 4; j++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            b[x % n] ^= (uint8_t)(1u << (x >> 32) % 8);
        }
        Spm *s = NULL;
        flips++;
        if (spm_load_model(&s, b, n, path) == 0) {
            loaded++;
            SpmEncoder *e = spm_encoder_new(s);
            IdVec v = {0};
            ByteVec d = {0};
            const char *t = "Hello w\xc3\xb6rld \xf0\x9f\x98\x80  x";
            if (spm_encode(e, &v, t, strlen(t)) == 0) spm_decode(s, &d, v.v, v.n);
            idvec_free(&v);
            bytevec_free(&d);
            spm_encoder_free(e);
        }
        spm_free(s);
    }
    free(b);
    T_OK(1, "%s: %zu files with flipped bits, %zu loaded, no crash", path, flips, loaded);
}

static void test_json_env(Spm *model, const char *shared) {
    const char *path = getenv("SPM_TEST_JSON");
    if (!path) {
        T_SKIP("tokenizer.json cases: set SPM_TEST_JSON to a LLaMA-2 tokenizer.json (legacy layout)");
        return;
    }
    json_error_t je;
    json_t *root = json_load_file(path, 0, &je);
    Spm *s = NULL;
    if (!root) printf("#   %s\n", je.text);
    if (LOAD_OK(root && spm_load_json(&s, root, path) == 0, "load %s", path)) {
        T_OK(spm_vocab_size(s) == spm_vocab_size(model), "%s: same vocab size as tokenizer.model", path);
        test_cases(shared, s, path);
    }
    spm_free(s);
    json_decref(root);
}

static int write_corpus(const char *dir) {
    ByteVec b = {0};
    const char *names[] = {"tiny", "tiny-bf", "tiny-user", "tiny-bf-user"};
    for (int k = 0; k < 4; k++) {
        make_tiny(&b, k);
        char p[512];
        snprintf(p, sizeof p, "%s/%s.model", dir, names[k]);
        FILE *f = fopen(p, "wb");
        if (!f || fwrite(b.v, 1, b.n, f) != b.n || fclose(f) != 0) return 1;
    }
    bytevec_free(&b);
    return 0;
}

int main(int argc, char **argv) {
    if (argc == 3 && strcmp(argv[1], "--write-corpus") == 0) return write_corpus(argv[2]);
    test_tiny();
    test_refused();
    test_tiny_json();
    {
        ByteVec b = {0};
        make_tiny(&b, TINY_BF | TINY_USER);
        test_damage((const uint8_t *)b.v, b.n, "tiny-bf-user.model", 2000);
        bytevec_free(&b);
    }
    const char *shared = test_shared();
    if (!shared) {
        T_SKIP("LLaMA-2 tokenizer.model, llama-spm cases: ../shared not found (set SHARED)");
        T_DONE();
    }
    char path[512];
    snprintf(path, sizeof path, "%s/tokenizers/llama2/tokenizer.model", shared);
    char *data;
    size_t n;
    Spm *s = NULL;
    if (!LOAD_OK(file_read_all(&data, &n, path) == 0 && spm_load_model(&s, (const uint8_t *)data, n, path) == 0,
                 "load %s", path))
        T_DONE();
    T_OK(spm_vocab_size(s) == 32000 && spm_bos_id(s) == 1 && spm_eos_id(s) == 2, "llama: vocab 32000, bos 1, eos 2");
    test_cases(shared, s, "llama tokenizer.model");
    test_roundtrip(s);
    test_damage((const uint8_t *)data, n, path, 100);
    test_json_env(s, shared);
    spm_free(s);
    free(data);
    T_DONE();
}
