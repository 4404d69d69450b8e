"""Reports: a plan as a table or JSON (``render.py``), pictures, ``report RUN_DIR``, and
``sweep`` with its table."""
