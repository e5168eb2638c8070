"""In-process A/B of `model.generate` (bertkit only), CPU seconds on 1 thread (robust to a busy
machine): random t5-mini / gpt-mini / bart-mini, 2 batches of 8, 24 new tokens, greedy, beam-4
and (gpt) sampling; prints generated tokens per CPU-second (best of 3) and an output digest."""
import hashlib, sys, time
sys.path.insert(0, "/work/main/bench")
import torch
torch.set_num_threads(1)
from bench_generate import random_batches
import bertkit
from bertkit.model.t5.config import T5_PRESETS, T5Config
from bertkit.model.gpt.config import GPT2_PRESETS, GPT2Config
from bertkit.model.bart.config import BART_PRESETS, BartConfig

def build(name):
    torch.manual_seed(0)
    if name == "t5-mini":
        m = bertkit.T5ForConditionalGeneration(T5Config(vocab_size=32000, decoder_start_token_id=0, eos_token_id=1,
                                                        pad_token_id=0, **T5_PRESETS[name]))
    elif name == "gpt-mini":
        m = bertkit.GPT2LMHeadModel(GPT2Config(vocab_size=32000, bos_token_id=1, eos_token_id=2, pad_token_id=0,
                                               **GPT2_PRESETS[name]))
    else:
        m = bertkit.BartForConditionalGeneration(BartConfig(vocab_size=32000, dropout=0.0, **BART_PRESETS[name]))
    with torch.no_grad():
        for p in m.parameters():
            p.normal_(0.0, 0.2)
    return m.eval()

modes = {"greedy": dict(), "beam-4": dict(num_beams=4), "sample": dict(do_sample=True, top_p=0.9, seed=0)}
for name in sys.argv[1:]:
    model = build(name)
    batches = random_batches(2, 8, 64 if name != "gpt-mini" else 32, 32000)
    if name == "gpt-mini":  # prompts left-padded as bench_gpt_generate
        batches = [(i.flip(1), m.flip(1)) for i, m in batches]
    for mode, opts in modes.items():
        if mode == "sample" and name != "gpt-mini":
            continue
        best, digest = 0.0, None
        for _ in range(3):
            start = time.process_time()
            with torch.inference_mode():
                outs = [model.generate(input_ids=i, attention_mask=m, max_new_tokens=24, **opts) for i, m in batches]
            spent = time.process_time() - start
            tokens = sum(o.numel() for o in outs)
            best = max(best, tokens / spent)
            digest = hashlib.md5(b"".join(o.numpy().tobytes() for o in outs)).hexdigest()[:8]
        print(f"{name:9s} {mode:7s} {best:8.1f} tok/CPU-s  digest {digest}  [{bertkit.__file__.split('/src/')[0]}]",
              flush=True)
