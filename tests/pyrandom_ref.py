# pyrandom_ref.py: the reference of tests/test_pyrandom.c, from the python3 at hand: for each
# seed on stdin (one a line), one line of what random.Random(seed) draws in turn:
# getrandbits(32) x 3, getrandbits(k) for k in 1, 7, 31, 33, 53, 64, randrange(n) for n in
# 1, 2, 3, 1000, 2**33 + 1, 2**63 + 5, then sample(range(n), k) for each (n, k) of SAMPLES.
import random
import sys

SAMPLES = [(1, 1), (10, 5), (21, 5), (22, 5), (30, 0), (80, 10), (85, 10), (86, 10), (100, 10),
           (500, 500), (5000, 40), (100000, 1234)]
for line in sys.stdin:
    r = random.Random(int(line))
    out = [r.getrandbits(32) for _ in range(3)]
    out += [r.getrandbits(k) for k in (1, 7, 31, 33, 53, 64)]
    out += [r.randrange(n) for n in (1, 2, 3, 1000, 2**33 + 1, 2**63 + 5)]
    for n, k in SAMPLES:
        out += r.sample(range(n), k)
    print(" ".join(map(str, out)))
