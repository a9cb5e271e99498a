"""`python -m fqntrace top TRACE...`: a live per-module view of a running job.

Each trace file is followed (follower.Follower: only the bytes appended since the last read,
one partial line kept) and its events go through the summary's streaming rules, so memory is
bounded by the modules, never by the file: the native engine's (fed the appended event lines as
they are, NativeLiveSummary) when it is built, else summarize.StreamSummary's (LiveSummary). A
range's time shows once the outermost range around it has ended (a module's forward, a step).

The recent window is in *trace* time: the last --window seconds before the newest event of each
file, kept as one bucket per second. Steps/s counts `ProfilerStep#N` ranges (fqntrace's steps).
With steps, the "/st" columns give `summary`'s per-step number live: per module and phase the
median over the last RECENT_STEPS finished steps of its time in each, the steps in
--exclude-steps (the warm-up, step 0) left out; "cpu/st" the same of its thread CPU time (all
phases) when the trace recorded it. A range's time goes to the step whose range holds
the end of the outermost range around it (the moment it is counted).

The screen is drawn with `rich` (the optional extra `fqntrace[top]`); keys are read from the
terminal in cbreak mode: q quits, s changes the order, up/down (or k/j) move, Enter/space
expands or collapses the selected module, + / - expand or collapse all.

The package, one module a job: ``live`` (the time counted per module, phase, second and step),
``sources`` (the followed files), ``tree`` (the module tree and what the user steers),
``screen`` (drawing it with rich), ``terminal`` (the keys and the refresh loop: ``main``).
"""

from fqntrace.analysis.top.terminal import main  # noqa: F401  (cli.cmd_top's entry)
