#!/usr/bin/env bash
# Downloads the original exercise's data: the first 5,000 / 1,000 / 100 pairs of the train /
# validation / test splits of Hugging Face's bbaaaa/iwslt14-de-en-preprocess (IWSLT14 German->
# English), written as DIR/{train,validation,test}.jsonl, one {"de": ..., "en": ...} per line
# (the format of common/include/dtlab/data/translation.h).
#
# Needs internet access and Python with the `datasets` package (pip install datasets), so it is
# never run by the kit, its tests or CI, and it has not been run on the offline machines the kit
# is developed on: treat it as untested. Offline, use dtlab-translation-data (real sentences from
# the Ding dictionary, same sizes) or dtlab-fixtures (an invented language). The dataset ships a
# loading script; if `datasets` refuses it (version 4 dropped loading scripts), try
# pip install 'datasets<4'.
# Usage: scripts/fetch_iwslt14.sh [DIR]  (default data/iwslt14-de-en)
set -euo pipefail
dir=${1:-data/iwslt14-de-en}
mkdir -p "$dir"
python3 - "$dir" <<'PY'
import json, os, sys
import datasets

out = sys.argv[1]
sizes = {"train": 5000, "validation": 1000, "test": 100}
for split, n in sizes.items():
    pairs = datasets.load_dataset("bbaaaa/iwslt14-de-en-preprocess", split=split)["translation"][:n]
    path = os.path.join(out, f"{split}.jsonl")
    with open(path + ".part", "w", encoding="utf-8", newline="\n") as f:  # renamed when complete
        for p in pairs:
            f.write(json.dumps({"de": p["de"], "en": p["en"]}, ensure_ascii=False) + "\n")
    os.replace(path + ".part", path)
    print(f"{path}: {len(pairs)} pairs")
PY
