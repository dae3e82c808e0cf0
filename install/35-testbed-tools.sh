#!/usr/bin/env bash
# for: demo test
# Tools the testbed topology and its fidelity check call inside the namespaces:
#   ip (iproute2), iptables (linkem's NFQUEUE rules), ethtool (offloads off on every veth),
#   iperf3 (TCP goodput in `dnscamp testbed check`), ping (reachability tests),
#   setpriv (util-linux: the not-root test).
# Idempotent: installs only what is missing.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
[ "$(id -u)" -eq 0 ] || { echo "install: must run as root (apt, namespaces)"; exit 2; }
apt_install iproute2 iptables ethtool iperf3 iputils-ping util-linux
echo "   testbed tools: $(ip -V | head -1); $(iperf3 --version | head -1 | cut -d' ' -f1-2); $(command -v ping)"
