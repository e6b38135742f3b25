"""Sum what ``bench/gc_probe`` recorded: per process, its CPU and the collector's share.

.venv/bin/python bench/gc_report.py /tmp/gc
"""

from __future__ import annotations

import glob
import re
import sys
from pathlib import Path

LINE = re.compile(r"cpu=([\d.]+) g0=(\d+)/([\d.]+) g1=(\d+)/([\d.]+) g2=(\d+)/([\d.]+)")


def main() -> None:
    prefix = sys.argv[1]
    print("| process | CPU s | collections gen 0 / 1 / 2 | collector CPU s gen 0 / 1 / 2 | share |")
    print("|---|---|---|---|---|")
    for path in sorted(glob.glob(f"{prefix}.*")):
        lines = Path(path).read_text().splitlines()
        if not lines:
            continue
        found = LINE.search(lines[-1])
        if found is None:
            continue
        cpu = float(found.group(1))
        counts = [int(found.group(i)) for i in (2, 4, 6)]
        seconds = [float(found.group(i)) for i in (3, 5, 7)]
        pid = path.rsplit(".", 1)[1]
        name = lines[0].removeprefix("argv=") if lines[0].startswith("argv=") else "?"
        share = sum(seconds) / cpu if cpu else 0.0
        print(
            f"| {name} {pid} | {cpu:.2f} | {' / '.join(map(str, counts))} | "
            f"{' / '.join(f'{s:.3f}' for s in seconds)} | {share:.1%} |"
        )


if __name__ == "__main__":
    main()
