# REHEARSAL ONLY — sourced by bench/device/run-all.sh when REHEARSAL=1, never on a GPU machine.
#
# Points everything the device run uses at stand-ins, so its control flow, time limits, $OUT
# layout and comparer run end to end on a machine without a GPU:
#   - the test bed's fake NVML (crates/testbed/fake-nvml), as hmn's HMN_NVML_LIB, with an
#     H200-like scenario (fake-nvml.base.conf; the stub processes add themselves to it);
#   - rehearsal/bin/nvidia-smi (answers from the fake through the pynvml stand-in);
#   - rehearsal/py: stand-ins for `pynvml` (ctypes on the fake), `torch` (allocates nothing,
#     keeps the caching allocator's books) and `transformers` (Llama layout, sparse weights).
# The fake library: $REHEARSAL_NVML if set, else the newest one cargo's build of the test bed
# left under target/, else compiled here from crates/testbed/fake-nvml/lib.rs with rustc.
# Set REHEARSAL_SMI_ROOT=1 to let the stand-in `nvidia-smi -am 1` succeed (as root would), and
# REHEARSAL_HANG=1 for a driver that never answers (the fake's hang flag): every step must then
# end at its time limit, its background loads with it.

R_HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
R_ROOT=$(cd "$R_HERE/../../.." && pwd)
REHEARSAL_DIR=$(mktemp -d /tmp/hmn-rehearsal.XXXXXX)
mkdir -p "$REHEARSAL_DIR/nvml"
lib=${REHEARSAL_NVML:-$(ls -t "$R_ROOT"/target/*/build/hmn-testbed-*/out/modern/libnvidia-ml.so.1 2>/dev/null | head -1)}
if [ -n "$lib" ] && [ -f "$lib" ]; then
  cp "$lib" "$REHEARSAL_DIR/nvml/libnvidia-ml.so.1"
else
  (cd "$R_ROOT/crates/testbed" && rustc --edition 2021 --crate-type cdylib --crate-name nvidia_ml \
    -C opt-level=1 -C panic=abort -C debuginfo=0 -o "$REHEARSAL_DIR/nvml/libnvidia-ml.so.1" \
    fake-nvml/lib.rs) || { echo "rehearsal: no fake NVML (build the test bed or install rustc)" >&2; exit 2; }
fi
cat > "$REHEARSAL_DIR/nvml/fake-nvml.base.conf" <<'EOF'
# hmn device-run rehearsal: an H200-like GPU (driver 580.159.04 as seen on the lent machines)
driver_version = 580.159.04
nvml_version = 12.580.159.04
cuda_driver_version = 13000
process_stride = 24
late_processes = 0

[device]
name = NVIDIA H200
uuid = GPU-5d0c2a71-3e4f-4b8a-9c1d-0e2f4a6b8c0d
pci_bus_id = 00000000:1A:00.0
memory_total = 150754820096
memory_reserved = 566231040
memory_used = 8589934592
utilization_gpu = 93
utilization_memory = 41
temperature_c = 38
power_mw = 412345
energy_mj = 987654321
clock_graphics_mhz = 1980
clock_sm_mhz = 1980
clock_memory_mhz = 3201
max_clock_graphics_mhz = 1980
max_clock_sm_mhz = 1980
max_clock_memory_mhz = 3201
persistence_mode = 1
accounting_mode = 0
mig_mode = 0
compute_mode = 0
events_supported = 0xff9f
EOF
export HMN_NVML_LIB=$REHEARSAL_DIR/nvml/libnvidia-ml.so.1
export PATH=$R_HERE/bin:$PATH
export PYTHONPATH=$R_HERE/py${PYTHONPATH:+:$PYTHONPATH}
export REHEARSAL_CUDA_CONTEXT_BYTES=${REHEARSAL_CUDA_CONTEXT_BYTES:-524288000}
python3 -c 'import _rehearsal_conf as c; c.rebuild()'
[ "${REHEARSAL_HANG:-0}" = 1 ] && touch "$REHEARSAL_DIR/nvml/fake-nvml.hang"

rehearsal_cleanup() {
  rm -rf "$REHEARSAL_DIR"
}
echo "rehearsal: fake NVML at $HMN_NVML_LIB, stand-ins from $R_HERE"
