"""RIPE Atlas: measurement definitions, parsing and the QuicSocks analysis, by measurement type.

One module per measurement type, as ripe.atlas.sagan has (each: its cousteau definition and
credit price, its sagan parser and typed rows, and the emitter of its RIPE Atlas JSON):
``ping``, ``dns``; what every result shares is ``result`` (load / header / status) and
``measurement_types`` maps a result's ``type`` to its module. What every definition shares is
``definitions`` (the Definition, the probe source, the one-off factor).

Shared parts: ``spec`` (the Atlas campaign spec), ``plan`` (spec → API requests and credits),
``key`` (API key handling), ``client`` (submit / fetch / stream with retry), ``discovery``
(probe → resolver, ASN filter), ``probes`` (where probes stand: the probe API). The analysis:
``quicsocks`` (the model of 001_3c494309ab66be23.txt Table I over many probes).

Pure of the store and the testbed: results go to the store through collectors/ (atlas_ingest,
atlas_store), and the emulated Atlas-like probes are testbed/atlas_probes/.
"""
