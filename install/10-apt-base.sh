#!/usr/bin/env bash
# for: demo test
# Base system packages: namespaces + firewall tools for the testbed, getdns headers for the
# Python binding (TOOLCHAIN.md: pip's getdns builds against libgetdns-dev in ~3 s), and Debian
# 12's Python 3.11 with venv and headers (install/20-python.sh builds .venv from it); cron and
# socat for the fleet rehearsal (a cron daemon per rehearsed instance; socat relays the island's
# S3 server to the host's collector, docs/pipeline.md); faketime for the rehearsal's skewed clock
# (--faults); Debian's docker-compose client, whose `config` and Compose schema check
# docker-compose.yml without an engine (tests/unit/test_compose.py).
# The demo uses none of these four: `install/run.sh demo` leaves them out.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
[ "$(id -u)" -eq 0 ] || { echo "install: must run as root (apt, namespaces)"; exit 2; }
apt_install iproute2 iptables libgetdns-dev build-essential pkg-config procps python3 python3-venv python3-dev
for_demo || apt_install cron socat faketime docker-compose
