"""Time from `gload serve` start (argv[2], epoch seconds) to listening and to the first batch, cold cache
(for bench/s3_bench.sh)."""
import os
import sys
import time

sock, t0, shard = sys.argv[1], float(sys.argv[2]), int(sys.argv[3])
while not os.path.exists(sock):
    time.sleep(0.002)
t_listen = time.time() - t0
import gload  # noqa: E402  (imported after the wait: its import time is not the server's)

# A shuffle window keeps the first batch inside one or two shards (a global shuffle's first batch touches up to
# batch_size shards, and waits for all of them).
ld = gload.Loader("unix://" + sock, "bench", batch_size=16, transport="grpc", shuffle_window=1000, return_tensors="np")
next(iter(ld))
t_first = time.time() - t0
print(f"s3bench: cold start: listening after {t_listen:.3f} s (metadata only), first batch after {t_first:.3f} s "
      f"(its shard, {shard / 1e6:.0f} MB, downloaded before it; shuffle_window 1000)")
ld.close()
