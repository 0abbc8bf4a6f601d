"""The lab's command modules: each has ``add_arguments(parser)`` and ``main(args) -> int``."""
