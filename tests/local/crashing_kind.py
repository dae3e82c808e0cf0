"""A kind that kills the agent running it (used to test the runner's crash handling)."""

import os
import signal

from vantage_agent.ping import KIND as PING


class _Crash:
    name = "ping"
    params_model = PING.params_model
    where = "client"
    targets = PING.targets

    def run(self, unit, ctx):
        os.kill(os.getpid(), signal.SIGKILL)
        yield from ()


KIND = _Crash()
