import time, statistics, torch
from bita.runtime.padded import PassBuffers
torch.set_num_threads(1)
b = PassBuffers.make(64, 1024, 576, torch.bfloat16, torch.device("cpu"))
e = torch.randn(20, 576).bfloat16(); pos = torch.arange(500, 520); allowed = torch.ones(20, 520, dtype=torch.bool)
with torch.inference_mode():
    for _ in range(200): b.fill(500, e, pos, allowed)
    times = []
    for _ in range(15):
        t = time.perf_counter()
        for _ in range(200): b.fill(500, e, pos, allowed)
        times.append((time.perf_counter() - t) / 200 * 1e6)
print(f"fill us: median {statistics.median(times):.1f} ({min(times):.1f}-{max(times):.1f})")
