"""Planning: the facts a plan reads (model, checkpoint, weights, KV, catalog, estimates,
calibration and census records) and the pure planner (``planner.py``)."""
