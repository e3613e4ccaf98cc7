#!/bin/sh
# hmn serve in Docker, for Prometheus on this host (see docs/containers.md).
#
# --gpus all: NVML through the NVIDIA Container Toolkit (drop it on hosts without NVIDIA GPUs).
# -v /proc:/host/proc:ro + --proc-root: the host's processes, so NVML's host PIDs are named and
#   each process's cgroup names its container; the container keeps its own PID namespace.
# --cap-drop ALL --cap-add SYS_PTRACE --cap-add DAC_READ_SEARCH: read other users' fdinfo
#   (AMD/Intel memory per process) and nothing more.
# -p 127.0.0.1:9835: the exporter on loopback; publish it wider only on purpose.
set -eu
exec docker run -d --name hmn-serve --restart unless-stopped \
  --gpus all \
  -v /proc:/host/proc:ro \
  --cap-drop ALL --cap-add SYS_PTRACE --cap-add DAC_READ_SEARCH \
  --read-only --security-opt no-new-privileges \
  -p 127.0.0.1:9835:9835 \
  hmn:local \
  serve --listen 0.0.0.0:9835 --proc-root /host/proc
