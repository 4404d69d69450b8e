"""The contract: every type that crosses a process or a boot, in one room below the planner
and the runtime (the plan, the run file, the rank record, census entries, the qualified record
and the calibration store). Each is a pydantic model whose JSON Schema is generated
(``b12x-launch schema --run-file`` / ``--record``), with a reader for the older versions."""
