"""Following a landing directory: the always-on worker's streaming jobs.

:mod:`~costlib_pipelines.follow.landing` (the writer's contract and the poll of the landing
glob), :mod:`~costlib_pipelines.follow.window_book` (windows, watermark and panes of a followed
stream), :mod:`~costlib_pipelines.follow.live_run` (the run a stream writes, its verdicts),
:mod:`~costlib_pipelines.follow.recalibrate_stream` (``costlib recalibrate --follow``) and
:mod:`~costlib_pipelines.follow.decide_stream` (``costlib decide --follow``).
"""
