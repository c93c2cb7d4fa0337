#!/bin/sh
# tests/gpu/deps_sim.sh: tests/gpu/deps.sh and run.sh's build on this Debian machine as on a
# lent GPU machine that lacks the packages: a copy of the working tree and .gpudeps/*.deb
# (what the device tool carries) is built in a private mount namespace (unshare -m) whose
# /usr is an overlay hiding every file of the packages that deps.sh fetches, except the
# libraries that the toolchain here needs itself (ld links libjansson, gcc libzstd, grep
# libpcre2-8, ...: an image with gcc has them too), and the links that lead to hidden files
# (OpenBLAS's alternatives). Root only (unshare, mount); not part of `make test`.
#
#   sh tests/gpu/deps_sim.sh      after sh tests/gpu/deps.sh fetch; KEEP=1 keeps the copy
#
# It checks that there: pkg-config, the headers and the libraries are gone; `make all`
# fails; run.sh's build step falls back to .gpudeps and passes ("ok - make all with
# .gpudeps"); the programs built carry DT_RPATH (not DT_RUNPATH) into .gpudeps/root and load
# its libraries (ldd) with no LD_LIBRARY_PATH; bin/best-train --help, test_model and
# test_pack run; GPU_FALLBACK=1, and a tree without .gpudeps, still take the fallback build.
# Last line "N passed, N failed".
set -u
cd "$(dirname "$0")/../.."
if [ "${1:-}" != inner ]; then
    [ "$(id -u)" = 0 ] || { echo "deps_sim.sh: needs root (unshare -m, mount)"; exit 1; }
    ls .gpudeps/*.deb >/dev/null 2>&1 || { echo "deps_sim.sh: no .gpudeps/*.deb: sh tests/gpu/deps.sh fetch first"; exit 1; }
    S=$(mktemp -d /tmp/gpudeps-sim.XXXXXX)
    # the tree as the device tool sends it: tracked and untracked files git does not ignore,
    # plus the carried .debs
    mkdir -p "$S/tree/.gpudeps"
    git ls-files -co --exclude-standard -z | xargs -0 tar -cf - | tar -xf - -C "$S/tree"
    cp .gpudeps/*.deb "$S/tree/.gpudeps/"
    # the hidden files: all of the -dev packages and pkgconf, and the libraries the
    # toolchain does not load
    tools=""
    for b in gcc g++ "$(gcc -print-prog-name=cc1)" "$(gcc -print-prog-name=cc1plus)" "$(gcc -print-prog-name=collect2)" \
        ld as ar make sh grep sed awk tar find dpkg-deb xz python3 /usr/local/cuda/bin/* /usr/local/cuda/nvvm/bin/*; do
        p=$(command -v "$b" 2>/dev/null) && tools="$tools $p"
    done
    used=$(for p in $tools; do ldd "$p" 2>/dev/null | awk '{ print $1 }'; done | sort -u)
    pkgs=$(sed -n 's/^\(DEV\|LIB\|RUN\|PC\)_PKGS="\(.*\)"$/\2/p' tests/gpu/deps.sh)
    : >"$S/hidden"
    : >"$S/visible"
    for pkg in $pkgs; do
        files=$(dpkg -L "$pkg" | while read -r f; do [ -f "$f" ] || [ -L "$f" ] && echo "$f"; done)
        keep=0
        for f in $files; do
            case "$f" in *.so.*) echo "$used" | grep -qx "$(basename "$f")" && keep=1 ;; esac
        done
        if [ "$keep" = 1 ]; then echo "$pkg" >>"$S/visible"; else echo "$files" >>"$S/hidden"; fi
    done
    # links (alternatives) that lead to a hidden file
    for l in $(find /usr/lib/x86_64-linux-gnu /usr/include /usr/bin -maxdepth 2 -type l); do
        t=$(readlink -f "$l")
        grep -qx "$t" "$S/hidden" && echo "$l" >>"$S/hidden.links"
    done
    cat "$S/hidden.links" >>"$S/hidden"
    mkdir -p "$S/upper" "$S/work"
    sed 's|^/lib/|/usr/lib/|' "$S/hidden" | sort -u | while read -r f; do
        case "$f" in /usr/*) ;; *) continue ;; esac
        mkdir -p "$S/upper$(dirname "${f#/usr}")"
        mknod "$S/upper${f#/usr}" c 0 0 # an overlay whiteout
    done
    echo "# deps_sim: $(wc -l <"$S/hidden") files hidden under /usr; kept, the toolchain loads them: $(tr '\n' ' ' <"$S/visible")"
    echo "# deps_sim: tree in $S/tree"
    unshare -m sh "$0" inner "$S"
    rc=$?
    [ "${KEEP:-0}" = 1 ] || rm -rf "$S"
    exit $rc
fi

# --- inside the namespace ------------------------------------------------------------------
S=$2
mount --make-rprivate /
mount -t overlay overlay -o "lowerdir=/usr,upperdir=$S/upper,workdir=$S/work" /usr || { echo "not ok - overlay mount"; exit 1; }
cd "$S/tree"
pass=0 fail=0
check() {
    what=$1
    shift
    if "$@" >"$S/check.log" 2>&1; then echo "ok - $what"; pass=$((pass + 1))
    else echo "not ok - $what"; sed 's/^/   /' "$S/check.log" | tail -n 20; fail=$((fail + 1)); fi
}
check "no pkg-config on PATH" sh -c '! command -v pkg-config && ! command -v pkgconf'
check "no jansson.h archive.h utf8proc.h pcre2.h xxhash.h cblas.h" sh -c \
    'for h in jansson.h archive.h utf8proc.h pcre2.h xxhash.h x86_64-linux-gnu/cblas.h; do [ ! -e /usr/include/$h ] || exit 1; done'
check "no libarchive, libopenblas, libxml2, libgfortran in /usr/lib or /lib" sh -c \
    '! ls /usr/lib/x86_64-linux-gnu/libarchive.so* /lib/x86_64-linux-gnu/libopenblas.so* /usr/lib/x86_64-linux-gnu/libxml2.so* /usr/lib/x86_64-linux-gnu/libgfortran.so* /usr/lib/x86_64-linux-gnu/openblas-pthread/libopenblas.so.0'
check "cc cannot link -larchive -lopenblas" sh -c '! echo "int main(void){return 0;}" | gcc -x c - -o /tmp/a.out -larchive -lopenblas'
check "make all fails without .gpudeps (one line naming the packages)" sh -c \
    'make all >"$0/make-plain.log" 2>&1; rc=$?; cat "$0/make-plain.log"; [ $rc != 0 ] && grep -q "missing pkg-config packages: libarchive" "$0/make-plain.log"' "$S"
check "deps.sh use on an empty GPUDEPS does nothing" sh -c \
    'mkdir -p "$0/empty" && GPUDEPS="$0/empty" sh tests/gpu/deps.sh use && [ -z "$(ls -A "$0/empty")" ]' "$S"
# run.sh's build step: the first make fails, the second with .gpudeps passes; the tests of
# step 3 run but see no GPU (their failures are not checked here)
start=$(date +%s)
OUT=$S/out sh tests/gpu/run.sh >"$S/run.out" 2>&1
echo "# run.sh in $(($(date +%s) - start))s: $(tail -n 1 "$S/run.out")"
grep -E '^(ok|not ok|#) ' "$S/run.out" | sed 's/^/   /' | head -n 20
check "run.sh: ok - make all with .gpudeps" grep -q '^ok - make all with .gpudeps' "$S/run.out"
check "run.sh: no fallback build, build-deps.log written" sh -c '[ ! -d build-gpu ] && [ -s "$0/out/build-deps.log" ]' "$S"
check "run.sh: the GPU tests were built (test_kernels_gpu, test_step_gpu)" test -x build/tests/test_step_gpu
check "bin/best-train: DT_RPATH into .gpudeps/root, no DT_RUNPATH" sh -c \
    'readelf -d bin/best-train | grep -q "(RPATH).*\.gpudeps/root" && ! readelf -d bin/best-train | grep -q RUNPATH'
# (the linker drops unused libraries: best-train needs OpenBLAS, best-eval libarchive,
# utf8proc and pcre2, libarchive libxml2 and libzstd, ...)
progs=$(find bin build/tests build/bench -maxdepth 1 -type f -perm -u+x)
env -u LD_LIBRARY_PATH ldd $progs >"$S/ldd.txt" 2>&1
for lib in libarchive.so.13 libxml2.so.2 libicuuc.so.72 libjansson.so.4 libutf8proc.so.2 libpcre2-8.so.0 libxxhash.so.0 \
    libopenblas.so.0 libgfortran.so.5 libzstd.so.1 libnettle.so.8 liblz4.so.1 libz.so.1; do
    check "ldd bin/best-train bin/best-eval: $lib from .gpudeps/root" sh -c \
        "env -u LD_LIBRARY_PATH ldd bin/best-train bin/best-eval | grep -q '$lib => $S/tree/.gpudeps/root/'"
done
check "ldd of the $(echo $progs | wc -w) programs: every library of the packages from .gpudeps/root, none not found" sh -c \
    '! grep -E "not found|lib(archive|xml2|icu|jansson|utf8proc|pcre2|xxhash|openblas|gfortran|quadmath|zstd|nettle|lz4|lzma|bz2|acl|z)\.so" "$0/ldd.txt" | grep -v "=> $0/tree/.gpudeps/root/"' "$S"
check "bin/best-train --help runs" sh -c 'env -u LD_LIBRARY_PATH bin/best-train --help 2>&1 | grep -qi usage'
check "build/tests/test_model passes (utf8proc, pcre2, OpenBLAS)" env -u LD_LIBRARY_PATH build/tests/test_model
check "build/tests/test_pack passes (libarchive)" env -u LD_LIBRARY_PATH build/tests/test_pack
# the other two ways of run.sh's build step: GPU_FALLBACK=1 (the .debs are not used), and
# no .debs (make all fails, one failure, then the fallback build)
GPU_FALLBACK=1 OUT=$S/out-fb sh tests/gpu/run.sh >"$S/run-fb.out" 2>&1
check "run.sh GPU_FALLBACK=1: the fallback build only, .gpudeps not used" sh -c \
    'grep -q "^# GPU_FALLBACK=1" "$0/run-fb.out" && grep -q "^ok - fallback build" "$0/run-fb.out" && ! grep -q gpudeps "$0/run-fb.out"' "$S"
mv .gpudeps "$S/gpudeps.off"
rm -rf build-gpu
OUT=$S/out-nodebs sh tests/gpu/run.sh >"$S/run-nodebs.out" 2>&1
check "run.sh without .gpudeps: not ok - make all failed, then the fallback build" sh -c \
    'grep -q "^not ok - make all failed: .*no .gpudeps" "$0/run-nodebs.out" && grep -q "^ok - fallback build" "$0/run-nodebs.out"' "$S"
echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
