#!/usr/bin/env bash
# Downloads what the real task 1 run uses: bert-base-cased in Hugging Face format and GLUE RTE.
# Needs internet access (and curl, unzip), so it is never run by the kit, its tests or CI (and cannot run on the
# offline machines the kit is developed on). Usage: scripts/fetch_real_data.sh [DIR]  (default data/)
set -euo pipefail
dir=${1:-data}
model=$dir/bert-base-cased
mkdir -p "$model"

fetch() {  # fetch URL FILE: download to a temporary name, then rename, so nothing is half-written
  curl --fail --location --retry 3 --output "$2.part" "$1" && mv "$2.part" "$2"
}

for f in config.json model.safetensors vocab.txt tokenizer_config.json; do
  [[ -s "$model/$f" ]] || fetch "https://huggingface.co/bert-base-cased/resolve/main/$f" "$model/$f"
done

if [[ ! -s "$dir/RTE/train.tsv" ]]; then
  fetch "https://dl.fbaipublicfiles.com/glue/data/RTE.zip" "$dir/RTE.zip"
  (cd "$dir" && unzip -q -o RTE.zip && rm RTE.zip)
fi
echo "model: $model"
echo "data:  $dir/RTE"
echo "run:   make task1 MODEL=$model DATA=$dir/RTE LR=2e-5 EPOCHS=3 BATCH=32"
