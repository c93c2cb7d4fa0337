// test_bbpe.c: byte-level BPE (lib/tok/bbpe.c) against ids derived by hand on a tiny
// tokenizer built here (always runs), and against HF tokenizers' ids for Qwen2
// and GPT-2 from ../shared (skipped when absent); error paths on corrupted
// files; the hand-written splitters against the same regex run by PCRE2.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>
#include <utf8proc.h>

#include "tok/bbpe.h"    // defines: Bbpe, BbpeEncoder, bbpe_*
#include "base/error.h"  // defines: err_msg
#include "base/fileio.h" // defines: file_read_all, path_join
#include "test.h"        // defines: T_OK, T_SKIP, T_DONE, test_shared

#define QWEN2_RE "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
#define GPT2_RE "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+"

// ---- helpers ---------------------------------------------------------------

// UTF-8 of the byte-level character that stands for byte x (GPT-2's bytes_to_unicode).
static int bl_char(int x, char *buf) {
    int printable = (x >= '!' && x <= '~') || (x >= 0xA1 && x <= 0xAC) || (x >= 0xAE && x <= 0xFF);
    int cp = x;
    if (!printable) {
        int below = 0;
        for (int b = 0; b < x; b++)
            below += !((b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF));
        cp = 256 + below;
    }
    return (int)utf8proc_encode_char(cp, (utf8proc_uint8_t *)buf);
}

// Encodes text; returns 1 when the ids equal want[0..n).
static int ids_equal(BbpeEncoder *e, const char *text, size_t len, const int32_t *want, size_t n) {
    IdVec out = {0};
    int ok = bbpe_encode(e, &out, text, len) == 0 && out.n == n &&
             memcmp(out.v, want, n * sizeof *want) == 0;
    if (!ok) {
        printf("# got %zu ids:", out.n);
        for (size_t i = 0; i < out.n && i < 24; i++) printf(" %d", out.v[i]);
        printf("\n# want %zu ids:", n);
        for (size_t i = 0; i < n && i < 24; i++) printf(" %d", want[i]);
        printf("\n");
    }
    idvec_free(&out);
    return ok;
}

#define IDS(e, text, ...) ids_equal(e, text, strlen(text), (const int32_t[]){__VA_ARGS__}, \
    sizeof((const int32_t[]){__VA_ARGS__}) / sizeof(int32_t))

// decode(encode(text)) == text
static int round_trip(const Bbpe *b, BbpeEncoder *e, const char *text, size_t len) {
    IdVec ids = {0};
    ByteVec back = {0};
    int ok = bbpe_encode(e, &ids, text, len) == 0 && bbpe_decode(b, &back, ids.v, ids.n) == 0 &&
             back.n == len && (len == 0 || memcmp(back.v, text, len) == 0);
    idvec_free(&ids);
    bytevec_free(&back);
    return ok;
}

// The first bytes of s with control characters escaped, for one-line messages.
static const char *preview(const char *s) {
    static char buf[64];
    size_t o = 0;
    for (; *s && o + 5 < sizeof buf; s++) {
        unsigned char c = (unsigned char)*s;
        if (c < 0x20 || c == 0x7f) o += (size_t)snprintf(buf + o, sizeof buf - o, "\\x%02x", c);
        else buf[o++] = (char)c;
    }
    buf[o] = 0;
    return buf;
}

static int write_file(const char *path, const char *data, size_t n) {
    FILE *f = fopen(path, "wb");
    if (!f) return -1;
    size_t w = fwrite(data, 1, n, f);
    return fclose(f) == 0 && w == n ? 0 : -1;
}

// ---- a tiny byte-level tokenizer ---------------------------------------------
//
// ids 0..255: the byte-level character of that byte; then these merges in rank
// order, each making the next id: "h e" 256, "Ġ t" 257, "Ġt he" 258, "a a" 259,
// "Ġ Ġ" 260, "e r" 261, "' S" 262; the added token "<|endoftext|>" is 263.
static const char *tiny_merges[][2] = {
    {"h", "e"}, {"\xc4\xa0", "t"}, {"\xc4\xa0t", "he"}, {"a", "a"}, {"\xc4\xa0", "\xc4\xa0"}, {"e", "r"}, {"'", "S"},
};
#define N_TINY_MERGES (sizeof tiny_merges / sizeof tiny_merges[0])

static json_t *tiny_vocab(void) {
    json_t *v = json_object();
    char buf[8];
    for (int x = 0; x < 256; x++) {
        int n = bl_char(x, buf);
        buf[n] = 0;
        json_object_set_new(v, buf, json_integer(x));
    }
    for (size_t i = 0; i < N_TINY_MERGES; i++) {
        char both[16];
        snprintf(both, sizeof both, "%s%s", tiny_merges[i][0], tiny_merges[i][1]);
        json_object_set_new(v, both, json_integer(256 + (json_int_t)i));
    }
    return v;
}

static json_t *tiny_special(void) {
    return json_pack("{s:i, s:s, s:b, s:b, s:b, s:b, s:b}", "id", 263, "content", "<|endoftext|>",
                     "single_word", 0, "lstrip", 0, "rstrip", 0, "normalized", 0, "special", 1);
}

// tokenizer.json of the tiny tokenizer; qwen: NFC + Split(Qwen2 regex) + ByteLevel,
// else ByteLevel with the GPT-2 regex.
static json_t *tiny_json(int qwen) {
    json_t *merges = json_array();
    for (size_t i = 0; i < N_TINY_MERGES; i++) {
        char m[16];
        snprintf(m, sizeof m, "%s %s", tiny_merges[i][0], tiny_merges[i][1]);
        json_array_append_new(merges, json_string(m));
    }
    json_t *pre = qwen
        ? json_pack("{s:s, s:[{s:s, s:{s:s}, s:s, s:b}, {s:s, s:b, s:b}]}", "type", "Sequence", "pretokenizers",
                    "type", "Split", "pattern", "Regex", QWEN2_RE, "behavior", "Isolated", "invert", 0,
                    "type", "ByteLevel", "add_prefix_space", 0, "use_regex", 0)
        : json_pack("{s:s, s:b, s:b}", "type", "ByteLevel", "add_prefix_space", 0, "use_regex", 1);
    json_t *model = json_pack("{s:s, s:n, s:o, s:o}", "type", "BPE", "dropout", "vocab", tiny_vocab(),
                              "merges", merges);
    json_t *normalizer = qwen ? json_pack("{s:s}", "type", "NFC") : json_null();
    return json_pack("{s:s, s:[o], s:o, s:o, s:o}", "version", "1.0", "added_tokens", tiny_special(),
                     "normalizer", normalizer, "pre_tokenizer", pre, "model", model);
}

static Bbpe *tiny_load(json_t *j) {
    Bbpe *b = NULL;
    if (bbpe_load_json(&b, j, "tiny.json") < 0) printf("# load: %s\n", err_msg());
    json_decref(j);
    return b;
}

static void test_tiny_gpt2(void) {
    Bbpe *b = tiny_load(tiny_json(0));
    if (!T_OK(b, "tiny GPT-2 tokenizer.json loads")) return;
    BbpeEncoder *e = bbpe_encoder_new(b);
    T_OK(bbpe_vocab_size(b) == 264, "tiny vocab size 264 (got %d)", bbpe_vocab_size(b));
    T_OK(bbpe_token_id(b, "<|endoftext|>") == 263 && bbpe_token_id(b, "\xc4\xa0the") == 258 &&
         bbpe_token_id(b, "nope") == -1, "token ids by string");
    // Hand-derived (and cross-checked with tokenizers.Tokenizer.from_str of the same JSON):
    T_OK(IDS(e, "the", 116, 256), "'the': t + he (no merge t he)");
    T_OK(IDS(e, " the", 258), "' the': h e, then Gt, then Gt he");
    T_OK(IDS(e, "her", 256, 114), "'her': h e (rank 0) wins over e r (rank 5)");
    T_OK(IDS(e, "aaa", 259, 97), "'aaa': leftmost pair first");
    T_OK(IDS(e, "aaaa", 259, 259), "'aaaa': two pairs");
    T_OK(IDS(e, "  the", 32, 258), "two spaces: \\s+(?!\\S) leaves one space to the word");
    T_OK(IDS(e, "   x", 260, 32, 120), "three spaces before a word: GG, then ' x'");
    T_OK(IDS(e, "a<|endoftext|>b", 97, 263, 98), "added token split out of the text");
    T_OK(IDS(e, "\xc3\xa9", 195, 169), "e-acute: one symbol per byte");
    T_OK(IDS(e, "e\xcc\x81", 101, 204, 129), "no normalizer: e + U+0301 stays decomposed");
    T_OK(IDS(e, "'S", 39, 83), "GPT-2 regex: 'S is not a contraction (case-sensitive)");
    // long words merge through the heap, short ones by scanning: same rule
    char a201[202];
    memset(a201, 'a', 201);
    a201[201] = 0;
    IdVec out = {0};
    int ok = bbpe_encode(e, &out, a201, 200) == 0 && out.n == 100;
    for (size_t i = 0; ok && i < 100; i++) ok = out.v[i] == 259;
    T_OK(ok, "200 x 'a' (heap path) -> 100 x 'aa'");
    out.n = 0;
    ok = bbpe_encode(e, &out, a201, 201) == 0 && out.n == 101 && out.v[100] == 97;
    T_OK(ok, "201 x 'a' -> 100 x 'aa' + 'a'");
    idvec_free(&out);
    // round trips (byte-level is lossless without a normalizer)
    const char *rt[] = {"hello world", "  two  spaces\t\ttabs\r\n\r\n", "\xc3\xa9t\xc3\xa9 \xe4\xb8\xad\xe6\x96\x87 \xf0\x9f\x98\x80",
                        "a<|endoftext|>b<|endoftext|>", "", "e\xcc\x81", "\x01\x02\x7f"};
    ok = 1;
    for (size_t i = 0; i < sizeof rt / sizeof rt[0]; i++) ok &= round_trip(b, e, rt[i], strlen(rt[i]));
    T_OK(ok, "decode(encode(x)) == x on %zu strings", sizeof rt / sizeof rt[0]);
    ok = round_trip(b, e, "a\0b", 3);
    T_OK(ok, "NUL bytes pass through");
    // errors
    out.n = 0;
    T_OK(bbpe_encode(e, &out, "ab\xff", 3) < 0 && strstr(err_msg(), "UTF-8"), "invalid UTF-8 is an error: %s", err_msg());
    T_OK(bbpe_encode(e, &out, "\xed\xa0\x80", 3) < 0, "a UTF-8 surrogate is an error");
    ByteVec dec = {0};
    T_OK(bbpe_decode(b, &dec, (const int32_t[]){264}, 1) < 0, "decode of id 264 is an error: %s", err_msg());
    T_OK(bbpe_decode(b, &dec, (const int32_t[]){-1}, 1) < 0, "decode of id -1 is an error");
    idvec_free(&out);
    bytevec_free(&dec);
    bbpe_encoder_free(e);
    bbpe_free(b);
}

static void test_tiny_qwen(void) {
    Bbpe *b = tiny_load(tiny_json(1));
    if (!T_OK(b, "tiny Qwen2-style tokenizer.json loads")) return;
    BbpeEncoder *e = bbpe_encoder_new(b);
    T_OK(IDS(e, "'S", 262), "Qwen2 regex: (?i:'s) takes 'S whole");
    T_OK(IDS(e, "e\xcc\x81", 195, 169), "NFC: e + U+0301 becomes U+00E9");
    T_OK(IDS(e, "  the", 32, 258), "Qwen2: two spaces before a word");
    T_OK(IDS(e, "a<|endoftext|>b", 97, 263, 98), "Qwen2: added token split out");
    T_OK(IDS(e, "12", 49, 50), "Qwen2: digits one by one");
    bbpe_encoder_free(e);
    bbpe_free(b);
}

// The same tokenizer from vocab.json + merges.txt (+ tokenizer_config.json).
static void test_tiny_files(const char *dir) {
    char *vp = path_join(dir, "vocab.json"), *mp = path_join(dir, "merges.txt"),
         *cp = path_join(dir, "tokenizer_config.json");
    json_t *v = tiny_vocab();
    char *vs = json_dumps(v, JSON_COMPACT);
    json_decref(v);
    ByteVec m = {0};
    bytevec_append(&m, "#version: 0.2\n", 14);
    for (size_t i = 0; i < N_TINY_MERGES; i++) {
        char line[32];
        int n = snprintf(line, sizeof line, "%s %s\n", tiny_merges[i][0], tiny_merges[i][1]);
        bytevec_append(&m, line, (size_t)n);
    }
    const char *config = "{\"tokenizer_class\": \"Qwen2Tokenizer\", \"added_tokens_decoder\": {\"263\": "
                         "{\"content\": \"<|endoftext|>\", \"lstrip\": false, \"normalized\": false, "
                         "\"rstrip\": false, \"single_word\": false, \"special\": true}}}";
    T_OK(write_file(vp, vs, strlen(vs)) == 0 && write_file(mp, m.v, m.n) == 0 &&
         write_file(cp, config, strlen(config)) == 0, "write tiny vocab.json, merges.txt, tokenizer_config.json");

    Bbpe *b = NULL;
    T_OK(bbpe_load_files(&b, vp, mp, NULL) == 0, "tiny vocab.json + merges.txt load: %s", b ? "" : err_msg());
    if (b) {
        BbpeEncoder *e = bbpe_encoder_new(b);
        T_OK(IDS(e, " the", 258), "files: ' the'");
        T_OK(IDS(e, "a<|endoftext|>b", 97, 60, 124, 101, 110, 100, 111, 102, 116, 101, 120, 116, 124, 62, 98),
             "files without config (GPT-2): <|endoftext|> is plain text");
        T_OK(bbpe_vocab_size(b) == 263, "files without config: vocab size 263");
        bbpe_encoder_free(e);
        bbpe_free(b);
    }
    b = NULL;
    T_OK(bbpe_load_files(&b, vp, mp, cp) == 0, "tiny files + Qwen2 config load: %s", b ? "" : err_msg());
    if (b) {
        BbpeEncoder *e = bbpe_encoder_new(b);
        T_OK(IDS(e, "a<|endoftext|>b", 97, 263, 98), "files + config: special split out");
        T_OK(IDS(e, "'S e\xcc\x81", 262, 32, 195, 169), "files + Qwen2 config: Qwen2 regex and NFC");
        bbpe_encoder_free(e);
        bbpe_free(b);
    }

    // corrupted files: each must fail with a message naming the file, and never crash
    struct { const char *what, *file, *data; } bad[] = {
        {"truncated vocab.json", vp, NULL},
        {"vocab.json that is an array", vp, "[1, 2]"},
        {"vocab.json with a string id", vp, "{\"a\": \"1\"}"},
        {"vocab.json with a negative id", vp, "{\"a\": -1}"},
        {"vocab.json with a huge id", vp, "{\"a\": 99999999999}"},
        {"merges.txt with three fields", mp, "a a a\n"},
        {"merges.txt with an empty line", mp, "h e\n\nh e\n"},
        {"merges.txt with a token not in the vocab", mp, "\xe2\x82\xac x\n"},
        {"merges.txt whose merge result is not in the vocab", mp, "x y\n"},
        {"tokenizer_config.json that is not JSON", cp, "{\"tokenizer_class\": "},
        {"tokenizer_config.json with a bad added token id", cp, "{\"added_tokens_decoder\": {\"x\": {\"content\": \"a\"}}}"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        // start from good files each time
        write_file(vp, vs, strlen(vs));
        write_file(mp, m.v, m.n);
        write_file(cp, config, strlen(config));
        if (bad[i].data) write_file(bad[i].file, bad[i].data, strlen(bad[i].data));
        else write_file(bad[i].file, vs, strlen(vs) / 2);
        b = NULL;
        int rc = bbpe_load_files(&b, vp, mp, cp);
        T_OK(rc < 0 && !b && strstr(err_msg(), bad[i].file), "%s: error \"%s\"", bad[i].what, err_msg());
        bbpe_free(b);
    }
    b = NULL;
    T_OK(bbpe_load_files(&b, vp, "/nonexistent/merges.txt", NULL) < 0 && strstr(err_msg(), "/nonexistent/merges.txt"),
         "missing merges.txt: \"%s\"", err_msg());
    // truncated merges.txt at every length: an error or a tokenizer, never a crash
    write_file(vp, vs, strlen(vs));
    int fine = 1;
    for (size_t cut = 0; cut <= m.n; cut++) {
        write_file(mp, m.v, cut);
        b = NULL;
        int rc = bbpe_load_files(&b, vp, mp, NULL);
        fine &= (rc == 0) == (b != NULL);
        if (b) {
            BbpeEncoder *e = bbpe_encoder_new(b);
            IdVec out = {0};
            fine &= bbpe_encode(e, &out, " the her", 8) == 0;
            idvec_free(&out);
            bbpe_encoder_free(e);
        }
        bbpe_free(b);
    }
    T_OK(fine, "merges.txt truncated at each of %zu lengths: loads or fails cleanly", m.n + 1);
    unlink(vp);
    unlink(mp);
    unlink(cp);
    free(vs);
    bytevec_free(&m);
    free(vp);
    free(mp);
    free(cp);
}

// tokenizer.json settings we refuse, each with a clear message.
static void test_json_errors(void) {
    struct { const char *what, *path, *value; } bad[] = {
        {"no model", "model", NULL},
        {"model type Unigram", "model.type", "\"Unigram\""},
        {"model vocab not an object", "model.vocab", "[]"},
        {"model merges not an array", "model.merges", "{}"},
        {"a merge with three tokens", "model.merges", "[\"a b c\"]"},
        {"a merge of unknown tokens", "model.merges", "[[\"\\u20ac\", \"x\"]]"},
        {"BPE dropout 0.1", "model.dropout", "0.1"},
        {"continuing_subword_prefix ##", "model.continuing_subword_prefix", "\"##\""},
        {"normalizer NFKC", "normalizer", "{\"type\": \"NFKC\"}"},
        {"pre_tokenizer Metaspace", "pre_tokenizer", "{\"type\": \"Metaspace\"}"},
        {"no pre_tokenizer", "pre_tokenizer", "null"},
        {"Split without ByteLevel", "pre_tokenizer",
         "{\"type\": \"Split\", \"pattern\": {\"Regex\": \"a\"}, \"behavior\": \"Isolated\", \"invert\": false}"},
        {"Split behavior Removed", "pre_tokenizer",
         "{\"type\": \"Sequence\", \"pretokenizers\": [{\"type\": \"Split\", \"pattern\": {\"Regex\": \"a\"}, "
         "\"behavior\": \"Removed\", \"invert\": false}, {\"type\": \"ByteLevel\"}]}"},
        {"Split regex that does not compile", "pre_tokenizer",
         "{\"type\": \"Sequence\", \"pretokenizers\": [{\"type\": \"Split\", \"pattern\": {\"Regex\": \"(a\"}, "
         "\"behavior\": \"Isolated\", \"invert\": false}, {\"type\": \"ByteLevel\"}]}"},
        {"added token without content", "added_tokens", "[{\"id\": 5}]"},
        {"added tokens not an array", "added_tokens", "{}"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        json_t *j = tiny_json(0);
        char key[64];
        snprintf(key, sizeof key, "%s", bad[i].path);
        char *dot = strchr(key, '.');
        json_t *parent = j;
        if (dot) { *dot = 0; parent = json_object_get(j, key); memmove(key, dot + 1, strlen(dot + 1) + 1); }
        if (bad[i].value) json_object_set_new(parent, key, json_loads(bad[i].value, JSON_DECODE_ANY, NULL));
        else json_object_del(parent, key);
        Bbpe *b = NULL;
        int rc = bbpe_load_json(&b, j, "bad.json");
        T_OK(rc < 0 && !b && strstr(err_msg(), "bad.json"), "tokenizer.json with %s: error \"%s\"", bad[i].what, err_msg());
        bbpe_free(b);
        json_decref(j);
    }
    Bbpe *b = NULL;
    json_t *arr = json_array();
    T_OK(bbpe_load_json(&b, arr, "bad.json") < 0, "tokenizer.json that is an array: error \"%s\"", err_msg());
    json_decref(arr);
}

// ---- against HF tokenizers (needs ../shared) ------------------------------

typedef struct { const char *text; int32_t ids[64]; size_t n; } TrickyCase;

// Reference ids from HF tokenizers 0.23.3, produced by this script (qwen: Tokenizer.from_file of
// qwen2/tokenizer.json; gpt2: Tokenizer(models.BPE.from_file(vocab, merges)) with
// pre_tokenizer ByteLevel(add_prefix_space=False)), printing for each case
//   t.encode(s, add_special_tokens=False).ids
// e.g. python3 -c "from tokenizers import Tokenizer; print(Tokenizer.from_file('../shared/tokenizers/qwen2/tokenizer.json').encode(\"DON'T 'S 'll I'M we'Re\", add_special_tokens=False).ids)"
static const TrickyCase qwen_cases[] = {
    {"DON'T 'S 'll I'M we'Re",
     {84641, 17323, 364, 50, 364, 654, 358, 27603, 582, 49427}, 10},
    {"a\015\012\015\012b\015\012",
     {64, 871, 65, 319}, 4},
    {"trailing spaces   ",
     {376, 14277, 12621, 262}, 4},
    {"x  multiple   spaces  before words",
     {87, 220, 5248, 256, 12621, 220, 1573, 4244}, 8},
    {"\011tab\011\011sep\011",
     {58149, 197, 197, 28036, 197}, 5},
    {"digits 1234567 and 3.14159",
     {60770, 220, 16, 17, 18, 19, 20, 21, 22, 323, 220, 18, 13, 16, 19, 16, 20, 24}, 18},
    {"\344\270\255\346\226\207\345\210\206\350\257\215\346\265\213\350\257\225\357\274\214\346\227\245\346\234\254\350\252\236\343\201\256\343\203\206\343\202\255\343\202\271\343\203\210",
     {104811, 17177, 99689, 81705, 3837, 101059, 102819, 15767, 56833, 61803, 70534}, 11},
    {"emoji \360\237\230\200\360\237\221\215\360\237\217\275\360\237\207\253\360\237\207\267 end",
     {37523, 90316, 144349, 145375, 145919, 145070, 835}, 7},
    {"e\314\201 cafe\314\201 n\314\203",
     {963, 51950, 1683, 109}, 4},
    {"nbsp\302\240ideo\343\200\200ls\342\200\250nel\302\205end",
     {5674, 4102, 1888, 22441, 4730, 378, 101, 8138, 126, 227, 408}, 11},
    {"a<|endoftext|>b",
     {64, 151643, 65}, 3},
    {"<|im_start|>user\012hi<|im_end|>\012",
     {151644, 872, 198, 6023, 151645, 198}, 6},
    {"'\305\277 long s",
     {6, 144815, 1293, 274}, 4},
    {"mongol\341\240\216ian",
     {71155, 337, 123970, 236, 1103}, 5},
    {"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx----------------------------------------------------------------------",
     {44102, 44102, 44102, 44102, 44102, 44102, 44102, 44102, 18516, 4146, 53264}, 11},
};
static const TrickyCase gpt2_cases[] = {
    {"DON'T 'S 'll I'M we'Re",
     {41173, 6, 51, 705, 50, 705, 297, 314, 6, 44, 356, 6, 3041}, 13},
    {"a\015\012\015\012b\015\012",
     {64, 201, 198, 201, 198, 65, 201, 198}, 8},
    {"trailing spaces   ",
     {9535, 4386, 9029, 220, 220, 220}, 6},
    {"x  multiple   spaces  before words",
     {87, 220, 3294, 220, 220, 9029, 220, 878, 2456}, 9},
    {"\011tab\011\011sep\011",
     {197, 8658, 197, 197, 325, 79, 197}, 7},
    {"digits 1234567 and 3.14159",
     {12894, 896, 17031, 2231, 3134, 290, 513, 13, 1415, 19707}, 10},
    {"\344\270\255\346\226\207\345\210\206\350\257\215\346\265\213\350\257\225\357\274\214\346\227\245\346\234\254\350\252\236\343\201\256\343\203\206\343\202\255\343\202\271\343\203\210",
     {40792, 23877, 229, 26344, 228, 46237, 235, 38184, 233, 46237, 243, 171, 120, 234, 33768, 98, 17312, 105, 45739, 252, 5641, 24336, 25084, 43302}, 24},
    {"emoji \360\237\230\200\360\237\221\215\360\237\217\275\360\237\207\253\360\237\207\267 end",
     {368, 31370, 30325, 222, 41840, 235, 8582, 237, 121, 8582, 229, 104, 8582, 229, 115, 886}, 16},
    {"e\314\201 cafe\314\201 n\314\203",
     {68, 136, 223, 26725, 136, 223, 299, 136, 225}, 9},
    {"nbsp\302\240ideo\343\200\200ls\342\200\250nel\302\205end",
     {77, 24145, 1849, 1651, 5099, 222, 7278, 447, 101, 4954, 126, 227, 437}, 13},
    {"a<|endoftext|>b",
     {64, 27, 91, 437, 1659, 5239, 91, 29, 65}, 9},
    {"<|im_start|>user\012hi<|im_end|>\012",
     {27, 91, 320, 62, 9688, 91, 29, 7220, 198, 5303, 27, 91, 320, 62, 437, 91, 29, 198}, 18},
    {"'\305\277 long s",
     {6, 129, 123, 890, 264}, 5},
    {"mongol\341\240\216ian",
     {31059, 349, 157, 254, 236, 666}, 6},
    {"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx----------------------------------------------------------------------",
     {24223, 24223, 24223, 24223, 24223, 24223, 24223, 24223, 12343, 5324, 10097, 23031}, 12},
};

static void check_cases(const char *name, const Bbpe *b, const TrickyCase *cs, size_t n, int nfc) {
    BbpeEncoder *e = bbpe_encoder_new(b);
    for (size_t i = 0; i < n; i++) {
        size_t len = strlen(cs[i].text);
        T_OK(ids_equal(e, cs[i].text, len, cs[i].ids, cs[i].n), "%s: HF ids for case %zu \"%s\"", name, i, preview(cs[i].text));
        // lossless for byte-level, up to NFC: only NFC input must come back unchanged
        utf8proc_uint8_t *norm = NULL;
        utf8proc_ssize_t r = utf8proc_map((const utf8proc_uint8_t *)cs[i].text, (utf8proc_ssize_t)len, &norm,
                                          UTF8PROC_STABLE | UTF8PROC_COMPOSE);
        int is_nfc = r == (utf8proc_ssize_t)len && memcmp(norm, cs[i].text, len) == 0;
        free(norm);
        if (!nfc || is_nfc) T_OK(round_trip(b, e, cs[i].text, len), "%s: decode(encode(case %zu)) == case", name, i);
    }
    bbpe_encoder_free(e);
}

// Up to max documents: the "text" fields of C4's first jsonl, then WikiText.
typedef struct { char **text; size_t *len, n; } Docs;

static void docs_load(Docs *d, const char *shared, size_t max) {
    memset(d, 0, sizeof *d);
    char *c4 = path_join(shared, "data/c4/c4-train.00000-of-01024.first1000.jsonl");
    char *wiki = path_join(shared, "data/wikitext2/wiki.test.joined.txt");
    char *buf;
    size_t n;
    d->text = xmalloc((max + 1) * sizeof *d->text);
    d->len = xmalloc((max + 1) * sizeof *d->len);
    if (file_read_all(&buf, &n, c4) == 0) {
        for (char *p = buf, *nl; d->n < max && (nl = strchr(p, '\n')); p = nl + 1) {
            json_t *j = json_loadb(p, (size_t)(nl - p), JSON_ALLOW_NUL, NULL);
            json_t *t = json_object_get(j, "text");
            if (json_is_string(t)) {
                d->len[d->n] = json_string_length(t);
                d->text[d->n] = xmalloc(d->len[d->n] + 1);
                memcpy(d->text[d->n], json_string_value(t), d->len[d->n] + 1);
                d->n++;
            }
            json_decref(j);
        }
        free(buf);
    }
    if (file_read_all(&buf, &n, wiki) == 0) { d->text[d->n] = buf; d->len[d->n++] = n; }
    free(c4);
    free(wiki);
}

static void docs_free(Docs *d) {
    for (size_t i = 0; i < d->n; i++) free(d->text[i]);
    free(d->text);
    free(d->len);
}

// The hand-written splitter (exact pattern string) against PCRE2 running the same
// regex (wrapped in (?:...), so the string differs and the generic path is taken).
static void check_fast_vs_pcre(const char *name, const Bbpe *fast, json_t *j_pcre, const Docs *d) {
    Bbpe *slow = NULL;
    if (!T_OK(bbpe_load_json(&slow, j_pcre, "pcre.json") == 0, "%s: PCRE2 variant loads: %s", name, slow ? "" : err_msg()))
        return;
    BbpeEncoder *ef = bbpe_encoder_new(fast), *es = bbpe_encoder_new(slow);
    IdVec a = {0}, b = {0};
    size_t same = 0, rt = 0;
    for (size_t i = 0; i < d->n; i++) {
        a.n = b.n = 0;
        int ok = bbpe_encode(ef, &a, d->text[i], d->len[i]) == 0 && bbpe_encode(es, &b, d->text[i], d->len[i]) == 0;
        same += ok && a.n == b.n && memcmp(a.v, b.v, a.n * sizeof *a.v) == 0;
        ByteVec back = {0};
        bbpe_decode(fast, &back, a.v, a.n);
        rt += back.n == d->len[i] && memcmp(back.v, d->text[i], back.n) == 0;
        bytevec_free(&back);
    }
    T_OK(same == d->n, "%s: hand-written splitter == PCRE2 regex on %zu/%zu documents", name, same, d->n);
    printf("# %s: %zu/%zu documents decode back to their bytes\n", name, rt, d->n);
    idvec_free(&a);
    idvec_free(&b);
    bbpe_encoder_free(ef);
    bbpe_encoder_free(es);
    bbpe_free(slow);
}

static void test_shared_qwen(const char *shared, const Docs *docs) {
    char *tj = path_join(shared, "tokenizers/qwen2/tokenizer.json");
    char *vp = path_join(shared, "tokenizers/qwen2/vocab.json"), *mp = path_join(shared, "tokenizers/qwen2/merges.txt"),
         *cp = path_join(shared, "tokenizers/qwen2/tokenizer_config.json");
    json_error_t je;
    json_t *j = json_load_file(tj, 0, &je);
    Bbpe *b = NULL;
    if (T_OK(j && bbpe_load_json(&b, j, tj) == 0, "Qwen2 tokenizer.json loads: %s", j ? err_msg() : je.text)) {
        T_OK(bbpe_vocab_size(b) == 151646, "Qwen2 vocab size 151646 (got %d)", bbpe_vocab_size(b));
        T_OK(bbpe_token_id(b, "<|endoftext|>") == 151643 && bbpe_token_id(b, "<|im_end|>") == 151645,
             "Qwen2 special ids");
        check_cases("qwen2 json", b, qwen_cases, sizeof qwen_cases / sizeof qwen_cases[0], 1);
        json_t *pre = json_array_get(json_object_get(json_object_get(j, "pre_tokenizer"), "pretokenizers"), 0);
        json_t *rx = json_object_get(json_object_get(pre, "pattern"), "Regex");
        char *wrapped = xmalloc(json_string_length(rx) + 8);
        sprintf(wrapped, "(?:%s)", json_string_value(rx));
        json_string_set(rx, wrapped);
        free(wrapped);
        check_fast_vs_pcre("qwen2", b, j, docs);
        bbpe_free(b);
    }
    json_decref(j);
    b = NULL;
    if (T_OK(bbpe_load_files(&b, vp, mp, cp) == 0, "Qwen2 vocab.json + merges.txt + config load: %s", b ? "" : err_msg())) {
        check_cases("qwen2 files", b, qwen_cases, sizeof qwen_cases / sizeof qwen_cases[0], 1);
        bbpe_free(b);
    }
    // a truncated copy of the real vocab.json must fail cleanly
    char *buf;
    size_t n;
    char tmp[] = "/tmp/test_bbpe_vocab_XXXXXX";
    int fd = mkstemp(tmp);
    if (fd >= 0 && file_read_all(&buf, &n, vp) == 0) {
        close(fd);
        write_file(tmp, buf, n / 3);
        b = NULL;
        T_OK(bbpe_load_files(&b, tmp, mp, cp) < 0 && strstr(err_msg(), tmp), "truncated Qwen2 vocab.json: error \"%.80s\"", err_msg());
        // and merges that end in the middle of a line either load or fail, without a crash
        free(buf);
        if (file_read_all(&buf, &n, mp) == 0) {
            write_file(tmp, buf, n / 2 + 3);
            b = NULL;
            int rc = bbpe_load_files(&b, vp, tmp, cp);
            T_OK((rc == 0) == (b != NULL), "Qwen2 merges.txt cut mid-line: %s", rc ? err_msg() : "loads");
            bbpe_free(b);
            free(buf);
        }
        unlink(tmp);
    }
    free(tj);
    free(vp);
    free(mp);
    free(cp);
}

static void test_shared_gpt2(const char *shared, const Docs *docs) {
    char *vp = path_join(shared, "tokenizers/gpt2/vocab.json"), *mp = path_join(shared, "tokenizers/gpt2/merges.txt");
    Bbpe *b = NULL;
    if (T_OK(bbpe_load_files(&b, vp, mp, NULL) == 0, "GPT-2 vocab.json + merges.txt load: %s", b ? "" : err_msg())) {
        T_OK(bbpe_vocab_size(b) == 50257 && bbpe_token_id(b, "<|endoftext|>") == 50256, "GPT-2 vocab size and <|endoftext|>");
        check_cases("gpt2", b, gpt2_cases, sizeof gpt2_cases / sizeof gpt2_cases[0], 0);
        // the same vocab as a tokenizer.json whose Split regex goes through PCRE2
        json_t *v = json_load_file(vp, 0, NULL);
        char *buf;
        size_t n;
        json_t *merges = json_array();
        if (file_read_all(&buf, &n, mp) == 0) {
            for (char *p = buf, *nl; (nl = strchr(p, '\n')); p = nl + 1) {
                *nl = 0;
                if (strncmp(p, "#version", 8) != 0) json_array_append_new(merges, json_string(p));
            }
            free(buf);
        }
        json_t *j = json_pack("{s:[], s:n, s:{s:s, s:[{s:s, s:{s:s}, s:s, s:b}, {s:s, s:b, s:b}]}, s:{s:s, s:o, s:o}}",
                              "added_tokens", "normalizer", "pre_tokenizer", "type", "Sequence", "pretokenizers",
                              "type", "Split", "pattern", "Regex", "(?:" GPT2_RE ")", "behavior", "Isolated", "invert", 0,
                              "type", "ByteLevel", "add_prefix_space", 0, "use_regex", 0,
                              "model", "type", "BPE", "vocab", v, "merges", merges);
        check_fast_vs_pcre("gpt2", b, j, docs);
        json_decref(j);
        bbpe_free(b);
    }
    free(vp);
    free(mp);
}

int main(void) {
    // nfc_unsafe (lib/tok/unicode_tables.c) lists where utf8proc 2.8's Unicode 15 differs
    // from HF's Unicode 9 NFC tables; another utf8proc needs that list re-derived
    // (lib/tok/gen_unicode_tables.py).
    T_OK(strcmp(utf8proc_unicode_version(), "15.0.0") == 0,
         "utf8proc Unicode version is 15.0.0, the one nfc_unsafe was derived for (got %s)", utf8proc_unicode_version());
    test_tiny_gpt2();
    test_tiny_qwen();
    char dir[] = "/tmp/test_bbpe_XXXXXX";
    if (T_OK(mkdtemp(dir) != NULL, "temp dir")) {
        test_tiny_files(dir);
        rmdir(dir);
    }
    test_json_errors();
    const char *shared = test_shared();
    if (!shared) {
        T_SKIP("HF comparisons: ../shared not found");
        T_DONE();
    }
    Docs docs;
    docs_load(&docs, shared, 300);
    if (docs.n == 0) T_SKIP("fast vs PCRE2 splitter: no C4 or WikiText under %s", shared);
    test_shared_qwen(shared, &docs);
    test_shared_gpt2(shared, &docs);
    docs_free(&docs);
    T_DONE();
}
