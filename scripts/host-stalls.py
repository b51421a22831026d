#!/usr/bin/env python3
"""Host stalls: when the guest as a whole did not run.

Usage: scripts/host-stalls.py OUT_FILE
    Samples every 100 ms until killed (SIGTERM or SIGINT), then writes one line to OUT_FILE:
    `host_stalls=N worst_stall_ms=W steal_ms=S worst_cpu_steal_1s_ms=C samples=K`.

Two signs that the host did not run the guest's vCPUs, both measured by the guest:

- the steal time the kernel accounts to each CPU (`/proc/stat`, the 8th value of each
  `cpuN` line, in USER_HZ ticks): `steal_ms` over the whole run, all CPUs together, and
  `worst_cpu_steal_1s_ms`, the most one CPU lost within one second (1,000 ms: the host
  ran none of it);
- a sampler that sleeps 100 ms and wakes up much later: when the whole machine was stopped,
  no CPU could run it. A stall is a wake-up more than 200 ms after its sleep was due (a busy
  guest's worst wake-ups are tens of ms late). A host that stops one vCPU leaves the
  sampler the other: then only the steal time shows it.

`scripts/bench-drain.sh` prints these figures beside each run to tell a loss the drain
caused from one the host did.
"""

import os
import signal
import sys
import time

PERIOD_S = 0.1
STALL_S = 0.2


def steal_ticks():
    """The steal time of each CPU in USER_HZ ticks (`/proc/stat` `cpuN` lines, field 8)."""
    out = []
    with open("/proc/stat") as f:
        for line in f:
            if line.startswith("cpu") and not line.startswith("cpu "):
                fields = line.split()
                out.append(int(fields[8]) if len(fields) > 8 else 0)
    return out


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: host-stalls.py OUT_FILE")
    out = sys.argv[1]
    hz = os.sysconf("SC_CLK_TCK")
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    signal.signal(signal.SIGINT, lambda *_: stop.append(1))
    steal0 = steal_ticks()
    window = [(time.monotonic(), steal0)]  # (time, steal times) of the last second
    worst_cpu = 0
    stalls, worst, samples = 0, 0.0, 0
    due = time.monotonic() + PERIOD_S
    while not stop:
        time.sleep(max(0.0, due - time.monotonic()))
        now = time.monotonic()
        late = now - due
        if late > STALL_S:
            stalls += 1
        worst = max(worst, late)
        samples += 1
        steal = steal_ticks()
        while len(window) > 1 and window[1][0] <= now - 1.0:
            window.pop(0)
        worst_cpu = max([worst_cpu] + [a - b for a, b in zip(steal, window[0][1])])
        window.append((now, steal))
        due = now + PERIOD_S
    steal_ms = (sum(steal_ticks()) - sum(steal0)) * 1000 // hz
    with open(out, "w") as f:
        f.write(
            f"host_stalls={stalls} worst_stall_ms={worst * 1e3:.0f} steal_ms={steal_ms} "
            f"worst_cpu_steal_1s_ms={worst_cpu * 1000 // hz} samples={samples}\n"
        )


if __name__ == "__main__":
    main()
