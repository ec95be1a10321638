#!/bin/sh
# the benchmark's python pinned to core JAX_PROCESS_ID (0 for a lone process): one core each
exec taskset -c "${JAX_PROCESS_ID:-0}" "${MH_PYTHON:-python3}" "$@"
