#!/usr/bin/python3
"""PyTorch's DDP compute per step on dtsuite's model, for a side-by-side ratio in one session.

The model is dtsuite's MLP (strategies/mlp.h): LAYERS linear layers, GeLU (exact, erf) after
every one but the last, softmax cross-entropy, SGD with momentum 0.9 (dtsuite's default). Each of
RANKS processes (gloo, as PyTorch's CPU DDP runs) computes forward, backward and the optimizer
step on its BATCH / RANKS rows inside DDP's no_sync(), so no gradient is communicated: the figure
is what dtsuite's equivalence suite books as a ddp rank's compute_time per step. One intra-op
thread per rank, intra-op and OpenBLAS (dtsuite's OpenBLAS runs one thread per rank too; Debian's
torch reaches OpenBLAS through the generic libblas, whose threads set_num_threads does not set).

    /usr/bin/python3 bench/pytorch_ddp_step.py [--layers 5 --width 1024 --input 1024
        --classes 10 --batch 128 --ranks 2 --steps 30 --warmup 5]

Prints one line per rank and the median over ranks of each rank's median step, in seconds.
"""
import argparse
import os
import statistics
import time

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # before torch loads OpenBLAS
import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.multiprocessing as mp  # noqa: E402
from torch.nn.parallel import DistributedDataParallel as DDP  # noqa: E402


def model_of(a):
    layers = []
    width_in = a.input
    for i in range(a.layers):
        width_out = a.classes if i == a.layers - 1 else a.width
        layers.append(torch.nn.Linear(width_in, width_out))
        if i != a.layers - 1:
            layers.append(torch.nn.GELU())
        width_in = width_out
    return torch.nn.Sequential(*layers)


def worker(rank, a, port, out):
    torch.set_num_threads(1)
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    dist.init_process_group("gloo", rank=rank, world_size=a.ranks)
    torch.manual_seed(0)
    model = DDP(model_of(a))
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    rows = a.batch // a.ranks + (1 if rank < a.batch % a.ranks else 0)
    x = torch.randn(rows, a.input)
    y = torch.randint(0, a.classes, (rows,))
    loss_fn = torch.nn.CrossEntropyLoss()
    times = []
    for step in range(a.warmup + a.steps):
        start = time.perf_counter()
        with model.no_sync():
            opt.zero_grad(set_to_none=False)
            loss = loss_fn(model(x), y)
            loss.backward()
        opt.step()
        elapsed = time.perf_counter() - start
        if step >= a.warmup:
            times.append(elapsed)
    out[rank] = statistics.median(times)
    dist.barrier()
    dist.destroy_process_group()


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    for name, default in (("layers", 5), ("width", 1024), ("input", 1024), ("classes", 10), ("batch", 128),
                          ("ranks", 2), ("steps", 30), ("warmup", 5), ("port", 29517)):
        p.add_argument("--" + name, type=int, default=default)
    a = p.parse_args()
    with mp.Manager() as manager:
        out = manager.dict()
        mp.spawn(worker, args=(a, a.port, out), nprocs=a.ranks, join=True)
        medians = [out[r] for r in range(a.ranks)]
    for r, m in enumerate(medians):
        print(f"rank {r}: median compute per step {m:.6f} s")
    print(f"pytorch {torch.__version__} ddp no_sync step, {a.ranks} ranks: {statistics.median(medians):.6f} s")


if __name__ == "__main__":
    main()
