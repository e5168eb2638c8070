import sys, numpy as np, torch
from pathlib import Path
from bertkit.demos import downstream as d
from bertkit.inference.embedding import embed
model = Path(sys.argv[1]); out = Path("/tmp/probe-rand")
rand = d.random_init_copy(model, out, 42)
tr, ty = d.read_task(d.TRAIN_ASSET, 4000); dv, dy = d.read_task(d.DEV_ASSET)
ty = np.array(ty); dy = np.array(dy)
def cv(x, y, folds=4):
    idx = np.arange(len(y)); s = []
    for f in range(folds):
        te = idx % folds == f
        s.append(d.probe_accuracy(x[~te], y[~te], x[te], y[te], 0))
    return np.mean(s)
for layers in ["average", "second_to_last"]:
  for pooling in ["mean"]:
    res = []
    for m in (model, rand):
        try:
            f = lambda t: embed(t, model=str(m), pooling=pooling, normalize=False, max_length=64, batch_size=64, progress=False, layers=layers)
            xt, xd = f(tr), f(dv)
        except Exception as e:
            res.append(f"err {e}"[:60]); continue
        res.append((round(cv(xt, ty),1), round(d.probe_accuracy(xt, ty, xd, dy, 42),1)))
    print(layers, pooling, "pretrained (cv, dev)", res[0], "random", res[1], flush=True)
