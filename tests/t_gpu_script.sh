#!/bin/sh
# t_gpu_script.sh: tests/gpu/run.sh, the one call that checks everything on a lent GPU,
# stays runnable on machines that have none: it parses (sh -n); `make cuda-flags` (its
# fallback build's source of flags) names the three architectures when nvcc is there;
# and, in a build with CUDA, a whole run here builds, runs the tests, counts the GPU
# test's "skip - no CUDA device" as a failure (on a GPU machine a skip means the GPU
# went unused), writes its logs and ends with "N passed, N failed", exiting 1; and
# tests/gpu/train_check.sh, eval_check.sh and oneshot_check.sh run with both of their
# sides on the CPU, and bench/oneshot_gpu.sh at a tiny size.
# Plain pass only (run.sh uses the plain build).
. tests/lib.sh
check "tests/gpu/run.sh parses (sh -n)" sh -n tests/gpu/run.sh
# tests/gpu/deps.sh (the packages carried to a GPU machine), offline: `use` without .deb
# files does nothing; with one made here (a stand-in pkgconf, an absolute link) it unpacks
# under GPUDEPS/root only, writes a pkg-config wrapper that runs the root's pkgconf with
# the root as sysroot, and an env.sh whose EXTRA_LDFLAGS asks for DT_RPATH. (The real
# packages: tests/gpu/deps_sim.sh, as root.)
check "tests/gpu/deps.sh parses (sh -n)" sh -n tests/gpu/deps.sh
check "deps.sh without a command: exit 2" sh -c 'sh tests/gpu/deps.sh; [ $? = 2 ]'
check "deps.sh use without .deb files: exit 0, nothing written" sh -c \
    'mkdir "$0/gd0" && GPUDEPS="$0/gd0" sh tests/gpu/deps.sh use && [ -z "$(ls -A "$0/gd0")" ]' "$TMP"
if command -v dpkg-deb >/dev/null; then
    P=$TMP/pkg
    mkdir -p "$P/DEBIAN" "$P/usr/bin" "$P/usr/lib/x86_64-linux-gnu/openblas-pthread" "$TMP/gd"
    printf 'Package: fake\nVersion: 1\nArchitecture: all\nMaintainer: t <t@t>\nDescription: t\n' >"$P/DEBIAN/control"
    printf '#!/bin/sh\necho "sysroot=$PKG_CONFIG_SYSROOT_DIR libdir=$PKG_CONFIG_LIBDIR ld=$LD_LIBRARY_PATH args=$*"\n' >"$P/usr/bin/pkgconf"
    chmod +x "$P/usr/bin/pkgconf"
    : >"$P/usr/lib/x86_64-linux-gnu/openblas-pthread/libopenblas.so.0"
    ln -s /usr/lib/x86_64-linux-gnu/openblas-pthread/libopenblas.so.0 "$P/usr/lib/x86_64-linux-gnu/openblas-pthread/libopenblas.so"
    dpkg-deb --build "$P" "$TMP/gd/fake.deb" >/dev/null 2>&1
    GPUDEPS="$TMP/gd" sh tests/gpu/deps.sh use >"$TMP/use.out" 2>&1
    R=$TMP/gd/root
    check "deps.sh use: unpacks into GPUDEPS/root, the absolute link made to point into it" \
        test "$(readlink "$R/usr/lib/x86_64-linux-gnu/openblas-pthread/libopenblas.so")" = "$R/usr/lib/x86_64-linux-gnu/openblas-pthread/libopenblas.so.0"
    check "deps.sh use: the pkg-config wrapper runs the root's pkgconf, sysroot and .pc folders in the root" sh -c \
        '"$0/gd/bin/pkg-config" --libs x | grep -q "^sysroot=$0/gd/root libdir=$0/gd/root/usr/lib/x86_64-linux-gnu/pkgconfig:.* ld=$0/gd/root/usr/lib/x86_64-linux-gnu.* args=--libs x$"' "$TMP"
    check "deps.sh use: env.sh puts the wrapper first on PATH, CPATH on cblas.h's folder, DT_RPATH in EXTRA_LDFLAGS" sh -c \
        '. "$0/gd/env.sh" && [ "$(command -v pkg-config)" = "$0/gd/bin/pkg-config" ] &&
         echo "$CPATH" | grep -q "$0/gd/root/usr/include/x86_64-linux-gnu/openblas-pthread" &&
         echo "$EXTRA_LDFLAGS" | grep -q "^-Wl,--disable-new-dtags -Wl,-rpath,$0/gd/root/usr/lib/x86_64-linux-gnu:"' "$TMP"
else
    skip "deps.sh use with a .deb: no dpkg-deb here"
fi
if [ "${SAN:-0}" = 1 ]; then skip "gpu script: run.sh uses the plain build"; finish; fi
# train_check.sh with its GPU side on the CPU too (GD=cpu): the script runs, and its
# comparisons pass when the two sides are the same computation
if GD=cpu OUT="$TMP" sh tests/gpu/train_check.sh >"$TMP/tc.out" 2>&1; then
    ok "tests/gpu/train_check.sh with GD=cpu: $(grep -c '^ok - ' "$TMP/tc.out") checks pass"
else
    fail "tests/gpu/train_check.sh with GD=cpu: $(grep -m 1 '^not ok' "$TMP/tc.out" || tail -n 1 "$TMP/tc.out")"
fi
if GD=cpu sh tests/gpu/eval_check.sh >"$TMP/ec.out" 2>&1; then
    ok "tests/gpu/eval_check.sh with GD=cpu: $(grep -c '^ok - ' "$TMP/ec.out") checks pass"
else
    fail "tests/gpu/eval_check.sh with GD=cpu: $(grep -m 1 '^not ok' "$TMP/ec.out" || tail -n 1 "$TMP/ec.out")"
fi
# tests/gpu/oneshot_check.sh (issue 38) with both sides on the CPU: every comparison exact;
# its control (the side under test on other windows) must fail; its smoke mode; and
# bench/oneshot_gpu.sh at a tiny size on the CPU (its extrapolation said so, not judged).
OD=cpu
if GD=$OD CD=$OD sh tests/gpu/oneshot_check.sh >"$TMP/oc.out" 2>&1; then
    ok "tests/gpu/oneshot_check.sh with GD=cpu CD=cpu: $(grep -c '^ok - ' "$TMP/oc.out") checks pass"
else
    fail "tests/gpu/oneshot_check.sh with GD=cpu CD=cpu: $(grep -m 1 '^not ok' "$TMP/oc.out" || tail -n 1 "$TMP/oc.out")"
fi
GD=$OD CD=$OD GD_ARGS="--seed 1 --nsamples 2" PRECISIONS=bf16 SHARED=/nonexistent sh tests/gpu/oneshot_check.sh \
    >"$TMP/oc2.out" 2>&1
rc=$?
check "oneshot_check.sh's control (other windows on one side) fails the sparsegpt comparisons, magnitude's pass" sh -c "
    [ $rc = 1 ] && grep -q '^not ok - llama fixture at 0.5, .*, sparsegpt' '$TMP/oc2.out' &&
    grep -q '^not ok - qwen3 fixture at 0.5, .*, sparsegpt' '$TMP/oc2.out' &&
    [ \$(grep -c '^ok - .*magnitude: masks identical, models identical' '$TMP/oc2.out') = 2 ]"
check "oneshot_check.sh smoke: magnitude, and wanda and sparsegpt at both precisions, their reports' seconds" sh -c \
    "GD=$OD sh tests/gpu/oneshot_check.sh smoke >'$TMP/oc3.out' 2>&1 && grep -q '^5 passed, 0 failed' '$TMP/oc3.out'"
if CONFIG=bench/configs/llama-30m.json NSAMPLES=2 SEQ=64 DEVICE=$OD PRECISION=fp32 OUT="$TMP/og" WORK="$TMP/ogw" \
    sh bench/oneshot_gpu.sh >"$TMP/og.out" 2>&1 && grep -q '^sparsegpt: 10 layers in .* EXTRAPOLATED from 1 and 2' "$TMP/og.out" &&
    python3 -c "import json; j = json.load(open('$TMP/og/oneshot.json')); assert len(j['runs']) == 4 and not j['judged'] and j['precision'] == 'fp32'"; then
    ok "bench/oneshot_gpu.sh at llama-30m's size on the CPU: 4 runs, extrapolated to 10 layers, said so, not judged"
else
    fail "bench/oneshot_gpu.sh at a tiny size: $(tail -n 1 "$TMP/og.out")"
fi
# run.sh's deadline (issue 34): with BUDGET_S=0 no step starts, each says so and counts
# as a failure, and summary.txt holds the totals; a SIGTERM mid-run (the device tool's
# limit) writes summary.txt with the step it cut off, packs the logs and exits 124
BUDGET_S=0 OUT="$TMP/g0" env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL sh tests/gpu/run.sh >"$TMP/g0.out" 2>&1
rc=$?
check "run.sh BUDGET_S=0: nothing starts, each step 'not run: the budget is spent', exit 1" sh -c "
    [ $rc = 1 ] && grep -q '^not ok - build: not run: the budget is spent (BUDGET_S=0)' '$TMP/g0.out' &&
    grep -q '^not ok - test_step_gpu: not run: the budget is spent' '$TMP/g0.out' && [ ! -e '$TMP/g0/build.log' ]"
check "... and summary.txt holds the totals of the last line" sh -c "
    [ \"\$(cat '$TMP/g0/summary.txt')\" = \"\$(tail -n 1 '$TMP/g0.out')\" ]"
OUT="$TMP/g1" env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL sh tests/gpu/run.sh >"$TMP/g1.out" 2>&1 &
g1=$!
i=0
while ! grep -q 'running: test_' "$TMP/g1/summary.txt" 2>/dev/null && [ $i -lt 1200 ]; do sleep 0.1; i=$((i + 1)); done
kill -TERM $g1 2>/dev/null
wait $g1
rc=$?
check "run.sh cut off by SIGTERM: exit 124, summary.txt says where ('cut off during: test_...')" sh -c "
    [ $rc = 124 ] && grep -q '^[0-9]* passed, [0-9]* failed, cut off during: test_' '$TMP/g1/summary.txt'"
flags=$(env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL CUDA_BUILD=1 make -s cuda-flags 2>&1)
# Without an NVIDIA driver, make and make demo leave the kernels out (issue 36: nvcc took 66 s
# of a fresh make demo); CUDA_BUILD=1 (as make test sets) puts them in
if [ ! -e /proc/driver/nvidia/version ]; then
    plain=$(env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL -u CUDA_BUILD make -s cuda-flags 2>&1)
    check "no NVIDIA driver: make's CUDA is off unless CUDA_BUILD=1" sh -c "
        printf '%s\n' '$plain' | grep -qx 'CUDA=0' && printf '%s\n' '$flags' | grep -q '^CUDA='"
fi
case "$flags" in
*"CUDA=1"*)
    if echo "$flags" | grep -q "arch=compute_80,code=sm_80 -gencode arch=compute_90a,code=sm_90a -gencode arch=compute_90a,code=compute_90a"; then
        ok "make cuda-flags: sm_80, sm_90a and compute_90a PTX, named"
    else fail "make cuda-flags: the architectures are not the three named ones: $flags"; fi ;;
*"CUDA=0"*) skip "gpu script: this build has no nvcc (make cuda-flags: CUDA=0)"; finish ;;
*) fail "make cuda-flags printed no CUDA= line: $flags"; finish ;;
esac
if [ ! -x "$TBIN/test_kernels_gpu" ]; then fail "no $TBIN/test_kernels_gpu in a build with nvcc: run make"; finish; fi
LOGS_MAX=4 OUT="$TMP/gpu" env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL sh tests/gpu/run.sh >"$TMP/run.out" 2>&1
rc=$?
last=$(tail -n 1 "$TMP/run.out")
if nvidia-smi -L >/dev/null 2>&1; then
    # a machine with a GPU: the run must pass
    if [ "$rc" = 0 ]; then ok "tests/gpu/run.sh on this GPU: $last"
    else fail "tests/gpu/run.sh on this GPU: exit $rc, $last"; fi
else
    check "run.sh without a GPU: ends with 'N passed, N failed' and exits 1" sh -c \
        "echo '$last' | grep -Eq '^[0-9]+ passed, [1-9][0-9]* failed$' && [ $rc = 1 ]"
    check "run.sh packs its logs (past LOGS_MAX - 1 files; the device tool returns 8) into logs.tar.gz, summary.txt beside it" sh -c \
        "cd '$TMP/gpu' && [ -s logs.tar.gz ] && [ -s summary.txt ] && [ \$(ls | wc -l) = 2 ] && tar xzf logs.tar.gz"
    check "run.sh without a GPU: the GPU kernel test was built, ran and skipped, and that counts as a failure" sh -c \
        "grep -q '^skip - no CUDA device' '$TMP/gpu/test_kernels_gpu.log' && grep -q '== test_kernels_gpu: 0 passed, 1 failed' '$TMP/run.out'"
    check "run.sh writes device.txt, build.log, the tests' logs and summary.txt under OUT" sh -c \
        "cd '$TMP/gpu' && [ -s device.txt ] && [ -s build.log ] && [ -s test_cuda.log ] && [ -s test_kernels_emulated.log ] && [ -s summary.txt ]"
fi
finish
