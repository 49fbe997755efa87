"""The HTML report of a recalibration run, and of an output's history of runs.

- :mod:`.page`: the report of one run and :func:`write_report` (``costlib report --run``);
- :mod:`.history`: the runs of an output over time (``costlib report --output``);
- :mod:`.figures`: the figures of a group section; :mod:`.capacity`: the shared capacity section.
"""

from costlib._moved import forward_to_modules

__getattr__ = forward_to_modules(
    __name__, ("page", "history", "figures", "capacity"),
    current=frozenset({"write_report", "build_report", "write_history", "build_history"}),
)
