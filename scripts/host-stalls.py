#!/usr/bin/env python3
"""Host stalls: when the guest as a whole did not run.

Usage: scripts/host-stalls.py OUT_FILE
    Samples every 100 ms until killed (SIGTERM or SIGINT), then writes one line to OUT_FILE:
    `host_stalls=N worst_stall_ms=W steal_ms=S worst_cpu_steal_ms=C reported_mib=R samples=K`.

What the host took from the guest, as the guest sees it:

- the steal time the kernel accounts to each CPU (`/proc/stat`, the 8th value of each
  `cpuN` line, in USER_HZ ticks): `steal_ms`, all CPUs over the whole sampling, and
  `worst_cpu_steal_ms`, the most one CPU lost between a sample and the oldest sample at
  most one second before it (or the sample before, after a wake-up more than a second
  late: then the span is that wake-up's);
- a sampler that sleeps 100 ms and wakes up late: `host_stalls`, the wake-ups more than
  200 ms late (a busy guest's worst are tens of ms), and `worst_stall_ms`. When the host
  stops every vCPU none can run the sampler; when it stops one, the sampler runs on
  another and only the steal time shows it;
- `reported_mib`: free memory the guest's kernel reported to the host meanwhile (free
  page reporting of a virtio balloon, `/sys/module/page_reporting/parameters/reported_kib`
  where the kernel has it; `-` where it has not).

`scripts/bench-drain.sh` prints these figures beside each run. They show when the host
took the guest's CPUs, not why.
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


REPORTED = "/sys/module/page_reporting/parameters/reported_kib"


def reported_kib():
    """Free memory reported to the host so far, in KiB, or None where the kernel has no count."""
    try:
        with open(REPORTED) as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: host-stalls.py OUT_FILE")
    out = sys.argv[1]
    hz = os.sysconf("SC_CLK_TCK")
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    signal.signal(signal.SIGINT, lambda *_: stop.append(1))
    steal0 = steal_ticks()
    reported0 = reported_kib()
    window = [(time.monotonic(), steal0)]  # (time, steal times) of the samples of the last second
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
        # The oldest sample at most a second old, else the last one (after a late wake-up).
        while len(window) > 1 and window[0][0] < now - 1.0:
            window.pop(0)
        worst_cpu = max([worst_cpu] + [a - b for a, b in zip(steal, window[0][1])])
        window.append((now, steal))
        due = now + PERIOD_S
    steal_ms = (sum(steal_ticks()) - sum(steal0)) * 1000 // hz
    reported = reported_kib()
    reported_mib = "-" if reported is None or reported0 is None else str((reported - reported0) // 1024)
    with open(out, "w") as f:
        f.write(
            f"host_stalls={stalls} worst_stall_ms={worst * 1e3:.0f} steal_ms={steal_ms} "
            f"worst_cpu_steal_ms={worst_cpu * 1000 // hz} reported_mib={reported_mib} samples={samples}\n"
        )


if __name__ == "__main__":
    main()
