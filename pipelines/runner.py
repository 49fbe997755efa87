"""Creating a Beam pipeline from command-line style options, offline by default.

With no ``--runner`` flag the pipeline runs on Beam's ``FnApiRunner`` directly: in-process, no
attempt to download the Prism runner (which the default DirectRunner of Beam 2.77 makes), and
it honours ``--direct_running_mode`` (``in_memory``, ``multi_threading``,
``multi_processing``) and ``--direct_num_workers``. Any other runner flag (``--runner
FlinkRunner --flink_master ...``, ``--runner DataflowRunner --project ...``, ``--runner
PortableRunner --job_endpoint ...``) is passed through to Beam unchanged, except that a runner
Beam ships but knows only by class path (``--runner DaskRunner``) is handed to Beam by that path
(:data:`costlib_pipelines.flags.SHIPPED_RUNNERS`).

Graph construction is part of every run's fixed cost, so the options are made to be cheap:
:class:`CachedViewOptions` parses the flags once per options class (Beam re-parses them, with a
new ``argparse`` parser of some 150 flags, on every ``view_as``, which pipeline construction
calls twice per transform), and ``type_check=False`` turns off Beam's construction-time type
inference and checks (``--no_pipeline_type_check``) for pipelines whose elements are untyped
Python objects anyway.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, TypeVar

import apache_beam as beam
from apache_beam.options.pipeline_options import PipelineOptions, StandardOptions
from apache_beam.runners.portability.fn_api_runner import FnApiRunner

from costlib_pipelines.flags import check_runner, resolve_runner

__all__ = ["CachedViewOptions", "make_pipeline", "runner_name"]

OptionsT = TypeVar("OptionsT", bound=PipelineOptions)


class CachedViewOptions(PipelineOptions):
    """:class:`PipelineOptions` whose ``view_as(cls)`` is made once per ``cls`` and reused.

    Every view of one options object shares its values (``_all_options``), so a view made
    once is the same as a fresh one; only the argument parsing is saved. The cache is left
    out of pickles and copies (Beam deep-copies the options of every pipeline).
    """

    def view_as(self, cls: type[OptionsT]) -> OptionsT:
        views = self.__dict__.get("_views")
        if views is None:
            views = self.__dict__["_views"] = {}
        view = views.get(cls)
        if view is None:
            view = views[cls] = super().view_as(cls)
        return view

    def __getstate__(self) -> dict[str, Any]:
        state = dict(super().__getstate__())
        state.pop("_views", None)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)


def runner_name(beam_args: Sequence[str]) -> str:
    """The runner ``beam_args`` select (``FnApiRunner`` by default), checked to be known.

    Raises
    ------
    costlib_pipelines.flags.UsageError
        An unknown ``--runner`` (before any input is read).
    """
    return check_runner(beam_args) or "FnApiRunner"


def make_pipeline(beam_args: Sequence[str] = (), *, type_check: bool = True) -> beam.Pipeline:
    """A pipeline for the given Beam flags; ``FnApiRunner`` when no ``--runner`` is given.

    ``type_check=False`` sets ``pipeline_type_check`` off (as ``--no_pipeline_type_check``
    does): no type inference or type checks while the graph is built, and every PCollection
    gets Beam's default coder for untyped elements.
    """
    overrides = {} if type_check else {"pipeline_type_check": False}
    options = CachedViewOptions(list(beam_args), **overrides)
    standard = options.view_as(StandardOptions)
    if standard.runner is None:
        return beam.Pipeline(runner=FnApiRunner(), options=options)
    if isinstance(standard.runner, str):  # DaskRunner -> apache_beam.runners.dask...DaskRunner
        standard.runner = resolve_runner(standard.runner)
    return beam.Pipeline(options=options)
