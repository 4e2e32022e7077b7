#!/usr/bin/env bash
# The trainer builds with LibTorch and without gRPC: configure the tree with
# COHORT_TRAINER_ONLY=ON and check that gRPC/protobuf are never even looked up, that no
# generated rule of the trainer mentions them (protobuf itself is a LibTorch dependency), and that the trainer target exists.
# (`make trainer-only` builds it; here the configure is enough and stays cheap.)
set -euo pipefail
src=$1
out=$2
rm -rf "$out"
cmake -S "$src" -B "$out" -G Ninja -DCOHORT_TRAINER_ONLY=ON -DCOHORT_BUILD_TESTS=OFF > "$out.log" 2>&1 \
  || { cat "$out.log"; exit 1; }
if grep -Eiq '^(gRPC_DIR|COHORT_GRPC_CPP_PLUGIN)[:=]' "$out/CMakeCache.txt"; then
  echo "FAIL: the trainer-only configure looked up gRPC"; exit 1
fi
# (Whole outputs are captured first: `cmd | grep -q` can fail under pipefail when grep
# stops reading early.)
targets=$(ninja -C "$out" -t targets all)
commands=$(ninja -C "$out" -t commands cohort_trainer)
grep -q '^cohort_trainer:' <<<"$targets" || { echo "FAIL: no cohort_trainer target"; exit 1; }
if grep -Eiq 'grpc|cohort_proto' <<<"$commands"; then
  echo "FAIL: building cohort_trainer mentions grpc or the wire API"; exit 1
fi
if grep -Eq '^(cohort-server|cohort_proto|cohort_server):' <<<"$targets"; then
  echo "FAIL: trainer-only tree has server targets"; exit 1
fi
echo "trainer-only configure: LibTorch found, no gRPC, cohort_trainer defined"
