"""What every layer reads: settings, names, formulas, errors, telemetry.

Configuration and options (``_config``, ``_options``), node URLs and their
identity (``_address``), the key layout (``_keys``), the timing formulas
(``_timing``), the timetable (``_timetable``), loggers and telemetry
(``_observe``), the exception tree (``_errors``) and the version
(``_version``). Nothing about locks or nodes: no module here imports from
another folder of the package (``tests/unit/test_structure.py``). The public names among them are
re-exported by the package's ``__init__``.
"""
