"""Reference solutions (``reference/``) and the nbgrader source notebooks (``notebooks/``)."""
