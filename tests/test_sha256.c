// test_sha256.c: SHA-256 (base/sha256.h) against FIPS 180-2's published examples ("abc",
// the 448-bit two-block message, a million "a") and the empty string's known digest, and
// against Python's hashlib on lengths 0-200 around the block and padding edges (the digests
// below printed by hashlib.sha256(bytes((7 j + 3) % 256 for j < n)) on 2026-11-29).
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/sha256.h"
#include "test.h"

int main(void) {
    static const struct { const char *msg, *hex; } FIPS[] = {
        {"", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"},
        {"abc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"},
        {"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq",
         "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"}};
    char hex[65];
    size_t bad = 0;
    for (size_t i = 0; i < sizeof FIPS / sizeof *FIPS; i++) {
        sha256_hex(hex, FIPS[i].msg, strlen(FIPS[i].msg));
        bad += strcmp(hex, FIPS[i].hex) != 0;
    }
    char *million = malloc(1000000);
    memset(million, 'a', 1000000);
    sha256_hex(hex, million, 1000000);
    free(million);
    bad += strcmp(hex, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0") != 0;
    T_OK(bad == 0, "the FIPS 180-2 examples and the empty string (%zu differ)", bad);
    static const struct { int n; const char *hex; } PY[] = {
        {0, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"},
        {1, "084fed08b978af4d7d196a7446a86b58009e636b611db16211b65a9aadff29c5"},
        {2, "323b730f87b4e7cc0948351a1c11b757b3026cda6784282576757bca21f12483"},
        {31, "721f1b54dd0f746ef819ba479fcd63b6117bfbe44acc432bf0cb0a639fd41766"},
        {32, "ab5f8b5cb9435354c7b58603592d5faf081e17ceb05f7a7c67f4b666f12ca457"},
        {54, "160bbf14b458c877b7049e7cb5771dd653930f97d20bdd8ee795c16062906233"},
        {55, "e7313d333c272e639f790978283f9eb392e843d0f29b7016828bb1daa4aac70b"},
        {56, "4324d65f3c103567f5589c710bc08f8523f929a9272e3af36fc968e52abc6c27"},
        {57, "35df609437dcfea3279283ab79fd554e2bf78f8f7ae2de532d8ee300b09e8f73"},
        {63, "81c80242132f230c3bd41b3e63bbcff16107339549214a99614ff26664625055"},
        {64, "39e3d7b6b5d075d37d053ad89b24b41bef4f3c29760c84447cab3f3be1882241"},
        {65, "aacca6ff74fdbb296d165a45cecfa04e5127bc008770fbbdd48006f2d2fae95e"},
        {100, "5a2cda2351d1cdd9dd7957e57c0b3c8522451f25b6494569b7e94388c46f0980"},
        {118, "2c49b89c5aaaaaa69ae70251cc0803f14afaf1a2caa461fa6b083750bc07ce88"},
        {119, "9ce7368e4daf32341631b492e80359dc9f594b48453cd0dd5bf0b19279cc177e"},
        {120, "7836b787757e95e58b3ca5aec90b1b004e8deba1e50e9675af9cabf1a13a04b5"},
        {127, "a8d23e75d936f303d248888d9b165ee543f4cbafcad3c9dd2a79bd84faa11d07"},
        {128, "d2742f1f4ac6bb7ca2b239ee18402ba8b3f9f8e652d2a72973c2b9ba11c08cf6"},
        {129, "307f8fc2c1622b92762e818d39a185d4d667ad49a4b07ceae1f4afa008a93ec4"},
        {200, "2c7e18c942ef065b526a2d4e5546283749cd3ddfb51d8fc71f42717363685f46"},
    };
    unsigned char buf[256];
    bad = 0;
    for (size_t i = 0; i < sizeof PY / sizeof *PY; i++) {
        for (int j = 0; j < PY[i].n; j++) buf[j] = (unsigned char)(j * 7 + 3);
        sha256_hex(hex, buf, (size_t)PY[i].n);
        if (strcmp(hex, PY[i].hex) != 0) fprintf(stderr, "# length %d: %s, hashlib %s\n", PY[i].n, hex, PY[i].hex), bad++;
    }
    T_OK(bad == 0, "hashlib's digests of %zu messages of 0-200 bytes (the padding's one- and two-block cases; %zu differ)",
         sizeof PY / sizeof *PY, bad);
    T_DONE();
}
