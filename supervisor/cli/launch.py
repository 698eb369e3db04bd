"""``launch-config``: mint one trusted launch and print the ``mcpServers`` map for it."""

from __future__ import annotations

import argparse
import json
import os
import sys

from supervisor.cli.common import EXIT_OK, EXIT_USAGE, strip_dashdash
from supervisor.client_configs.launcher import (
    absolute_path,
    absolute_path_args,
    build_launch_config,
    build_server_entry,
    exec_command,
    resolve_server_command,
)
from supervisor.errors import ConfigError
from supervisor.policy.identity.instance import UntrustedInstanceError
from supervisor.settings.config import Settings

__all__ = ["run_launch_config"]


def run_launch_config(args: argparse.Namespace, settings: Settings) -> int:
    command = strip_dashdash(args.server_command)
    if not command:
        sys.stderr.write("launch-config: give the server command after --\n")
        return EXIT_USAGE
    try:
        server = resolve_server_command(command[0])
    except ConfigError as exc:
        sys.stderr.write(f"launch-config: {exc.detail}\n")
        return EXIT_USAGE
    wrapper = None
    if args.wrap:
        # The wrapper runs wherever the client starts it: the config file this run
        # read (so its [exec] settings apply there too) and the socket go in as
        # absolute paths. Without --config the wrapper repeats the default search.
        carried = ["--config", absolute_path(str(args.config.expanduser()))] if args.config else []
        socket_path = os.path.abspath(settings.socket.path)
        wrapper = [*exec_command(), *carried, "--socket", socket_path]
    if args.server is not None:
        entry = build_server_entry(
            args.server,
            client_type=args.client,
            command=server,
            args=absolute_path_args(command[1:]),
            exec_wrapper=wrapper,
        )
        sys.stdout.write(json.dumps(entry, indent=2) + "\n")
        return EXIT_OK
    try:
        config = build_launch_config(
            client_type=args.client,
            command=server,
            args=absolute_path_args(command[1:]),
            instance_id=args.instance_id,
            session_id=args.session_id,
            fleet_run_id=args.fleet_run_id,
            profile_prefix=args.profile_prefix,
            exec_wrapper=wrapper,
        )
    except UntrustedInstanceError as exc:
        sys.stderr.write(f"launch-config: refusing untrusted instance id: {exc}\n")
        return EXIT_USAGE
    sys.stdout.write(json.dumps(config, indent=2) + "\n")
    return EXIT_OK
