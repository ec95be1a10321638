#!/bin/bash
# One GPU round of checks and timings, in parts that each fit a 10-minute command:
#
#   benchmarks/gpu_round.sh OUT int            # integer GEMMs at scale against exact host sums
#   benchmarks/gpu_round.sh OUT grid REF 480 [FIRST]
#                                              # the whole crosscheck grid against REF (a CPU run
#                                              #   saved with --save), resumable: run it again;
#                                              #   FIRST: models whose keys run first ("exact,fma_chain")
#   benchmarks/gpu_round.sh OUT ref REF        # the grid's CPU reference made on this machine's CPUs
#                                              #   (JAX_PLATFORMS=cpu, 14 processes): REF for `grid`
#   benchmarks/gpu_round.sh OUT mosaic REF     # the keys of the families `auto` lowers with Mosaic GPU
#                                              #   (jwmma.backends.pallas.AUTO_MOSAIC) on Mosaic, against REF
#   benchmarks/gpu_round.sh OUT rows           # every bench_rows row at 8192^3, first calls too
#   benchmarks/gpu_round.sh OUT rows_ab BASE [ROW...]
#                                              # bench_rows rows (default: the fused-group kernels' sparse
#                                              #   and dense rows) under BASE (a folder holding a jwmma/) and
#                                              #   this tree, alternating twice: first calls and steady times
#   benchmarks/gpu_round.sh OUT tiles [ROW...]  # bench_rows rows (default: the gfx12 kernels' sparse and dense
#                                              #   rows) at their tiles, then at each "tm,tn,warps" of $TILES
#                                              #   (default "4,64,2 4,32,1"), one process each; $SIZE (8192)
#   benchmarks/gpu_round.sh OUT calls          # builtin calls over 65536 waves on the kernels
#   benchmarks/gpu_round.sh OUT calls_all      # a builtin of every default model over 65536 waves, 'auto'
#   benchmarks/gpu_round.sh OUT calls_ab BASE  # the calls below 1e11 under BASE (a folder holding a jwmma/)
#                                              #   and under this tree, in alternating processes (ab_trees.py)
#   benchmarks/gpu_round.sh OUT calls_prof     # device events and compiled programs of the calls below 1e11
#   benchmarks/gpu_round.sh OUT compile_opts   # XLA:GPU option sets on matmul layers and small programs
#   benchmarks/gpu_round.sh OUT trees KEYS REF TREE...
#                                              # the crosscheck keys listed in KEYS against REF, once
#                                              #   under each code tree (a folder holding a jwmma/):
#                                              #   which commit or change a GPU difference comes from
#
# OUT is a folder for the reports. The grid's own save file stays in $TMPDIR (default /tmp)
# between parts: keep it out of any folder the machine receives again, which would replace it.
# REF is made on a CPU (JAX 0.11 where the GPU runs 0.11): the `ref` part on the device machine's
# CPUs, or elsewhere, e.g. with 2 processes in ~9 minutes on a Zen 4 (18.5 on a Zen 1):
#   python benchmarks/crosscheck.py --save ref.npz --targets --models "$MODELS" \
#       --paths matrix --backends xla --jobs 2 --quiet
# with MODELS as below; the GPU runs both paths and both backends and compares each key with
# the reference's key or its anchor (crosscheck.py's docstring).
set -u
out=$1; part=$2
mkdir -p "$out"
here=$(cd "$(dirname "$0")" && pwd)
export PYTHONPATH=$here/..${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
MODELS="cdna3,cdna1,cdna2,gfx12_dot4,gfx11_dot2,exact,cdna4_mx,staged_clamp,CDNA2(group=2),fma_chain,fma_chain_k"
py=${PYTHON:-python3}
case $part in
int)
    # the grid's one int8 GEMM that XLA:GPU once got wrong (53 x 51 x 53), then sizes of the rows
    $py "$here/int_rows_bits.py" --rows mfma_i32_32x32x16_i8 mfma_int8_942 --shapes 53x51x53 53x51x69 | tee "$out/int_bits.txt"
    $py "$here/int_rows_bits.py" --shapes 2048x2048x2112 4096x2048x4096 4096 | tee -a "$out/int_bits.txt"
    $py "$here/int_rows_bits.py" --rows int8_cdna4 mfma_int8_942 --shapes 8192 | tee -a "$out/int_bits.txt"
    ;;
grid)
    ref=$3; limit=${4:-480}; first=${5:-}
    if [ -n "$first" ]; then  # these models' keys first (the code a change touched), same save file
        $py "$here/crosscheck.py" --targets --models "$first" --compare "$ref" --save "${TMPDIR:-/tmp}/gpu_round_grid.npz" \
            --resume --jobs "${JOBS:-14}" --time-limit "$limit" --quiet --report "$out/grid_first_report.txt" \
            2> "$out/grid_first_progress.log"
        limit=$((limit - SECONDS))
        [ "$limit" -gt 0 ] || { echo "crosscheck: no time left after the first models, run this part again"; exit 0; }
    fi
    $py "$here/crosscheck.py" --targets --models "$MODELS" --compare "$ref" --save "${TMPDIR:-/tmp}/gpu_round_grid.npz" \
        --resume --jobs "${JOBS:-14}" --time-limit "$limit" --quiet --report "$out/grid_report.txt" \
        2> "$out/grid_progress.log"
    echo "crosscheck exit $? (3: time limit reached, run this part again)"
    ;;
ref)
    # the device machine's CPUs run the JAX the GPU runs: the reference in one command, kept in
    # $TMPDIR (not in a folder the machine receives again) for the `grid` parts that follow
    JAX_PLATFORMS=cpu $py "$here/crosscheck.py" --save "$3" --targets --models "$MODELS" --paths matrix \
        --backends xla --jobs "${JOBS:-14}" --quiet 2> "$out/ref_progress.log" | tail -3
    ;;
mosaic)
    $py "$here/crosscheck.py" --targets --models "exact,fma_chain,fma_chain_k" --backends mosaic --compare "$3" \
        --jobs "${JOBS:-14}" --quiet --report "$out/mosaic_report.txt" 2> "$out/mosaic_progress.log"
    grep "identical" "$out/mosaic_report.txt" | tail -1
    ;;
rows)
    $py "$here/bench_rows.py" --reps 3 --json "$out/rows.json" | tee "$out/rows.txt"
    ;;
rows_ab)
    base=$3; shift 3
    rows=${*:-fp8_cdna3 mfma_fp8_cdna3 f16_cdna3 mfma_f16_cdna3 bf16_cdna3 mfma_bf16_cdna3}
    for tree in "$base" "$here/.." "$base" "$here/.."; do
        echo "== $tree" | tee -a "$out/rows_ab.txt"
        PYTHONPATH=$tree $py "$here/bench_rows.py" --reps 3 --rows $rows | tee -a "$out/rows_ab.txt"
    done
    ;;
tiles)
    shift 2
    rows=${*:-f16_gfx12 bf16_gfx12 fp8_gfx12 f16acc_gfx12 f16_wmma bf16_wmma_gfx12 fp8_wmma_gfx12}
    echo "== the tiles of jwmma.backends.pallas.TILES" | tee -a "$out/tiles.txt"
    $py "$here/bench_rows.py" --size "${SIZE:-8192}" --reps 3 --rows $rows | tee -a "$out/tiles.txt"
    for t in ${TILES:-4,64,2 4,32,1}; do
        IFS=, read -r tm tn warps <<< "$t"
        echo "== $tm x $tn x $warps" | tee -a "$out/tiles.txt"
        $py "$here/bench_rows.py" --size "${SIZE:-8192}" --reps 3 --rows $rows \
            --pallas tm="$tm" tn="$tn" num_warps="$warps" | tee -a "$out/tiles.txt"
    done
    ;;
calls)
    $py "$here/bench_calls.py" --backend pallas --repeat 3 \
        --rows fp8:cdna3 f16c:cdna3 bf16:cdna3 f16:gfx12_dot4 fp8:exact | tee "$out/calls.txt"
    ;;
calls_all)
    # one builtin of every default model and the dense rows (issue 36 goal 4: >= 1e11 MAC/s each),
    # as a user calls them (backend 'auto')
    $py "$here/bench_calls.py" --repeat 3 --rows fp8:cdna3 f16c:cdna3 bf16:cdna3 f16:gfx12_dot4 fp8:exact \
        mfma_f32_16x16x32_fp8_fp8: mfma_f32_16x16x16f16: mfma_f32_32x32x16_bf16: mfma_f32_32x32x8bf16_1k: \
        mfma_scale_f32_16x16x128_f8f6f4: wmma_f32_16x16x16_f16_w32_gfx12: swmmac_i32_16x16x32_iu8_w32: \
        wmma_f32_16x16x16_f16_w32: mfma_f32_32x32x4bf16: smfmac_i32_16x16x128_i8: mfma_i32_16x16x32_i8: \
        | tee "$out/calls_all.txt"
    ;;
calls_ab)
    # issue 36 goal 4: a change to the XLA rows below 1e11 MAC/s against its baseline, three
    # alternating pairs of processes (the speed of a shared machine drifts between processes)
    $py "$here/ab_trees.py" --a "$3" --b "$here/.." --pairs 3 --metric mac_per_s,first_s -- "$here/bench_calls.py" \
        --repeat 5 --rows wmma_f32_16x16x16_f16_w32: mfma_f32_32x32x4bf16: | tee "$out/calls_ab.txt"
    ;;
calls_prof)
    # issue 36 goal 4: where the calls below 1e11 MAC/s spend their device time (profile_gpu.py
    # --call; inside a user's jit, so that the events are the program's; --hlo names the fusions)
    i=0
    for row in f16:gfx12_dot4 wmma_f32_16x16x16_f16_w32: mfma_f32_32x32x4bf16:; do
        i=$((i+1))
        $py "$here/profile_gpu.py" --call "$row" --jit --reps 5 --top 30 --hlo "$out/calls_prof_hlo_$i.txt" \
            --out "${TMPDIR:-/tmp}" | tee -a "$out/calls_prof.txt"
    done
    ;;
compile_opts)
    $py "$here/bench_compile_options.py" --rows matmul_mfma_fp8 matmul_fp8 matmul_mx gemm_fp8_pallas waves_fp8 \
        | tee "$out/compile_opts.txt"
    ;;
trees)
    keys=$3; ref=$4; shift 4
    for tree in "$@"; do
        echo "== $tree" | tee -a "$out/trees.txt"
        PYTHONPATH=$tree $py "$here/crosscheck.py" --targets --models "$MODELS" --keys "$keys" --compare "$ref" \
            --jobs "${JOBS:-4}" --quiet 2>&1 | grep -v "^\[" | tee -a "$out/trees.txt"
    done
    ;;
*)
    echo "unknown part $part: int, grid, ref, mosaic, rows, rows_ab, tiles, calls, calls_all, calls_ab, calls_prof, compile_opts or trees" >&2; exit 2
    ;;
esac
