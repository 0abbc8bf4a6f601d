"""The laboratory: experiments, the report and the command-line interface.

This is the only part of normlab that imports matplotlib, rich or ray; the core never imports it.
"""
