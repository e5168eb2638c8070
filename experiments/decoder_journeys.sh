#!/usr/bin/env bash
# Issue 42's journey re-run: the README's and docs/commands.md's journeys on tiny GPT, BART, T5 and ELMo
# checkpoints (30 pre-training steps each on a slice of the shared English corpus) and on classifiers
# fine-tuned from them (300 SST-2 examples). Step 1 builds; the journeys themselves
# (experiments/decoder_journeys.py) run every command and every route /info lists, with the real
# huggingface_hub and openai clients, and print what tripped. Results: experiments/results/journeys_decoders.md.
# Run from a checkout with `make install` done: bash experiments/decoder_journeys.sh (W: the work folder).
set -euo pipefail
REPO=${REPO:-$PWD}
W=${W:-/tmp/decoder-journeys}; mkdir -p "$W/corpus" "$W/glue"; cd "$W"
. "$REPO/.venv/bin/activate"
DATA=${DATA:-$REPO/../shared/data}
run() { echo "+ $*"; "$@"; }
[ -f corpus/austen.txt ] || python3 -c "import gzip,sys; sys.stdout.write(gzip.open(sys.argv[1], mode='rt').read(400000))" "$DATA/corpus-en/austen_novels.txt.gz" > corpus/austen.txt
[ -e glue/SST-2 ] || ln -s "$DATA/glue/SST-2" glue/SST-2
S="--threads 1 --no-progress"
FT="--max-train-samples 200 --max-eval-samples 50 --epochs 1 --batch-size 16 --no-progress --threads 1"
if [ ! -d runs/gpt/final ]; then
  run bertkit tokenizer train --algorithm bbpe --vocab-size 1000 --layout gpt2 --output tok-gpt/ corpus/austen.txt
  run bertkit data build --tokenizer tok-gpt/ --format packed --max-seq-length 64 --output data-gpt/ $S corpus/austen.txt
  run bertkit pretrain --objective clm --preset gpt-tiny --data data-gpt/ --output-dir runs/gpt --set max_steps=30 $S
fi
if [ ! -d runs/bart/final ]; then
  run bertkit tokenizer train --algorithm bbpe --vocab-size 1000 --layout bart --output tok-bart/ corpus/austen.txt
  run bertkit data build --tokenizer tok-bart/ --format packed --max-seq-length 64 --output data-bart/ $S corpus/austen.txt
  run bertkit pretrain --objective bart --preset bart-tiny --data data-bart/ --output-dir runs/bart --set max_steps=30 $S
fi
if [ ! -d runs/t5/final ]; then
  run bertkit tokenizer train --algorithm unigram --vocab-size 1000 --layout t5 --sentinels 100 --output tok-t5/ corpus/austen.txt
  run bertkit data build --tokenizer tok-t5/ --format packed --max-seq-length 64 --output data-t5/ $S corpus/austen.txt
  run bertkit pretrain --objective t5 --preset t5-tiny --data data-t5/ --output-dir runs/t5 --set max_steps=30 $S
fi
if [ ! -d runs/elmo/final ]; then
  run bertkit tokenizer train --algorithm wordpiece --vocab-size 1000 --output tok/ corpus/austen.txt
  run bertkit data build --tokenizer tok/ --format packed --max-seq-length 64 --output data/ $S corpus/austen.txt
  run bertkit pretrain --objective bilm --preset elmo-tiny --data data/ --output-dir runs/elmo --set max_steps=30 $S
fi
[ -d runs/gpt-sst2/best ] || run bertkit finetune glue --task sst2 --model runs/gpt/final --data glue/SST-2 --output-dir runs/gpt-sst2 $FT
[ -d runs/bart-sst2/best ] || run bertkit finetune glue --task sst2 --model runs/bart/final --data glue/SST-2 --output-dir runs/bart-sst2 $FT
[ -d runs/t5-sst2/best ] || run bertkit finetune glue --task sst2 --model runs/t5/final --data glue/SST-2 --output-dir runs/t5-sst2 $FT
[ -d runs/t5-t2t/best ] || run bertkit finetune text2text --task glue --glue-task sst2 --model runs/t5/final --data glue/SST-2 --output-dir runs/t5-t2t $FT
[ -d runs/elmo-sst2/best ] || run bertkit finetune classify --train glue/SST-2/train.tsv --dev glue/SST-2/dev.tsv --text-column sentence --label-column label --model runs/elmo/final --features scalar_mix --output-dir runs/elmo-sst2 $FT
echo "decoder journeys: checkpoints built in $W/runs"
