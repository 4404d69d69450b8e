"""Everything the launcher knows about vLLM's insides, in one room: the internals the stage
uses (``internals``), which of them each supported release has (``releases.json``, written by
``scan`` from each release's source), the check a worker and an image build run (``check``),
and where each field of vLLM's request models stands (``request_fields``)."""
