"""The HTML report of a recalibration run, and of an output's history of runs.

The report of one run (``costlib report --run``):

- :mod:`.page`: :func:`build_report` and :func:`write_report`;
- :mod:`.runs_data`: reading a run (:class:`RunData`, ``load_run``, ``previous_run``);
- :mod:`.changes`: the record shown per group, the change since the previous run, which groups
  get a section;
- :mod:`.sections`: the run-wide sections; :mod:`.group_section`: one group's section;
- :mod:`.run_figures`: the lattice and curves a run's figures use; :mod:`.figures`: the
  figures of a group section; :mod:`.capacity`: the shared capacity section.

The runs of an output over time (``costlib report --output``): :mod:`.history`
(:func:`build_history`, :func:`write_history`), :mod:`.history_data` (reading the runs, which
groups get a figure) and :mod:`.history_figures`.

Shared: :mod:`.templates` (the Jinja2 environment of ``templates/``, where the HTML is),
:mod:`.cells` (the tables of the view models), :mod:`.formatting` (numbers as text).
"""
