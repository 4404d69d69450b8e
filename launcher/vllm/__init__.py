"""Everything the launcher knows about vLLM, in one room: the lines (``lines``) and their
capability tables (``capabilities``), whether a line can serve what a profile asks
(``can_serve``), ``serve``'s option table and how its parser reads an argument list
(``options``), the request features (``request_features``) and where each field of vLLM's
request models stands (``request_fields``), the internals the stage uses (``internals``), which
of them each supported release has (``releases.json``, written by ``scan`` from each release's
source) and the check a worker and an image build run (``check``). It imports nothing above
the leaf helpers: no contract or profile type."""
