"""RIPE Atlas campaigns, resolver discovery and the QuicSocks analysis (issue 7).

Modules: ``spec`` (campaign spec), ``definitions`` (cousteau measurement definitions and
credit pricing), ``plan`` (spec → API requests), ``key`` (API key handling), ``client``
(submit / fetch / stream with retry), ``parse`` (sagan), ``discovery`` (probe → resolver, ASN),
``quicsocks`` (the model of 001_3c494309ab66be23.txt Table I), ``testbed`` (the offline mode).
"""
