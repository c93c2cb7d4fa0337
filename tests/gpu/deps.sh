#!/bin/sh
# tests/gpu/deps.sh: the Debian packages that `make all` needs, carried to a lent GPU
# machine that has no network and cannot install them (docs/cuda.md, "On a lent GPU").
#
#   sh tests/gpu/deps.sh fetch   on a Debian 12 machine with apt (this development machine):
#                                `apt-get download` of the .deb files below into .gpudeps/
#                                (git-ignored; the device tool's run carries it: carry
#                                [".gpudeps"]), checks that the list is closed under
#                                Depends, prints the total size; and the cuDNN frontend's
#                                headers (make cudnn-frontend) into .gpudeps/cudnn-frontend
#   sh tests/gpu/deps.sh use     on the GPU machine (tests/gpu/run.sh does it when `make all`
#                                fails): `dpkg -x` of every .gpudeps/*.deb into .gpudeps/root
#                                (never into /), a pkg-config wrapper in .gpudeps/bin, and
#                                .gpudeps/env.sh, to source before `make all`. Without .deb
#                                files it does nothing.
#
# env.sh exports PATH (the wrapper first), CPATH and LIBRARY_PATH (the root's headers and
# libraries, cblas.h and libopenblas.so in openblas-pthread/), and EXTRA_LDFLAGS (the
# Makefile adds it to LDFLAGS): -Wl,--disable-new-dtags -Wl,-rpath,<the root's library
# folders>, so that the programs built find those libraries at run time with no global
# LD_LIBRARY_PATH (that could break python and torch run by the same script). DT_RPATH, not
# DT_RUNPATH: the loader uses an executable's DT_RPATH for the dependencies of its
# libraries too (libarchive -> libxml2 -> libicu), DT_RUNPATH only for its own. The
# wrapper keeps pkgconf's settings to itself: LD_LIBRARY_PATH for libpkgconf, and
# PKG_CONFIG_LIBDIR (the root's .pc folders only, so that a .pc file of the machine is
# never read with the root's sysroot) with PKG_CONFIG_SYSROOT_DIR (the .pc files say
# /usr/...). openblas.pc is read from openblas-pthread/pkgconfig: Debian's
# pkgconfig/openblas.pc is an alternatives link, which dpkg -x does not make.
#
# GPUDEPS=DIR uses DIR instead of .gpudeps (relative to the repository root).
set -eu
cd "$(dirname "$0")/../.."
GPUDEPS=${GPUDEPS:-.gpudeps}

# The packages, Debian 12 (bookworm), amd64. The library packages' own dependencies that
# every image has are left out: libc6, libc6-dev, libgcc-s1, libstdc++6, gcc-12-base (the
# compiler's). zlib, zstd and snappy's -dev packages: the Makefile's PKGS (Parquet).
# libpcre2-dev also depends on libpcre2-16-0, -32-0 and -posix3: we link only -lpcre2-8.
DEV_PKGS="libarchive-dev libjansson-dev libutf8proc-dev libpcre2-dev libxxhash-dev libopenblas-pthread-dev libzstd-dev zlib1g-dev libsnappy-dev"
# their libraries (the Makefile's PKGS, and -lopenblas with cblas.h: the pthread variant)
LIB_PKGS="libarchive13 libjansson4 libutf8proc2 libpcre2-8-0 libxxhash0 libopenblas0-pthread libsnappy1v5"
# what those libraries need that a minimal CUDA / Python image may lack: libarchive13's,
# libxml2's (libicu72) and OpenBLAS's (gfortran's run-time library)
RUN_PKGS="libacl1 libbz2-1.0 liblz4-1 liblzma5 libnettle8 libxml2 libicu72 libzstd1 zlib1g libgfortran5 libquadmath0"
# pkg-config itself
PC_PKGS="pkgconf pkgconf-bin libpkgconf3"
ALL_PKGS="$DEV_PKGS $LIB_PKGS $RUN_PKGS $PC_PKGS"
SKIP_DEPS="libc6 libgcc-s1 libstdc++6 gcc-12-base libc6-dev <libc-dev> libpcre2-16-0 libpcre2-32-0 libpcre2-posix3"

fetch() {
    command -v apt-get >/dev/null || { echo "deps.sh fetch: no apt-get here (a Debian 12 machine is needed)" >&2; exit 1; }
    # the list must be closed under Depends (a point release may add one): every dependency
    # of a listed package is listed or named in SKIP_DEPS
    open=""
    for dep in $(apt-cache depends --no-recommends --no-suggests --no-conflicts --no-breaks \
                     --no-replaces --no-enhances $ALL_PKGS | sed -n 's/^ *|\{0,1\}\(Pre\)\{0,1\}Depends: //p' | sort -u); do
        case " $ALL_PKGS $SKIP_DEPS " in *" $dep "*) ;; *) open="$open $dep" ;; esac
    done
    if [ -n "$open" ]; then echo "deps.sh fetch: dependencies not in the list:$open (edit tests/gpu/deps.sh)" >&2; exit 1; fi
    mkdir -p "$GPUDEPS"
    # only the .deb files are carried: what `use` made (root/ is ~150 MiB) goes
    rm -rf "$GPUDEPS"/*.deb "$GPUDEPS/root" "$GPUDEPS/bin" "$GPUDEPS/env.sh"
    # (apt-get download writes into the current folder; a stale package list is refreshed
    # once; as root, apt's sandbox user could not write here)
    sandbox=""; [ "$(id -u)" = 0 ] && sandbox="-o APT::Sandbox::User=root"
    (cd "$GPUDEPS" && { apt-get download -q $sandbox $ALL_PKGS ||
        { apt-get update -qq && apt-get download -q $sandbox $ALL_PKGS; }; }) >/dev/null
    # plain names for the transfer: the epoch (zlib1g_1%3a1.2.13...) dropped
    for f in "$GPUDEPS"/*%3a*.deb; do [ -e "$f" ] && mv "$f" "$(echo "$f" | sed 's/_[0-9]*%3a/_/')"; done
    # the cuDNN frontend's headers (BEST_ATTN=cudnn; tests/gpu/run.sh points CUDNN_FE here)
    [ -f .deps/cudnn-frontend/include/cudnn_frontend.h ] || make -s cudnn-frontend >/dev/null
    rm -rf "$GPUDEPS/cudnn-frontend" && cp -r .deps/cudnn-frontend "$GPUDEPS/cudnn-frontend"
    n=$(ls "$GPUDEPS"/*.deb | wc -l)
    [ "$n" = "$(echo $ALL_PKGS | wc -w)" ] || { echo "deps.sh fetch: $n .deb files for $(echo $ALL_PKGS | wc -w) packages" >&2; exit 1; }
    for f in "$GPUDEPS"/*.deb; do echo "$(wc -c <"$f") $(basename "$f")"; done >"$GPUDEPS/MANIFEST"
    total=$(awk '{ s += $1 } END { print s }' "$GPUDEPS/MANIFEST")
    echo "deps.sh fetch: $n packages in $GPUDEPS, $total bytes ($(awk -v b="$total" 'BEGIN { printf "%.1f", b / 1048576 }') MiB);" \
         "carry [\"$GPUDEPS\"] to the GPU machine"
}

use() {
    if ! ls "$GPUDEPS"/*.deb >/dev/null 2>&1; then
        echo "deps.sh use: no .deb files in $GPUDEPS: nothing to do (sh tests/gpu/deps.sh fetch on a machine with apt)" >&2
        exit 0
    fi
    # Debian 12's libraries need glibc 2.36 (libarchive: GLIBC_2.36) and libstdc++ of gcc 12
    # (libicu: GLIBCXX_3.4.30): Ubuntu 24.04 has both, 22.04 only glibc 2.35
    glibc=$(getconf GNU_LIBC_VERSION 2>/dev/null | sed 's/^glibc //')
    case "$glibc" in 2.[0-9] | 2.[0-2][0-9] | 2.3[0-5])
        echo "deps.sh use: warning: glibc $glibc here, Debian 12's libarchive needs 2.36: the link will fail" >&2 ;;
    esac
    D=$(cd "$GPUDEPS" && pwd)
    R=$D/root
    case "$D" in *[!A-Za-z0-9_./+-]*) echo "deps.sh use: $D: a path with spaces or odd characters cannot go into make's flags" >&2; exit 1 ;; esac
    rm -rf "$R" "$D/bin" "$D/env.sh"
    mkdir -p "$R" "$D/bin"
    for f in "$D"/*.deb; do
        if command -v dpkg-deb >/dev/null; then dpkg-deb -x "$f" "$R"
        else
            # no dpkg: a .deb is an ar archive holding data.tar.xz (or .zst, .gz)
            data=$(ar t "$f" | grep '^data\.tar')
            ar p "$f" "$data" | tar -x -C "$R" $(case "$data" in *.xz) echo -J ;; *.gz) echo -z ;; *.zst) echo --zstd ;; esac)
        fi
    done
    # absolute links (a -dev package's libfoo.so -> /lib/...) are made to point into the root
    find "$R" -type l | while read -r l; do
        t=$(readlink "$l")
        case "$t" in /*) ln -sfn "$R$t" "$l" ;; esac
    done
    L=$R/usr/lib/x86_64-linux-gnu
    [ -x "$R/usr/bin/pkgconf" ] && [ -e "$L/openblas-pthread/libopenblas.so" ] ||
        { echo "deps.sh use: $R lacks usr/bin/pkgconf or openblas-pthread/libopenblas.so" >&2; exit 1; }
    cat >"$D/bin/pkg-config" <<EOF
#!/bin/sh
# pkg-config of $R, written by tests/gpu/deps.sh use: only its .pc files, their paths under it
LD_LIBRARY_PATH=$L\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH} \\
PKG_CONFIG_LIBDIR=$L/pkgconfig:$R/usr/share/pkgconfig:$L/openblas-pthread/pkgconfig \\
PKG_CONFIG_PATH= PKG_CONFIG_SYSROOT_DIR=$R exec $R/usr/bin/pkgconf "\$@"
EOF
    chmod +x "$D/bin/pkg-config"
    # Debian 12 still puts some libraries in /lib (zlib, liblzma, libzstd, ...)
    rpath=$L:$L/openblas-pthread:$R/lib/x86_64-linux-gnu
    cat >"$D/env.sh" <<EOF
# written by tests/gpu/deps.sh use: source it, then make all (docs/cuda.md)
export PATH="$D/bin:\$PATH"
export CPATH="$R/usr/include:$R/usr/include/x86_64-linux-gnu/openblas-pthread\${CPATH:+:\$CPATH}"
export LIBRARY_PATH="$L:$L/openblas-pthread:$R/lib/x86_64-linux-gnu\${LIBRARY_PATH:+:\$LIBRARY_PATH}"
export EXTRA_LDFLAGS="-Wl,--disable-new-dtags -Wl,-rpath,$rpath\${EXTRA_LDFLAGS:+ \$EXTRA_LDFLAGS}"
EOF
    echo "deps.sh use: $(ls "$D"/*.deb | wc -l) packages in $R; . $D/env.sh, then make all"
    echo "deps.sh use: pkg-config: $("$D/bin/pkg-config" --modversion libarchive jansson libutf8proc libpcre2-8 libxxhash openblas | tr '\n' ' ')"
}

case "${1:-}" in
fetch) fetch ;;
use) use ;;
*) echo "usage: sh tests/gpu/deps.sh fetch|use" >&2; exit 2 ;;
esac
