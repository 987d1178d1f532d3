#!/usr/bin/env python3
"""Print the slowest translation units of the last build, from ninja's log (<build>/.ninja_log).

Usage: scripts/tu_times.py BUILD_DIR [N]   (N slowest, default 8)
"""
import os
import sys


def main() -> int:
    build = sys.argv[1] if len(sys.argv) > 1 else "build"
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 8
    log = os.path.join(build, ".ninja_log")
    if not os.path.exists(log):
        print(f"tu_times: no {log}")
        return 1
    latest = {}
    with open(log) as f:
        for line in f:
            if line.startswith("#"):
                continue
            parts = line.rstrip("\n").split("\t")
            if len(parts) < 4:
                continue
            start, end, _, target = int(parts[0]), int(parts[1]), parts[2], parts[3]
            if target.endswith(".o"):
                latest[target] = (end - start) / 1000.0
    rows = sorted(latest.items(), key=lambda kv: -kv[1])[:n]
    total = sum(latest.values())
    print(f"slowest translation units (of {len(latest)}, {total:.0f} s compile time in all):")
    for target, secs in rows:
        print(f"  {secs:8.1f} s  {target}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
