"""The decision stage: score streams in, one decision record per valid row out.

- :mod:`.pipeline`: the pipeline and :func:`run_decide` (``costlib decide``);
- :mod:`.audit_lattice`, :mod:`.audit_sizing`: the audit design of a run (relative strata, sizing
  from the previous run's counts).
"""

from costlib._moved import forward_to_modules

__getattr__ = forward_to_modules(
    __name__, ("pipeline", "audit_lattice", "audit_sizing"),
    current=frozenset({"run_decide", "build_decide", "read_decisions"}),
)
