#!/usr/bin/env bash
# Tokenizes the bundled corpus (data/corpus/kjv.jsonl.gz) with GPT-2's BPE into a Megatron dataset:
# $BUILD_DIR/data/kjv_text_document.{bin,idx} (BUILD_DIR defaults to build/).
# Usage: scripts/prepare_data.sh [--workers N]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build_dir=${BUILD_DIR:-$root/build}
workers=2
while [ $# -gt 0 ]; do
  case "$1" in
    --workers) workers=$2; shift ;;
    *) echo "prepare_data.sh: unknown option $1 (only --workers N)" >&2; exit 2 ;;
  esac
  shift
done
tool="$build_dir/bin/preprocess_data"
if [ ! -x "$tool" ]; then
  echo "prepare_data.sh: $tool is missing; build it first: cmake --build $build_dir --target preprocess_data" >&2
  exit 2
fi
out="$build_dir/data"
mkdir -p "$out"
gzip -dc "$root/data/corpus/kjv.jsonl.gz" > "$out/kjv.jsonl"
"$tool" --input "$out/kjv.jsonl" --output-prefix "$out/kjv" --json-keys text \
  --tokenizer-type GPT2BPETokenizer --vocab-file "$root/data/corpus/gpt2-vocab.json" \
  --merge-file "$root/data/corpus/gpt2-merges.txt" --append-eod --workers "$workers" --log-interval 500
echo "prepare_data.sh: dataset prefix $out/kjv_text_document"
