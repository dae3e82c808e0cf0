"""Replays of the seed papers' controlled experiments (docs/experiments.md).

An experiment is one or more campaign specs under ``campaigns/experiments/`` (a sibling
``<stem>-reduced.toml`` is the small version the testbed tests run) plus an analysis that
reads the store's SQL views and prints its table with the paper's figure beside ours.
``dnscamp experiment run NAME`` runs the specs through the campaign service (dnscamp.campaign,
as `dnscamp campaign run` does; common.run_experiment) and then the analysis; ``report NAME``
re-runs only the analysis on the latest stored run of each of its campaigns.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass


@dataclass(frozen=True)
class Experiment:
    name: str
    number: int  # the numbering
    title: str
    paper: str  # seed file and section
    module: str  # analysis module in this package

    def load(self):
        return importlib.import_module(f"dnscamp.experiments.{self.module}")


class ExperimentError(Exception):
    """One line for the user (unknown experiment, nothing stored, ...)."""


EXPERIMENTS: dict[str, Experiment] = {e.name: e for e in (
    Experiment("hol", 1, "Head-of-line blocking over one connection", "003_b61199a6a5b37f70.txt §3 (Fig. 2)", "hol"),
    Experiment("bytes", 2, "Bytes and packets per resolution by layer", "003_b61199a6a5b37f70.txt §4 (Figs. 3-5)",
               "bytes"),
    Experiment("www20", 3, "WWW'20 conditions matrix: PLT difference to Do53",
               "002_6fa4cf280535d36b.txt §3.2.4, §4.3 (Fig. 4), §4.4 (Fig. 5)", "www20"),
    Experiment("coalescing", 4, "DoQ / DoH / DoH3 and HTTP/3: RTT multiples, PLT heat map with H3 0-RTT rows",
               "000_6647a8606a2226e0.txt §V-B (Fig. 5), §V-C (Fig. 8)", "coalescing"),
    Experiment("quicsocks", 5, "QuicSocks Table II and savings on Atlas-like probes",
               "001_3c494309ab66be23.txt §IV-A Table II, §IV-B", "quicsocks"),
)}


def get(name: str) -> Experiment:
    try:
        return EXPERIMENTS[name]
    except KeyError:
        raise ExperimentError(f"unknown experiment {name!r} (known: {', '.join(EXPERIMENTS)})") from None
