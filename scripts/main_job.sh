#!/usr/bin/env bash
# Sets up from a bare Debian 12 machine and runs the main job: a 2-rank data-parallel GPT training
# run on the bundled corpus (the King James Bible, GPT-2 BPE), launched by mactor as mpirun would.
# Usage: scripts/main_job.sh [-np N] [--train-iters K]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
ranks=2
iters=100
while [ $# -gt 0 ]; do
  case "$1" in
    -np) ranks=$2; shift ;;
    --train-iters) iters=$2; shift ;;
    *) echo "main_job.sh: unknown option $1 (use -np N, --train-iters K)" >&2; exit 2 ;;
  esac
  shift
done
bash "$root/scripts/setup.sh" --no-python
[ -f "$root/build/data/kjv_text_document.idx" ] || bash "$root/scripts/prepare_data.sh"

# A GPT-2-style model sized for a 2-core CPU; the flags are Megatron-LM's, unchanged.
exec "$root/build/bin/mactor" -np "$ranks" "$root/build/bin/pretrain_gpt" \
  --num-layers 2 --hidden-size 128 --num-attention-heads 4 --seq-length 128 --max-position-embeddings 128 \
  --micro-batch-size 4 --global-batch-size 16 --train-iters "$iters" \
  --lr 6e-4 --min-lr 6e-5 --lr-decay-style cosine --lr-warmup-iters 10 --weight-decay 0.1 --clip-grad 1.0 \
  --adam-beta1 0.9 --adam-beta2 0.95 --init-method-std 0.02 --seed 1234 \
  --data-path "$root/build/data/kjv_text_document" --split 949,50,1 \
  --tokenizer-type GPT2BPETokenizer --vocab-file "$root/data/corpus/gpt2-vocab.json" \
  --merge-file "$root/data/corpus/gpt2-merges.txt" \
  --log-interval 5 --eval-interval 50 --eval-iters 2
