"""Side-by-side benchmarks of cmux against tmux on the same machine, in one run.

``python -m bench`` (or ``make bench``) starts a private cmux server and a private
tmux server for each case, measures both the same way, prints a table of ratios
(cmux / tmux) and writes ``bench/results/latest.json``. The cases live in
:mod:`bench.cases`; each has a cmux half and a tmux half so either can run alone.
"""
