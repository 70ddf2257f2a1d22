"""The ``glove-ros`` command and its front-ends (argument parsing, printing, processes).

``main`` builds the command; each other module is one subcommand: ``launch`` (launcher),
``task`` / ``watch`` (live), ``demo``, ``memory``, ``bag`` (bags), ``fleet``, ``docs``
(docgen). Front-ends may import anything below them (``glove_ros.core``, ``glove_ros.nodes``
helpers, ``graph``, ``paths``); nothing outside this folder imports a front-end, except the
launch files, which reuse :func:`glove_ros.cli.fleet.leaf_launch`.
"""
