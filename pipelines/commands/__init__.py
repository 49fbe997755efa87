"""The ``costlib`` command line: :mod:`.cli` (the parser and ``main``), one module per command
(:mod:`.recalibrate`, :mod:`.decide`, :mod:`.report`, :mod:`.publish`, :mod:`.status`,
:mod:`.unlock`, :mod:`.demo`), :mod:`.arguments` (flags several commands share),
:mod:`.exit_codes` (the one exit-code contract) and :mod:`.progress` (progress lines on stderr).
"""
