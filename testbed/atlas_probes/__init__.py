"""The testbed's Atlas-like probes: namespaces behind their own access links and ISP resolvers
that run RIPE Atlas's definitions and write RIPE Atlas JSON results, which
collectors/atlas_ingest.py ingests like any other Atlas results.

Topology (per probe i; every node a network namespace, every delay a linkem link):

    probe i ──[access link: RTT_DNS_i]── ISP node i (resolver) ──[backbone link: RTT_Server_i]── server

- the probe (10.90.i.2) uses its ISP resolver 10.90.i.53; the resolver asks our authoritative
  server from its egress address (10.90.i.53, or 10.90.i.54 for even i: the "configured address
  differs from the sending address" case of 001_3c494309ab66be23.txt §IV-B);
- every fifth probe's resolver addresses (10.90.i.48/28) are announced by another AS in the
  island's pyasn database: a "public" resolver that the ISP-resolver filter must drop;
- the server node holds 10.90.0.10 (ping target) and 10.90.0.53, authoritative for
  ``SERVER_ZONE``: it logs every query (source, name) and answers with the asker's address
  (so the whoami method works too).

Ground truth: RTT_DNS = access RTT, RTT_Server = backbone RTT, RTT_direct = their sum.

Modules: ``island`` (the probes' plan and ground truth, the namespaces, links and DNS servers),
``measure`` (the measurements: a DNS query through each probe's resolver for
``<prb_id>-<ts>.<random>.<zone>`` as with ``prepend_probe_id``; five pings probe → server,
probe → resolver, server → resolver; each result in RIPE Atlas JSON via atlas.dns / atlas.ping),
``sites`` (where the probes stand, as RIPE Atlas's probe API describes a probe; sites.json).

One process drives everything: sockets are opened inside the namespaces with setns(2) and
used from here, so no agent process runs per probe. Namespaces are named
``dc-ap-<pid>-<role><i>`` (``p`` probe, ``a`` access router, ``r`` ISP/resolver node, ``b``
backbone router, ``s`` server): the pid keeps them out of the main island's `testbed down`.
The measurement that runs them and checks the analysis against the ground truth is
dnscamp/atlas_offline.py (the ``atlas`` kind); dnscamp/atlas_run.py (`dnscamp atlas run
--testbed`) also stores their results.
"""
