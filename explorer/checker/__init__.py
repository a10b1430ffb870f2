"""A learner's own attention module against the reference, step by step.

`check` (`check_module`, `check_source`), `report` (the report, as plain data:
step verdicts, the first difference, a failure), `comparison` (tensors compared to
the tolerance, in every layout), `results` (a report crossing a process boundary),
`learner` (reading and running the learner's module), `mistakes` (the classic
mistakes, named), `sandbox` (checking from source, in a child process with
limits), `box` (that child's sandbox: bubblewrap, seccomp, cgroups, an
unprivileged user), `limits` (the time and memory limits in this process),
`verdicts` (match, differs, not seen), `listings` (the book's own code as text). ``python -m explorer check`` is `explorer.__main__`.
Torch only; a report's charts are `explorer.render.check_view`.
"""
