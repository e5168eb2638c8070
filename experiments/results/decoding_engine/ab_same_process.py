"""`generate` before (6b855a5's model/generation.py, loaded as a module of its own) and after,
interleaved in one process on the same model and inputs: CPU seconds, 1 thread, best of 5
rounds; the outputs checked equal."""
import importlib.util, sys, time
sys.argv = ["x"]
import runpy
g = runpy.run_path("/tmp/ab/ab_generate.py")
import torch
spec = importlib.util.spec_from_file_location("old_generation", "/tmp/before_tree/src/bertkit/model/generation.py")
old = importlib.util.module_from_spec(spec); sys.modules["old_generation"] = old; spec.loader.exec_module(old)
modes = {"greedy": dict(), "beam-4": dict(num_beams=4), "sample": dict(do_sample=True, top_p=0.9, seed=0)}
for name in ("gpt-mini", "t5-mini", "bart-mini"):
    model = g["build"](name)
    batches = g["random_batches"](2, 8, 32 if name == "gpt-mini" else 64, 32000)
    if name == "gpt-mini":
        batches = [(i.flip(1), m.flip(1)) for i, m in batches]
    for mode, opts in modes.items():
        if mode == "sample" and name != "gpt-mini":
            continue
        sides = {"before": lambda i, m: old.GenerationMixin.generate(model, input_ids=i, attention_mask=m,
                                                                      max_new_tokens=24, **opts),
                 "after": lambda i, m: model.generate(input_ids=i, attention_mask=m, max_new_tokens=24, **opts)}
        best, outs = {k: float("inf") for k in sides}, {}
        for _ in range(5):
            for side, run in sides.items():
                start = time.process_time()
                with torch.inference_mode():
                    outs[side] = [run(i, m) for i, m in batches]
                best[side] = min(best[side], time.process_time() - start)
        equal = all(torch.equal(a, b) for a, b in zip(outs["before"], outs["after"]))
        print(f"{name:9s} {mode:7s} before {best['before']*1000:7.1f} ms  after {best['after']*1000:7.1f} ms  "
              f"after/before time {best['after']/best['before']:.3f}  outputs equal {equal}", flush=True)
