"""Print N lines of SGR-coloured text, then ``colour-done``, then wait for stdin to close.

Run as a pane's program by the RSS case: ``python colour_lines.py 10000``. Lines fit
in 80 columns so each is one scrollback row.
"""

from __future__ import annotations

import sys


def main() -> None:
    count = int(sys.argv[1])
    out = sys.stdout
    for i in range(count):
        out.write(f"\x1b[3{i % 8}m{i:6d}\x1b[0m \x1b[1;4{(i // 8) % 8}mcoloured\x1b[0m "
                  f"\x1b[38;5;{i % 256}mline with 256-colour text\x1b[0m and "
                  f"\x1b[4;38;2;{i % 256};128;{255 - i % 256}mtruecolour\x1b[0m\n")
    out.write("colour-done\n")
    out.flush()
    sys.stdin.read()


if __name__ == "__main__":
    main()
