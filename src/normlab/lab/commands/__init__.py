"""The ``normlab`` subcommands, one module each, registered in ``normlab.lab.cli.COMMANDS``.

A command module has ``add_arguments(parser)`` and ``main(args) -> int``; its top-level imports
stay light (heavy ones inside ``main``), and its argument checks raise
``normlab.lab.cli.UsageError`` before any work starts.
"""
