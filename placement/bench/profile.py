"""Summarise py-spy collapsed stacks (``--profile`` output): the functions
where the server spends its time, by own time and by inclusive time.

    python -m placement.bench.profile DIR/b.storm-c8.txt [--top 25] [--filter placement/]
"""

from __future__ import annotations

import argparse
import re
from collections import Counter

# py-spy frames look like "function (path/to/file.py:123)"; the line number
# differs per call site, so it is dropped to add up a function's samples.
_LINE = re.compile(r":\d+\)$")


def summarise(paths: list[str], keep: str) -> tuple[int, Counter, Counter]:
    own: Counter = Counter()
    inclusive: Counter = Counter()
    total = 0
    for path in paths:
        with open(path) as collapsed:
            for line in collapsed:
                stack, _, count_text = line.rstrip("\n").rpartition(" ")
                if not stack:
                    continue
                count = int(count_text)
                frames = [_LINE.sub(")", frame) for frame in stack.split(";")]
                # Idle server threads wait in these; they are not work.
                if any(idle in frames[-1] for idle in ("wait (threading.py", "select (",
                                                       "accept (", "_recv_into", "get (queue")):
                    continue
                total += count
                own[frames[-1]] += count
                for frame in set(frames):
                    if keep in frame:
                        inclusive[frame] += count
    return total, own, inclusive


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("paths", nargs="+")
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("--filter", default="",
                        help="only list inclusive times of frames containing this text")
    args = parser.parse_args()
    total, own, inclusive = summarise(args.paths, args.filter)
    print(f"{total} busy samples")
    for title, counter in (("own time", own), ("inclusive time", inclusive)):
        print(f"\n-- {title}")
        for frame, count in counter.most_common(args.top):
            print(f"{100 * count / max(total, 1):5.1f}%  {frame}")


if __name__ == "__main__":
    main()
